/** @jsxImportSource hono/jsx */
/**
 * The viewer's one table: columns declared as (heading, cell) pairs, so every
 * list — instances, channels, subscribers, schedules, dead letters — renders
 * its head, rows and empty state the same way.
 */
import type { Child } from "hono/jsx";

export interface Column<T> {
  /** Heading; leave every heading out for a table without a head row. */
  head?: string;
  cell: (row: T) => Child;
  /** Class of the cell (`id`, `small`, `muted`, `mono small`…). */
  class?: string;
}

export interface TableProps<T> {
  columns: Column<T>[];
  rows: readonly T[];
  /** Shown in one full-width row when there are no rows. */
  empty: Child;
  class?: string;
  id?: string;
}

export function Table<T>(p: TableProps<T>) {
  const headed = p.columns.some((c) => c.head !== undefined);
  return (
    <table class={p.class} id={p.id}>
      {headed ? (
        <thead>
          <tr>
            {p.columns.map((c) => (
              <th>{c.head ?? ""}</th>
            ))}
          </tr>
        </thead>
      ) : null}
      <tbody>
        {p.rows.length === 0 ? (
          <tr>
            <td colspan={p.columns.length} class="muted">
              {p.empty}
            </td>
          </tr>
        ) : (
          p.rows.map((row) => <tr>{p.columns.map((c) => <td class={c.class}>{c.cell(row)}</td>)}</tr>)
        )}
      </tbody>
    </table>
  );
}
