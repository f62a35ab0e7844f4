/**
 * Bulk set-up by cloning: one instance is brought to the wanted state by the
 * engine itself, then every row that belongs to it (every public table with an
 * `instance_id` column) is copied `count` times under new ids, one INSERT …
 * SELECT per table. Column lists come from the catalog, so the clone follows
 * schema changes; serial/identity columns take fresh values.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Database } from "../../src/storage/database.ts";

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;
const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;

/** Copies instance `templateId` to `${prefix}${1..count}`; returns the new ids. */
export async function cloneInstance(database: Database, templateId: string, prefix: string, count: number): Promise<string[]> {
  const columns = await queryRows<{ table_name: string; column_name: string; generated: boolean }>(
    database.db,
    sql`SELECT c.table_name, c.column_name,
               (c.is_identity = 'YES' OR coalesce(c.column_default, '') LIKE 'nextval(%') AS generated
        FROM information_schema.columns c
        JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
        WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
          AND c.table_name IN (SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'instance_id')
        ORDER BY c.table_name, c.ordinal_position`,
  );
  const tables = new Map<string, string[]>();
  for (const c of columns) {
    if (c.generated) continue;
    if (!tables.has(c.table_name)) tables.set(c.table_name, []);
    tables.get(c.table_name)!.push(c.column_name);
  }
  // Parents first: workflow_instances is what the others reference.
  const order = [...tables.keys()].sort((a, b) => Number(b === "workflow_instances") - Number(a === "workflow_instances"));
  await database.db.transaction(async (tx) => {
    for (const table of order) {
      const cols = tables.get(table)!;
      const list = cols.map(ident).join(", ");
      const select = cols.map((c) => (c === "instance_id" ? `${literal(prefix)} || g` : `src.${ident(c)}`)).join(", ");
      await tx.execute(
        sql.raw(`INSERT INTO ${ident(table)} (${list})
                 SELECT ${select} FROM ${ident(table)} src, generate_series(1, ${Math.trunc(count)}) g
                 WHERE src.instance_id = ${literal(templateId)}`),
      );
    }
  });
  return Array.from({ length: count }, (_, i) => `${prefix}${i + 1}`);
}
