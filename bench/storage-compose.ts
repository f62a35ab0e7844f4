/**
 * What building a Storage costs: every transaction builds one over its
 * executor (storage/pg-storage.ts `storageOn`). Measured without a database
 * (drizzle's mock executor), in CPU time per Storage, for
 *
 *   shared prototype   what storageOn does: one object on the prototype whose
 *                      getters build an area on first use
 *   + 3 areas used     the same, then one method taken from each of three
 *                      areas (leases, history, channels), as a step does
 *   spread             the thirteen areas built and spread into one object
 *                      after `executor` and `transaction` (the composition
 *                      the prototype replaced; an object literal that starts
 *                      with a spread instead is far slower still in V8)
 *
 * Benchmark, not test: nothing asserts.
 *
 *   npx tsx bench/storage-compose.ts
 */
import { drizzle } from "drizzle-orm/postgres-js";
import { channelDeliveryArea } from "../src/storage/channel-delivery.ts";
import { channelsArea } from "../src/storage/channels.ts";
import type { Executor } from "../src/storage/database.ts";
import { failuresArea } from "../src/storage/failures.ts";
import { flowControlArea } from "../src/storage/flow-control.ts";
import { groupsArea } from "../src/storage/groups.ts";
import { historyArea } from "../src/storage/history.ts";
import { inspectArea } from "../src/storage/inspect.ts";
import { instancesArea } from "../src/storage/instances.ts";
import { leasesArea } from "../src/storage/leases.ts";
import { lifecycleArea } from "../src/storage/lifecycle.ts";
import { locksArea } from "../src/storage/locks.ts";
import { outboxArea } from "../src/storage/outbox.ts";
import { storageOn } from "../src/storage/pg-storage.ts";
import { schedulesArea } from "../src/storage/schedules.ts";

const executor = drizzle.mock() as unknown as Executor;
const N = Number(process.env.N ?? 200_000);

function cpuPerCall(f: () => unknown): number {
  for (let i = 0; i < 20_000; i++) f();
  const start = process.cpuUsage();
  let sink: unknown;
  for (let i = 0; i < N; i++) sink = f();
  const used = process.cpuUsage(start);
  if (sink === undefined) throw new Error("nothing built");
  return (used.user + used.system) / N;
}

const spread = () => ({
  executor,
  transaction: () => undefined,
  ...instancesArea(executor),
  ...leasesArea(executor),
  ...historyArea(executor),
  ...lifecycleArea(executor),
  ...channelsArea(executor),
  ...channelDeliveryArea(executor),
  ...groupsArea(executor),
  ...flowControlArea(executor),
  ...schedulesArea(executor),
  ...outboxArea(executor),
  ...inspectArea(executor),
  ...failuresArea(executor),
  ...locksArea(executor),
});

const rows: [string, number][] = [
  ["shared prototype", cpuPerCall(() => storageOn(executor))],
  [
    "shared prototype + 3 areas used",
    cpuPerCall(() => {
      const s = storageOn(executor);
      return [s.concludeStep, s.appendHistory, s.publishMessage];
    }),
  ],
  ["spread of the 13 areas", cpuPerCall(spread)],
];
for (const [name, us] of rows) console.log(`${name.padEnd(34)} ${us.toFixed(2)} µs CPU per Storage`);
