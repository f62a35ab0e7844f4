/**
 * A postgres.js transaction in the fewest flights: BEGIN goes out with its
 * first statement, COMMIT right behind its last (`LAST_STATEMENT`, a step's
 * fenced conclusion), each pair in one socket write.
 *
 * postgres.js's `begin()` awaits BEGIN before its callback runs and sends
 * COMMIT only after the callback returned. Here BEGIN is sent through the pool
 * like any statement, with an `onexecute` hook: postgres.js calls it with the
 * connection as it writes BEGIN — an open one, a busy one (behind its
 * statements in flight), or a fresh one once it is up — and the hook pins the
 * connection to this transaction the way `begin()` does (`reserved` set: the
 * pool hands it to nobody else, and takes it back by itself once the server
 * reports no transaction open). The transaction's statements are postgres.js
 * queries whose handler writes them to that connection, in order, behind
 * BEGIN; written in the same tick, they leave in one write.
 *
 * (postgres.js's `reserve()` is not used: in 3.4.9 it never resolves when it
 * must open the connection and array types are not fetched — the driver
 * declares them, postgres-js-types.ts — because connection.js skips the
 * pool's `onopen` for a reservation that was a fresh connection's first
 * request. Under backend kills that is every other transaction.)
 *
 * COMMIT sent before the reply to the statement in front of it is safe: a
 * failed statement aborts the transaction and the COMMIT then rolls back —
 * the conclusion marked last fails (not just matches no row) when its fence
 * does not hold (storage/leases.ts) — and a COMMIT whose reply says ROLLBACK
 * fails the transaction with the error that aborted it.
 *
 * The connection fence (postgres-js-fence.ts) holds: the pinned connection's
 * id is known from the hook, a close of it ends the transaction at once, its
 * statements not yet written are rejected, and later ones are refused
 * without touching the connection.
 */
import { LAST_STATEMENT } from "../database.ts";
import type { Query } from "./postgres-js-lazy-tx.ts";

/** What postgres.js's connection offers a pinning hook (connection.js, 3.4.9). */
interface Connection {
  id: number;
  execute(q: unknown): boolean;
  reserved: ((() => void) & { release?: boolean }) | null;
}

/** A postgres.js query object, before it runs: its handler is where it goes when awaited. */
interface PgQuery extends Query {
  handler(q: PgQuery): void;
  reject(e: unknown): void;
}

export interface PipelineHost {
  /** A statement as the driver sends it (prepared or inlined, rows dense), created on the pool and not yet run. */
  make(q: string, p: unknown[], o: Record<string, unknown>): Query;
  /** The transaction's connection fence (postgres-js-fence.ts). */
  fence: { readonly over: boolean; readonly closed: boolean; connectionId: number | null; readonly ended: Promise<void> };
  guarded(fn: (c: unknown) => unknown, c: unknown): Promise<unknown>;
  rejected(err: () => Error): Query;
  closedError(): Error;
  client(own: { unsafe(q: string, p?: unknown[], o?: Record<string, unknown>): Query; savepoint(fn: (c: unknown) => unknown): Promise<unknown> }): unknown;
}

interface Scope {
  over: boolean;
  top: boolean;
  failure?: unknown;
}

const rolledBack = () => new Error("the transaction rolled back at COMMIT");
const committed = (r: unknown) => (r as { command?: unknown } | null)?.command === "COMMIT";
const afterLast = () => new Error("edda: a statement after the transaction's last statement (it would run outside the transaction)");

class PinnedTransaction {
  private conn: Connection | null = null;
  /** Statements waiting for the connection, or for it to take more (postgres.js reported it full). */
  private readonly waiting: PgQuery[] = [];
  private full = false;
  private begin: PgQuery | null = null;
  private decided: Promise<void> | null = null;
  private savepoints = 0;

  constructor(private readonly host: PipelineHost) {}

  async run(fn: (c: unknown) => unknown): Promise<unknown> {
    const { fence } = this.host;
    // The connection closed: what never reached it fails now, not at the next sweep.
    void fence.ended.then(() => {
      for (const q of this.waiting.splice(0)) q.reject(this.host.closedError());
    });
    const closed = fence.ended.then(() => {
      if (fence.closed) throw this.host.closedError();
      return new Promise<never>(() => undefined);
    });
    this.start();
    const top: Scope = { over: false, top: true };
    return Promise.race([this.scope(fn, null, top), closed]);
  }

  /** BEGIN through the pool; the connection that writes it is pinned to this transaction. */
  private start(): void {
    const begin = this.host.make("begin", [], {
      onexecute: (c: Connection) => {
        this.conn = c;
        this.host.fence.connectionId = c.id;
        c.reserved = () => this.drain();
        // Statements made before BEGIN reached a connection follow it now, still in this tick's write.
        queueMicrotask(() => this.drain());
        // false: postgres.js moves the connection out of the pool's rotation ("full"), as for its own begin().
        return false;
      },
    }) as PgQuery;
    this.begin = begin;
    begin.then(undefined, (e: unknown) => {
      // BEGIN failed: nothing behind it can be in a transaction.
      for (const q of this.waiting.splice(0)) q.reject(e);
    });
  }

  private drain(): void {
    const c = this.conn;
    if (!c || this.host.fence.over) return;
    this.full = false;
    while (this.waiting.length) {
      if (!c.execute(this.waiting.shift()!)) {
        this.full = true;
        return;
      }
    }
  }

  private enqueue(q: PgQuery): void {
    if (this.host.fence.over) return q.reject(this.host.closedError());
    if (!this.conn || this.full || this.waiting.length) {
      this.waiting.push(q);
      return;
    }
    if (!this.conn.execute(q)) this.full = true;
  }

  /** A statement of this transaction: it runs when awaited, on the pinned connection, in order. */
  private send(q: string, p: unknown[], o: Record<string, unknown>): PgQuery {
    const query = this.host.make(q, p, o) as PgQuery;
    query.handler = (x) => this.enqueue(x);
    return query;
  }

  private track(q: Query, s: Scope): Query {
    q.catch((e) => {
      if (s.failure === undefined) s.failure = e;
    });
    return q;
  }

  private statement(q: string, p: unknown[], o: Record<string, unknown>, s: Scope): Query {
    if (s.over || this.host.fence.over) return this.host.rejected(this.host.closedError);
    if (this.decided) return this.host.rejected(afterLast);
    const r = this.track(this.send(q, p, o), s);
    if (s.top && q.startsWith(LAST_STATEMENT)) {
      // COMMIT right behind it, in the same write; its reply decides.
      const commit = this.send("commit", [], {});
      const decided = Promise.resolve(commit).then((res) => {
        if (!committed(res)) throw s.failure ?? rolledBack();
      });
      this.decided = decided.catch((e: unknown) => {
        if (s.failure === undefined) s.failure = e;
      });
      return r;
    }
    return r;
  }

  private async scope(fn: (c: unknown) => unknown, name: string | null, s: Scope, parent?: Scope): Promise<unknown> {
    if (name) await this.statement(`savepoint ${name}`, [], {}, parent!);
    let result: unknown;
    try {
      result = await this.host.guarded(fn, this.host.client(this.own(s)));
      if (s.failure !== undefined) throw s.failure;
    } catch (err) {
      s.over = true;
      await this.abandon(name, parent);
      throw err;
    }
    s.over = true;
    if (!name) await this.commit(s);
    return result;
  }

  private own(s: Scope) {
    return {
      unsafe: (q: string, p: unknown[] = [], o: Record<string, unknown> = {}) => this.statement(q, p, o, s),
      savepoint: (fn: (c: unknown) => unknown) => {
        if (s.over || this.host.fence.over) return Promise.reject(this.host.closedError());
        if (this.decided) return Promise.reject(afterLast());
        return this.scope(fn, `s${this.savepoints++}`, { over: false, top: false }, s);
      },
    };
  }

  private async commit(s: Scope): Promise<void> {
    if (!this.decided) {
      const res = await this.send("commit", [], {});
      if (!committed(res)) throw s.failure ?? rolledBack();
      return;
    }
    await this.decided;
    if (s.failure !== undefined) throw s.failure;
  }

  private async abandon(name: string | null, parent?: Scope): Promise<void> {
    // The connection is gone: nothing was rolled back to a savepoint, and the scope's own failure (an activity's
    // error, a rollback marker) must not pass for an ordinary one — the transaction failed with its connection.
    if (this.host.fence.over) throw this.host.closedError();
    if (this.decided) return this.decided;
    if (name) {
      await this.statement(`rollback to ${name}`, [], {}, parent!);
      return;
    }
    // BEGIN failed: there is no transaction to roll back (and its connection went back to the pool).
    if (!(await this.begin!.then(() => true, () => false))) return;
    await this.send("rollback", [], {});
  }
}

/** Run `fn` as one pipelined transaction (see the module comment). */
export function pipelinedTransaction(host: PipelineHost, fn: (c: unknown) => unknown): Promise<unknown> {
  return new PinnedTransaction(host).run(fn);
}
