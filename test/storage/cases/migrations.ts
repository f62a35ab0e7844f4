// The portable migrator on an up-to-date database.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { LATEST_SCHEMA_VERSION, migrate } from "../../../src/storage/migrate.ts";
import { MIGRATIONS } from "../../../src/storage/migrations.gen.ts";
import { newInstance, rows, type ContractContext } from "./helpers.ts";

const TABLES = [
  "schema_version",
  "workflow_definitions",
  "workflow_instances",
  "workflow_history",
  "workflow_history_archive",
  "workflow_compensations",
  "workflow_timer_subscriptions",
  "outbox_events",
  "workflow_group_memberships",
  "channel_messages",
  "channel_subscriptions",
  "channel_delivery_cursors",
  "channel_message_claims",
  "system_locks",
  "cloudevent_dedupe",
];

export function migrationCases(ctx: ContractContext): void {
  describe("migrations", () => {
    it("applied every bundled migration to the fresh database", () => {
      expect(ctx.firstMigration).toEqual({ applied: MIGRATIONS.map((m) => m.version), current: LATEST_SCHEMA_VERSION });
    });

    it("changes nothing on an already-latest database (no migration applied, no row touched)", async () => {
      await newInstance(ctx.storage);
      const snapshot = async () => {
        const counts: Record<string, number> = {};
        for (const table of TABLES) {
          const [row] = await rows<{ n: unknown }>(ctx.database, sql`SELECT count(*) AS n FROM ${sql.raw(table)}`);
          counts[table] = Number(row?.n);
        }
        const [schema] = await rows<{ columns: unknown; indexes: unknown; constraints: unknown }>(
          ctx.database,
          sql`SELECT (SELECT count(*) FROM information_schema.columns WHERE table_schema = 'public') AS columns,
                     (SELECT count(*) FROM pg_indexes WHERE schemaname = 'public') AS indexes,
                     (SELECT count(*) FROM information_schema.table_constraints WHERE table_schema = 'public') AS constraints`,
        );
        const versions = await rows<{ version: number; applied_at: string }>(ctx.database, sql`SELECT version, applied_at::text AS applied_at FROM schema_version ORDER BY version`);
        return { counts, schema: { columns: Number(schema?.columns), indexes: Number(schema?.indexes), constraints: Number(schema?.constraints) }, versions };
      };
      const before = await snapshot();
      expect(before.counts.workflow_instances).toBeGreaterThan(0);
      expect(await migrate(ctx.database.db)).toEqual({ applied: [], current: LATEST_SCHEMA_VERSION });
      expect(await migrate(ctx.database.db)).toEqual({ applied: [], current: LATEST_SCHEMA_VERSION });
      expect(await snapshot()).toEqual(before);
    });
  });
}
