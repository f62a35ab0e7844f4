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
 *
 * Every statement's result is also made dense (postgres-js-rows.ts): after
 * such a drop postgres.js can resolve the connection's next statement with
 * its rows shifted up, the first ones missing.
 */
import { SEND_LAST_ALONE } from "../database.ts";
import { inlineParameters } from "./postgres-js-inline.ts";
import { lazyTransaction, type LazyHost, type Query } from "./postgres-js-lazy-tx.ts";
import { pipelinedTransaction } from "./postgres-js-pipeline.ts";
import { denseResults } from "./postgres-js-rows.ts";

type Client = ((...args: unknown[]) => unknown) & Record<string | symbol, unknown>;

interface TxState {
  over: boolean;
  /** Over because its connection closed. */
  closed: boolean;
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
function refused(err: () => Error = closedError): Record<string, (...a: never[]) => Promise<unknown>> {
  const settle = () => Promise.reject(err());
  return {
    then: (ok?: (v: never) => unknown, bad?: (e: unknown) => unknown) => settle().then(ok, bad),
    catch: (bad: (e: unknown) => unknown) => settle().catch(bad),
    finally: (f: () => void) => settle().finally(f),
    values: settle,
    raw: settle,
    execute: settle,
  };
}

const never = () => new Promise<never>(() => undefined);

export interface Fencing {
  /** Pass as postgres.js's `onclose` option. */
  onclose(connectionId: number): void;
  /**
   * The client handed to drizzle, with transactions and savepoints fenced.
   * `prepared`: `unsafe()` prepares named statements; `inline`: statements
   * carry their values as literals where that is exact (postgres-js-inline.ts).
   */
  wrap<C>(client: C, mode: StatementMode): C;
}

export type StatementMode = "prepared" | "inline";

export interface FencingOptions {
  /**
   * Transactions that begin with their first statement (postgres-js-lazy-tx.ts; default true): a lone
   * last statement goes without BEGIN and COMMIT. false: postgres.js's own `begin()` for every transaction.
   */
  lazy?: boolean;
  /**
   * With `lazy`: a transaction that does begin sends BEGIN with its first statement and COMMIT with its
   * last (postgres-js-pipeline.ts; default true). false: postgres.js's own `begin()` once one is needed.
   */
  pipeline?: boolean;
}

export function createFencing(options: FencingOptions = {}): Fencing {
  const lazy = options.lazy ?? true;
  const pipeline = options.pipeline ?? true;
  const open = new Set<TxState>();

  const onclose = (connectionId: number) => {
    for (const tx of open) {
      if (tx.connectionId !== connectionId) continue;
      tx.closed = true;
      tx.end();
    }
  };

  function newState(): TxState {
    let resolve!: () => void;
    const tx: TxState = {
      over: false,
      closed: false,
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

  /** postgres.js `begin()` / `savepoint()` with the transaction fenced. */
  function begin(target: Client, mode: StatementMode, tx: TxState | null, key: "begin" | "savepoint", args: unknown[]): Promise<unknown> {
    if (tx?.over) return Promise.reject(closedError());
    const fn = args.pop() as (c: unknown) => unknown;
    const inner = newState();
    if (tx) inner.connectionId = tx.connectionId;
    const p = (target[key] as (...a: unknown[]) => Promise<unknown>)(...args, (c: unknown) => guarded(fn, wrap(c, mode, inner), inner));
    // A savepoint is over with its transaction too.
    if (tx) void tx.ended.then(inner.end);
    return p.finally(inner.end);
  }

  /** A transaction with BEGIN and COMMIT in its statements' flights, fenced. */
  function pipelined(target: Client, mode: StatementMode, fn: (c: unknown) => unknown): Promise<unknown> {
    const state = newState();
    const p = pipelinedTransaction(
      {
        make: (q, params, o) => send(target, mode, null, q, params, o),
        fence: state,
        guarded: (f, c) => guarded(f, c, state),
        rejected: (err) => refused(err) as unknown as Query,
        closedError,
        client: (own) => ownClient(target, own),
      },
      fn,
    );
    return p.finally(state.end);
  }

  function wrap<C>(client: C, mode: StatementMode, tx: TxState | null = null): C {
    const target0 = client as unknown as Client;
    // What every lazy transaction of this client needs of it (the same for each: built once, not per transaction).
    const lazyHost = (begin: LazyHost["begin"]): LazyHost => ({
      sendAlone: (q, p, o) => send(target0, mode, null, q, p, o),
      begin,
      rejected: (err) => refused(err) as unknown as Query,
      closedError,
      client: (own) => ownClient(target0, own),
    });
    const plainHost = lazyHost((inner) => (pipeline ? pipelined(target0, mode, inner) : begin(target0, mode, null, "begin", [inner])));
    return new Proxy(target0, {
      apply(target, self, args) {
        if (tx?.over) return refused();
        return denseResults(Reflect.apply(target, self, args));
      },
      get(target, key) {
        if (key === "unsafe") {
          return (q: string, p: unknown[] = [], o: Record<string, unknown> = {}) => {
            if (tx?.over) return refused();
            return send(target, mode, tx, q, p, o);
          };
        }
        if (key === "begin" && lazy && !tx) {
          return (...args: unknown[]): Promise<unknown> => {
            const fn = args.pop() as (c: unknown) => unknown;
            // begin(fn), what drizzle calls: the shared host; begin(options, fn): its options go to BEGIN.
            if (args.length === 0) return lazyTransaction(plainHost, fn);
            return lazyTransaction(
              lazyHost((inner) => (pipeline ? pipelined(target, mode, inner) : begin(target, mode, null, "begin", [...args, inner]))),
              fn,
            );
          };
        }
        if (key === "begin" || key === "savepoint") return (...args: unknown[]) => begin(target, mode, tx, key, args);
        const v = target[key];
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as unknown as C;
  }

  return { onclose, wrap: (client, mode) => wrap(client, mode) };
}

/**
 * A statement as the driver sends it: prepared, or with its values inlined (postgres-js-inline.ts),
 * rows made dense; on a transaction's connection, the first one sent tells the fence that connection's id.
 */
function send(target: Client, mode: StatementMode, tx: TxState | null, q: string, p: unknown[], o: Record<string, unknown>): Query {
  const inlined = mode === "inline" && p.length > 0 ? inlineParameters(q, p) : null;
  const unsafeOpts = mode === "prepared" ? { ...o, prepare: true } : o;
  // postgres.js calls `onexecute` when it writes the statement to a connection (not for one it describes first).
  const hook =
    tx && tx.connectionId === null
      ? {
          onexecute: (conn: { id: number }) => {
            if (tx.connectionId === null) tx.connectionId = conn.id;
            return true;
          },
        }
      : {};
  const unsafe = target.unsafe as (...a: unknown[]) => Query;
  // Inlined: still the extended protocol (postgres.js would use the simple one for a statement without
  // parameters), which refuses more than one command in a statement.
  return denseResults(inlined === null ? unsafe(q, p, { ...unsafeOpts, ...hook }) : unsafe(inlined, [], { ...unsafeOpts, simple: false, ...hook }));
}

/** The client a lazy transaction hands its callback (drizzle uses `unsafe` and `savepoint`; the step, SEND_LAST_ALONE). */
function ownClient(pool: Client, own: { unsafe: unknown; savepoint: unknown; sendLastAlone?: () => boolean }): unknown {
  return new Proxy(pool, {
    apply() {
      throw new TypeError("edda: tagged-template statements are not sent inside a transaction; use unsafe()");
    },
    get(target, key) {
      if (key === "unsafe") return own.unsafe;
      if (key === "savepoint") return own.savepoint;
      if (key === SEND_LAST_ALONE) return own.sendLastAlone;
      if (key === "begin") return () => Promise.reject(new TypeError("edda: begin() inside a transaction; use savepoint()"));
      const v = target[key];
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
