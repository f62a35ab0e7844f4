/**
 * `POST /webhooks/:name`: deliveries from senders that sign their requests
 * (Stripe, GitHub, Standard Webhooks, a plain HMAC) instead of sending a
 * bearer token — so the route sits outside the API's bearer auth and is
 * authenticated by the signature alone.
 *
 * Order of work: the unknown name is a 404; a webhook without a configured
 * secret a 503 naming the variable (the sender retries once it is set); then
 * the signature over the raw body (401 on any failure, and nothing parsed
 * before it holds); then `toEvent` and the CloudEvents rules (400); then the
 * event goes through the CloudEvents ingestion (cloudevents.ts) in one
 * transaction, and only after it committed is the 202 sent — a retry after a
 * lost response is a duplicate `(source, id)`, applied once.
 */
import type { Context, Hono } from "hono";
import * as z from "zod";
import { INGESTION_LIMITS, SPEC_VERSION, outgoingEvent, type CloudEventRecord } from "../core/cloudevent.ts";
import { ConfigurationError, InvalidCloudEventError } from "../core/errors.ts";
import { MalformedWebhookError, webhookSecretVariable, type Webhook, type WebhookEvent, type WebhookRequest } from "../core/webhooks.ts";
import type { RouteHelpers } from "./routes.ts";
import { ingestCloudEvents } from "./cloudevents.ts";
import { documented } from "./openapi.ts";
import { jsonText, utf8Text, type BodyRead } from "./body.ts";
import { problem } from "./problem.ts";

export interface WebhookRouteOptions {
  webhooks: () => readonly Webhook[];
  /** The secrets configured for a webhook (EDDA_WEBHOOK_<NAME>_SECRET), or none. */
  secrets: (name: string) => readonly string[] | undefined;
  /** Unix seconds (tests pin the clock). */
  now?: () => number;
}

/** What `toEvent` reads: a body it cannot use is the sender's mistake (400), named by the error. */
function valueOf<T>(read: BodyRead<T>): T {
  if (!read.ok) throw new MalformedWebhookError(read.reason);
  return read.value;
}

function requestOf(name: string, headers: Headers, body: Uint8Array): WebhookRequest {
  let text: string | undefined;
  const readText = () => (text ??= valueOf(utf8Text(body)));
  return { name, headers, body, text: readText, json: () => valueOf(jsonText(readText())) };
}

/** The event as a CloudEvent, judged by the rules and column sizes every ingested event meets. */
function asCloudEvent(e: WebhookEvent): CloudEventRecord {
  if (typeof e !== "object" || e === null) throw new InvalidCloudEventError("toEvent must return { type, source, id, data }");
  const attrs = { specversion: SPEC_VERSION, id: e.id, source: e.source, type: e.type, subject: e.subject, time: e.time, datacontenttype: "application/json" };
  return outgoingEvent(attrs, e.data ?? null, INGESTION_LIMITS);
}

const bad = (c: Context, message: string, extra: Record<string, unknown> = {}) => problem(c, 400, message, "InvalidWebhook", { retryable: false, ...extra });

export function webhookRoutes(app: Hono, h: Pick<RouteHelpers, "engine" | "scope">, opts: WebhookRouteOptions): void {
  const byName = () => new Map(opts.webhooks().map((w) => [w.name, w]));
  app.post(
    "/webhooks/:name",
    documented({
      operationId: "receiveWebhook",
      summary: "Receive a signed webhook delivery (Stripe, GitHub, Standard Webhooks, HMAC)",
      description:
        "Authenticated by the sender's signature over the raw body with the secrets of `EDDA_WEBHOOK_<NAME>_SECRET` (comma-separated, for rotation), not by a bearer token. The delivery becomes an event (the webhook's `toEvent`) ingested like a CloudEvent: handler workflows start, matching `waitEvent`s wake, a repeated `(source, id)` is accepted and ignored. 202 only once the event is stored.",
      tags: ["events"],
      auth: "none",
      params: z.object({ name: z.string().describe("a declared webhook") }),
      rawBody: { description: "the sender's delivery, exactly as signed", content: { "*/*": { schema: {} } } },
      responses: {
        202: { description: "stored (or a duplicate, ignored)", schema: z.object({ status: z.literal("accepted"), id: z.string(), duplicate: z.boolean(), messageId: z.string().optional(), instanceId: z.string().optional() }) },
        400: { description: "verified, but not an acceptable event" },
        401: { description: "missing, stale or wrong signature; nothing stored" },
        404: { description: "no webhook of that name" },
        503: { description: "the webhook's secret is not configured" },
      },
    }),
    async (c) => {
      const name = c.req.param("name");
      const hook = byName().get(name);
      if (!hook) return problem(c, 404, `no webhook "${name}"`, "NotFound");
      const variable = webhookSecretVariable(name);
      const secrets = opts.secrets(name) ?? [];
      if (secrets.length === 0) throw new ConfigurationError(`webhook "${name}" has no secret: set ${variable}`, variable);
      const body = new Uint8Array(await c.req.arrayBuffer());
      const headers = c.req.raw.headers;
      const now = opts.now?.() ?? Math.floor(Date.now() / 1000);
      const check = await hook.verify.verify({ headers, body }, secrets, now, variable);
      if (!check.ok) return problem(c, 401, `webhook "${name}": ${check.reason}`, "InvalidWebhookSignature", { retryable: false }, { "www-authenticate": `Signature realm="webhook ${name}"` });
      let record: CloudEventRecord;
      try {
        record = asCloudEvent(await hook.toEvent(requestOf(name, headers, body)));
      } catch (err) {
        if (err instanceof MalformedWebhookError) return bad(c, `webhook "${name}": ${err.message}`);
        if (err instanceof InvalidCloudEventError) return bad(c, `webhook "${name}": the event is not acceptable: ${err.message}`, err.attribute ? { attribute: err.attribute } : {});
        throw err;
      }
      const engine = await h.engine(c);
      let result;
      try {
        [result] = await ingestCloudEvents(engine, [record], h.scope(c));
      } catch (err) {
        if (err instanceof InvalidCloudEventError) return bad(c, `webhook "${name}": ${err.message}`, err.attribute ? { attribute: err.attribute } : {});
        throw err;
      }
      return c.json({ status: "accepted", ...result! }, 202);
    },
  );
}
