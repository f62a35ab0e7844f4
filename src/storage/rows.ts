/**
 * Row → record mapping, and the value normalization that makes the three
 * drivers look alike. Raw queries (`queryRows`) return driver-native values:
 *  - int8 / bigserial: a string (postgres.js, Neon) or a number (PGlite) → number;
 *  - bytea: a Node Buffer (postgres.js, Neon) or a Uint8Array (PGlite), or a hex
 *    string when it travelled inside a JSON aggregate → a plain Uint8Array copy
 *    (a Buffer may be a view into a shared pool, so it is never handed out);
 *  - timestamptz: a Postgres text timestamp (drizzle turns the drivers' date
 *    parsing off), or an ISO string inside JSON → Date.
 * Query parameters go the other way: dates are sent as ISO strings with an
 * explicit `::timestamptz` cast (drizzle's postgres.js setup passes Date
 * objects through unserialized), bytes as a Uint8Array with `::bytea`.
 */
import { getTableColumns, sql, type SQL } from "drizzle-orm";
import { COMPENSATION_PREFIX, EV, HOOK_LISTENING_STATUSES, WAIT_KINDS, type WaitKind } from "../core/model.ts";
import { channelMessages, channelSubscriptions, workflowInstances } from "./schema.ts";
import type {
  ArchivedHistoryEvent,
  ChannelMessageRecord,
  ChannelMode,
  CompensationRecord,
  HistoryEvent,
  InstanceRecord,
  InstanceStatus,
  OutboxRecord,
  OutboxStatus,
  Payload,
  SubscriptionRecord,
} from "./records.ts";

export type Row = Record<string, unknown>;

/**
 * The database clock used for every lease, lock and timer computation. The
 * statement's start rather than `now()` (the transaction's start), so a lease
 * set late in a long step transaction still lasts its full duration.
 */
export const DB_NOW = sql`statement_timestamp()`;

/**
 * The instance row `alias` is still in its workflow body: not cancelled, and no compensation recorded
 * (engine/decide.ts `phase` is the rule; this is its SQL side, for the statements that end an instance
 * from outside). A compensation waiting out its retry backoff waits for a timer — a cancellable
 * status — yet a second cancel or a deadline must not rewrite how it ends nor skip its backoff.
 */
export function inBody(alias: string): SQL {
  return sql.raw(
    `(${alias}.cancel_data IS NULL AND NOT EXISTS (SELECT 1 FROM workflow_history ch WHERE ch.instance_id = ${alias}.instance_id AND starts_with(ch.activity_id, '${COMPENSATION_PREFIX}')))`,
  );
}

/** Names of the model as a SQL literal (constants, never user input): text of the statement, so no plan or prepared shape depends on them. */
const literal = (value: string): SQL => sql.raw(`'${value}'`);

/** Each wait kind's waiting status as a SQL literal, from its one declaration (core/model.ts WAIT_KINDS). */
export const WAITING = Object.fromEntries(Object.entries(WAIT_KINDS).map(([kind, d]) => [kind, literal(d.status)])) as Record<WaitKind, SQL>;

/** `(…)`: the statuses of an instance that may be listening for a webhook's POST (its own wait, or a race's message wait beside a webhook branch). */
export const HOOK_LISTENING: SQL = sql.raw(`(${HOOK_LISTENING_STATUSES.map((s) => `'${s}'`).join(", ")})`);

/** `DB_NOW + seconds` (fractional seconds allowed). */
export function dbNowPlus(seconds: number): SQL {
  return sql`(statement_timestamp() + make_interval(secs => ${seconds}::float8))`;
}

/** A Date as a query parameter. */
export function tsParam(date: Date): SQL {
  return sql`${date.toISOString()}::timestamptz`;
}

/** A timestamptz rendered as an ISO-8601 UTC string inside SQL (for JSON payloads). */
export function isoUtc(expr: SQL): SQL {
  return sql`to_char((${expr}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

export function toNumber(value: unknown): number {
  if (typeof value === "number") return value;
  if (typeof value === "bigint" || typeof value === "string") return Number(value);
  throw new TypeError(`expected a number, got ${typeof value}`);
}

export function toNullableNumber(value: unknown): number | null {
  return value === null || value === undefined ? null : toNumber(value);
}

const PG_TIMESTAMP = /^(\d{4,}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d(?::?\d\d)?(?::?\d\d)?)?$/;

/** Already ISO-8601 with a `T` and a `Z` or `±HH:MM` zone (JSON's rendering of a timestamptz): parsed as it is. */
function isIsoTimestamp(s: string): boolean {
  const n = s.length;
  if (n < 20 || s.charCodeAt(10) !== 84 /* T */) return false;
  if (s.charCodeAt(n - 1) === 90 /* Z */) return true;
  const sign = s.charCodeAt(n - 6);
  return (sign === 43 /* + */ || sign === 45) /* - */ && s.charCodeAt(n - 3) === 58 /* : */;
}

export function toDate(value: unknown): Date {
  if (value instanceof Date) return new Date(value.getTime());
  if (typeof value === "number") return new Date(value);
  if (typeof value === "string") {
    // The history's JSON carries ISO timestamps: what the rewrite below would build is the string itself.
    if (isIsoTimestamp(value)) {
      const date = new Date(value);
      if (!Number.isNaN(date.getTime())) return date;
    }
    // Postgres text output `2026-01-02 03:04:05.123456+00` → ISO-8601, which
    // every JS runtime parses (the space form is only parsed by some).
    const m = PG_TIMESTAMP.exec(value);
    let iso = value;
    if (m) {
      let zone = m[3] ?? "Z";
      if (zone !== "Z") {
        const sign = zone[0];
        const digits = zone.slice(1).replace(/:/g, "");
        zone = `${sign}${digits.slice(0, 2)}:${digits.slice(2, 4) || "00"}`;
        // Seconds in an offset (historic zones) cannot be expressed in ISO; rare enough to ignore.
      }
      iso = `${m[1]}T${m[2]}${zone}`;
    }
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) throw new TypeError(`unparseable timestamp: ${value}`);
    return date;
  }
  throw new TypeError(`expected a timestamp, got ${typeof value}`);
}

export function toNullableDate(value: unknown): Date | null {
  return value === null || value === undefined ? null : toDate(value);
}

function hexNibble(code: number): number {
  if (code >= 48 && code <= 57) return code - 48; // 0-9
  if (code >= 97 && code <= 102) return code - 87; // a-f
  if (code >= 65 && code <= 70) return code - 55; // A-F
  throw new TypeError("invalid hex in bytea");
}

/** `\x`-prefixed or bare hex (Postgres `encode(.., 'hex')`) → bytes. */
function hexToBytes(hex: string): Uint8Array {
  const start = hex.startsWith("\\x") ? 2 : 0;
  if ((hex.length - start) % 2 !== 0) throw new TypeError("odd-length hex bytea");
  const out = new Uint8Array((hex.length - start) / 2);
  for (let i = 0, j = start; i < out.length; i++, j += 2) {
    out[i] = (hexNibble(hex.charCodeAt(j)) << 4) | hexNibble(hex.charCodeAt(j + 1));
  }
  return out;
}

/** Exact bytes as a plain Uint8Array that owns its memory. */
export function toBytes(value: unknown): Uint8Array {
  // `new Uint8Array(view)` copies into a fresh buffer; `slice` would keep the Buffer species.
  if (value instanceof Uint8Array) return new Uint8Array(value);
  if (typeof value === "string") return hexToBytes(value);
  throw new TypeError(`expected bytea, got ${typeof value}`);
}

/** Driver JSON values arrive parsed on every driver today; accept text too. */
export function toJsonValue<T>(value: unknown): T {
  return (typeof value === "string" ? JSON.parse(value) : value) as T;
}

function str(value: unknown): string {
  if (typeof value !== "string") throw new TypeError(`expected text, got ${typeof value}`);
  return value;
}

function nullableStr(value: unknown): string | null {
  return value === null || value === undefined ? null : str(value);
}

/** Columns (data_type, text column, bytea column) → Payload. */
export function toPayload(dataType: unknown, text: unknown, binary: unknown): Payload {
  if (dataType === "binary") return { type: "binary", bytes: toBytes(binary) };
  return { type: "json", json: str(text) };
}

/** Payload → the (data_type, text, bytea) parameter triple, explicitly cast. */
export function payloadParams(p: Payload): { dataType: SQL; text: SQL; binary: SQL } {
  return p.type === "binary"
    ? { dataType: sql`'binary'::text`, text: sql`NULL::text`, binary: sql`${p.bytes}::bytea` }
    : { dataType: sql`'json'::text`, text: sql`${p.json}::text`, binary: sql`NULL::bytea` };
}

/** A select list of these columns by their SQL names (`c.name` of the drizzle column). */
function columnList(columns: Record<string, { name: string }>): SQL {
  return sql.raw(Object.values(columns).map((c) => c.name).join(", "));
}

/**
 * The columns an InstanceRecord carries: the table's (schema.ts, the one
 * definition of its shape) but two — `trace_context` is read on its own
 * (getTraceContext), `continued_from` is never read.
 */
const { continuedFrom: _continuedFrom, traceContext: _traceContext, ...instanceRecordColumns } = getTableColumns(workflowInstances);
export const INSTANCE_COLUMNS = columnList(instanceRecordColumns);

// A column added to the table fails to compile here until InstanceRecord (and toInstance) carry it, or it is left out above.
type InstanceRecordColumn = keyof typeof instanceRecordColumns;
const _instanceRecordMatchesTable: [InstanceRecordColumn, keyof InstanceRecord] extends [keyof InstanceRecord, InstanceRecordColumn] ? true : never = true;

/** Every column of channel_messages: what a ChannelMessageRecord is read from. */
export const MESSAGE_COLUMNS = columnList(getTableColumns(channelMessages));

/** The columns a SubscriptionRecord carries (the wait's match and lookback stay in SQL). */
const { id: _subscriptionId, match: _match, lookbackFrom: _lookbackFrom, ...subscriptionRecordColumns } = getTableColumns(channelSubscriptions);
export const SUBSCRIPTION_COLUMNS = columnList(subscriptionRecordColumns);
type SubscriptionRecordColumn = keyof typeof subscriptionRecordColumns;
const _subscriptionRecordMatchesTable: [SubscriptionRecordColumn, keyof SubscriptionRecord] extends [keyof SubscriptionRecord, SubscriptionRecordColumn] ? true : never = true;

const laterOf = (a: Date, b: Date | null): Date => (b && b > a ? b : a);

export function toInstance(r: Row): InstanceRecord {
  return {
    instanceId: str(r.instance_id),
    workflowName: str(r.workflow_name),
    sourceHash: str(r.source_hash),
    ownerService: str(r.owner_service),
    status: str(r.status) as InstanceStatus,
    currentActivityId: nullableStr(r.current_activity_id),
    run: toNumber(r.run),
    startedAt: toDate(r.started_at),
    // A lease handed from step to step leaves updated_at (concludeStep); locked_at moves with it.
    updatedAt: laterOf(toDate(r.updated_at), toNullableDate(r.locked_at)),
    inputData: str(r.input_data),
    outputData: nullableStr(r.output_data),
    errorData: nullableStr(r.error_data),
    cancelData: nullableStr(r.cancel_data),
    lockedBy: nullableStr(r.locked_by),
    lockedAt: toNullableDate(r.locked_at),
    lockToken: toNumber(r.lock_token),
    lockExpiresAt: toNullableDate(r.lock_expires_at),
    lockTimeoutSeconds: toNullableNumber(r.lock_timeout_seconds),
    parentInstanceId: nullableStr(r.parent_instance_id),
    parentActivityId: nullableStr(r.parent_activity_id),
    detached: r.detached === true || r.detached === "t",
    deadlineAt: toNullableDate(r.deadline_at),
    parkedHash: nullableStr(r.parked_hash),
    failureCount: toNumber(r.failure_count ?? 0),
    failureData: nullableStr(r.failure_data),
    concurrencyKey: nullableStr(r.concurrency_key),
    rateKey: nullableStr(r.rate_key),
    admittedAt: toNullableDate(r.admitted_at),
    singletonKey: nullableStr(r.singleton_key),
    debounceKey: nullableStr(r.debounce_key),
    notBefore: toNullableDate(r.not_before),
    originInstanceId: nullableStr(r.origin_instance_id),
    originKind: nullableStr(r.origin_kind) as InstanceRecord["originKind"],
    originActivityId: nullableStr(r.origin_activity_id),
    priority: toNumber(r.priority ?? 0),
    deployment: nullableStr(r.deployment),
    replayRefusedBy: nullableStr(r.replay_refused_by),
    replayRefusedError: nullableStr(r.replay_refused_error),
  };
}

/** A history row, from a plain SELECT or from the `json_agg` of HISTORY_JSON. */
export function toHistoryEvent(r: Row): HistoryEvent {
  return {
    id: toNumber(r.id),
    activityId: str(r.activity_id),
    eventType: str(r.event_type),
    data: toPayload(r.data_type, r.event_data, r.event_data_binary),
    createdAt: toDate(r.created_at),
  };
}

/** The model's event types, in one order: a history entry names its type by its index here. */
const EVENT_TYPES: readonly string[] = Object.values(EV);
/**
 * `event_type` as the text of its index in EVENT_TYPES (a number in the JSON: no string to parse and keep
 * per entry, a sixth of an entry's text), or as a JSON string for a type the model does not know.
 */
const EVENT_TYPE_CODE: SQL = sql.raw(`CASE h.event_type ${EVENT_TYPES.map((t, i) => `WHEN '${t}' THEN '${i}'`).join(" ")} ELSE to_json(h.event_type)::text END`);

/**
 * The current history of the instance `instanceIdExpr` as the text of one
 * flat JSON array ordered by id, for loading it in the same statement as a
 * lease acquisition. Each entry is five values in a row — id, activity_id,
 * event_type (EVENT_TYPE_CODE), the payload, created_at as epoch
 * milliseconds — with no array or object of its own: a cold step parses the
 * whole history, and an array per entry is an allocation per entry the
 * garbage collector pays for, keys repeated per entry nearly double the text
 * the driver decodes and parses, and the separators json_build_array writes
 * (`, `) a tenth of it. The payload is `event_data` as a string (its exact
 * stored text, decoded only when replay delivers it), or for a binary one
 * `["<hex>"]`. The time is a number, cut to the millisecond as a `Date` of
 * its text would be (no string per entry kept alive through the replay).
 * Built as text (string_agg), parsed once by toHistoryList.
 */
export function historyJson(instanceIdExpr: SQL): SQL {
  return sql`(SELECT '[' || coalesce(string_agg(h.id::text || ',' || to_json(h.activity_id)::text || ',' || ${EVENT_TYPE_CODE} || ',' ||
      CASE WHEN h.data_type = 'binary' THEN '["' || encode(h.event_data_binary, 'hex') || '"]' ELSE to_json(h.event_data)::text END || ',' ||
      (extract(epoch FROM date_trunc('milliseconds', h.created_at)) * 1000)::int8::text, ',' ORDER BY h.id), '') || ']'
    FROM workflow_history h WHERE h.instance_id = ${instanceIdExpr})`;
}

/**
 * A history entry of `historyJson`, one object with no other per entry: a
 * cold step over a long history keeps every entry alive through its replay,
 * and the garbage collector pays for what is alive. Its payload is made when
 * read (replay reads it once, when it delivers the entry; bytes are decoded
 * once) and can be replaced (a sealed or referenced value, once opened), its
 * time is made when read too (replay reads it only for failed attempts).
 */
class LoadedHistoryEvent implements HistoryEvent {
  /** The stored JSON text, or null for a binary payload. */
  #json: string | null;
  /** The payload's bytes, as hex until first read. */
  #bytes: string | Uint8Array | null;
  #createdMs: number;
  constructor(
    readonly id: number,
    readonly activityId: string,
    readonly eventType: string,
    json: string | null,
    hex: string | null,
    createdMs: number,
  ) {
    this.#json = json;
    this.#bytes = hex;
    this.#createdMs = createdMs;
  }

  get data(): Payload {
    if (this.#json !== null) return { type: "json", json: this.#json };
    if (typeof this.#bytes === "string") this.#bytes = hexToBytes(this.#bytes);
    return { type: "binary", bytes: this.#bytes! };
  }

  /** The payload as the engine sees it, once opened (engine/payload-sealing.ts replaces it in place). */
  set data(p: Payload) {
    this.#json = p.type === "json" ? p.json : null;
    this.#bytes = p.type === "binary" ? p.bytes : null;
  }

  get createdAt(): Date {
    return new Date(this.#createdMs);
  }

  /** As a plain HistoryEvent (the getters are not own properties). */
  toJSON(): HistoryEvent {
    return { id: this.id, activityId: this.activityId, eventType: this.eventType, data: this.data, createdAt: this.createdAt };
  }
}

/** `historyJson`'s values per entry. */
const STRIDE = 5;

export function toHistoryList(value: unknown): HistoryEvent[] {
  const flat = toJsonValue<unknown[]>(value);
  if (flat.length % STRIDE !== 0) throw new TypeError(`a loaded history of ${flat.length} values is not entries of ${STRIDE}`);
  const out = new Array<HistoryEvent>(flat.length / STRIDE);
  for (let i = 0, k = 0; k < flat.length; i++, k += STRIDE) {
    const code = flat[k + 2];
    const type = typeof code === "number" ? EVENT_TYPES[code] : str(code);
    if (type === undefined) throw new TypeError(`unknown event type code ${String(code)}`);
    const payload = flat[k + 3];
    const binary = Array.isArray(payload);
    out[i] = new LoadedHistoryEvent(toNumber(flat[k]), str(flat[k + 1]), type, binary ? null : str(payload), binary ? str(payload[0]) : null, toNumber(flat[k + 4]));
  }
  return out;
}

export function toArchivedEvent(r: Row): ArchivedHistoryEvent {
  return { ...toHistoryEvent(r), run: toNumber(r.run), archivedAt: toDate(r.archived_at) };
}

export function toCompensation(r: Row): CompensationRecord {
  return {
    id: toNumber(r.id),
    activityId: str(r.activity_id),
    activityName: str(r.activity_name),
    args: str(r.args),
    createdAt: toDate(r.created_at),
  };
}

export function toChannelMessage(r: Row): ChannelMessageRecord {
  return {
    seq: toNumber(r.id),
    messageId: str(r.message_id),
    channel: str(r.channel),
    data: toPayload(r.data_type, r.data, r.data_binary),
    metadata: nullableStr(r.metadata),
    targetInstanceId: nullableStr(r.target_instance_id),
    publishedAt: toDate(r.published_at),
  };
}

export function toSubscription(r: Row): SubscriptionRecord {
  return {
    instanceId: str(r.instance_id),
    channel: str(r.channel),
    mode: str(r.mode) as ChannelMode,
    activityId: nullableStr(r.activity_id),
    cursorMessageId: toNullableNumber(r.cursor_message_id),
    timeoutAt: toNullableDate(r.timeout_at),
    subscribedAt: toDate(r.subscribed_at),
  };
}

export function toOutbox(r: Row): OutboxRecord {
  return {
    eventId: str(r.event_id),
    eventType: str(r.event_type),
    eventSource: str(r.event_source),
    data: toPayload(r.data_type, r.event_data, r.event_data_binary),
    contentType: str(r.content_type),
    extensions: nullableStr(r.extensions),
    status: str(r.status) as OutboxStatus,
    retryCount: toNumber(r.retry_count),
    createdAt: toDate(r.created_at),
    publishedAt: toNullableDate(r.published_at),
    lastError: nullableStr(r.last_error),
    rearmedAt: toNullableDate(r.rearmed_at),
  };
}
