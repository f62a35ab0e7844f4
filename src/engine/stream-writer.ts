/**
 * `ctx.stream` of one activity attempt: items are buffered and appended in
 * batches, at most one batch per FLUSH_MS (or sooner when FLUSH_BYTES /
 * FLUSH_ITEMS are buffered) — so a model streaming tokens costs one statement
 * per batch, not one commit per token — while an item after a quiet spell
 * goes out at once (no added latency for sparse progress). Batches go out one
 * at a time, in order.
 *
 * Where a batch is written (the step picks it, step.ts): on a database with
 * several connections, always outside the step's transaction, so readers see
 * it while the attempt runs; items of an attempt that then fails stay, and the
 * next attempt's first batch starts with a `retry` marker. On PGlite (one
 * connection) a transactional activity's batches go through its transaction —
 * a write outside would wait for that very transaction — so they appear at
 * its commit and vanish with its rollback.
 *
 * Every batch is fenced by the step's lease: once it is lost nothing more is
 * appended and the next write throws LeaseLostError. The engine drains the
 * writer when the attempt returns, before the step concludes; a refusal the
 * activity never saw fails the attempt then.
 */
import type { ActivityStream } from "../core/context.ts";
import { LeaseLostError, StreamLimitError } from "../core/errors.ts";
import { encodeStreamItem } from "../core/stream.ts";
import type { Fence, NewStreamItem, Storage } from "../storage/types.ts";

export const FLUSH_MS = 50;
export const FLUSH_BYTES = 4096;
export const FLUSH_ITEMS = 256;

export interface StreamTarget {
  storage: Storage;
  fence: Fence;
  run: number;
  activityId: string;
  attempt: number;
  maxBytes: number;
}

export class StreamWriter implements ActivityStream {
  private buffer: NewStreamItem[] = [];
  private bytes = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private chain: Promise<void> = Promise.resolve();
  private first = true;
  private lastFlush = 0;
  private closed = false;
  private failure: Error | null = null;
  /** Whether the activity has seen the failure (a write or close threw it). */
  private reported = false;

  constructor(private readonly target: StreamTarget) {}

  write(data: unknown, opts?: { topic?: string }): void {
    this.check();
    if (this.closed) throw new StreamLimitError(`the stream of ${this.target.activityId} is closed`, "closed");
    const item = encodeStreamItem(data, opts, `a stream item of ${this.target.activityId}`);
    this.buffer.push({ kind: "chunk", source: this.target.activityId, ...item });
    this.bytes += item.size;
    if (this.bytes >= FLUSH_BYTES || this.buffer.length >= FLUSH_ITEMS) return this.flush();
    if (this.timer !== undefined) return;
    // Leading edge: an item after a quiet spell goes out at once; items that follow within FLUSH_MS
    // wait for the window to close and go out together.
    const wait = this.lastFlush + FLUSH_MS - Date.now();
    if (wait <= 0) return this.flush();
    this.timer = setTimeout(() => this.flush(), wait);
    (this.timer as { unref?: () => void }).unref?.();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.flush();
    await this.chain;
    this.check();
  }

  /** The engine's end of the attempt: everything buffered written; the failure the activity did not see, if any. */
  async drain(): Promise<Error | null> {
    this.closed = true;
    this.flush();
    await this.chain;
    return this.reported ? null : this.failure;
  }

  private check(): void {
    if (this.failure) {
      this.reported = true;
      throw this.failure;
    }
  }

  private flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.buffer.length === 0 || this.failure) return;
    const items = this.buffer;
    this.buffer = [];
    this.bytes = 0;
    const first = this.first;
    this.first = false;
    this.lastFlush = Date.now();
    this.chain = this.chain.then(() => this.append(items, first));
  }

  private async append(items: NewStreamItem[], first: boolean): Promise<void> {
    if (this.failure) return;
    const t = this.target;
    try {
      const r = await t.storage.appendStream({
        fence: t.fence,
        run: t.run,
        attempt: t.attempt,
        items,
        maxBytes: t.maxBytes,
        ...(first ? { retryMarkerFor: t.activityId } : {}),
      });
      if (r.ok) return;
      this.failure =
        r.reason === "lease_lost"
          ? new LeaseLostError(`lease on ${t.fence.instanceId} lost while ${t.activityId} streamed`)
          : new StreamLimitError(`the stream of instance ${t.fence.instanceId} is full (${t.maxBytes} bytes)`, "stream_full");
    } catch (err) {
      this.failure = err instanceof Error ? err : new Error(String(err));
    }
  }
}
