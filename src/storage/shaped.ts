/**
 * Statements whose text is built once per shape.
 *
 * drizzle's `sql` template builds a statement by walking its chunks on every
 * call: the text is concatenated again, each parameter numbered again, for a
 * statement whose text never changes — only its values do. A shaped
 * statement is written with drizzle's `sql` once, with named placeholders
 * where the values go, and built once; each call then only lays its values
 * out in their order, for `queryText` (database.ts), which hands drizzle the
 * finished text. Only for statements whose text does not depend on their
 * values: a shape with an optional part is two shapes. (The step's
 * conclusion, whose shapes are many, keeps its own texts: conclusion.ts.)
 */
import { is, Placeholder, sql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";

/** The dialect every driver builds with (`$n` parameters). */
const dialect = new PgDialect();

/** Where each parameter of the built text comes from: a value by name, or a constant of the shape. */
type Slot = { name: string } | { value: unknown };

/**
 * `shaped((v) => sql\`… ${v.instanceId} …\`)` → a function of `{ instanceId }` giving the text and its
 * parameters. Each `v.name` is a placeholder; a value interpolated directly is a constant of the shape.
 */
export function shaped<K extends string>(build: (v: Record<K, Placeholder<K>>) => SQL): (values: Record<K, unknown>) => { text: string; params: unknown[] } {
  const names = new Proxy({} as Record<K, Placeholder<K>>, { get: (_, key) => sql.placeholder(String(key)) });
  const { sql: text, params } = dialect.sqlToQuery(build(names));
  const slots: Slot[] = params.map((p) => (is(p, Placeholder) ? { name: (p as Placeholder).name } : { value: p }));
  return (values) => {
    const filled = new Array<unknown>(slots.length);
    for (let i = 0; i < slots.length; i++) {
      const s = slots[i]!;
      filled[i] = "name" in s ? values[s.name as K] : s.value;
    }
    return { text, params: filled };
  };
}
