/**
 * Transactions on postgres.js that end with their connection.
 *
 * When a transaction's connection drops (the backend terminated, the server
 * restarted), postgres.js rejects `begin()` at once, but the callback keeps
 * running: its next statements go to the same connection object, which the
 * pool meanwhile reconnects and hands to other callers. They then run outside
 * any transaction (autocommit: half a step's writes commit while the step
 * itself failed) or inside another caller's transaction, and the callback's
 * final COMMIT/ROLLBACK ends that other transaction half-way. On a connection
 * not yet reconnected, postgres.js 3.4.x writes to a null socket from a timer
 * instead, an uncatchable TypeError that ends the process (porsager/postgres
 * #1208, no fixed release).
 *
 * The fence: each transaction (and savepoint) gets a client whose statements
 * are refused with CONNECTION_CLOSED, without touching the connection, once
 * the transaction is over — `begin()` settled, or the pool reported its
 * connection closed (synchronously, before the callback can run again). A
 * callback that ends after that, or fails because the connection went away,
 * is never handed back to postgres.js, so no COMMIT or ROLLBACK is sent for a
 * transaction the server already rolled back.
 */

type Client = ((...args: unknown[]) => unknown) & Record<string | symbol, unknown>;

interface TxState {
  over: boolean;
  /** The postgres.js connection id the transaction's statements ran on (learnt from the first one). */
  connectionId: number | null;
  /** Resolves once the transaction is over. */
  ended: Promise<void>;
  end(): void;
}

/** How long a callback that failed with a lost connection waits for postgres.js to confirm the close. */
const CLOSE_CONFIRM_MS = 5_000;

const CLOSED_CODES = new Set(["CONNECTION_CLOSED", "CONNECTION_ENDED", "CONNECTION_DESTROYED", "ECONNRESET", "EPIPE"]);

function isConnectionGone(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && (CLOSED_CODES.has(code) || /^(08|57P0[123])/.test(code))) return true;
  }
  return false;
}

function closedError(): Error {
  return Object.assign(new Error("write CONNECTION_CLOSED: the transaction's connection was closed"), { code: "CONNECTION_CLOSED" });
}

/** What a refused statement returns: rejects however it is consumed (awaited, `.values()`, `.raw()`), only when consumed. */
function refused(): Record<string, (...a: never[]) => Promise<unknown>> {
  const settle = () => Promise.reject(closedError());
  return {
    then: (ok?: (v: never) => unknown, bad?: (e: unknown) => unknown) => settle().then(ok, bad),
    catch: (bad: (e: unknown) => unknown) => settle().catch(bad),
    finally: (f: () => void) => settle().finally(f),
    values: settle,
    raw: settle,
    execute: settle,
  };
}

/** A statement sent once `wait` settles; consumed like a postgres.js query (awaited, `.values()`, `.raw()`). */
function deferred(wait: Promise<void>, send: () => unknown, onSettled?: (ok: boolean) => void): Record<string, (...a: never[]) => Promise<unknown>> {
  type Query = PromiseLike<unknown> & Record<string, () => PromiseLike<unknown>>;
  // Sent once, however many times it is consumed.
  let sent: Promise<unknown> | undefined;
  const go = (mode?: "values" | "raw" | "execute") =>
    (sent ??= settled(
      wait.then(() => {
        const q = send() as Query;
        return mode ? q[mode]!() : q;
      }),
    ));
  const settled = (p: Promise<unknown>) => {
    if (onSettled) p.then(() => onSettled(true), () => onSettled(false));
    return p;
  };
  return {
    then: (ok?: (v: unknown) => unknown, bad?: (e: unknown) => unknown) => go().then(ok, bad),
    catch: (bad: (e: unknown) => unknown) => go().catch(bad),
    finally: (f: () => void) => go().finally(f),
    values: () => go("values"),
    raw: () => go("raw"),
    execute: () => go("execute"),
  };
}

const never = () => new Promise<never>(() => undefined);

export interface Fencing {
  /** Pass as postgres.js's `onclose` option. */
  onclose(connectionId: number): void;
  /** The client handed to drizzle: transactions and savepoints fenced; `prepare` makes `unsafe()` prepare. */
  wrap<C>(client: C, prepare: boolean): C;
}

export interface FencingOptions {
  /** Called once, when a first statement is written to a connection (the client has fetched the array types by then). */
  onTypesKnown?: () => void;
}

/** How long statements wait for the first one to fetch the array types before going ahead on their own. */
const TYPES_GATE_MS = 2_000;

export function createFencing(opts: FencingOptions = {}): Fencing {
  const open = new Set<TxState>();
  let typesKnown = opts.onTypesKnown === undefined;
  // Until the first statement has reached a connection, later ones wait for it (at most TYPES_GATE_MS), so one
  // connection fetches the array types and no other opens meanwhile to fetch them again with a promise nobody handles.
  let pioneer = false;
  let gateOpen = false;
  let resolveGate!: () => void;
  const gate = new Promise<void>((r) => (resolveGate = r));
  const openGate = () => {
    gateOpen = true;
    resolveGate();
  };
  const typesReady = (): Promise<void> | null => {
    if (typesKnown || gateOpen) return null;
    if (!pioneer) {
      pioneer = true;
      setTimeout(openGate, TYPES_GATE_MS).unref?.();
      return null;
    }
    return gate;
  };

  const onclose = (connectionId: number) => {
    for (const tx of open) if (tx.connectionId === connectionId) tx.end();
  };

  function newState(): TxState {
    let resolve!: () => void;
    const tx: TxState = {
      over: false,
      connectionId: null,
      ended: new Promise<void>((r) => (resolve = r)),
      end: () => {
        if (tx.over) return;
        tx.over = true;
        open.delete(tx);
        resolve();
      },
    };
    open.add(tx);
    return tx;
  }

  /** The callback's side of the fence: its outcome reaches postgres.js only while the transaction is live. */
  async function guarded(fn: (c: unknown) => unknown, c: unknown, tx: TxState): Promise<unknown> {
    let result: unknown;
    try {
      result = await fn(c);
    } catch (err) {
      if (!tx.over && isConnectionGone(err)) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([tx.ended, new Promise<void>((r) => (timer = setTimeout(r, CLOSE_CONFIRM_MS)))]);
        clearTimeout(timer);
      }
      if (tx.over) return never();
      throw err;
    }
    return tx.over ? never() : result;
  }

  function wrap<C>(client: C, prepare: boolean, tx: TxState | null = null): C {
    return new Proxy(client as unknown as Client, {
      apply(target, self, args) {
        if (tx?.over) return refused();
        return Reflect.apply(target, self, args);
      },
      get(target, key) {
        if (key === "unsafe") {
          return (q: string, p: unknown[] = [], o: Record<string, unknown> = {}) => {
            if (tx?.over) return refused();
            const unsafeOpts = prepare ? { ...o, prepare: true } : o;
            // postgres.js calls `onexecute` when it writes the statement to a connection (which has its array types by then).
            const learn = (tx && tx.connectionId === null) || !typesKnown;
            const hook = learn
              ? {
                  onexecute: (conn: { id: number }) => {
                    if (tx && tx.connectionId === null) tx.connectionId = conn.id;
                    if (!typesKnown) {
                      typesKnown = true;
                      opts.onTypesKnown?.();
                      openGate();
                    }
                    return true;
                  },
                }
              : {};
            const send = () => (target.unsafe as (...a: unknown[]) => unknown)(q, p, { ...unsafeOpts, ...hook });
            if (typesKnown || gateOpen) return send();
            // Inside a transaction the connection is open already (and may be the one fetching the types).
            const wait = tx ? null : typesReady();
            if (wait) return deferred(wait, send);
            // The first statement (or one of the first transaction): once it settled its connection has the types.
            return deferred(Promise.resolve(), send, (ok) => {
              if (ok && !typesKnown) {
                typesKnown = true;
                opts.onTypesKnown?.();
              }
              openGate();
            });
          };
        }
        if (key === "begin" || key === "savepoint") {
          const call = (...args: unknown[]): Promise<unknown> => {
            if (tx?.over) return Promise.reject(closedError());
            const wait = tx ? null : typesReady();
            if (wait) return wait.then(() => call(...args));
            const fn = args.pop() as (c: unknown) => unknown;
            const inner = newState();
            if (tx) inner.connectionId = tx.connectionId;
            const p = (target[key] as (...a: unknown[]) => Promise<unknown>)(...args, (c: unknown) => guarded(fn, wrap(c, prepare, inner), inner));
            // A savepoint is over with its transaction too.
            if (tx) void tx.ended.then(inner.end);
            return p.finally(inner.end);
          };
          return call;
        }
        const v = target[key];
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as unknown as C;
  }

  return { onclose, wrap: (client, prepare) => wrap(client, prepare) };
}
