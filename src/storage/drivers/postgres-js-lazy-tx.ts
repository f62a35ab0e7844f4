/**
 * Transactions on postgres.js that begin with their first statement, and
 * none at all around a lone last statement.
 *
 * postgres.js's `begin()` sends BEGIN and awaits it before its callback runs,
 * and COMMIT after the callback returned: two round trips on top of the
 * statements. A step's transaction often has one statement only — its fenced
 * conclusion, when the step's transactional activity never touched `ctx.tx`
 * — and one statement is atomic by itself. So a transaction here starts
 * nothing: the first statement that is not marked last (`LAST_STATEMENT`)
 * opens the real transaction (postgres.js `begin()`, fenced by
 * postgres-js-fence.ts) and it and every later one run in it; a statement
 * marked last that finds no transaction open goes alone, autocommitted, on
 * any connection of the pool: one round trip, the same rows written.
 *
 * Nothing may follow the last statement (it would run outside the
 * transaction): later statements are refused, as are those of a callback
 * that goes on after its transaction ended (an activity past its timeout).
 * A failed lone statement wrote nothing; the transaction still fails with
 * it when the callback swallowed the error, as postgres.js's own would.
 *
 * Pipelining BEGIN with the first statement and COMMIT with the last needs
 * a connection taken from the pool before the first statement, and
 * postgres.js 3.4.9 `reserve()` never resolves when it has to open that
 * connection without fetching array types (the driver declares them instead,
 * postgres-js-types.ts): connection.js skips the pool's `onopen` for a
 * reserve that was a fresh connection's first request. So a transaction with
 * body statements still pays BEGIN and COMMIT.
 */
import { LAST_STATEMENT } from "../database.ts";

/** A postgres.js query: lazy until awaited, `.values()` / `.raw()` set how its rows come back. */
export interface Query extends PromiseLike<unknown> {
  values(): Query;
  raw(): Query;
  execute(): Query;
  catch(bad: (e: unknown) => unknown): Promise<unknown>;
}

/** The client of a begun transaction (the fenced postgres.js one). */
interface TxClient {
  unsafe(q: string, p?: unknown[], o?: Record<string, unknown>): Query;
  savepoint(fn: (c: unknown) => unknown): Promise<unknown>;
}

/** The callback's side of a lazy transaction. */
export interface OwnClient extends TxClient {
  /** SEND_LAST_ALONE (database.ts): true, and nothing more is taken, when no statement was sent yet. */
  sendLastAlone(): boolean;
}

/** What the transaction needs of its surroundings (postgres-js-fence.ts provides it). */
export interface LazyHost {
  /** Send a statement on the pool, autocommitted, the way the driver sends every statement. */
  sendAlone(q: string, p: unknown[], o: Record<string, unknown>): Query;
  /** Open the real transaction: the fenced postgres.js `begin()`. */
  begin(fn: (c: unknown) => unknown): Promise<unknown>;
  /** A query that rejects with `err()` when consumed. */
  rejected(err: () => Error): Query;
  closedError(): Error;
  /** The client the callback gets, with this transaction's `unsafe`, `savepoint` and `sendLastAlone`. */
  client(own: OwnClient): unknown;
}

type Mode = "values" | "raw" | null;

/** A query sent once `ready` resolves; `.values()` / `.raw()` called before that are applied to it. */
function later<C>(ready: Promise<C>, make: (c: C, mode: Mode) => PromiseLike<unknown>): Query {
  let mode: Mode = null;
  const result = ready.then((c) => make(c, mode));
  result.catch(() => undefined);
  const q: Query = {
    values: () => ((mode = "values"), q),
    raw: () => ((mode = "raw"), q),
    execute: () => q,
    then: (ok, bad) => result.then(ok, bad),
    catch: (bad) => result.catch(bad),
  };
  return q;
}

const afterLast = () => new Error("edda: a statement after the transaction's last statement (it would run outside the transaction)");

class LazyTransaction {
  /** The begun transaction's client, once a statement needed it. */
  private inner: Promise<TxClient> | null = null;
  /** postgres.js `begin()`, settled after COMMIT or ROLLBACK. */
  private begun: Promise<unknown> | null = null;
  /** Settles the begun transaction's callback with the outer callback's outcome. */
  private finish: { resolve(v: unknown): void; reject(e: unknown): void } | null = null;
  /** Rejects when the begun transaction failed under the callback (its connection closed). */
  private readonly lost: Promise<never>;
  private loseWith!: (e: unknown) => void;
  private lastSent = false;
  private over = false;
  /** The lone statement failed: nothing was written, and the transaction must not look committed. */
  private failure: unknown = undefined;

  constructor(private readonly host: LazyHost) {
    this.lost = new Promise<never>((_, reject) => (this.loseWith = reject));
    this.lost.catch(() => undefined);
  }

  async run(fn: (c: unknown) => unknown): Promise<unknown> {
    let result: unknown;
    try {
      result = await Promise.race([Promise.resolve(fn(this.host.client(this.own()))), this.lost]);
      if (this.failure !== undefined) throw this.failure;
    } catch (err) {
      this.over = true;
      if (this.begun) {
        this.finish!.reject(err);
        await this.begun.catch(() => undefined);
      }
      throw err;
    }
    this.over = true;
    if (this.begun) {
      this.finish!.resolve(result);
      await this.begun;
    }
    return result;
  }

  private own(): OwnClient {
    return {
      unsafe: (q, p = [], o = {}) => this.statement(q, p, o),
      // The last statement goes elsewhere (with other steps' conclusions): none may follow it here.
      sendLastAlone: () => {
        if (this.inner || this.lastSent || this.over) return false;
        this.lastSent = true;
        return true;
      },
      savepoint: (fn) => {
        if (this.over || this.lastSent) return Promise.reject(this.over ? this.host.closedError() : afterLast());
        return this.start().then((c) => c.savepoint(fn));
      },
    };
  }

  private statement(q: string, p: unknown[], o: Record<string, unknown>): Query {
    if (this.over) return this.host.rejected(this.host.closedError);
    if (this.lastSent) return this.host.rejected(afterLast);
    if (q.startsWith(LAST_STATEMENT)) {
      this.lastSent = true;
      if (!this.inner) {
        // The transaction's only statement: alone, autocommitted.
        const r = this.host.sendAlone(q, p, o);
        r.catch((e) => {
          if (this.failure === undefined) this.failure = e;
        });
        return r;
      }
    }
    return later(this.start(), (c, mode) => {
      const r = c.unsafe(q, p, o);
      return mode ? r[mode]() : r;
    });
  }

  /** The real transaction, begun by the first statement that needs it. */
  private start(): Promise<TxClient> {
    this.inner ??= new Promise<TxClient>((resolve, reject) => {
      const finished = new Promise<unknown>((res, rej) => (this.finish = { resolve: res, reject: rej }));
      finished.catch(() => undefined);
      this.begun = this.host.begin((c) => {
        resolve(c as TxClient);
        return finished;
      });
      this.begun.catch((e: unknown) => {
        reject(e);
        this.loseWith(e);
      });
    });
    return this.inner;
  }
}

/** Run `fn` as one transaction that begins with its first statement (see the module comment). */
export function lazyTransaction(host: LazyHost, fn: (c: unknown) => unknown): Promise<unknown> {
  return new LazyTransaction(host).run(fn);
}
