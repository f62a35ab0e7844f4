/**
 * Payloads sealed on their way into the database and opened on their way
 * out, around the Storage every engine uses (`sealPayloads`): the one place a
 * value crosses that boundary, so the statements themselves stay as they are
 * and every driver gets it alike.
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
import type { MatchDocument } from "../core/model.ts";
import type { LeasedInstance, StepConclusion } from "./leases.ts";
import type { ChannelMessageRecord, CompensationRecord, Fence, HistoryEvent, InstanceRecord, NewCompensation, NewHistoryEvent, OutboxRecord, Payload, Storage, TxStorage } from "./types.ts";

const SEALING = Symbol("edda.payloadSealing");

type Sealing = Storage & { readonly [SEALING]: PayloadCodec | null };

/** `storage` with its payloads sealed by `codec` (null: none sealed, sealed ones refused) — `storage` itself when it already is. */
export function sealPayloads<S extends Storage>(storage: S, codec: PayloadCodec | null): S {
  if (SEALING in storage) return storage;
  // Everything else is inherited: the areas' getters read the executor through the prototype chain.
  // The overrides are defined, not assigned: the prototype's methods are getters, which assignment cannot shadow.
  const own: Record<PropertyKey, unknown> = {
    ...methods(storage, codec),
    [SEALING]: codec,
    transaction: <T>(fn: (tx: TxStorage) => Promise<T>) => storage.transaction((tx) => fn(sealPayloads(tx, codec))),
  };
  const sealed: object = Object.create(storage);
  for (const key of Reflect.ownKeys(own)) Object.defineProperty(sealed, key, { value: own[key], writable: true, configurable: true });
  return sealed as S & Sealing;
}

// --- opening (always) ------------------------------------------------------------------------------

const openText = (codec: PayloadCodec | null, text: string): Promise<string> | string => (holdsSealed(text) ? openJson(codec, text) : text);
const needsOpen = (p: Payload | null): boolean => p !== null && p.type === "json" && holdsSealed(p.json);

async function openInstance<T extends InstanceRecord | null>(codec: PayloadCodec | null, r: T): Promise<T> {
  if (r === null) return r;
  const rec = r as InstanceRecord;
  if (holdsSealed(rec.inputData)) rec.inputData = await openJson(codec, rec.inputData);
  if (rec.outputData !== null && holdsSealed(rec.outputData)) rec.outputData = await openJson(codec, rec.outputData);
  return r;
}

/**
 * The events' data opened in place. The rows were built for this call (a
 * loaded history's entries are objects whose `data` is an own field), and
 * replacing the field keeps their lazily parsed times lazy.
 */
async function openEvents<T extends { data: Payload | null }>(codec: PayloadCodec | null, events: T[]): Promise<T[]> {
  const todo = events.filter((e) => needsOpen(e.data));
  if (todo.length) await Promise.all(todo.map(async (e) => ((e as { data: Payload }).data = await openPayload(codec, e.data!))));
  return events;
}

async function openMessage<T extends ChannelMessageRecord | OutboxRecord | null>(codec: PayloadCodec | null, m: T): Promise<T> {
  if (m !== null && needsOpen(m.data)) m.data = await openPayload(codec, m.data);
  return m;
}

async function openCompensations(codec: PayloadCodec | null, comps: CompensationRecord[]): Promise<CompensationRecord[]> {
  await Promise.all(comps.map(async (c) => (c.args = await openText(codec, c.args))));
  return comps;
}

const leasesOfFailedOpens = new WeakMap<object, Fence>();

/** The lease a failed opening of a leased instance left held (the step gives it back and counts the failure), if `err` is one. */
export function leaseLeftBy(err: unknown): Fence | undefined {
  return typeof err === "object" && err !== null ? leasesOfFailedOpens.get(err) : undefined;
}

async function openLeased(codec: PayloadCodec | null, l: LeasedInstance | null): Promise<LeasedInstance | null> {
  if (l === null) return l;
  try {
    await Promise.all([openInstance(codec, l.instance), openEvents(codec, l.history)]);
  } catch (err) {
    // The lease is taken by then: whoever handles the error must know it holds one.
    if (typeof err === "object" && err !== null) leasesOfFailedOpens.set(err, l.fence);
    throw err;
  }
  return l;
}

// --- sealing (with a codec) ------------------------------------------------------------------------

const sealEvents = (codec: PayloadCodec, events: readonly NewHistoryEvent[]): Promise<NewHistoryEvent[]> =>
  Promise.all(events.map(async (e) => ({ ...e, data: await sealPayload(codec, e.data) })));

const sealCompensations = (codec: PayloadCodec, comps: readonly NewCompensation[]): Promise<NewCompensation[]> =>
  Promise.all(comps.map(async (c) => ({ ...c, args: await sealJson(codec, c.args) })));

/** A new object, never the caller's: a warm run keeps the conclusion it handed over. */
async function sealConclusion(codec: PayloadCodec, c: StepConclusion): Promise<StepConclusion> {
  const [history, compensations, outputData] = await Promise.all([
    c.history?.length ? sealEvents(codec, c.history) : c.history,
    c.compensations?.length ? sealCompensations(codec, c.compensations) : c.compensations,
    typeof c.outputData === "string" ? sealJson(codec, c.outputData) : c.outputData,
  ]);
  const out: StepConclusion = { ...c };
  if (history !== undefined) out.history = history;
  if (compensations !== undefined) out.compensations = compensations;
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

function methods(s: Storage, codec: PayloadCodec | null): Methods {
  return {
    async createInstance(input) {
      const r = await s.createInstance(codec ? { ...input, inputData: await sealJson(codec, input.inputData) } : input);
      await openInstance(codec, r.instance);
      return r;
    },
    async getInstance(id) {
      return openInstance(codec, await s.getInstance(id));
    },
    async listInstances(query) {
      const page = await s.listInstances(query);
      await Promise.all(page.instances.map((i) => openInstance(codec, i)));
      return page;
    },
    async acquireLease(instanceId, workerId, leaseSeconds, opts) {
      return openLeased(codec, await s.acquireLease(instanceId, workerId, leaseSeconds, opts));
    },
    async loadLeased(fence) {
      return openLeased(codec, await s.loadLeased(fence));
    },
    async concludeStep(fence, conclusion, opts) {
      return s.concludeStep(fence, codec ? await sealConclusion(codec, conclusion) : conclusion, opts);
    },
    async concludeSteps(items) {
      return s.concludeSteps(codec ? await Promise.all(items.map(async (i) => ({ fence: i.fence, conclusion: await sealConclusion(codec, i.conclusion) }))) : items);
    },
    async registerCompensations(fence, comps) {
      return s.registerCompensations(fence, codec ? await sealCompensations(codec, comps) : comps);
    },
    async recurInstance(fence, newInputData) {
      return s.recurInstance(fence, codec ? await sealJson(codec, newInputData) : newInputData);
    },
    async appendHistory(instanceId, events) {
      return s.appendHistory(instanceId, codec ? await sealEvents(codec, events) : events);
    },
    async loadHistory(instanceId) {
      return openEvents<HistoryEvent>(codec, await s.loadHistory(instanceId));
    },
    async loadHistoryPage(instanceId, afterId, limit) {
      const page = await s.loadHistoryPage(instanceId, afterId, limit);
      await openEvents(codec, page.events);
      return page;
    },
    async loadHistoryPreview(instanceId, opts) {
      const page = await s.loadHistoryPreview(instanceId, opts);
      await openEvents(codec, page.events);
      return page;
    },
    async loadArchivedHistory(instanceId, run) {
      return openEvents(codec, await s.loadArchivedHistory(instanceId, run));
    },
    async addCompensations(instanceId, comps) {
      return s.addCompensations(instanceId, codec ? await sealCompensations(codec, comps) : comps);
    },
    async listCompensations(instanceId) {
      return openCompensations(codec, await s.listCompensations(instanceId));
    },
    async recordChildOutcome(parentId, activityId, event) {
      return s.recordChildOutcome(parentId, activityId, codec ? { ...event, data: await sealPayload(codec, event.data) } : event);
    },
    async publishMessage(msg) {
      return openMessage(codec, await s.publishMessage(codec ? { ...msg, data: await sealPayload(codec, msg.data) } : msg));
    },
    async takeNextMessage(instanceId, channel, match) {
      refuseDataMatch(codec, match);
      return openMessage(codec, await s.takeNextMessage(instanceId, channel, match));
    },
    async setWaiting(instanceId, channel, activityId, timeout, match) {
      refuseDataMatch(codec, match);
      return s.setWaiting(instanceId, channel, activityId, timeout, match);
    },
    async pendingMessages(channel, limit) {
      const list = await s.pendingMessages(channel, limit);
      await Promise.all(list.map((m) => openMessage(codec, m)));
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
      await Promise.all(list.map((m) => openMessage(codec, m)));
      return list;
    },
    async listDeadLetters(query) {
      const page = await s.listDeadLetters(query);
      await Promise.all(page.events.map((m) => openMessage(codec, m)));
      return page;
    },
    async appendStream(a) {
      return s.appendStream(codec ? { ...a, items: await Promise.all(a.items.map(async (i) => ({ ...i, data: await sealPayload(codec, i.data) }))) } : a);
    },
    async readStream(instanceId, afterSeq, opts) {
      const read = await s.readStream(instanceId, afterSeq, opts);
      await openEvents(codec, read.items);
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
