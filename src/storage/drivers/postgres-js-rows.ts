/**
 * Results without holes, whatever the connection went through before.
 *
 * postgres.js 3.4.x (3.4.9 is the latest release) counts the rows of the
 * statement in flight per connection, and resets the count only when the
 * statement completes (CommandComplete). A statement that ends otherwise —
 * its connection closed between two of its rows (the backend terminated,
 * the server restarting), or an error after some rows — leaves the count
 * where it was, and the connection's next result, after a reconnect too,
 * stores its rows from that index on: a sparse array whose first elements
 * are missing, with the right `count` and no error (porsager/postgres#1119,
 * #1181; the fix, #1120, is unreleased). `const [row] = …` then reads
 * undefined: a lease the database granted looked refused, and the instance
 * stayed locked by its own worker until the lease ran out.
 *
 * Only the start index is wrong — the rows themselves are complete and in
 * order, and the next completed statement resets the count — so each
 * statement's result is made dense again as postgres.js settles it, before
 * any caller (drizzle, `queryRows`) sees it. A result never has holes
 * otherwise, so this changes nothing else.
 */

/**
 * Have `q` (a postgres.js query, not yet settled) resolve to dense results.
 * Anything that is not a pending query is returned as it is.
 */
export function denseResults<Q>(q: Q): Q {
  const query = q as { resolve?: unknown };
  const resolve = query.resolve;
  // postgres.js settles a query through the `resolve` it keeps on it (query.js), whatever consumes it.
  if (typeof resolve === "function") query.resolve = (x: unknown) => (resolve as (x: unknown) => unknown)(dense(x));
  return q;
}

function dense(x: unknown): unknown {
  if (!Array.isArray(x)) return x; // a statement description, a stream
  // Several result sets (a simple-protocol string of statements) come as a plain array of results: only
  // the first can start at a stale index (the count is reset between them). A result has `command`.
  if (!("command" in x)) {
    if (Array.isArray(x[0])) dense(x[0]);
    return x;
  }
  if (x.length === 0 || 0 in x) return x;
  let holes = 1;
  while (holes < x.length && !(holes in x)) holes++;
  x.splice(0, holes);
  return x;
}
