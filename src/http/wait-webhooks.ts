/**
 * `POST /hooks/:token`: the per-wait URLs `createWebhook` hands out
 * (engine/webhook-waits.ts). The URL is the credential — an unguessable token
 * whose SHA-256 is all the database holds — so the route sits outside the
 * API's bearer auth, like the signed webhooks.
 *
 * A token of the wrong shape and an unknown one are the same 404 (nothing
 * tells a guesser which tokens exist); a hook that already fired, expired,
 * whose instance ended, or whose race another branch won is 410 Gone, so a sender's retry of a delivery
 * that was applied changes nothing. The body is checked before anything is
 * stored: JSON when the content type says so (parsed, depth-limited), else
 * UTF-8 text; 202 only after the transaction that fired the hook committed.
 */
import type { Hono } from "hono";
import * as z from "zod";
import { WEBHOOK_TOKEN, webhookTokenHash } from "../core/webhook-waits.ts";
import type { RouteHelpers } from "./routes.ts";
import { documented } from "./openapi.ts";
import { jsonTooDeep, MAX_JSON_DEPTH, problem } from "./problem.ts";

const utf8 = new TextDecoder("utf-8", { fatal: true });
const JSON_TYPE = /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i;

/** The body as `hook.wait()` gets it, or why it is refused. */
function bodyOf(contentType: string | null, raw: Uint8Array): { ok: true; body: unknown } | { ok: false; reason: string } {
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    return { ok: false, reason: "the body is not valid UTF-8" };
  }
  if (!contentType || !JSON_TYPE.test(contentType)) return { ok: true, body: text };
  if (jsonTooDeep(text)) return { ok: false, reason: `the body nests deeper than ${MAX_JSON_DEPTH} levels` };
  try {
    return { ok: true, body: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, reason: "the body is not valid JSON" };
  }
}

export function waitWebhookRoutes(app: Hono, h: Pick<RouteHelpers, "engine" | "scope">): void {
  app.post(
    "/hooks/:token",
    documented({
      operationId: "callWaitWebhook",
      summary: "Resume the one wait a per-wait URL (createWebhook) belongs to",
      description:
        "The URL is the credential (no bearer token): the first POST resumes `hook.wait()` (or the race with its `onWebhook` branch) in its workflow with the body (JSON when the content type is JSON, else text) and a subset of the headers. A hook that fired, expired, whose instance ended or whose race another branch won answers 410; an unknown token 404.",
      tags: ["events"],
      auth: "none",
      params: z.object({ token: z.string().describe("the token in the URL createWebhook returned") }),
      rawBody: { description: "anything: JSON (application/json, *+json) or text", content: { "*/*": { schema: {} } } },
      responses: {
        202: { description: "accepted: the wait resumes (or takes it when it begins)", schema: z.object({ status: z.literal("accepted") }) },
        400: { description: "the body is not valid UTF-8, or not valid JSON under a JSON content type; nothing stored" },
        404: { description: "no such hook" },
        410: {
          description: "the hook already fired, expired, its instance ended, or another branch of the race it was in won (`lost`)",
          schema: z.object({ reason: z.enum(["fired", "expired", "cancelled", "finished", "lost"]) }).passthrough(),
        },
      },
    }),
    async (c) => {
      const token = c.req.param("token");
      if (!WEBHOOK_TOKEN.test(token)) return problem(c, 404, "no such webhook", "NotFound");
      const headers = c.req.raw.headers;
      const parsed = bodyOf(headers.get("content-type"), new Uint8Array(await c.req.arrayBuffer()));
      if (!parsed.ok) return problem(c, 400, parsed.reason, "InvalidWebhookBody", { retryable: false });
      const engine = await h.engine(c);
      const r = await engine.deliverToWebhook(await webhookTokenHash(token), headers, parsed.body, h.scope(c));
      if (r.kind === "unknown") return problem(c, 404, "no such webhook", "NotFound");
      if (r.kind === "gone") return problem(c, 410, `this webhook is gone (${r.reason})`, "WebhookGone", { reason: r.reason, retryable: false });
      return c.json({ status: "accepted" as const }, 202);
    },
  );
}
