/**
 * Each change of an instance's state, written once.
 *
 * The storage areas compose their statements from these parts, so the SQL of
 * a state change stands in one place:
 *
 *   makeRunnable   the UPDATE that makes instances `running`: a wait ended, a
 *                  queued instance admitted, a parked one resumed, a run recurring;
 *   recordHistory  the INSERT into the current run's history (and its text form
 *                  for the step's conclusion, storage/conclusion.ts, which writes
 *                  the status its decision chose);
 *   resolveWaits   the statement that ends waits: record at each bound wait's id,
 *                  wake the instances still waiting there, withdraw the other
 *                  branches of those waits. Timers, a receive's timeout, channel
 *                  deliveries, webhook POSTs and expiries and a child's end are
 *                  this statement over their own rows.
 *
 * What ends an instance withdraws every kind's rows in one place too
 * (storage/conclusion.ts `cleanupCtes`).
 */
import { sql, type SQL } from "drizzle-orm";
import type { HistoryEventType } from "../core/model.ts";
import { DB_NOW } from "./rows.ts";

const HISTORY_COLUMNS = "instance_id, activity_id, event_type, data_type, event_data, event_data_binary";

/** `INSERT INTO workflow_history (…columns)` as text, for statements built as text (the step's conclusion). */
export function historyInsertText(opts: { createdAt?: boolean } = {}): string {
  return `INSERT INTO workflow_history (${HISTORY_COLUMNS}${opts.createdAt ? ", created_at" : ""})`;
}

/**
 * Record history rows: `rows` is a SELECT of the history columns in order
 * (`instance_id, activity_id, event_type, data_type, event_data,
 * event_data_binary`, and `created_at` when `createdAt`). `firstWins`: a
 * record already at the same activity id wins (a sweep racing a delivery);
 * otherwise recording twice is an error.
 */
export function recordHistory(rows: SQL, opts: { createdAt?: boolean; firstWins?: boolean } = {}): SQL {
  return sql`${sql.raw(historyInsertText(opts))} ${rows}${opts.firstWins ? sql` ON CONFLICT (instance_id, activity_id) DO NOTHING` : sql``}`;
}

/**
 * Make the instances `where` selects runnable: `status = 'running'`, with
 * `set` for what the change clears or starts beside it.
 */
export function makeRunnable(p: { alias?: string; set?: SQL; from?: SQL; where: SQL; returning?: SQL }): SQL {
  const alias = p.alias === undefined ? sql`` : sql.raw(` ${p.alias}`);
  const set = p.set === undefined ? sql`` : sql`${p.set}, `;
  const from = p.from === undefined ? sql`` : sql` FROM ${p.from}`;
  const returning = p.returning === undefined ? sql`` : sql` RETURNING ${p.returning}`;
  return sql`UPDATE workflow_instances${alias} SET status = 'running', ${set}updated_at = ${DB_NOW}${from} WHERE ${p.where}${returning}`;
}

/** The rows a wait may keep beside its instance; a webhook's outcome is read from its record instead (storage/webhook-waits.ts `decided`). */
export type WaitRows = "timers" | "receives";

/**
 * CTEs that withdraw every wait the instances `of` (a SELECT of instance_id)
 * keep rows for, as ending or restarting an instance does: their timer rows
 * go, their receive markers are cleared (the subscriptions themselves stay;
 * `receivesOf` narrows whose, when the caller deletes the others' subscriptions
 * in the same statement). A webhook needs no withdrawal here: its POST is
 * refused once its instance finished or moved to another run.
 */
export function withdrawWaits(of: SQL, receivesOf: SQL = of): SQL {
  return sql`withdrawn_timers AS (
            DELETE FROM workflow_timer_subscriptions WHERE instance_id IN (${of})
          ), withdrawn_receives AS (
            UPDATE channel_subscriptions SET activity_id = NULL, timeout_at = NULL, match = NULL
            WHERE instance_id IN (${receivesOf}) AND activity_id IS NOT NULL
          )`;
}

/**
 * The one statement that ends waits.
 *
 * `bound` selects one row per wait it ends — `instance_id`, `wait_id` (the id
 * the outcome is recorded at), `ord` (the record order), and the record's
 * `event_type, data_type, event_data, event_data_binary`; more columns may
 * follow for `stillWaiting`. In one statement, in the module's lock order
 * (the instance rows are locked by `before` or by the caller already):
 *   - the instances that `stillWaiting` (over the instance `i` and the bound
 *     row `b`) says wait there become runnable (`woken`);
 *   - the outcome is recorded at the wait's id — `always` (an instance that
 *     does not wait there yet reads it when it does), or only
 *     where it woke the instance (`woken`: the wait's own registration reads the
 *     outcome from the kind's row instead);
 *   - the woken waits' other branches are withdrawn: a race's message branch
 *     (its subscription's wait marker, so no delivery takes a message for it)
 *     and its timer rows. `own` names the rows the resolving kind withdrew itself
 *     in `before` (a row is changed at most once per statement).
 * `result` is the statement's SELECT (default: the distinct instance ids of `bound`).
 */
export function resolveWaits(p: {
  before?: SQL;
  bound: SQL;
  stillWaiting: SQL;
  record: "always" | "woken";
  /** A record already at the wait's id: the first wins (a sweep racing a POST), or the statement fails (it would lose what it took, e.g. a message). */
  onConflict: "first-wins" | "error";
  own?: WaitRows;
  result?: SQL;
}): SQL {
  const before = p.before === undefined ? sql`` : sql`${p.before}, `;
  const recorded =
    p.record === "woken"
      ? sql`SELECT bound.instance_id, bound.wait_id, bound.event_type, bound.data_type, bound.event_data, bound.event_data_binary
            FROM bound JOIN woken ON woken.instance_id = bound.instance_id AND woken.wait_id = bound.wait_id ORDER BY bound.ord`
      : sql`SELECT instance_id, wait_id, event_type, data_type, event_data, event_data_binary FROM bound ORDER BY ord`;
  const withdraw: SQL[] = [];
  if (p.own !== "receives") {
    withdraw.push(sql`withdrawn_receives AS (
            UPDATE channel_subscriptions s SET activity_id = NULL, timeout_at = NULL, match = NULL
            FROM woken WHERE s.instance_id = woken.instance_id AND s.activity_id = woken.wait_id
          )`);
  }
  if (p.own !== "timers") {
    withdraw.push(sql`withdrawn_timers AS (
            DELETE FROM workflow_timer_subscriptions t USING woken
            WHERE t.instance_id = woken.instance_id AND (t.timer_id = woken.wait_id OR t.activity_id = woken.wait_id)
          )`);
  }
  return sql`
        WITH ${before}bound AS MATERIALIZED (${p.bound}), woken AS (
          ${makeRunnable({ alias: "i", from: sql`bound b`, where: sql`i.instance_id = b.instance_id AND ${p.stillWaiting}`, returning: sql`i.instance_id, b.wait_id` })}
        ), recorded AS (
          ${recordHistory(recorded, { firstWins: p.onConflict === "first-wins" })}
        ), ${sql.join(withdraw, sql`, `)}
        ${p.result ?? sql`SELECT DISTINCT instance_id FROM bound`}`;
}

/**
 * A wait that comes due as a row of its own (a timer; a receive's timeout on its subscription), ended by
 * `resolveWaits`: `due` locks the due rows with their instances (… instance_id, activity_id — the wait's id — and
 * the columns `data` and `order` read …, instance row first, SKIP LOCKED), `withdraw` removes or clears them (it
 * reads `due`), and the expiry is recorded at each wait's id (a record already there wins).
 */
export function expireDue(p: { due: SQL; withdraw: SQL; eventType: HistoryEventType; data: SQL; order: SQL; own: WaitRows; stillWaiting: SQL }): SQL {
  return resolveWaits({
    before: sql`due AS (${p.due}), withdrawn AS (${p.withdraw})`,
    bound: sql`SELECT instance_id, activity_id AS wait_id, row_number() OVER (ORDER BY ${p.order}) AS ord,
                 ${p.eventType}::text AS event_type, 'json'::text AS data_type, (${p.data})::text AS event_data, NULL::bytea AS event_data_binary
            FROM due`,
    own: p.own,
    record: "always",
    onConflict: "first-wins",
    stillWaiting: p.stillWaiting,
  });
}
