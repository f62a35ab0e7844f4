// Shared fixtures for the storage contract cases: the per-driver context
// (filled in by contract.ts's beforeAll), unique names, payload builders.
import { randomBytes } from "node:crypto";
import { sql, type SQL } from "drizzle-orm";
import { queryRows, type Database } from "../../../src/storage/database.ts";
import type { InstanceRecord, NewInstance, Payload, Storage } from "../../../src/storage/types.ts";

export interface ContractContext {
  /** The main connection of this file's database. */
  database: Database;
  storage: Storage;
  /** Opens another, separate connection (pool) to the same database. */
  open: () => Promise<Database>;
  /** Result of the first migration run in beforeAll. */
  firstMigration: { applied: number[]; current: number };
}

export const WORKFLOW = "contract_workflow";
export const SOURCE_HASH = "a".repeat(64);

export function uid(prefix: string): string {
  return `${prefix}-${randomBytes(6).toString("hex")}`;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function json(value: unknown): Payload {
  return { type: "json", json: JSON.stringify(value) };
}

export function binary(bytes: Uint8Array): Payload {
  return { type: "binary", bytes };
}

export async function newInstance(storage: Storage, overrides: Partial<NewInstance> = {}): Promise<InstanceRecord> {
  const { instance } = await storage.createInstance({
    instanceId: uid("wf"),
    workflowName: WORKFLOW,
    sourceHash: SOURCE_HASH,
    ownerService: "contract",
    inputData: JSON.stringify({ n: 1 }),
    ...overrides,
  });
  return instance;
}

export function rows<T = Record<string, unknown>>(database: Database, query: SQL): Promise<T[]> {
  return queryRows<T>(database.db, query);
}

export async function count(database: Database, query: SQL): Promise<number> {
  const [row] = await queryRows<{ n: unknown }>(database.db, sql`SELECT count(*)::int AS n FROM (${query}) q`);
  return Number(row?.n ?? 0);
}

/** Every byte value, in order. */
export const ALL_BYTES = Uint8Array.from({ length: 256 }, (_, i) => i);

/** JSON text with astral emoji (ZWJ sequences), CJK, combining marks, RTL and escapes; no U+0000. */
export const UNICODE_JSON = `{"emoji":"👩‍👩‍👧‍👦 🏳️‍🌈 😀","cjk":"漢字かなカナ한국어","combining":"e\u0301 a\u0308 \u1E9B\u0323","rtl":"مرحبا שלום","esc":"q\\"b\\\\n\\n\\t\\u0001","keep":  [1, 2.50, -0e0]}`;

/** Several distinct connections warmed up so a race really runs in parallel. */
export async function openMany(ctx: ContractContext, n: number): Promise<{ databases: Database[]; close: () => Promise<void> }> {
  const databases = await Promise.all(Array.from({ length: n }, () => ctx.open()));
  await Promise.all(databases.map((d) => d.db.execute(sql`SELECT 1`)));
  return { databases, close: async () => void (await Promise.all(databases.map((d) => d.close()))) };
}
