/**
 * Waiting for an instance to finish, bounded (the long-poll result route).
 *
 * The database tells us: a trigger NOTIFYs `edda_instance_finished` with the
 * instance id when a status becomes terminal, whatever path finished it (a
 * step in any process, a cancel, the sweeper). The waiter LISTENs first and
 * reads the status second, so a finish landing between the two is never
 * missed. On a driver that cannot LISTEN, or if the listen fails, the wait
 * reads the status once per `FALLBACK_POLL_MS` instead — a bounded, slow
 * poll, never a busy loop. A notification only prompts a read: the row is
 * the truth.
 */
import type { InstanceRecord, InstanceStatus, Storage } from "../storage/types.ts";

export const INSTANCE_FINISHED_CHANNEL = "edda_instance_finished";
export const TERMINAL_STATUSES: readonly InstanceStatus[] = ["completed", "failed", "cancelled"];
/** Status reads per second when the driver cannot LISTEN. */
export const FALLBACK_POLL_MS = 1000;

export const isTerminal = (status: InstanceStatus) => TERMINAL_STATUSES.includes(status);

/**
 * The instance once it is terminal, or as it is after `waitSeconds` (null if
 * it does not exist). Ends early when `signal` aborts (the client went away).
 */
export async function awaitFinished(storage: Storage, instanceId: string, waitSeconds: number, signal?: AbortSignal): Promise<InstanceRecord | null> {
  let inst = await storage.getInstance(instanceId);
  if (!inst || isTerminal(inst.status) || waitSeconds <= 0) return inst;
  const deadline = Date.now() + waitSeconds * 1000;

  // `notified` catches a notification that lands while a read is in flight.
  let notified: boolean;
  let wake: () => void = () => {};
  const onNotify = () => {
    notified = true;
    wake();
  };
  let unlisten: (() => Promise<void>) | null = null;
  try {
    unlisten = (await storage.listen?.(INSTANCE_FINISHED_CHANNEL, (id) => id === instanceId && onNotify())) ?? null;
  } catch (err) {
    console.warn("edda: LISTEN failed; the result wait polls instead", err);
  }
  signal?.addEventListener("abort", onNotify);
  try {
    for (;;) {
      notified = false;
      // Listening (or polling) from here: this read sees any finish before it.
      inst = await storage.getInstance(instanceId);
      if (!inst || isTerminal(inst.status)) return inst;
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted) return inst;
      if (notified) continue;
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, unlisten ? left : Math.min(left, FALLBACK_POLL_MS));
        function done() {
          clearTimeout(t);
          wake = () => {};
          resolve();
        }
        wake = done;
      });
    }
  } finally {
    signal?.removeEventListener("abort", onNotify);
    await unlisten?.().catch(() => undefined);
  }
}
