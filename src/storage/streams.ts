/**
 * Realtime streams: what workflows (`emit`) and activities (`ctx.stream`)
 * publish for live readers, in `workflow_streams` (one head per instance) and
 * `workflow_stream_chunks` (the items).
 *
 * One append is one statement, fenced by the step's lease: a writer whose
 * lease was lost (a zombie after a takeover or a cancel) appends nothing. It
 * upserts the head first — the head row lock serializes appends to one
 * stream, so sequence order is commit order and a reader that has read up to
 * `n` never later finds a commit below `n` — and checks the size budget in
 * the same upsert. Emits are unique per (instance, run, operation id): a
 * replay appending one again adds nothing. An append NOTIFYs
 * `edda_stream` with the instance id at commit, so readers wake without
 * polling (engine/stream-listener.ts).
 *
 * A read is one statement too, and carries the instance's status from the
 * same snapshot: when that status is terminal, every item appended before the
 * end is in the rows read, so the reader may send its final event.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { toDate, toNumber, toPayload, type Row } from "./rows.ts";
import type { Fence, InstanceStatus, Payload } from "./records.ts";

export const STREAM_CHANNEL = "edda_stream";

export type StreamItemKind = "chunk" | "emit" | "retry";

export interface NewStreamItem {
  kind: "chunk" | "emit";
  /** The activity id (chunks) or the emit's operation id. */
  source: string;
  topic: string | null;
  data: Payload;
  /** Bytes the item counts against the stream's budget. */
  size: number;
}

export interface StreamAppend {
  /** The step's lease: an append after it was lost writes nothing. */
  fence: Fence;
  run: number;
  attempt: number;
  items: NewStreamItem[];
  /**
   * The first append of an activity attempt's writer names the activity: if
   * an earlier execution of it in this run streamed, a `retry` marker goes
   * first (a later run of `ctx.recur` reuses activity ids without retrying).
   */
  retryMarkerFor?: string;
  /** Refuse the append when the stream's bytes would pass this. */
  maxBytes: number;
}

export type StreamAppendResult = { ok: true; lastSeq: number | null } | { ok: false; reason: "lease_lost" | "stream_full" };

export interface StreamItem {
  seq: number;
  kind: StreamItemKind;
  source: string;
  run: number;
  attempt: number;
  topic: string | null;
  data: Payload;
  createdAt: Date;
}

export interface StreamRead {
  items: StreamItem[];
  /** The instance's status in the same snapshot; null when it does not exist. */
  status: InstanceStatus | null;
  /** The seq of the stream's last item in the same snapshot (0: nothing appended yet), whatever `afterSeq` and `topics` were. */
  lastSeq: number;
}

export interface StreamsArea {
  appendStream(a: StreamAppend): Promise<StreamAppendResult>;
  /** Items after `afterSeq` in order (at most `limit`); `topics` keeps those topics and the retry markers. */
  readStream(instanceId: string, afterSeq: number, opts: { limit: number; topics?: readonly string[] }): Promise<StreamRead>;
}

/** The largest budget Postgres' bigint comparison takes from a JS number exactly. */
const NO_LIMIT = Number.MAX_SAFE_INTEGER;

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

function toHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += HEX[b]!;
  return s;
}

function batchJson(items: NewStreamItem[]): string {
  return JSON.stringify(
    items.map((i) => ({
      k: i.kind,
      s: i.source,
      t: i.topic,
      n: i.size,
      // The item's JSON text travels as a string (`->>` gives it back verbatim), so a lone surrogate
      // escape inside it never meets a JSON parser of the database.
      ...(i.data.type === "json" ? { j: i.data.json } : { b: toHex(i.data.bytes) }),
    })),
  );
}

export function streamsArea(ex: Executor): StreamsArea {
  return {
    async appendStream(a) {
      const f = a.fence;
      const marker = a.retryMarkerFor ?? null;
      const markerData = JSON.stringify({ activityId: marker, attempt: a.attempt });
      const rows = await queryRows(
        ex,
        sql`WITH fence AS (
          SELECT 1 FROM workflow_instances WHERE instance_id = ${f.instanceId} AND locked_by = ${f.workerId} AND lock_token = ${f.token}::bigint
        ), items AS (
          SELECT 0::bigint AS ord, 'retry'::text AS kind, ${marker}::text AS source, NULL::text AS topic, 'json'::text AS data_type,
                 ${markerData}::text AS data, NULL::text AS hexdata, 0::bigint AS size
          WHERE ${marker}::text IS NOT NULL
            AND EXISTS (SELECT 1 FROM workflow_stream_chunks c
                        WHERE c.instance_id = ${f.instanceId} AND c.run = ${a.run}::int AND c.source = ${marker}::text AND c.kind = 'chunk')
          UNION ALL
          SELECT x.ord, x.e->>'k', x.e->>'s', x.e->>'t', CASE WHEN x.e->>'b' IS NULL THEN 'json' ELSE 'binary' END,
                 x.e->>'j', x.e->>'b', (x.e->>'n')::bigint
          FROM json_array_elements(${batchJson(a.items)}::json) WITH ORDINALITY AS x(e, ord)
          WHERE x.e->>'k' <> 'emit' OR NOT EXISTS (
            SELECT 1 FROM workflow_stream_chunks c
            WHERE c.instance_id = ${f.instanceId} AND c.kind = 'emit' AND c.run = ${a.run}::int AND c.source = x.e->>'s')
        ), numbered AS (
          SELECT items.*, row_number() OVER (ORDER BY ord) AS rn FROM items
        ), need AS (
          SELECT count(*)::bigint AS n, coalesce(sum(size), 0)::bigint AS bytes FROM numbered
        ), head AS (
          INSERT INTO workflow_streams AS s (instance_id, last_seq, total_bytes)
          SELECT ${f.instanceId}, need.n, need.bytes FROM need, fence WHERE need.n > 0 AND need.bytes <= ${a.maxBytes}::bigint
          ON CONFLICT (instance_id) DO UPDATE SET last_seq = s.last_seq + EXCLUDED.last_seq, total_bytes = s.total_bytes + EXCLUDED.total_bytes
            WHERE s.total_bytes + EXCLUDED.total_bytes <= ${a.maxBytes}::bigint
          RETURNING s.last_seq
        ), ins AS (
          INSERT INTO workflow_stream_chunks (instance_id, seq, kind, source, run, attempt, topic, data_type, data, data_binary)
          SELECT ${f.instanceId}, head.last_seq - need.n + numbered.rn, numbered.kind, numbered.source, ${a.run}::int, ${a.attempt}::int,
                 numbered.topic, numbered.data_type,
                 CASE WHEN numbered.data_type = 'json' THEN numbered.data END,
                 CASE WHEN numbered.data_type = 'binary' THEN decode(numbered.hexdata, 'hex') END
          FROM numbered, head, need
          ON CONFLICT DO NOTHING
          RETURNING seq
        ), woke AS (
          SELECT pg_notify(${STREAM_CHANNEL}, ${f.instanceId}) FROM head
        )
        SELECT (SELECT count(*) FROM fence) AS fenced, (SELECT n FROM need) AS n,
               (SELECT last_seq FROM head) AS last_seq, (SELECT count(*) FROM woke) AS woke`,
      );
      const r = rows[0]!;
      if (toNumber(r.fenced) === 0) return { ok: false, reason: "lease_lost" };
      if (toNumber(r.n) === 0) return { ok: true, lastSeq: null };
      if (r.last_seq === null || r.last_seq === undefined) return { ok: false, reason: "stream_full" };
      return { ok: true, lastSeq: toNumber(r.last_seq) };
    },

    async readStream(instanceId, afterSeq, opts) {
      const topics = opts.topics?.length ? sql`AND (c.topic IN (${sql.join(opts.topics.map((t) => sql`${t}`), sql`, `)}) OR c.kind = 'retry')` : sql``;
      const rows = await queryRows(
        ex,
        sql`SELECT 'item' AS row_kind, c.seq, c.kind, c.source, c.run, c.attempt, c.topic, c.data_type, c.data, c.data_binary, c.created_at, NULL::text AS status
          FROM (SELECT * FROM workflow_stream_chunks c WHERE c.instance_id = ${instanceId} AND c.seq > ${afterSeq}::bigint ${topics}
                ORDER BY c.seq LIMIT ${opts.limit}::int) c
          UNION ALL
          SELECT 'status', coalesce(s.last_seq, 0), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, i.status
          FROM workflow_instances i LEFT JOIN workflow_streams s ON s.instance_id = i.instance_id WHERE i.instance_id = ${instanceId}`,
      );
      let status: InstanceStatus | null = null;
      let lastSeq = 0;
      const items: StreamItem[] = [];
      for (const r of rows) {
        if (r.row_kind === "status") {
          status = r.status as InstanceStatus;
          lastSeq = toNumber(r.seq);
        } else items.push(toStreamItem(r));
      }
      items.sort((a, b) => a.seq - b.seq);
      return { items, status, lastSeq };
    },
  };
}

function toStreamItem(r: Row): StreamItem {
  return {
    seq: toNumber(r.seq),
    kind: r.kind as StreamItemKind,
    source: r.source as string,
    run: toNumber(r.run),
    attempt: toNumber(r.attempt),
    topic: (r.topic as string | null) ?? null,
    data: toPayload(r.data_type, r.data, r.data_binary),
    createdAt: toDate(r.created_at),
  };
}

/** Emits are bounded by the history that holds them, not by the stream's budget. */
export const EMIT_BUDGET = NO_LIMIT;

