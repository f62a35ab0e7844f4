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
import { isJsonContentType, jsonText, utf8Text, type BodyRead } from "./body.ts";
import { problem } from "./problem.ts";

/** The body as `hook.wait()` gets it, or why it is refused. */
function bodyOf(contentType: string | null, raw: Uint8Array): BodyRead<unknown> {
  const text = utf8Text(raw);
  if (!text.ok || !contentType || !isJsonContentType(contentType)) return text;
  return jsonText(text.value);
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
      const r = await engine.deliverToWebhook(await webhookTokenHash(token), headers, parsed.value, h.scope(c));
      if (r.kind === "unknown") return problem(c, 404, "no such webhook", "NotFound");
      if (r.kind === "gone") return problem(c, 410, `this webhook is gone (${r.reason})`, "WebhookGone", { reason: r.reason, retryable: false });
      return c.json({ status: "accepted" as const }, 202);
    },
  );
}
