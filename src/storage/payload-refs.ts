/**
 * Large values by reference: a payload text over the threshold is stored
 * once in `workflow_payloads` (or an R2 bucket), owned by its instance, and the row that would
 * have held it (a history record, an input, an output) keeps
 * `{"$ref":"<ref>:<bytes>:<sha-256 hex>"}` instead — the same one-key tag
 * shape as the other envelopes (user `$` keys are escaped, so user data never
 * looks like one). The value's row goes in the same transaction as the write
 * that references it when there is one; a lone conclusion writes it just
 * before, and one whose fence then fails leaves an unreferenced row that is
 * deleted with its instance (the foreign key cascades: retention and
 * deletion remove values by reference with the instance). A read resolves
 * every reference of what it loaded in one statement and checks the size and
 * hash, so a damaged or missing value is an error, never a different one; a
 * step's leased history leaves its records by reference for the replay to
 * load as the code takes them (engine/payload-sealing.ts `deferredValues`).
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";

/** Payloads longer than this go by reference unless configured otherwise (EngineOptions.largeValues). */
export const DEFAULT_LARGE_VALUE_BYTES = 256 * 1024;

/**
 * The most one instance holds, in bytes of stored text: its input, output and history records, those by
 * reference included (EngineOptions.largeValues.maxInstanceBytes). Checked when a step records a value by
 * reference (the only writes that grow an instance by more than the threshold at once).
 */
export const MAX_INSTANCE_BYTES = 256 * 1024 * 1024;

export const REF_START = '{"$ref":"';
const REF = /\{"\$ref":"([0-9a-f-]{36}):(\d+):([0-9a-f]{64})"\}/g;
const WHOLE_REF = /^\{"\$ref":"([0-9a-f-]{36}):(\d+):([0-9a-f]{64})"\}$/;

export const holdsRef = (text: string): boolean => text.includes(REF_START);

/** A value's size and reference, or null when `text` is not exactly one reference. */
export function refOf(text: string): { ref: string; size: number } | null {
  const m = WHOLE_REF.exec(text);
  return m ? { ref: m[1]!, size: Number(m[2]) } : null;
}

/** A value that cannot be resolved: its row is missing, or its size or hash differ from the reference. */
export class LargeValueError extends Error {
  override name = "LargeValueError";
}

export interface OutOfLine {
  instanceId: string;
  ref: string;
  size: number;
  data: string;
}

const utf8 = new TextEncoder();

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** `text` as stored: itself when small, else a reference, with the row to write added to `rows`. */
export async function outOfLine(text: string, instanceId: string, thresholdBytes: number, rows: OutOfLine[]): Promise<string> {
  // A UTF-8 byte is at most 3 per UTF-16 unit: most texts are decided without encoding them.
  if (text.length * 3 <= thresholdBytes) return text;
  const bytes = utf8.encode(text);
  if (bytes.length <= thresholdBytes) return text;
  const ref = crypto.randomUUID();
  rows.push({ instanceId, ref, size: bytes.length, data: text });
  return `${REF_START}${ref}:${bytes.length}:${await sha256Hex(bytes)}"}`;
}

/**
 * Where values by reference live: the Postgres table by default (every driver, PGlite included,
 * transactional with the step, deleted with its instance by the foreign key), or an object store
 * (`r2Values`, storage/r2-values.ts) whose `deleted` the purge calls with the ids it deleted.
 */
export interface LargeValueStore {
  /** Write the rows (before, or in the transaction of, the statement that references them). */
  put(ex: Executor, rows: readonly OutOfLine[]): Promise<void>;
  /** The values of `refs` of one instance that exist (a missing one is left out). */
  get(ex: Executor, instanceId: string, refs: readonly string[]): Promise<Map<string, string>>;
  /** Copy an instance's values to another (a fork, whose copied history references them). */
  copy(ex: Executor, from: string, to: string): Promise<void>;
  /** These instances were deleted (retention): remove their values. The table needs none (its foreign key cascades). */
  deleted?(instanceIds: readonly string[]): Promise<void>;
  /** The bytes of the values an instance holds here (the per-instance bound adds them to its rows'). */
  bytes(ex: Executor, instanceId: string): Promise<number>;
}

export const postgresValues: LargeValueStore = {
  async put(ex, rows) {
    if (rows.length === 0) return;
    const values = sql.join(
      rows.map((r) => sql`(${r.instanceId}::text, ${r.ref}::text, ${r.size}::int, ${r.data}::text)`),
      sql`, `,
    );
    await ex.execute(sql`INSERT INTO workflow_payloads (instance_id, ref, size, data) VALUES ${values} ON CONFLICT DO NOTHING`);
  },
  async get(ex, instanceId, refs) {
    const list = sql.join(refs.map((r) => sql`${r}::text`), sql`, `);
    const rows = await queryRows<{ ref: string; data: string }>(ex, sql`SELECT ref, data FROM workflow_payloads WHERE instance_id = ${instanceId}::text AND ref IN (${list})`);
    return new Map(rows.map((r) => [r.ref, r.data]));
  },
  async copy(ex, from, to) {
    await ex.execute(sql`INSERT INTO workflow_payloads (instance_id, ref, size, data)
      SELECT ${to}::text, ref, size, data FROM workflow_payloads WHERE instance_id = ${from}::text ON CONFLICT DO NOTHING`);
  },
  async bytes(ex, instanceId) {
    const [r] = await queryRows<{ n: number | string | null }>(ex, sql`SELECT sum(size) AS n FROM workflow_payloads WHERE instance_id = ${instanceId}::text`);
    return Number(r?.n ?? 0);
  },
};

/** The bytes an instance's own rows hold: its input and output, and its history records' data (references count as their text). */
export async function rowBytes(ex: Executor, instanceId: string): Promise<number> {
  const [r] = await queryRows<{ n: number | string | null }>(
    ex,
    sql`SELECT coalesce((SELECT octet_length(input_data) + coalesce(octet_length(output_data), 0) FROM workflow_instances WHERE instance_id = ${instanceId}::text), 0)
             + coalesce((SELECT sum(coalesce(octet_length(event_data), octet_length(event_data_binary))) FROM workflow_history WHERE instance_id = ${instanceId}::text), 0) AS n`,
  );
  return Number(r?.n ?? 0);
}

/**
 * The texts with every reference replaced by its value, for one instance,
 * in one statement for all of them. Texts without a reference are returned
 * as they are, and then nothing is read.
 */
export async function resolveRefs(store: LargeValueStore, ex: Executor, instanceId: string, texts: readonly string[]): Promise<string[]> {
  const wanted = new Map<string, { size: number; hash: string }>();
  for (const t of texts) {
    if (!holdsRef(t)) continue;
    for (const m of t.matchAll(REF)) wanted.set(m[1]!, { size: Number(m[2]), hash: m[3]! });
  }
  if (wanted.size === 0) return texts as string[];
  const found = await store.get(ex, instanceId, [...wanted.keys()]);
  await Promise.all(
    [...wanted].map(async ([ref, want]) => {
      const data = found.get(ref);
      if (data === undefined) throw new LargeValueError(`value ${ref} of instance ${instanceId} is referenced but not stored`);
      const bytes = utf8.encode(data);
      if (bytes.length !== want.size || (await sha256Hex(bytes)) !== want.hash) throw new LargeValueError(`value ${ref} of instance ${instanceId} does not match its reference (size or hash)`);
    }),
  );
  return texts.map((t) => (holdsRef(t) ? t.replace(REF, (_m, ref: string) => found.get(ref)!) : t));
}
