/**
 * The Storage contract over drizzle, for every driver: the storage areas
 * (instances.ts, leases.ts, history.ts …, each owning its interface and its
 * implementation) composed over one executor — the database, or a
 * transaction — plus transactions and post-commit callbacks. This is the one
 * place that knows the list of areas.
 *
 * Post-commit callbacks: each `transaction()` call opens a scope. A nested
 * call (a savepoint) hands its callbacks to the parent scope when the
 * savepoint is released and drops them when it rolls back; the top-level call
 * runs them in registration order after COMMIT, each isolated so that one
 * throwing does not stop the others. A Storage built directly over a drizzle
 * transaction cannot see that transaction's commit, so it refuses `afterCommit`
 * rather than run callbacks too early.
 */
import { PgTransaction } from "drizzle-orm/pg-core";
import { channelDeliveryArea } from "./channel-delivery.ts";
import { channelsArea } from "./channels.ts";
import type { Database, Executor } from "./database.ts";
import { failuresArea } from "./failures.ts";
import { flowControlArea } from "./flow-control.ts";
import { gaugesArea } from "./gauges.ts";
import { receivedEventsArea } from "./received-events.ts";
import { tagsArea } from "./tags.ts";
import { groupsArea } from "./groups.ts";
import { historyArea } from "./history.ts";
import { inspectArea } from "./inspect.ts";
import { instancesArea } from "./instances.ts";
import { leasesArea } from "./leases.ts";
import { lifecycleArea } from "./lifecycle.ts";
import { locksArea } from "./locks.ts";
import { repairsArea } from "./repairs.ts";
import { outboxArea } from "./outbox.ts";
import { schedulesArea } from "./schedules.ts";
import { sessionsArea } from "./sessions.ts";
import { streamsArea } from "./streams.ts";
import { versioningArea } from "./versioning.ts";
import { webhookWaitsArea } from "./webhook-waits.ts";
import type { Storage, StorageCore, TxStorage } from "./types.ts";

type AfterCommit = () => void | Promise<void>;

interface CommitScope {
  callbacks: AfterCommit[];
  /** False once the scope's transaction/savepoint has ended. */
  open: boolean;
  /** True when the outermost transaction was not started by a Storage (its commit is invisible). */
  detached: boolean;
}

async function runAfterCommit(callbacks: AfterCommit[]): Promise<void> {
  for (const cb of callbacks) {
    try {
      await cb();
    } catch (err) {
      console.error("edda-edge: afterCommit callback failed", err);
    }
  }
}

/** The areas a Storage is made of (a new area is one entry here and one in types.ts). */
const AREAS = [
  instancesArea,
  leasesArea,
  historyArea,
  lifecycleArea,
  channelsArea,
  channelDeliveryArea,
  groupsArea,
  flowControlArea,
  schedulesArea,
  outboxArea,
  inspectArea,
  gaugesArea,
  receivedEventsArea,
  tagsArea,
  failuresArea,
  locksArea,
  sessionsArea,
  streamsArea,
  webhookWaitsArea,
  versioningArea,
  repairsArea,
] as const;

type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;
// Every method of the Storage type comes from an area in the list: an area left out fails to compile here.
const _everyMethodHasAnArea: [Omit<Storage, keyof StorageCore>] extends [UnionToIntersection<ReturnType<(typeof AREAS)[number]>>] ? true : never = true;

const AREA_OBJECTS = Symbol("edda.storageAreas");

interface Composed {
  readonly executor: Executor;
  readonly [AREA_OBJECTS]: object[];
}

/**
 * The prototype every Storage shares: each area method's name is a getter
 * that builds the owning area over the Storage's executor on first use and
 * returns its function — a closure over that executor, so a method taken off
 * the Storage still works. Spreading every area's closures (over a hundred)
 * into each Storage instead cost every transaction ~25× the CPU of this
 * (bench/storage-compose.ts: an object that grows by that many properties
 * leaves V8's fast mode); this
 * way a transaction pays for the areas it uses. The names are read once, off
 * areas built over no executor: an area factory only closes over its
 * executor, it does not use it.
 */
const STORAGE_PROTOTYPE: object = (() => {
  const proto = {};
  AREAS.forEach((area, i) => {
    for (const name of Object.keys(area(undefined as never))) {
      if (name in proto) throw new Error(`storage: two areas define ${name}`);
      Object.defineProperty(proto, name, {
        get(this: Composed): unknown {
          return ((this[AREA_OBJECTS][i] ??= area(this.executor)) as Record<string, unknown>)[name];
        },
      });
    }
  });
  return proto;
})();

/**
 * A Storage over `executor`. Over a drizzle transaction that no Storage
 * started, its `transaction()` opens savepoints whose callbacks it refuses
 * (see the module comment).
 */
export function storageOn(executor: Executor, scope?: CommitScope): Storage {
  const storage = Object.create(STORAGE_PROTOTYPE) as Record<PropertyKey, unknown>;
  storage.executor = executor;
  storage.transaction = <T>(fn: (tx: TxStorage) => Promise<T>) => transaction(executor, scope, fn);
  storage[AREA_OBJECTS] = [];
  return storage as unknown as Storage;
}

async function transaction<T>(executor: Executor, parent: CommitScope | undefined, fn: (tx: TxStorage) => Promise<T>): Promise<T> {
  const scope: CommitScope = {
    callbacks: [],
    open: true,
    detached: parent ? parent.detached : executor instanceof PgTransaction,
  };
  let result: T;
  try {
    result = await executor.transaction((tx) => fn(txStorage(tx, scope)));
  } finally {
    scope.open = false;
  }
  if (parent) parent.callbacks.push(...scope.callbacks);
  else await runAfterCommit(scope.callbacks);
  return result;
}

/** The Storage handed to a `transaction()` callback. */
function txStorage(tx: Executor, scope: CommitScope): TxStorage {
  return Object.assign(storageOn(tx, scope), {
    afterCommit(cb: AfterCommit): void {
      if (scope.detached) {
        throw new Error("afterCommit: this Storage runs inside a transaction it did not start, so it cannot see the commit");
      }
      if (!scope.open) throw new Error("afterCommit: the transaction has already ended");
      scope.callbacks.push(cb);
    },
  });
}

export function createStorage(database: Database): Storage {
  const storage = storageOn(database.db);
  if (database.listen) storage.listen = database.listen.bind(database);
  (storage as { concurrent?: boolean }).concurrent = database.concurrent;
  return storage;
}
