/**
 * Per-wait webhook URLs: `const hook = await createWebhook(ctx, { expiresIn })`
 * gives the workflow a URL of its own; the first POST to it resumes exactly
 * `await hook.wait()` with the request, once; after it fired, expired or the
 * instance ended it answers 410 Gone.
 *
 *   create   a built-in transactional activity (`webhook:n`): a random nonce,
 *            the token derived from it (core/webhook-waits.ts), the hook's row
 *            keyed by the token's SHA-256 written in the step's transaction;
 *            history records only `{ nonce, expiresAt }`
 *   wait     a wait kind of its own (`webhook` in wait-kinds.ts): its prepare
 *            takes a request that came before the wait, else the instance
 *            waits (the webhook kind's status)
 *   POST     `deliverToWebhook`: storage fires the hook under the instance's
 *            row lock and, when the instance waits on it, records the request
 *            and makes it runnable; the step is dispatched after the commit
 *   expiry   the sweep's `webhook_expiry` task (the one expiry path, expireDue)
 *   cancel   `endInstance` cancels the instance's open hooks
 */
import type { WorkflowContext } from "../core/context.ts";
import { activity } from "../core/definitions.ts";
import { TerminalError } from "../core/errors.ts";
import { explicitId } from "../core/ids.ts";
import { EV, type HistoryEvent, type NewHistoryEvent } from "../core/model.ts";
import { operation, operationId, replayStateOf } from "../core/operation.ts";
import { decodeActivityRecord, type WebhookBranch, type WebhookLinks } from "../core/replay.ts";
import { fromPayload, toPayload, toStoredJson } from "../core/serialization.ts";
import { webhookHandle, webhookLink, webhookToken, webhookTokenHash, type RecordedWebhook, type WaitWebhook } from "../core/webhook-waits.ts";
import type { TxStorage, WebhookFire } from "../storage/types.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Uses } from "./deps.ts";
import { activityInternalsOf } from "./execute.ts";

export interface CreateWebhookOptions {
  /** Seconds until the URL stops accepting POSTs and `wait()` throws WebhookExpiredError (default: never by itself). */
  expiresIn?: number;
  /** Explicit operation id instead of `webhook:n`. */
  id?: string;
}

const createWebhookActivity = activity("edda.create_webhook", async (ctx, opts: { run: number; expiresInSeconds: number | null }): Promise<RecordedWebhook> => {
  const rt = activityInternalsOf(ctx);
  const key = rt.notify.webhookLinks?.()?.key;
  if (!key) throw new TerminalError("createWebhook needs EDDA_SECRET: a per-wait URL's token is derived from it");
  const nonce = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
  const tokenHash = await webhookTokenHash(await webhookToken(key, ctx.instanceId, ctx.activityId, nonce));
  const { expiresAt } = await rt.storage.createWaitWebhook({ instanceId: ctx.instanceId, run: opts.run, hookId: ctx.activityId, tokenHash, expiresInSeconds: opts.expiresInSeconds });
  return { nonce, expiresAt: expiresAt ? expiresAt.toISOString() : null };
});

/**
 * A URL of this wait's own; POST to it resumes `await hook.wait()` with the
 * request (body, a subset of headers), once. See the module comment.
 */
export function createWebhook<T = unknown>(ctx: WorkflowContext, opts: CreateWebhookOptions = {}): Promise<WaitWebhook<T>> {
  const { expiresIn } = opts;
  if (expiresIn !== undefined && !(Number.isFinite(expiresIn) && expiresIn > 0)) throw new TypeError(`createWebhook: expiresIn must be a positive number of seconds, got ${expiresIn}`);
  const state = replayStateOf(ctx);
  const id = opts.id !== undefined ? explicitId(opts.id) : operationId(ctx, "webhook");
  const def = createWebhookActivity;
  state.uses(def as never);
  return operation<WaitWebhook<T>>(ctx, {
    id,
    describe: "createWebhook",
    request: { kind: "activity", activity: def as never, args: [{ run: ctx.run, expiresInSeconds: expiresIn ?? null }] },
    decode: (ev) => {
      const d = decodeActivityRecord(state, ev, def.activityName);
      if (!("ok" in d) || !d.ok) return d;
      return { later: webhookHandle<T>(ctx, id, d.value as RecordedWebhook) };
    },
  });
}

/**
 * In the step's transaction: the instance's row lock (a POST to the hook
 * serializes on it), then the hook, bound to the wait at `waitId` (a
 * `hook.wait()`, or a race with a webhook branch). A request that came before
 * the wait is recorded now, as is an expiry the sweep already applied (or a
 * hook an earlier wait already used up); otherwise the wait listens, woken
 * in-process at the hook's expiry.
 */
export async function prepareWebhookBranch(
  tx: TxStorage,
  instanceId: string,
  hook: WebhookBranch,
  waitId: string,
  now: number,
): Promise<{ kind: "ready"; event: NewHistoryEvent } | { kind: "waiting"; wakeInSeconds: number | null }> {
  await tx.lockInstanceRow(instanceId);
  const row = await tx.bindWaitWebhook(instanceId, hook.run, hook.hookId, waitId);
  if (row?.status === "fired" && row.payload !== null) return { kind: "ready", event: { activityId: waitId, eventType: EV.WebhookReceived, data: { type: "json", json: row.payload } } };
  if (!row || row.status !== "open") {
    const data = { hook_id: hook.hookId, expired_at: row?.expiresAt?.toISOString() ?? null, ...(row && row.status !== "expired" ? { status: row.status } : {}) };
    return { kind: "ready", event: { activityId: waitId, eventType: EV.WebhookExpired, data: toPayload(data) } };
  }
  return { kind: "waiting", wakeInSeconds: row.expiresAt ? Math.max(0, (row.expiresAt.getTime() - now) / 1000) : null };
}

/** The hooks a history created: each createWebhook's completed record (its id, nonce and expiry). */
export function webhookCreations(history: readonly HistoryEvent[]): { hookId: string; recorded: RecordedWebhook }[] {
  const out: { hookId: string; recorded: RecordedWebhook }[] = [];
  for (const ev of history) {
    if (ev.eventType !== EV.ActivityCompleted || ev.data.type !== "json") continue;
    const v = fromPayload(ev.data) as { name?: unknown; result?: RecordedWebhook } | null;
    if (v?.name === createWebhookActivity.activityName && v.result) out.push({ hookId: ev.activityId, recorded: v.result });
  }
  return out;
}

/** The URLs an instance's workflow derives for those hooks (and what the database keys them by). */
export async function webhookLinksOf(links: WebhookLinks, instanceId: string, creations: { hookId: string; recorded: RecordedWebhook }[]) {
  return Promise.all(
    creations.map(async ({ hookId, recorded }) => {
      const token = await webhookToken(links.key, instanceId, hookId, recorded.nonce);
      return { hookId, tokenHash: await webhookTokenHash(token), url: webhookLink(links, token).url, expiresAt: recorded.expiresAt };
    }),
  );
}

/** Headers a delivery keeps: what a receiver reasonably branches on, never credentials, cookies or the proxies' own. */
const KEPT_HEADERS = /^(content-type|user-agent|x-(?!forwarded-|real-ip$|edda-).+)$/;
const MAX_HEADERS = 32;
const MAX_HEADER_VALUE = 1024;

/** The delivery `hook.wait()` returns, as stored (receivedAt is added by the database). */
export function deliveryOf(headers: Headers, body: unknown): string {
  const kept: Record<string, string> = {};
  let n = 0;
  headers.forEach((value, name) => {
    const k = name.toLowerCase();
    if (n < MAX_HEADERS && KEPT_HEADERS.test(k) && k !== "x-api-key" && !k.includes("token") && !k.includes("auth")) {
      kept[k] = value.slice(0, MAX_HEADER_VALUE);
      n++;
    }
  });
  // The history's own encoding (tag-like keys in the body escaped), so the wait gets the body exactly as sent.
  return toStoredJson({ body, contentType: headers.get("content-type"), headers: kept }, "webhook delivery");
}

/** A POST to a per-wait URL: fire the hook (storage, one transaction); a woken instance's step is dispatched after the commit. */
export async function deliverToWebhook(deps: Uses<"storage" | "dispatcher">, tokenHash: string, delivery: string, scope?: DispatchScope): Promise<WebhookFire> {
  const r = await deps.storage.fireWaitWebhook(tokenHash, delivery);
  if (r.kind === "fired" && r.woken) deps.dispatcher.dispatch({ instanceId: r.instanceId }, scope);
  return r;
}
