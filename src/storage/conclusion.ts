/**
 * The text of a step's fenced conclusion, built once per shape.
 *
 * A conclusion's statement text depends only on which of its parts are there —
 * history rows, compensations, a timer, a terminal status's clean-up, the
 * `last` form (drivers/postgres-js-lazy-tx.ts) — never on their values: the
 * values go as parameters, the optional columns behind one bit mask, the rows
 * of history and compensations as one JSON parameter each
 * (`json_to_recordset`). So each of the ≤ 24 shapes is built once per process
 * and prepared once per connection, and a step fills a parameter array
 * instead of building a query (drizzle `sql` templates rebuilt the statement
 * on every step: ~11 % of the engine's CPU, issue 21).
 *
 * Several conclusions go as one statement too (`groupedConclusion`, group
 * commit, engine/group-commit.ts): a JSON array with one row per step, each
 * row fenced by its own (instance, worker, token); the statement returns the
 * rows whose fence held, so each step learns whether its own did. The rows of
 * a failed fence join nothing: they write nothing and touch no other row.
 *
 * JSON strings carry the text verbatim (`json_to_recordset` unescapes them);
 * bytes go as base64. A payload's JSON text is a string inside that JSON, so
 * its escapes (a lone surrogate's `\ud800`) never meet a JSON parser of the
 * database.
 */
import { LAST_STATEMENT } from "./database.ts";
import { historyInsertText } from "./transitions.ts";
import { RUNNABLE_STATUSES, TERMINAL_STATUSES, type Fence, type InstanceStatus, type NewCompensation, type NewHistoryEvent, type TimerRegistration } from "./records.ts";

/**
 * Everything one step concludes with, written in one fenced statement: if the
 * fence (workerId + token) no longer holds, nothing is written.
 */
export interface StepConclusion {
  status: InstanceStatus;
  currentActivityId?: string | null;
  history?: NewHistoryEvent[];
  compensations?: NewCompensation[];
  /** Registered with ON CONFLICT DO NOTHING: an existing timer keeps its first expiry. */
  timer?: TimerRegistration;
  outputData?: string | null;
  errorData?: string | null;
  /** With status `parked`: the source hash of the code that diverged. */
  parkedHash?: string | null;
  /**
   * Keep the lease for the follow-up step this conclusion dispatches: the token
   * is bumped and the expiry set to now() + `leaseSeconds`. Without it the lease
   * is released.
   */
  handoff?: { leaseSeconds: number };
}

export interface ConcludeResult {
  ok: boolean;
  /** The new fencing token when the lease was handed off. */
  token?: number;
}

export interface ConcludeOptions {
  /**
   * The transaction's last statement: a pipelining driver sends COMMIT right behind it, or sends it
   * alone, autocommitted, when the transaction has no other statement (LAST_STATEMENT). The statement
   * then fails when the fence does not hold, so that a COMMIT sent behind it rolls back; the result is
   * the same `{ ok: false }`.
   */
  last?: boolean;
}

/** One step's conclusion under its fence (a row of a grouped conclusion). */
export interface FencedConclusion {
  fence: Fence;
  conclusion: StepConclusion;
}

/** A statement: its text (one per shape, built once) and this call's parameters. */
export interface Statement {
  text: string;
  params: unknown[];
}

// The optional columns a conclusion sets, one bit each: unset leaves the column as it is.
const SETS_CURRENT = 1;
const SETS_OUTPUT = 2;
const SETS_ERROR = 4;
const SETS_PARKED = 8;

/** The columns a finished instance leaves behind (channel subscriptions and cursors, groups, timers). */
const END_TABLES = [
  ["d_subs", "channel_subscriptions"],
  ["d_groups", "workflow_group_memberships"],
  ["d_timers", "workflow_timer_subscriptions"],
  ["d_cursors", "channel_delivery_cursors"],
] as const;

/** What a shape's text depends on. */
interface Shape {
  history: boolean;
  compensations: boolean;
  timer: boolean;
  terminal: boolean;
}

/** The SQL expression of each input of the SET list (a parameter, or a column of the grouped input). */
interface SetInputs {
  status: string;
  mask: string;
  current: string;
  output: string;
  error: string;
  parked: string;
  /** The hand-off's lease seconds; NULL releases the lease. */
  handoffSeconds: string;
}

/**
 * The fenced UPDATE's SET list. A concluded step ends a run of failures (poison isolation counts only
 * failures in a row). A step that hands its lease on and keeps the status leaves updated_at alone: it then
 * changes no indexed column and Postgres updates the row HOT (schema.ts); locked_at says when the lease last
 * moved, and toInstance reports the later of the two as updatedAt. Setting a column to its own value (an
 * unset optional column, the kept locked_by) changes nothing an index sees.
 */
function setList(v: SetInputs, col: string): string {
  const keep = (bit: number, column: string, value: string) => `${column} = CASE WHEN (${v.mask} & ${bit}) <> 0 THEN ${value} ELSE ${col}${column} END`;
  return [
    `status = ${v.status}`,
    `updated_at = CASE WHEN ${v.handoffSeconds} IS NOT NULL AND ${col}status = ${v.status} THEN ${col}updated_at ELSE statement_timestamp() END`,
    `lock_token = ${col}lock_token + 1`,
    "failure_count = 0",
    "failure_data = NULL",
    keep(SETS_CURRENT, "current_activity_id", v.current),
    keep(SETS_OUTPUT, "output_data", v.output),
    keep(SETS_ERROR, "error_data", v.error),
    keep(SETS_PARKED, "parked_hash", v.parked),
    `locked_by = CASE WHEN ${v.handoffSeconds} IS NULL THEN NULL ELSE ${col}locked_by END`,
    `locked_at = CASE WHEN ${v.handoffSeconds} IS NULL THEN NULL ELSE statement_timestamp() END`,
    `lock_expires_at = CASE WHEN ${v.handoffSeconds} IS NULL THEN NULL ELSE statement_timestamp() + make_interval(secs => ${v.handoffSeconds}) END`,
  ].join(", ");
}

const HISTORY_COLUMNS = "k int, activity_id text, event_type text, data_type text, event_data text, event_data_b64 text";
const COMPENSATION_COLUMNS = "k int, activity_id text, activity_name text, args text";

/** The history and compensation inserts, joined to `upd` (by `join`, or to its only row). */
function rowInserts(shape: Shape, historyParam: string, compensationParam: string, grouped: boolean): string[] {
  // Grouped, each row names its conclusion (`ord`) and joins that conclusion's row of `upd`, if its fence held.
  const from = (param: string, columns: string, alias: string) =>
    grouped
      ? `upd JOIN json_to_recordset(${param}::json) AS ${alias}(ord int, ${columns}) ON ${alias}.ord = upd.ord`
      : `upd, json_to_recordset(${param}::json) AS ${alias}(${columns})`;
  const order = (alias: string) => (grouped ? `${alias}.ord, ${alias}.k` : `${alias}.k`);
  const ctes: string[] = [];
  if (shape.history) {
    ctes.push(`hist AS (
      ${historyInsertText()}
      SELECT upd.instance_id, h.activity_id, h.event_type, h.data_type, h.event_data, decode(h.event_data_b64, 'base64')
      FROM ${from(historyParam, HISTORY_COLUMNS, "h")} ORDER BY ${order("h")})`);
  }
  if (shape.compensations) {
    ctes.push(`comp AS (
      INSERT INTO workflow_compensations (instance_id, activity_id, activity_name, args)
      SELECT upd.instance_id, c.activity_id, c.activity_name, c.args FROM ${from(compensationParam, COMPENSATION_COLUMNS, "c")} ORDER BY ${order("c")}
      ON CONFLICT (instance_id, activity_id) DO NOTHING)`);
  }
  return ctes;
}

/** A finished instance leaves everything that could still wake or address it. */
function endDeletes(which: string): string[] {
  return END_TABLES.map(([name, table]) => `${name} AS (DELETE FROM ${table} WHERE instance_id IN (SELECT instance_id FROM upd${which}))`);
}

const shapeKey = (s: Shape) => (s.history ? 1 : 0) | (s.compensations ? 2 : 0) | (s.timer ? 4 : 0) | (s.terminal ? 8 : 0);

/** Parameters of the single conclusion, in order. */
const P = { id: "$1", worker: "$2", token: "$3::bigint", status: "$4::text", mask: "$5::int", current: "$6::text", output: "$7::text", error: "$8::text", parked: "$9::text", handoffSeconds: "$10::float8" };

function singleText(shape: Shape, last: boolean): string {
  let n = 10;
  const next = () => `$${++n}`;
  const historyParam = shape.history ? next() : "";
  const compensationParam = shape.compensations ? next() : "";
  const ctes = [
    `upd AS (UPDATE workflow_instances SET ${setList(P, "")}
      WHERE instance_id = ${P.id} AND locked_by = ${P.worker} AND lock_token = ${P.token} RETURNING instance_id, lock_token)`,
    ...rowInserts(shape, historyParam, compensationParam, false),
  ];
  if (shape.timer) {
    const [id, activity, at, secs] = [next(), next(), next(), next()];
    // ON CONFLICT DO NOTHING: a timer keeps the expiry it was first registered with.
    ctes.push(`timer AS (
      INSERT INTO workflow_timer_subscriptions (instance_id, timer_id, expires_at, activity_id)
      SELECT upd.instance_id, ${id}::text, COALESCE(${at}::timestamptz, statement_timestamp() + make_interval(secs => ${secs}::float8)), ${activity}::text FROM upd
      ON CONFLICT (instance_id, timer_id) DO NOTHING)`);
  }
  if (shape.terminal) ctes.push(...endDeletes(""));
  const body = `WITH ${ctes.join(", ")} `;
  // `last`: one row always, and a division by zero when the fence matched nothing: the statement fails, the
  // transaction it ends is aborted, and a COMMIT pipelined behind it rolls back (user writes included).
  return last
    ? `${LAST_STATEMENT}${body}SELECT (SELECT lock_token FROM upd) AS lock_token, 1 / (SELECT count(*)::int FROM upd) AS fenced`
    : `${body}SELECT lock_token FROM upd`;
}

/** The grouped input's columns (`json_to_recordset`), one row per conclusion. */
const GROUP_COLUMNS =
  "ord int, iid text, worker text, token bigint, to_status text, mask int, cur text, outp text, err text, parked text, " +
  "secs float8, ends bool, timer_id text, timer_activity text, timer_at timestamptz, timer_secs float8";

const G: SetInputs = { status: "i.to_status", mask: "i.mask", current: "i.cur", output: "i.outp", error: "i.err", parked: "i.parked", handoffSeconds: "i.secs" };

function groupedText(shape: Shape): string {
  const historyParam = shape.history ? "$2" : "";
  const compensationParam = shape.compensations ? (shape.history ? "$3" : "$2") : "";
  const ctes = [
    `upd AS (UPDATE workflow_instances w SET ${setList(G, "w.")}
      FROM json_to_recordset($1::json) AS i(${GROUP_COLUMNS})
      WHERE w.instance_id = i.iid AND w.locked_by = i.worker AND w.lock_token = i.token
      RETURNING i.ord, w.instance_id, w.lock_token, i.ends, i.timer_id, i.timer_activity, i.timer_at, i.timer_secs)`,
    ...rowInserts(shape, historyParam, compensationParam, true),
  ];
  if (shape.timer) {
    ctes.push(`timer AS (
      INSERT INTO workflow_timer_subscriptions (instance_id, timer_id, expires_at, activity_id)
      SELECT upd.instance_id, upd.timer_id, COALESCE(upd.timer_at, statement_timestamp() + make_interval(secs => upd.timer_secs)), upd.timer_activity
      FROM upd WHERE upd.timer_id IS NOT NULL ORDER BY upd.ord
      ON CONFLICT (instance_id, timer_id) DO NOTHING)`);
  }
  if (shape.terminal) ctes.push(...endDeletes(" WHERE ends"));
  return `WITH ${ctes.join(", ")} SELECT ord, lock_token FROM upd`;
}

// Built on first use: 12 single shapes (a timer and a terminal status exclude each other) × 2 (`last`), 16 grouped.
const singles = new Map<number, string>();
const groups = new Map<number, string>();

function cached(map: Map<number, string>, key: number, build: () => string): string {
  let text = map.get(key);
  if (text === undefined) map.set(key, (text = build()));
  return text;
}

/** What a conclusion writes besides its instance row. */
interface Parts {
  terminal: boolean;
  /** A hand-off is honoured only for a runnable status (a waiting or finished instance must not stay locked). */
  handoffSeconds: number | null;
  timer: TimerRegistration | undefined;
  mask: number;
}

/** Whether the conclusion keeps the lease for a follow-up: only a runnable status may stay locked. */
export function handsOff(c: StepConclusion): boolean {
  return !!c.handoff && RUNNABLE_STATUSES.includes(c.status);
}

function partsOf(c: StepConclusion): Parts {
  const terminal = TERMINAL_STATUSES.includes(c.status);
  const timer = c.timer && !terminal ? c.timer : undefined;
  if (timer && !timer.expiresAt && timer.delaySeconds === undefined) throw new TypeError(`timer ${timer.timerId}: expiresAt or delaySeconds is required`);
  const mask =
    (c.currentActivityId !== undefined ? SETS_CURRENT : 0) |
    (c.outputData !== undefined ? SETS_OUTPUT : 0) |
    (c.errorData !== undefined ? SETS_ERROR : 0) |
    (c.parkedHash !== undefined ? SETS_PARKED : 0);
  return { terminal, handoffSeconds: handsOff(c) ? c.handoff!.leaseSeconds : null, timer, mask };
}

function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

const historyRow = (e: NewHistoryEvent, k: number) =>
  e.data.type === "binary"
    ? { k, activity_id: e.activityId, event_type: e.eventType, data_type: "binary", event_data: null, event_data_b64: toBase64(e.data.bytes) }
    : { k, activity_id: e.activityId, event_type: e.eventType, data_type: "json", event_data: e.data.json, event_data_b64: null };

const compensationRow = (c: NewCompensation, k: number) => ({ k, activity_id: c.activityId, activity_name: c.activityName, args: c.args });

/** The statement of one step's conclusion under `fence`. */
export function singleConclusion(fence: Fence, c: StepConclusion, last: boolean): Statement {
  const p = partsOf(c);
  const shape: Shape = { history: !!c.history?.length, compensations: !!c.compensations?.length, timer: !!p.timer, terminal: p.terminal };
  const text = cached(singles, shapeKey(shape) | (last ? 16 : 0), () => singleText(shape, last));
  const params: unknown[] = [
    fence.instanceId,
    fence.workerId,
    fence.token,
    c.status,
    p.mask,
    c.currentActivityId ?? null,
    c.outputData ?? null,
    c.errorData ?? null,
    c.parkedHash ?? null,
    p.handoffSeconds,
  ];
  if (shape.history) params.push(JSON.stringify(c.history!.map(historyRow)));
  if (shape.compensations) params.push(JSON.stringify(c.compensations!.map(compensationRow)));
  if (p.timer) params.push(p.timer.timerId, p.timer.activityId, p.timer.expiresAt?.toISOString() ?? null, p.timer.expiresAt ? null : p.timer.delaySeconds);
  return { text, params };
}

/**
 * The statement of several steps' conclusions, each row under its own fence; its rows (`ord`, the index in
 * `items`, and `lock_token`) are those whose fence held. The instances must be distinct.
 */
export function groupedConclusion(items: readonly FencedConclusion[]): Statement {
  const shape: Shape = { history: false, compensations: false, timer: false, terminal: false };
  const rows: object[] = [];
  const history: object[] = [];
  const compensations: object[] = [];
  items.forEach(({ fence, conclusion: c }, ord) => {
    const p = partsOf(c);
    rows.push({
      ord,
      iid: fence.instanceId,
      worker: fence.workerId,
      token: fence.token,
      to_status: c.status,
      mask: p.mask,
      cur: c.currentActivityId ?? null,
      outp: c.outputData ?? null,
      err: c.errorData ?? null,
      parked: c.parkedHash ?? null,
      secs: p.handoffSeconds,
      ends: p.terminal,
      timer_id: p.timer?.timerId ?? null,
      timer_activity: p.timer?.activityId ?? null,
      timer_at: p.timer?.expiresAt?.toISOString() ?? null,
      timer_secs: p.timer && !p.timer.expiresAt ? p.timer.delaySeconds : null,
    });
    c.history?.forEach((e, k) => history.push({ ord, ...historyRow(e, k) }));
    c.compensations?.forEach((e, k) => compensations.push({ ord, ...compensationRow(e, k) }));
    shape.timer ||= !!p.timer;
    shape.terminal ||= p.terminal;
  });
  shape.history = history.length > 0;
  shape.compensations = compensations.length > 0;
  // Only the parameters the shape's text mentions: Postgres cannot type one it never sees.
  const params: unknown[] = [JSON.stringify(rows)];
  if (shape.history) params.push(JSON.stringify(history));
  if (shape.compensations) params.push(JSON.stringify(compensations));
  return { text: cached(groups, shapeKey(shape), () => groupedText(shape)), params };
}
