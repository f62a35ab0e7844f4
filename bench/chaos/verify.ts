/**
 * The chaos run's invariants, checked once every instance is terminal: each
 * instance ended with the outcome its input implies, every transactional row
 * exists exactly once, each competing message was consumed once, broadcast
 * listeners got everything in order, children followed their parents, every
 * order got its own payment event and no other, no concurrency key ran more
 * than its limit at once, and no lease is left held.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { KEYED_LIMIT } from "./workflows.ts";

export interface Mix {
  steps: number;
  sagas: number;
  consumers: number;
  jobsPerConsumer: number;
  listeners: number;
  news: number;
  cancels: number;
  slow: number;
  /** chaos_parent instances; the odd ones are held and cancelled mid-run. */
  parents: number;
  childrenPerParent: number;
  /** chaos_order instances waiting for their own payment event. */
  orders: number;
  /** chaos_keyed instances, spread over `keys` concurrency keys. */
  keyed: number;
  keys: number;
}

export const heldParents = (n: Mix) => Math.floor(n.parents / 2);

/** Every instance the mix starts, children included. */
export const instanceCount = (n: Mix) =>
  n.steps + n.sagas + n.consumers + n.listeners + n.cancels + n.slow + n.parents * (1 + n.childrenPerParent) + n.orders + n.keyed;

/** The payment the driver publishes for order `i` (and what the order must return). */
export const payment = (i: number) => ({ orderId: `order-${i}`, amount: 100 + i });

export interface Verdict {
  lost: number;
  duplicated: number;
  statementTimeouts: number;
  /** The most chaos_keyed runs of one key seen overlapping. */
  maxKeyOverlap: number;
}

export async function count(db: Database, q: ReturnType<typeof sql>): Promise<number> {
  return Number((await queryRows<{ n: number }>(db.db, q))[0]?.n ?? 0);
}

/**
 * The instances behind a loss, as a reader needs them: id, status, current activity, cancel data, and the
 * last history rows (issue 34: the run that lost two had to be dug out by hand). At most 10.
 */
async function stragglers(db: Database, workflow: string, status: string): Promise<string[]> {
  const rows = await queryRows<{ instance_id: string; status: string; current_activity_id: string | null; cancel_data: string | null; locked_by: string | null; last: string | null; timers: string | null }>(
    db.db,
    sql`SELECT i.instance_id, i.status, i.current_activity_id, i.cancel_data, i.locked_by,
               (SELECT string_agg(h.activity_id || ' ' || h.event_type, ' | ' ORDER BY h.id)
                  FROM (SELECT * FROM workflow_history h WHERE h.instance_id = i.instance_id ORDER BY h.id DESC LIMIT 6) h) AS last,
               (SELECT string_agg(t.timer_id || ' at ' || t.expires_at::text, ', ') FROM workflow_timer_subscriptions t WHERE t.instance_id = i.instance_id) AS timers
        FROM workflow_instances i WHERE i.workflow_name = ${workflow} AND i.status <> ${status}
        ORDER BY i.instance_id LIMIT 10`,
  );
  return rows.map(
    (r) =>
      `  ${r.instance_id}: ${r.status} at ${r.current_activity_id ?? "-"}${r.cancel_data ? `, cancel ${r.cancel_data}` : ""}${r.locked_by ? `, locked by ${r.locked_by}` : ""}` +
      `${r.timers ? `, timers ${r.timers}` : ""}; last history: ${r.last ?? "(none)"}`,
  );
}

export async function verify(db: Database, n: Mix, jobIds: string[], violations: string[]): Promise<Verdict> {
  let lost = 0;
  let duplicated = 0;
  const held = heldParents(n);
  const expectStatus = async (workflow: string, status: string, expected: number) => {
    const got = await count(db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = ${workflow} AND status = ${status}`);
    if (got !== expected) {
      violations.push(`${workflow}: ${got}/${expected} ${status}`);
      lost += Math.max(0, expected - got);
      if (got < expected) violations.push(...(await stragglers(db, workflow, status)));
    }
  };
  await expectStatus("chaos_steps", "completed", n.steps);
  await expectStatus("chaos_saga", "failed", n.sagas);
  await expectStatus("chaos_consumer", "completed", n.consumers);
  await expectStatus("chaos_listener", "completed", n.listeners);
  await expectStatus("chaos_cancel", "cancelled", n.cancels);
  await expectStatus("chaos_slow", "completed", n.slow);
  await expectStatus("chaos_parent", "completed", n.parents - held);
  await expectStatus("chaos_parent", "cancelled", held);
  await expectStatus("chaos_child", "completed", (n.parents - held) * n.childrenPerParent);
  await expectStatus("chaos_child", "cancelled", held * n.childrenPerParent);
  await expectStatus("chaos_order", "completed", n.orders);
  await expectStatus("chaos_keyed", "completed", n.keyed);

  // each slow activity succeeded on the attempt after its planned statement timeouts (a dropped connection may add attempts)
  const slow = await queryRows<{ instance_id: string; output_data: string | null }>(db.db, sql`SELECT instance_id, output_data FROM workflow_instances WHERE workflow_name = 'chaos_slow'`);
  for (const s of slow) {
    const planned = Number(s.instance_id.slice("slow-".length)) % 3;
    const attempts = s.output_data ? (JSON.parse(s.output_data) as { attempts: number }).attempts : 0;
    if (attempts < planned + 1) violations.push(`${s.instance_id}: succeeded on attempt ${attempts}, before its ${planned} statement timeouts`);
  }
  const statementTimeouts = await count(
    db,
    sql`SELECT count(*)::int AS n FROM workflow_history h JOIN workflow_instances i USING (instance_id)
        WHERE i.workflow_name = 'chaos_slow' AND h.event_type = 'ActivityAttemptFailed' AND h.event_data LIKE '%statement timeout%'`,
  );
  // An attempt that a fault failed first (its backend terminated, Postgres restarting) counts as an attempt, so it
  // takes the place of one planned timeout: the timeouts recorded and those displaced add up to the plan.
  const displaced = await count(
    db,
    sql`SELECT count(*)::int AS n FROM workflow_history h JOIN workflow_instances i USING (instance_id)
        WHERE i.workflow_name = 'chaos_slow' AND h.event_type = 'ActivityAttemptFailed' AND h.event_data NOT LIKE '%statement timeout%'`,
  );
  const plannedTimeouts = Array.from({ length: n.slow }, (_, i) => i % 3).reduce((a, b) => a + b, 0);
  if (statementTimeouts + displaced < plannedTimeouts) violations.push(`statement timeouts recorded: ${statementTimeouts} (+ ${displaced} attempts a fault failed first), planned ${plannedTimeouts}`);

  // every transactional row exactly once; an undo row only where the instance was cancelled or failed
  const rows = await queryRows<{ instance_id: string; tag: string; c: number }>(db.db, sql`SELECT instance_id, tag, count(*)::int AS c FROM chaos_rows GROUP BY 1, 2`);
  const expectedRows =
    n.steps * 3 + (n.sagas + n.cancels + n.slow) * 2 + held * (1 + n.childrenPerParent) * 2 + (n.parents - held) * (1 + n.childrenPerParent);
  for (const r of rows) if (Number(r.c) > 1) duplicated += Number(r.c) - 1;
  if (rows.length < expectedRows) lost += expectedRows - rows.length;
  if (rows.length !== expectedRows) violations.push(`chaos_rows: ${rows.length} distinct rows, expected ${expectedRows}`);

  // each competing message consumed exactly once
  const consumed = await queryRows<{ message_id: string; c: number }>(db.db, sql`SELECT message_id, count(*)::int AS c FROM chaos_consumed GROUP BY 1`);
  const seen = new Map(consumed.map((r) => [r.message_id, Number(r.c)]));
  for (const id of jobIds) {
    const c = seen.get(id) ?? 0;
    if (c === 0) lost++;
    if (c > 1) duplicated += c - 1;
  }
  if (consumed.length !== jobIds.length) violations.push(`chaos_consumed: ${consumed.length} messages, expected ${jobIds.length}`);

  // broadcast: every listener got 1..news, in order
  const outs = await queryRows<{ output_data: string | null }>(db.db, sql`SELECT output_data FROM workflow_instances WHERE workflow_name = 'chaos_listener'`);
  const want = JSON.stringify(Array.from({ length: n.news }, (_, i) => i + 1));
  const wrong = outs.filter((o) => o.output_data !== want).length;
  if (wrong) {
    violations.push(`${wrong} listeners did not get exactly 1..${n.news} in order`);
    lost += wrong;
  }

  // children: a completed parent returns [0, 1, …]; a cancelled parent's children are all cancelled
  const parents = await queryRows<{ instance_id: string; status: string; output_data: string | null }>(
    db.db,
    sql`SELECT instance_id, status, output_data FROM workflow_instances WHERE workflow_name = 'chaos_parent'`,
  );
  const wantChildren = JSON.stringify(Array.from({ length: n.childrenPerParent }, (_, i) => i));
  for (const p of parents) if (p.status === "completed" && p.output_data !== wantChildren) violations.push(`${p.instance_id}: output ${p.output_data}, expected ${wantChildren}`);
  const orphans = await count(
    db,
    sql`SELECT count(*)::int AS n FROM workflow_instances c JOIN workflow_instances p ON p.instance_id = c.parent_instance_id
        WHERE c.workflow_name = 'chaos_child' AND (p.status = 'cancelled') <> (c.status = 'cancelled')`,
  );
  if (orphans) violations.push(`${orphans} children whose cancellation does not follow their parent's`);

  // matched events: each order got its own payment, never another order's
  const orders = await queryRows<{ instance_id: string; output_data: string | null }>(db.db, sql`SELECT instance_id, output_data FROM workflow_instances WHERE workflow_name = 'chaos_order'`);
  const misrouted = orders.filter((o) => o.output_data !== null && o.output_data !== JSON.stringify(payment(Number(o.instance_id.slice("order-".length)))));
  if (misrouted.length) violations.push(`${misrouted.length} orders got another order's event (e.g. ${misrouted[0]!.instance_id}: ${misrouted[0]!.output_data})`);

  // keyed concurrency: one run interval per instance, never more than the limit of one key at once
  const runs = await queryRows<{ instance_id: string; c: number; open: number }>(
    db.db,
    sql`SELECT instance_id, count(*)::int AS c, count(*) FILTER (WHERE ended_at IS NULL)::int AS open FROM chaos_runs GROUP BY 1`,
  );
  for (const r of runs) if (Number(r.c) > 1) duplicated += Number(r.c) - 1;
  if (runs.length !== n.keyed) violations.push(`chaos_runs: ${runs.length} instances ran, expected ${n.keyed}`);
  const [overlap] = await queryRows<{ key: string; n: number }>(
    db.db,
    sql`SELECT a.key, count(*)::int AS n FROM chaos_runs a JOIN chaos_runs b
          ON b.key = a.key AND b.started_at <= a.started_at AND (b.ended_at IS NULL OR b.ended_at > a.started_at)
        GROUP BY a.id, a.key ORDER BY n DESC LIMIT 1`,
  );
  const maxKeyOverlap = Number(overlap?.n ?? 0);
  if (maxKeyOverlap > KEYED_LIMIT) violations.push(`concurrency key ${overlap!.key}: ${maxKeyOverlap} runs overlapped, limit ${KEYED_LIMIT}`);

  const leases = await count(db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE locked_by IS NOT NULL`);
  if (leases) violations.push(`${leases} leases still held`);
  if (duplicated) violations.push(`${duplicated} duplicated effects`);
  return { lost, duplicated, statementTimeouts, maxKeyOverlap };
}
