// Builds an Edda app on a real database for engine tests, with helpers to
// wait for instances to settle. No mocks: real drivers, real dispatcher.
import { createEdda, type Edda, type EddaOptions } from "../../src/edda.ts";
import { LocalDispatcher } from "../../src/engine/dispatcher.ts";
import type { Database } from "../../src/storage/database.ts";
import { createPgliteDatabase } from "../../src/storage/drivers/pglite.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { createNeonDatabase } from "../../src/storage/drivers/neon-serverless.ts";
import { viewer } from "../../src/viewer.ts";
import { freshDatabase, useLocalNeonProxy } from "./db.ts";

export type DriverKind = "pglite" | "postgres-js" | "neon";

export async function openTestDatabase(kind: DriverKind, prefix: string): Promise<Database> {
  const database =
    kind === "pglite"
      ? await createPgliteDatabase()
      : kind === "neon"
        ? (useLocalNeonProxy(), createNeonDatabase({ url: await freshDatabase(prefix) }))
        : createPostgresJsDatabase({ url: await freshDatabase(prefix), max: 10 });
  await migrate(database.db);
  return database;
}

/** A fresh, migrated real-Postgres database and a way to open more connections to it. */
export async function freshPostgres(prefix: string): Promise<{ url: string; open(): Database }> {
  const url = await freshDatabase(prefix);
  const first = createPostgresJsDatabase({ url, max: 2 });
  await migrate(first.db);
  await first.close();
  return { url, open: () => createPostgresJsDatabase({ url, max: 10 }) };
}

export interface TestApp {
  edda: Edda;
  database: Database;
  dispatcher: LocalDispatcher;
  waitFor(instanceId: string, statuses?: string[], timeoutMs?: number): Promise<Awaited<ReturnType<Edda["getInstance"]>> & object>;
}

export function makeTestApp(database: Database, opts: Omit<EddaOptions, "database" | "dispatcher"> & { dispatcher?: LocalDispatcher }): TestApp {
  const dispatcher = opts.dispatcher ?? new LocalDispatcher({ concurrency: 8, maxWakeSeconds: 30 });
  // The whole app, viewer included (serveNode's default), unless a test passes viewer: false.
  const edda = createEdda({ secret: "test-secret", viewer: viewer(), ...opts, database, dispatcher });
  return {
    edda,
    database,
    dispatcher,
    async waitFor(instanceId, statuses = ["completed", "failed", "cancelled"], timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const inst = await edda.getInstance(instanceId, { history: true });
        if (inst && statuses.includes(inst.status)) return inst;
        if (Date.now() > deadline) throw new Error(`instance ${instanceId} did not reach ${statuses.join("/")} (now ${inst?.status})`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}
