/**
 * Per-wait webhook URLs in workflow code: the link's token, the wait on it
 * and how their records settle them. (`createWebhook` itself is a built-in
 * activity, engine/webhook-waits.ts: it writes the hook's row.)
 *
 * The token is never stored. It is derived — HMAC-SHA256 over the instance,
 * the hook's operation id and a random nonce, keyed by the app's secret
 * (EDDA_SECRET) — so a replay rebuilds the same URL from the history, which
 * holds only the nonce; the database holds only the token's SHA-256, so
 * reading it (a backup, a leaked replica) gives no way to call a hook. The
 * nonce makes each creation's token new: a recurred run's `webhook:1`, a
 * retried creation, a fork. Derivation is Web Crypto, so it settles `later`
 * (replay.ts) and stays a pure function of (key, history).
 */
import type { WorkflowContext } from "./context.ts";
import { EddaError } from "./errors.ts";
import { EV, type HistoryEvent } from "./model.ts";
import { operation, replayStateOf } from "./operation.ts";
import type { Decoded, Settled, WebhookLinks } from "./replay.ts";
import { deserializeError, fromPayload, type SerializedError } from "./serialization.ts";

/** The hook's wait expired before a POST came. Catchable in workflow code. */
export class WebhookExpiredError extends EddaError {
  override name = "WebhookExpiredError";
}

/** What a POST to a per-wait URL gives `hook.wait()`: its body and a subset of its headers. */
export interface WebhookDelivery<T = unknown> {
  /** The JSON body parsed when the content type is JSON, else the body as text. */
  body: T;
  /** The request's content type, or null. */
  contentType: string | null;
  /** `content-type`, `user-agent` and the sender's own `x-…` headers (lower-case), values capped; never cookies or credentials. */
  headers: Record<string, string>;
  /** When the POST was accepted (the database's clock). */
  receivedAt: string;
}

/** A per-wait URL: give `url` to whoever decides, then `await hook.wait()`. */
export interface WaitWebhook<T = unknown> {
  /** The operation id of the creation (`webhook:1`, or the explicit id). */
  readonly id: string;
  /** The absolute URL with EDDA_PUBLIC_URL configured, else the path (`/hooks/…`). */
  readonly url: string;
  readonly path: string;
  /** When POSTs stop being accepted (the wait then throws WebhookExpiredError); null: never by itself. */
  readonly expiresAt: Date | null;
  /** The first POST to the URL, once; throws WebhookExpiredError after `expiresAt`. Calling it again returns the same wait. */
  wait(): Promise<WebhookDelivery<T>>;
}

/** The creation's recorded result (the built-in activity's): no token, only what rebuilds it. */
export interface RecordedWebhook {
  nonce: string;
  expiresAt: string | null;
}

export const WEBHOOK_PATH_PREFIX = "/hooks/";
/** A token: 32 bytes of HMAC, base64url without padding. */
export const WEBHOOK_TOKEN = /^[A-Za-z0-9_-]{43}$/;

const encoder = new TextEncoder();

function base64url(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The token of one hook: HMAC-SHA256(key, instance, hook id, nonce). */
export async function webhookToken(key: string, instanceId: string, hookId: string, nonce: string): Promise<string> {
  const k = await crypto.subtle.importKey("raw", encoder.encode(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = await crypto.subtle.sign("HMAC", k, encoder.encode(`edda-webhook-v1\n${instanceId}\n${hookId}\n${nonce}`));
  return base64url(new Uint8Array(mac));
}

/** What the database keys a hook by: the token's SHA-256, hex. */
export async function webhookTokenHash(token: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", encoder.encode(token));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The wait's operation id: the hook's id and `:wait` (`:` never occurs in an escaped explicit id, and `{prefix}:{n}` ends in digits). */
export const webhookWaitId = (hookId: string): string => `${hookId}:wait`;

/** A token's path and URL: the URL starts with the app's public URL when one is configured, else it is the path. */
export function webhookLink(links: WebhookLinks, token: string): { path: string; url: string } {
  const path = `${WEBHOOK_PATH_PREFIX}${token}`;
  return { path, url: links.baseUrl ? new URL(path, links.baseUrl).toString() : path };
}

/** Only verify-replay builds states without links; its URLs are never handed out. */
const REPLAY_ONLY: WebhookLinks = { key: "edda-replay-only" };

/** The handle, once the creation's record is decoded (the token derived: `later`). */
export function webhookHandle<T>(ctx: WorkflowContext, hookId: string, recorded: RecordedWebhook): Promise<Settled> {
  const links = replayStateOf(ctx).webhookLinks ?? REPLAY_ONLY;
  return webhookToken(links.key, ctx.instanceId, hookId, recorded.nonce).then((token) => {
    let waiting: Promise<WebhookDelivery<T>> | null = null;
    const hook: WaitWebhook<T> = {
      id: hookId,
      ...webhookLink(links, token),
      expiresAt: recorded.expiresAt ? new Date(recorded.expiresAt) : null,
      wait: () => (waiting ??= waitOn<T>(ctx, hookId)),
    };
    return { ok: true, value: hook };
  });
}

function waitOn<T>(ctx: WorkflowContext, hookId: string): Promise<WebhookDelivery<T>> {
  const id = webhookWaitId(hookId);
  return operation<WebhookDelivery<T>>(ctx, {
    id,
    describe: `a wait on the webhook ${hookId}`,
    request: { kind: "wait", wait: { kind: "webhook", activityId: id, hookId, run: ctx.run } },
    decode: (ev) => decodeWebhookRecord(ctx, ev, hookId),
  });
}

export function decodeWebhookRecord(ctx: WorkflowContext, ev: HistoryEvent, hookId: string): Decoded {
  if (ev.eventType === EV.WebhookReceived) return { ok: true, value: fromPayload(ev.data) as WebhookDelivery };
  if (ev.eventType === EV.WebhookExpired) {
    // `status`: the wait began on a hook that was no longer open without expiring (cancelled, or used up by an earlier wait or race).
    const { status } = (fromPayload(ev.data) ?? {}) as { status?: string };
    return { ok: false, error: new WebhookExpiredError(status ? `the webhook ${hookId} is no longer open (${status}): an earlier wait or race already ended on it` : `the webhook ${hookId} expired before it was called`) };
  }
  if (ev.eventType === EV.ActivityFailed) {
    const { error } = fromPayload(ev.data) as { error: SerializedError };
    return { ok: false, error: deserializeError(error, replayStateOf(ctx).errorClasses) };
  }
  return { mismatch: `holds a ${ev.eventType} record` };
}
