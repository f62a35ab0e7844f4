/**
 * Payloads on their way into the database and out of it, around the Storage
 * every engine uses (`sealPayloads`): sealed (encryption at rest) and, over
 * the threshold, stored by reference (payload-refs.ts). The one place a value
 * crosses that boundary, so the statements themselves stay as they are and
 * every driver gets it alike. A value is sealed first and the sealed text is
 * what goes out of line; reading resolves references, then opens envelopes.
 *
 * Out of line (instance-owned values only): inputs (a start's, a recur's),
 * outputs, history records (results, received messages, child outcomes).
 * Messages, stream items, outbox events, compensation arguments and a
 * debounced start's input stay inline (they are bounded by the request body
 * limit, the stream budget, or are small); a message over the threshold goes
 * by reference once it is recorded in a receiver's history.
 *
 * What is sealed (with a codec): workflow inputs (also a recur's and a
 * debounced start's), outputs, every history record's data (activity results
 * and errors, received messages and events, recorded values, child outcomes),
 * compensation arguments, channel messages' data, stream items, outbox
 * events' data and a webhook delivery's fields. What stays plain: ids,
 * names, statuses, timestamps, tags, message metadata (the CloudEvents
 * attributes an event wait matches on), outbox extensions, an instance's
 * `error_data`/`cancel_data` (the error's type and message an operator lists
 * by), and the records the database writes itself (timer, timeout and expiry
 * records: ids and times). A broadcast delivery copies a message's sealed
 * data into its receivers' history as it is (`SealedValue`).
 *
 * Opening runs with or without a codec: a sealed value read where no key is
 * set is a `PayloadDecryptionError`, never an envelope handed to workflow
 * code. A text holding no envelope costs one substring scan.
 */
import { EncryptedMatchError, holdsSealed, openJson, openPayload, sealJson, sealPayload, type PayloadCodec } from "../core/payload-codec.ts";
import { holdsRef, outOfLine, REF_START, refOf, resolveRefs, rowBytes, type LargeValueStore, type OutOfLine } from "../storage/payload-refs.ts";
import { PayloadTooLargeError } from "../core/errors.ts";
import type { DeferredValues } from "../core/replay.ts";
import type { MatchDocument } from "../core/model.ts";
import { logError } from "../core/log.ts";
import type { LeasedInstance, StepConclusion } from "../storage/leases.ts";
import type { CompensationRecord, Fence, HistoryEvent, InstanceRecord, LeasedLoad, NewCompensation, NewHistoryEvent, Payload, Storage } from "../storage/types.ts";

const SEALING = Symbol("edda.payloadSealing");

/** How payloads cross the boundary: sealed with `codec` (null: none sealed, sealed ones refused), out of line over `thresholdBytes`. */
export interface PayloadBoundary {
  codec: PayloadCodec | null;
  /** Infinity: every value inline. */
  thresholdBytes: number;
  /** Where values by reference are kept (`postgresValues`, or an R2 bucket). */
  store: LargeValueStore;
  /** The most one instance holds (payload-refs.ts MAX_INSTANCE_BYTES); Infinity: no bound. */
  maxInstanceBytes?: number;
}

type Sealing = Storage & { readonly [SEALING]: PayloadBoundary };

/** The storage a sealed one wraps, and its sealed methods over it (made on first use). */
const INNER = Symbol("edda.sealedStorage");
const OWN = Symbol("edda.sealedMethods");
interface Sealed {
  [INNER]: Storage;
  [OWN]: Record<PropertyKey, unknown> | undefined;
}

/**
 * What a sealed storage does not seal (the areas' other methods, `executor`, `afterCommit`…) is read off the
 * storage it wraps: those are closures over its executor, so they work taken off either.
 */
const FORWARD: object = new Proxy({}, { get: (_target, key, receiver: Sealed) => Reflect.get(receiver[INNER], key) });

/**
 * One prototype per boundary: each sealed method's name is a getter into the sealed storage's own table of
 * them, made on first use (closures over the storage it wraps, so one taken off still works), then `FORWARD`.
 * Sealing a storage — every transaction's — is one small object: defining the ~35 overrides on each instead
 * cost ~20 µs a transaction (an object that grows by that many properties leaves V8's fast mode, as in
 * pg-storage.ts).
 */
const prototypes = new WeakMap<PayloadBoundary, object>();

const ownMethods = (storage: Storage, b: PayloadBoundary): Record<PropertyKey, unknown> => methods(storage, b) as unknown as Record<PropertyKey, unknown>;

function sealedPrototype(b: PayloadBoundary): object {
  let proto = prototypes.get(b);
  if (proto) return proto;
  proto = Object.create(FORWARD) as object;
  // The names, off a table over no storage: methods() only closes over it.
  for (const name of Object.keys(ownMethods(undefined as never, b))) {
    Object.defineProperty(proto, name, {
      get(this: Sealed) {
        return (this[OWN] ??= ownMethods(this[INNER], b))[name];
      },
      // Assigned (a test's stand-in): the object's own, as the override it replaces was.
      set(this: Sealed, value: unknown) {
        Object.defineProperty(this, name, { value, writable: true, configurable: true, enumerable: true });
      },
    });
  }
  Object.defineProperty(proto, SEALING, { value: b });
  prototypes.set(b, proto);
  return proto;
}

/** `storage` with its payloads sealed and stored by reference as `boundary` says — `storage` itself when it already is. */
export function sealPayloads<S extends Storage>(storage: S, boundary: PayloadBoundary): S {
  if (SEALING in storage) return storage;
  const sealed = Object.create(sealedPrototype(boundary)) as Sealed;
  sealed[INNER] = storage;
  sealed[OWN] = undefined;
  return sealed as unknown as S & Sealing;
}

// --- reading (always) ------------------------------------------------------------------------------

/** Texts of one instance as loaded → as the engine sees them: references resolved (one statement), envelopes opened. */
async function openTexts(s: Storage, b: PayloadBoundary, instanceId: string, texts: string[]): Promise<string[]> {
  const resolved = await resolveRefs(b.store, s.executor, instanceId, texts);
  return Promise.all(resolved.map((t) => (holdsSealed(t) ? openJson(b.codec, t) : Promise.resolve(t))));
}

/** A record whose whole data is a reference (how a record goes out of line): a step loads it when its code takes it. */
const isDeferred = (e: { data: Payload | null }): boolean => e.data !== null && e.data.type === "json" && e.data.json.startsWith(REF_START);

const needsOpen = (p: Payload | null): p is { type: "json"; json: string } => p !== null && p.type === "json" && (holdsSealed(p.json) || holdsRef(p.json));

async function openInstance<T extends InstanceRecord | null>(s: Storage, b: PayloadBoundary, r: T, opts: { keepRefs?: boolean } = {}): Promise<T> {
  if (r === null) return r;
  const rec = r as InstanceRecord;
  const out = rec.outputData;
  if (opts.keepRefs) {
    if (!holdsRef(rec.inputData) && holdsSealed(rec.inputData)) rec.inputData = await openJson(b.codec, rec.inputData);
    if (out !== null && !holdsRef(out) && holdsSealed(out)) rec.outputData = await openJson(b.codec, out);
    return r;
  }
  if (!holdsSealed(rec.inputData) && !holdsRef(rec.inputData) && (out === null || (!holdsSealed(out) && !holdsRef(out)))) return r;
  const [input, output] = await openTexts(s, b, rec.instanceId, out === null ? [rec.inputData] : [rec.inputData, out]);
  rec.inputData = input!;
  if (out !== null) rec.outputData = output!;
  return r;
}

/**
 * The events' data opened in place. The rows were built for this call (a
 * loaded history's entry takes a new `data` through its setter, rows.ts),
 * and replacing it keeps the entry's lazily made parts lazy.
 */
async function openEvents<T extends { data: Payload | null }>(s: Storage, b: PayloadBoundary, instanceId: string, events: T[], leaveDeferred = false): Promise<T[]> {
  const todo = events.filter((e) => needsOpen(e.data) && !(leaveDeferred && isDeferred(e)));
  if (todo.length === 0) return events;
  const texts = await resolveRefs(b.store, s.executor, instanceId, todo.map((e) => (e.data as { json: string }).json));
  await Promise.all(todo.map(async (e, i) => ((e as { data: Payload }).data = await openPayload(b.codec, { type: "json", json: texts[i]! }))));
  return events;
}

/** A message's, outbox event's or stream item's data opened (these are never out of line). */
async function openMessage<T extends { data: Payload } | null>(b: PayloadBoundary, m: T): Promise<T> {
  if (m !== null && m.data.type === "json" && holdsSealed(m.data.json)) m.data = await openPayload(b.codec, m.data);
  return m;
}

async function openCompensations(b: PayloadBoundary, comps: CompensationRecord[]): Promise<CompensationRecord[]> {
  await Promise.all(comps.map(async (c) => (c.args = holdsSealed(c.args) ? await openJson(b.codec, c.args) : c.args)));
  return comps;
}

const leasesOfFailedOpens = new WeakMap<object, Fence>();

/** The lease a failed opening of a leased instance left held (the step gives it back and counts the failure), if `err` is one. */
export function leaseLeftBy(err: unknown): Fence | undefined {
  return typeof err === "object" && err !== null ? leasesOfFailedOpens.get(err) : undefined;
}

/**
 * How a step's replay loads the records a leased history left by reference (core/replay.ts DeferredValues),
 * for `instanceId`; null when `storage` does not store values by reference.
 */
export function deferredValues(storage: Storage, instanceId: string): DeferredValues | null {
  const b = (storage as Partial<Sealing>)[SEALING];
  if (!b) return null;
  return {
    deferred: isDeferred,
    load: async (events) => {
      await openEvents(storage, b, instanceId, events);
    },
  };
}

/**
 * A leased instance opened: its input, and every record of its history but those stored by reference —
 * a step replaying past twenty large results reads the ones its code takes, when it takes them
 * (`deferredValues`), and none for a compensation step, an emit's record or a replay that stops early.
 */
async function openLeased(s: Storage, b: PayloadBoundary, l: LeasedInstance | null): Promise<LeasedInstance | null> {
  if (l === null) return l;
  try {
    await Promise.all([openInstance(s, b, l.instance), openEvents(s, b, l.instance.instanceId, l.history, true)]);
  } catch (err) {
    // The lease is taken by then: whoever handles the error must know it holds one.
    if (typeof err === "object" && err !== null) leasesOfFailedOpens.set(err, l.fence);
    throw err;
  }
  return l;
}

// --- the per-instance bound ---------------------------------------------------------------------------

const MiB = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;

/**
 * The error that refuses `data` (the value named `slot`) to `instanceId`, when it goes by reference and would
 * take what the instance holds past its bound; null when it fits. Only a value by reference is checked (a
 * smaller one grows an instance by at most the threshold): then the instance's rows and its values are
 * summed, two statements on `storage` (the step's transaction when it has one) beside a write of over
 * 256 KiB. The size is the value's text before sealing, as MAX_VALUE_BYTES counts it.
 */
export async function overInstanceBound(storage: Storage, instanceId: string, slot: string, data: Payload): Promise<PayloadTooLargeError | null> {
  const b = (storage as Partial<Sealing>)[SEALING];
  const max = b?.maxInstanceBytes ?? Infinity;
  const size = data.type === "json" ? data.json.length : data.bytes.length;
  if (!b || max === Infinity || size <= b.thresholdBytes) return null;
  const [rows, values] = await Promise.all([rowBytes(storage.executor, instanceId), b.store.bytes(storage.executor, instanceId)]);
  const held = rows + values;
  if (held + size <= max) return null;
  return new PayloadTooLargeError(
    `${slot} is ${MiB(size)} and instance "${instanceId}" holds ${MiB(held)} already; one instance holds at most ${MiB(max)} (largeValues.maxInstanceBytes)`,
    slot,
    max,
  );
}

// --- writing ----------------------------------------------------------------------------------------

/** A JSON text as stored for `instanceId`: sealed, then out of line when long (its row added to `rows`). */
async function storeText(b: PayloadBoundary, text: string, instanceId: string, rows: OutOfLine[]): Promise<string> {
  return outOfLine(b.codec ? await sealJson(b.codec, text) : text, instanceId, b.thresholdBytes, rows);
}

/** A payload as stored for `instanceId` (bytes without a codec stay bytes, inline). */
async function storePayload(b: PayloadBoundary, p: Payload, instanceId: string, rows: OutOfLine[]): Promise<Payload> {
  if (p.type === "binary" && !b.codec) return p;
  const sealed = b.codec ? await sealPayload(b.codec, p) : p;
  return { type: "json", json: await outOfLine((sealed as { json: string }).json, instanceId, b.thresholdBytes, rows) };
}

const storeEvents = (b: PayloadBoundary, events: readonly NewHistoryEvent[], instanceId: string, rows: OutOfLine[]): Promise<NewHistoryEvent[]> =>
  Promise.all(events.map(async (e) => ({ ...e, data: await storePayload(b, e.data, instanceId, rows) })));

const sealCompensations = (codec: PayloadCodec | null, comps: readonly NewCompensation[]): Promise<readonly NewCompensation[]> | readonly NewCompensation[] =>
  codec ? Promise.all(comps.map(async (c) => ({ ...c, args: await sealJson(codec, c.args) }))) : comps;

/** A new object, never the caller's: a warm run keeps the conclusion it handed over. */
async function storeConclusion(b: PayloadBoundary, c: StepConclusion, instanceId: string, rows: OutOfLine[]): Promise<StepConclusion> {
  const [history, compensations, outputData] = await Promise.all([
    c.history?.length ? storeEvents(b, c.history, instanceId, rows) : c.history,
    c.compensations?.length ? sealCompensations(b.codec, c.compensations) : c.compensations,
    typeof c.outputData === "string" ? storeText(b, c.outputData, instanceId, rows) : c.outputData,
  ]);
  const out: StepConclusion = { ...c };
  if (history !== undefined) out.history = history;
  if (compensations !== undefined) out.compensations = [...compensations];
  if (outputData !== undefined) out.outputData = outputData;
  return out;
}

/**
 * A webhook delivery (`{body, contentType, headers}` JSON) with each field
 * sealed on its own: the database prepends `receivedAt` to the object's text,
 * so the object stays an object and its fields become envelopes.
 */
async function sealFields(codec: PayloadCodec, json: string): Promise<string> {
  const o = JSON.parse(json) as Record<string, unknown>;
  const fields = await Promise.all(Object.keys(o).map(async (k) => `${JSON.stringify(k)}:${await sealJson(codec, JSON.stringify(o[k]))}`));
  return `{${fields.join(",")}}`;
}

/** The database matches an event wait against the message's document: it cannot see into sealed data. */
function refuseDataMatch(codec: PayloadCodec | null, match: MatchDocument | null | undefined): void {
  if (codec && match?.data !== undefined) {
    throw new EncryptedMatchError(
      "waitEvent's match on data fields (\"data.…\") cannot be decided while payloads are encrypted at rest: match on CloudEvents attributes (subject, source, an extension) or check the data in the workflow",
    );
  }
}

type Methods = Pick<
  Storage,
  | "createInstance"
  | "getInstance"
  | "listInstances"
  | "acquireLease"
  | "loadLeased"
  | "loadLeasedMany"
  | "concludeStep"
  | "concludeSteps"
  | "registerCompensations"
  | "recurInstance"
  | "appendHistory"
  | "loadHistory"
  | "loadHistoryPage"
  | "loadHistoryPreview"
  | "loadArchivedHistory"
  | "addCompensations"
  | "listCompensations"
  | "recordChildOutcome"
  | "copyHistoryPrefix"
  | "purgeFinishedInstances"
  | "publishMessage"
  | "takeNextMessage"
  | "setWaiting"
  | "pendingMessages"
  | "debounceInto"
  | "addOutboxEvent"
  | "claimOutboxEvents"
  | "listDeadLetters"
  | "appendStream"
  | "readStream"
  | "fireWaitWebhook"
  | "bindWaitWebhook"
>;

function methods(s: Storage, b: PayloadBoundary): Methods & Pick<Storage, "transaction"> {
  const { codec } = b;
  return {
    transaction: (fn) => s.transaction((tx) => fn(sealPayloads(tx, b))),
    async createInstance(input) {
      const rows: OutOfLine[] = [];
      const stored = { ...input, inputData: await storeText(b, input.inputData, input.instanceId, rows) };
      // A value by reference is owned by its instance: written after it, in its transaction (none when the instance existed).
      const r = rows.length
        ? await s.transaction(async (tx) => {
            const created = await tx.createInstance(stored);
            if (created.created) await b.store.put(tx.executor, rows);
            return created;
          })
        : await s.createInstance(stored);
      await openInstance(s, b, r.instance);
      return r;
    },
    async getInstance(id) {
      return openInstance(s, b, await s.getInstance(id));
    },
    async listInstances(query) {
      const page = await s.listInstances(query);
      // A page never loads values by reference (50 inputs of up to 32 MiB each, for a list that shows none):
      // one stays its reference, `{"$ref": "<id>:<bytes>:<sha-256>"}`; the instance's own read resolves it.
      await Promise.all(page.instances.map((i) => openInstance(s, b, i, { keepRefs: true })));
      return page;
    },
    async acquireLease(instanceId, workerId, leaseSeconds, opts) {
      return openLeased(s, b, await s.acquireLease(instanceId, workerId, leaseSeconds, opts));
    },
    async loadLeased(fence) {
      return openLeased(s, b, await s.loadLeased(fence));
    },
    async loadLeasedMany(fences) {
      const loads = await s.loadLeasedMany(fences);
      // Each row opens on its own: one that cannot (a key this deployment lacks) fails only its step.
      return Promise.all(
        loads.map(async (l): Promise<LeasedLoad> => {
          if (!l.ok) return l;
          try {
            return { ok: true, leased: await openLeased(s, b, l.leased) };
          } catch (error) {
            return { ok: false, error };
          }
        }),
      );
    },
    async concludeStep(fence, conclusion, opts) {
      const rows: OutOfLine[] = [];
      const stored = await storeConclusion(b, conclusion, fence.instanceId, rows);
      await b.store.put(s.executor, rows);
      return s.concludeStep(fence, stored, opts);
    },
    async concludeSteps(items) {
      const rows: OutOfLine[] = [];
      const stored = await Promise.all(items.map(async (i) => ({ fence: i.fence, conclusion: await storeConclusion(b, i.conclusion, i.fence.instanceId, rows) })));
      await b.store.put(s.executor, rows);
      return s.concludeSteps(stored);
    },
    async registerCompensations(fence, comps) {
      return s.registerCompensations(fence, await sealCompensations(codec, comps));
    },
    async recurInstance(fence, newInputData) {
      const rows: OutOfLine[] = [];
      const stored = await storeText(b, newInputData, fence.instanceId, rows);
      await b.store.put(s.executor, rows);
      return s.recurInstance(fence, stored);
    },
    async appendHistory(instanceId, events) {
      const rows: OutOfLine[] = [];
      const stored = await storeEvents(b, events, instanceId, rows);
      await b.store.put(s.executor, rows);
      return s.appendHistory(instanceId, stored);
    },
    async loadHistory(instanceId) {
      return openEvents<HistoryEvent>(s, b, instanceId, await s.loadHistory(instanceId));
    },
    async loadHistoryPage(instanceId, afterId, limit) {
      const page = await s.loadHistoryPage(instanceId, afterId, limit);
      await openEvents(s, b, instanceId, page.events);
      return page;
    },
    async loadHistoryPreview(instanceId, opts) {
      const page = await s.loadHistoryPreview(instanceId, opts);
      // A value by reference over the preview's size is shown by its size, never loaded for a page; one asked
      // for whole (the viewer's raw link: maxChars beyond any value) is loaded like any other.
      for (const e of page.events) {
        const ref = e.data?.type === "json" ? refOf(e.data.json) : null;
        if (ref && ref.size > opts.maxChars) Object.assign(e, { data: null, size: ref.size });
      }
      await openEvents(s, b, instanceId, page.events);
      return page;
    },
    async loadArchivedHistory(instanceId, run) {
      return openEvents(s, b, instanceId, await s.loadArchivedHistory(instanceId, run));
    },
    async addCompensations(instanceId, comps) {
      return s.addCompensations(instanceId, await sealCompensations(codec, comps) as NewCompensation[]);
    },
    async listCompensations(instanceId) {
      return openCompensations(b, await s.listCompensations(instanceId));
    },
    async recordChildOutcome(parentId, activityId, event) {
      const rows: OutOfLine[] = [];
      const data = await storePayload(b, event.data, parentId, rows);
      await b.store.put(s.executor, rows);
      return s.recordChildOutcome(parentId, activityId, { ...event, data });
    },
    async copyHistoryPrefix(from, to, beforeEventId) {
      const n = await s.copyHistoryPrefix(from, to, beforeEventId);
      // The copied records reference their source's values: the fork owns copies (each instance's are deleted with it).
      await b.store.copy(s.executor, from, to);
      return n;
    },
    async purgeFinishedInstances(olderThanSeconds, limit, opts) {
      const ids = await s.purgeFinishedInstances(olderThanSeconds, limit, opts);
      // An object store's values go after their instances; one left behind by a failure here is unreferenced.
      if (ids.length && b.store.deleted) await b.store.deleted(ids).catch((err: unknown) => logError("edda: values of purged instances not deleted", err, { instances: ids.length }));
      return ids;
    },
    async publishMessage(msg) {
      return openMessage(b, await s.publishMessage(codec ? { ...msg, data: await sealPayload(codec, msg.data) } : msg));
    },
    async takeNextMessage(instanceId, channel, match) {
      refuseDataMatch(codec, match);
      return openMessage(b, await s.takeNextMessage(instanceId, channel, match));
    },
    async setWaiting(instanceId, channel, activityId, timeout, match) {
      refuseDataMatch(codec, match);
      return s.setWaiting(instanceId, channel, activityId, timeout, match);
    },
    async pendingMessages(channel, limit) {
      const list = await s.pendingMessages(channel, limit);
      await Promise.all(list.map((m) => openMessage(b, m)));
      return list;
    },
    async debounceInto(key, inputData, periodSeconds, maxWaitSeconds) {
      return s.debounceInto(key, codec ? await sealJson(codec, inputData) : inputData, periodSeconds, maxWaitSeconds);
    },
    async addOutboxEvent(event) {
      return s.addOutboxEvent(codec ? { ...event, data: await sealPayload(codec, event.data) } : event);
    },
    async claimOutboxEvents(limit, eventIds) {
      const list = await s.claimOutboxEvents(limit, eventIds);
      await Promise.all(list.map((m) => openMessage(b, m)));
      return list;
    },
    async listDeadLetters(query) {
      const page = await s.listDeadLetters(query);
      await Promise.all(page.events.map((m) => openMessage(b, m)));
      return page;
    },
    async appendStream(a) {
      return s.appendStream(codec ? { ...a, items: await Promise.all(a.items.map(async (i) => ({ ...i, data: await sealPayload(codec, i.data) }))) } : a);
    },
    async readStream(instanceId, afterSeq, opts) {
      const read = await s.readStream(instanceId, afterSeq, opts);
      await Promise.all(read.items.map((i) => openMessage(b, i)));
      return read;
    },
    async fireWaitWebhook(tokenHash, delivery) {
      return s.fireWaitWebhook(tokenHash, codec ? await sealFields(codec, delivery) : delivery);
    },
    async bindWaitWebhook(instanceId, run, hookId, waitId) {
      const r = await s.bindWaitWebhook(instanceId, run, hookId, waitId);
      if (r?.payload && holdsSealed(r.payload)) r.payload = await openJson(codec, r.payload);
      return r;
    },
  };
}
