/**
 * Transactions on Neon's driver that begin with their first statement, end in
 * their last one's flight, and are no transaction at all around a lone last
 * statement.
 *
 * drizzle's neon-serverless session runs a transaction as `pool.connect()`,
 * then BEGIN, the statements and COMMIT, each awaited: three round trips for
 * a step whose transaction holds only its fenced conclusion. Neon's Client is
 * pg's, which writes a query only once the one before it is answered
 * (ReadyForQuery), so two queries never share a flight. One query's own
 * messages do: the socket sends what a tick wrote as one WebSocket message
 * (`coalesceWrites`), and a query object decides what it writes (`submit`)
 * and hears every reply up to its ReadyForQuery. So here:
 *
 * - the client drizzle's `connect()` gets holds no connection: its BEGIN is
 *   answered, not sent;
 * - the first statement takes a connection and writes BEGIN in front of
 *   itself — Parse/Bind/Execute of BEGIN without a Sync, then its own
 *   messages and Sync (the simple protocol, a statement without parameters:
 *   `begin;` before its text) — one flight, one ReadyForQuery, BEGIN's
 *   CommandComplete skipped;
 * - the statement marked last (`LAST_STATEMENT`, a step's fenced
 *   conclusion) in a begun transaction writes COMMIT between its Execute and
 *   its Sync. The conclusion fails when its fence does not hold (a division
 *   by zero, storage/leases.ts); the server then skips everything up to the
 *   Sync, COMMIT included, and the transaction stays aborted until drizzle's
 *   ROLLBACK: nothing commits. (A Sync of its own before COMMIT would let
 *   COMMIT roll back in the same flight, but gives the query two
 *   ReadyForQuery replies, and pg's Client ends a query at the first.)
 * - the statement marked last with nothing begun goes alone, autocommitted:
 *   one statement is atomic by itself, and it writes the same rows.
 *
 * drizzle's COMMIT and ROLLBACK are answered from what happened: nothing to
 * send when nothing began or COMMIT went with the last statement; a real
 * ROLLBACK when a begun transaction is still open. A failed lone statement
 * wrote nothing, and the transaction fails with it even when the callback
 * swallowed the error. Nothing may follow the last statement (it would run
 * outside the transaction), nor run once the transaction ended (an activity
 * past its timeout): those statements are refused. A connection that broke,
 * or whose transaction may still be open, is not given back to the pool.
 */
import { Client, type Pool, type PoolClient } from "@neondatabase/serverless";
import { LAST_STATEMENT } from "../database.ts";

interface QueryConfig {
  text: string;
  name?: string;
  values?: unknown[];
}

/** The messages pg's Connection writes (Neon bundles pg 8). */
interface Wire {
  parse(m: { text: string }): void;
  bind(m: object): void;
  execute(m: { portal?: string; rows?: number }): void;
  sync(): void;
}

/** pg's Query: what a client's queue runs, and where the replies go. */
interface PgQuery {
  text: string;
  name?: string;
  rows?: number;
  portal: string;
  callback?: (err: Error | null, res?: unknown) => void;
  requiresPreparation(): boolean;
  submit(c: Wire): Error | null;
  handleCommandComplete(msg: { text: string }, c: Wire): void;
  _getRows(c: Wire, rows?: number): void;
}

const PgQueryClass = (Client as unknown as { Query: new (config: QueryConfig | string, values?: unknown[]) => PgQuery }).Query;

/** What the last statement's query heard of the COMMIT it carried. */
interface Frame {
  commit: boolean;
  committed: boolean;
}

/** `config` as one query on `client`, with `begin` written in front of it and, when `frame.commit`, COMMIT behind it. */
function framedQuery(client: PoolClient, config: QueryConfig | string, values: unknown[] | undefined, begin: string | null, frame: Frame): Promise<unknown> {
  const q = new PgQueryClass(config, values);
  const extended = q.requiresPreparation();
  // A named statement's ParseComplete marks it parsed on the connection: BEGIN's must not stand for its own.
  if (q.name || q.rows) return framedApart(client, config, values, begin, frame);
  if (!extended) {
    if (begin) q.text = `${begin};${q.text}`;
    // COMMIT behind a text of statements would be one of them: sent on its own at drizzle's COMMIT instead.
    frame.commit = false;
  }
  let beginReply = begin !== null;
  let statementDone = false;
  const submit = q.submit.bind(q);
  q.submit = (c) => {
    if (extended && begin) {
      c.parse({ text: begin });
      c.bind({});
      c.execute({});
    }
    return submit(c);
  };
  if (frame.commit) {
    // pg writes Execute and then Sync here (no `rows`: the portal runs to completion).
    q._getRows = (c) => {
      c.execute({ portal: q.portal });
      c.parse({ text: "commit" });
      c.bind({});
      c.execute({});
      c.sync();
    };
  }
  const complete = q.handleCommandComplete.bind(q);
  q.handleCommandComplete = (msg, c) => {
    if (beginReply) {
      beginReply = false;
      return;
    }
    if (frame.commit && statementDone) {
      frame.committed = msg.text === "COMMIT";
      return;
    }
    statementDone = true;
    complete(msg, c);
  };
  return new Promise((resolve, reject) => {
    q.callback = (err, res) => (err ? reject(err) : resolve(res));
    void client.query(q as never);
  });
}

/** BEGIN and COMMIT as queries of their own, around a statement that cannot carry them. */
async function framedApart(client: PoolClient, config: QueryConfig | string, values: unknown[] | undefined, begin: string | null, frame: Frame): Promise<unknown> {
  frame.commit = false;
  if (begin) await client.query(begin);
  return client.query(config as never, values);
}

const afterLast = () => new Error("edda: a statement after the transaction's last statement (it would run outside the transaction)");
const ended = () => Object.assign(new Error("edda: the transaction has ended"), { code: "CONNECTION_CLOSED" });
const rolledBack = () => new Error("edda: the transaction rolled back at COMMIT");
const answered = (command: string) => ({ command, rowCount: null, oid: null, rows: [], fields: [] });
const textOf = (config: QueryConfig | string) => (typeof config === "string" ? config : config.text);

type Phase =
  /** drizzle's BEGIN answered, no statement yet. */
  | "idle"
  /** The last statement went alone, autocommitted. */
  | "alone"
  /** A statement began the real transaction. */
  | "begun"
  /** Not a drizzle transaction (its first query was no BEGIN): every query as sent. */
  | "plain";

/** The client drizzle's transaction gets from `connect()`. */
class LazyClient {
  private phase: Phase | null = null;
  private begin = "begin";
  private conn: Promise<PoolClient> | null = null;
  private broken = false;
  /** The server has no transaction of ours open on the connection (nothing began, or it committed or rolled back). */
  private settled = true;
  private released = false;
  private lastSent = false;
  private last: { done: Promise<unknown>; frame: Frame | null } | null = null;
  private readonly onError = () => void (this.broken = true);

  constructor(private readonly pool: Pool) {}

  query(config: QueryConfig | string, values?: unknown[]): Promise<unknown> {
    if (this.released) return Promise.reject(ended());
    const text = textOf(config);
    if (this.phase === null) {
      // drizzle's `begin ` (and its isolation settings, kept for the real BEGIN).
      if (/^\s*begin\b/i.test(text) && !values?.length) {
        this.phase = "idle";
        this.begin = text.trim();
        return Promise.resolve(answered("BEGIN"));
      }
      this.phase = "plain";
    }
    if (this.phase === "plain") return this.client().then((c) => c.query(config as never, values));
    if (/^\s*commit\s*$/i.test(text)) return this.commit();
    if (/^\s*rollback\s*$/i.test(text)) return this.rollback();
    if (this.lastSent) return Promise.reject(afterLast());
    const isLast = text.startsWith(LAST_STATEMENT);
    if (isLast) this.lastSent = true;
    if (this.phase === "idle" && isLast && /^begin$/i.test(this.begin)) {
      // The transaction's only statement: alone, autocommitted (a BEGIN with settings keeps its envelope).
      this.phase = "alone";
      const r = this.client().then((c) => c.query(config as never, values));
      this.last = { done: r, frame: null };
      return r;
    }
    const begin = this.phase === "idle" ? this.begin : null;
    if (begin) {
      this.phase = "begun";
      this.settled = false;
    }
    const frame: Frame = { commit: isLast, committed: false };
    const r = this.client().then((c) => framedQuery(c, config, values, begin, frame));
    if (isLast) this.last = { done: r, frame };
    return r;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    void this.conn?.then(
      (c) => {
        c.removeListener("error", this.onError);
        // A connection whose transaction may still be open must not serve anyone else.
        c.release(this.broken || !this.settled ? new Error("edda: connection dropped after its transaction") : undefined);
      },
      () => undefined,
    );
  }

  private client(): Promise<PoolClient> {
    this.conn ??= this.pool.connect().then((c) => {
      c.on("error", this.onError);
      return c;
    });
    return this.conn;
  }

  private async commit(): Promise<unknown> {
    if (this.phase === "idle") return answered("COMMIT");
    const last = this.last;
    // A failed last statement is the transaction's failure (a lone one wrote nothing), swallowed or not.
    if (last) await last.done;
    if (this.phase === "alone") return answered("COMMIT");
    // Read after it ran: a statement that could not carry COMMIT cleared `frame.commit`.
    if (last?.frame?.commit) {
      if (!last.frame.committed) throw rolledBack();
      this.settled = true;
      return answered("COMMIT");
    }
    const c = await this.client();
    const res = (await c.query("commit")) as { command?: string };
    this.settled = true;
    // COMMIT of a transaction a failed statement aborted answers ROLLBACK.
    if (res.command !== "COMMIT") throw rolledBack();
    return res;
  }

  private async rollback(): Promise<unknown> {
    const last = this.last;
    await last?.done.catch(() => undefined);
    if (this.phase !== "begun") return answered("ROLLBACK");
    if (last?.frame?.commit && last.frame.committed) {
      // COMMIT went with the last statement: nothing is left to roll back.
      this.settled = true;
      return answered("ROLLBACK");
    }
    // The server rolled back with the connection; the rollback's own failure must not hide the transaction's.
    const c = await this.client().catch(() => null);
    if (this.broken || !c) return answered("ROLLBACK");
    try {
      const res = await c.query("rollback");
      this.settled = true;
      return res;
    } catch {
      this.broken = true;
      return answered("ROLLBACK");
    }
  }
}

/**
 * `pool` for drizzle, with its transactions lazy (see the module comment): `connect()` without a callback
 * (drizzle's, for a transaction) returns a client that takes a connection only for its first statement.
 * Everything else is the pool's own.
 */
export function lazyTransactionPool(pool: Pool): Pool {
  const connect = (cb?: unknown) => (cb === undefined ? Promise.resolve(new LazyClient(pool)) : pool.connect(cb as never));
  return new Proxy(pool, {
    get(target, key) {
      if (key === "connect") return connect;
      const v: unknown = Reflect.get(target, key, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
