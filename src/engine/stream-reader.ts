/**
 * Reading an instance's stream live: the items after a sequence number, in
 * order, then one end event once the instance has finished.
 *
 * Waking. With a long-lived database (Node, Deno on Postgres, PGlite) one
 * StreamHub per engine LISTENs on `edda_stream` (every append NOTIFYs the
 * instance id at commit) and `edda_instance_finished`, and fans a
 * notification out to the readers of that instance: two LISTENs per process,
 * however many readers — never a connection per reader. A reader subscribes
 * before it reads, so an append landing between a read and the wait is never
 * missed; a notification only prompts a read, the rows are the truth, and a
 * reader also reads again at every heartbeat in case a notification was lost
 * with a reconnecting listener. Where the database is opened per request
 * (Workers) or LISTEN is unavailable, a reader polls with back-off instead
 * (POLL_MIN_MS doubling to POLL_MAX_MS while nothing new arrives), and the
 * response is bounded in time: the client resumes with Last-Event-ID.
 *
 * Ending. Each read carries the instance's status from the same snapshot
 * (storage/streams.ts): once it is terminal and the read returned less than a
 * page, every item is out and the end event follows.
 */
import type { InstanceStatus, Storage, StreamItem } from "../storage/types.ts";
import { INSTANCE_FINISHED_CHANNEL, isTerminal } from "./results.ts";
import { STREAM_CHANNEL } from "../storage/streams.ts";

export const STREAM_PAGE = 500;
export const HEARTBEAT_MS = 15_000;
export const POLL_MIN_MS = 100;
export const POLL_MAX_MS = 2_000;
/** How long one response streams when readers poll (Workers): far under the platform's limits, see docs/design.md. */
export const POLL_RESPONSE_MAX_MS = 25_000;
/** How long one response streams when woken by LISTEN; the client resumes after it (and after any proxy timeout). */
export const LIVE_RESPONSE_MAX_MS = 10 * 60_000;

export type StreamEvent =
  | { type: "item"; item: StreamItem }
  | { type: "end"; status: InstanceStatus; lastSeq: number }
  | { type: "heartbeat" };

export interface StreamReadOptions {
  /** Items after this sequence number (Last-Event-ID); 0 for all. */
  after: number;
  topics?: readonly string[];
  signal?: AbortSignal;
  /** End the read (without an end event) after this long: bounded requests; the client resumes. */
  maxMs?: number;
  heartbeatMs?: number;
}

type Wake = () => void;

/** One LISTEN per channel for all readers of an engine. */
export class StreamHub {
  private readonly readers = new Map<string, Set<Wake>>();
  private listening: Promise<boolean> | null = null;

  constructor(private readonly storage: Storage) {}

  /** Whether readers are woken by notifications (else they poll). */
  live(): Promise<boolean> {
    return (this.listening ??= this.listen());
  }

  private async listen(): Promise<boolean> {
    const { listen } = this.storage;
    if (!listen) return false;
    const fan = (id: string) => this.readers.get(id)?.forEach((w) => w());
    try {
      await listen.call(this.storage, STREAM_CHANNEL, fan);
      await listen.call(this.storage, INSTANCE_FINISHED_CHANNEL, fan);
      return true;
    } catch (err) {
      console.warn("edda: LISTEN failed; stream readers poll instead", err);
      return false;
    }
  }

  subscribe(instanceId: string, wake: Wake): () => void {
    let set = this.readers.get(instanceId);
    if (!set) this.readers.set(instanceId, (set = new Set()));
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.readers.get(instanceId) === set) this.readers.delete(instanceId);
    };
  }

  /** Readers waiting now (for tests and metrics). */
  get readerCount(): number {
    let n = 0;
    for (const s of this.readers.values()) n += s.size;
    return n;
  }
}

/**
 * The events of an instance's stream from `opts.after`; null when the
 * instance does not exist (nothing is read after that first statement).
 */
export async function openStream(storage: Storage, hub: StreamHub | null, instanceId: string, opts: StreamReadOptions): Promise<AsyncGenerator<StreamEvent> | null> {
  const live = hub ? await hub.live() : false;
  opts = { ...opts, maxMs: Math.min(opts.maxMs ?? Infinity, live ? LIVE_RESPONSE_MAX_MS : POLL_RESPONSE_MAX_MS) };
  const first = await storage.readStream(instanceId, opts.after, { limit: STREAM_PAGE, ...(opts.topics ? { topics: opts.topics } : {}) });
  if (first.status === null) return null;
  return events(storage, hub, instanceId, opts, first);
}

async function* events(storage: Storage, hub: StreamHub | null, instanceId: string, opts: StreamReadOptions, first: Awaited<ReturnType<Storage["readStream"]>>): AsyncGenerator<StreamEvent> {
  const live = hub ? await hub.live() : false;
  const heartbeatMs = opts.heartbeatMs ?? HEARTBEAT_MS;
  const deadline = opts.maxMs !== undefined ? Date.now() + opts.maxMs : Infinity;
  let cursor = opts.after;
  let notified = false;
  let wake: Wake = () => {};
  const onWake = () => {
    notified = true;
    wake();
  };
  const unsubscribe = live && hub ? hub.subscribe(instanceId, onWake) : () => {};
  opts.signal?.addEventListener("abort", onWake);
  let pollMs = POLL_MIN_MS;
  let lastSent = Date.now();
  try {
    // The first page was read before subscribing: read once more so nothing between the two is missed.
    let read = first;
    let subscribedRead = !live;
    for (;;) {
      for (const item of read.items) {
        cursor = item.seq;
        lastSent = Date.now();
        yield { type: "item", item };
      }
      const full = read.items.length >= STREAM_PAGE;
      if (!full && read.status !== null && isTerminal(read.status) && subscribedRead) {
        // The stream's own last item, not the reader's cursor: a reader that resumed past the end (or
        // read one topic) is told where the stream ends, so resuming from `lastSeq` yields nothing new.
        yield { type: "end", status: read.status, lastSeq: read.lastSeq };
        return;
      }
      if (read.status === null) return; // purged under the reader
      if (opts.signal?.aborted || Date.now() >= deadline) return;
      if (full || !subscribedRead || notified) {
        subscribedRead = true;
      } else {
        const untilBeat = lastSent + heartbeatMs - Date.now();
        const left = Math.max(0, Math.min(deadline - Date.now(), untilBeat, live ? Infinity : pollMs));
        await new Promise<void>((resolve) => {
          const t = setTimeout(done, left);
          function done() {
            clearTimeout(t);
            wake = () => {};
            resolve();
          }
          wake = done;
        });
        if (opts.signal?.aborted) return;
        if (Date.now() - lastSent >= heartbeatMs) {
          lastSent = Date.now();
          yield { type: "heartbeat" };
        }
      }
      notified = false;
      read = await storage.readStream(instanceId, cursor, { limit: STREAM_PAGE, ...(opts.topics ? { topics: opts.topics } : {}) });
      if (!live) {
        pollMs = read.items.length > 0 ? POLL_MIN_MS : Math.min(pollMs * 2, POLL_MAX_MS);
      }
    }
  } finally {
    unsubscribe();
    opts.signal?.removeEventListener("abort", onWake);
  }
}
