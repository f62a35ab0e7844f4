// The Storage contract suite: the same cases against every driver (one
// *.test.ts per driver calls `storageContract`). Cases use unique ids per test,
// and sweeper-style assertions only look at rows the test created, so cases
// stay independent while sharing one database per file.
import { afterAll, beforeAll, describe } from "vitest";
import { freshDatabase } from "../support/db.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import type { Database } from "../../src/storage/database.ts";
import { SOURCE_HASH, WORKFLOW, type ContractContext } from "./cases/helpers.ts";
import { instanceCases } from "./cases/instances.ts";
import { leaseCases } from "./cases/leases.ts";
import { historyCases } from "./cases/history.ts";
import { channelCases } from "./cases/channels.ts";
import { outboxAndLockCases } from "./cases/outbox-locks.ts";
import { transactionCases } from "./cases/transactions.ts";
import { concurrencyCases } from "./cases/concurrency.ts";
import { migrationCases } from "./cases/migrations.ts";
import { inspectCases } from "./cases/inspect.ts";
import { failureCases } from "./cases/failures.ts";
import { webhookWaitCases } from "./cases/webhook-waits.ts";

export function storageContract(name: string, open: () => Promise<Database>): void {
  describe(`storage contract [${name}]`, () => {
    const ctx = { open } as ContractContext;

    beforeAll(async () => {
      ctx.database = await open();
      ctx.firstMigration = await migrate(ctx.database.db);
      ctx.storage = createStorage(ctx.database);
      await ctx.storage.upsertWorkflowDefinition(WORKFLOW, SOURCE_HASH, "async function contract() {}");
    });
    afterAll(async () => {
      await ctx.database?.close();
    });

    instanceCases(ctx);
    leaseCases(ctx);
    historyCases(ctx);
    channelCases(ctx);
    outboxAndLockCases(ctx);
    webhookWaitCases(ctx);
    transactionCases(ctx);
    concurrencyCases(ctx);
    migrationCases(ctx);
    inspectCases(ctx);
    failureCases(ctx);
  });
}

/** One fresh database per test file, created on first use (inside a hook). */
export function fileDatabase(prefix: string): () => Promise<string> {
  let url: Promise<string> | undefined;
  return () => (url ??= freshDatabase(prefix));
}
