/**
 * CloudEvents ingestion (`POST /`, `POST /events`) in binary, structured and
 * batch modes through the `cloudevents` SDK, plus the message routes.
 *
 * Every event is validated before anything is written (a batch with one bad
 * event is rejected whole). Each accepted event, in one transaction: the
 * `(source, id)` dedupe record (a duplicate is accepted and ignored), the
 * message on the channel named by its type (`ce_*` metadata; `eddainstanceid`
 * makes it point-to-point), and the start of an event-handler workflow.
 */
import { HTTP, type CloudEvent } from "cloudevents";
import type { Context, Hono } from "hono";
import { z } from "zod";
import { NotFoundError, ValidationError } from "../core/errors.ts";
import { toJson, toPayload } from "../core/serialization.ts";
import type { Workflow } from "../core/definitions.ts";
import type { Engine } from "../engine/engine.ts";
import type { DispatchScope } from "../engine/dispatcher.ts";
import type { RouteHelpers } from "./app.ts";
import { documented } from "./openapi.ts";
import { jsonTooDeep, MAX_JSON_DEPTH, problem } from "./problem.ts";
import { accepted } from "./schemas.ts";

interface PreparedEvent {
  event: CloudEvent;
  data: unknown;
  metadata: Record<string, unknown>;
  target: string | null;
  handler: Workflow | undefined;
  input: unknown;
}

const TEXTUAL = /^(application\/([\w.+-]*json|cloudevents[\w.+-]*)|text\/)/i;

function badEvent(c: Context, message: string) {
  return problem(c, 400, message, "InvalidCloudEvent", { retryable: false });
}

function prepare(engine: Engine, event: CloudEvent): PreparedEvent {
  const metadata: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(event)) {
    if (k === "data" || k === "data_base64" || v === undefined) continue;
    metadata[`ce_${k}`] = v instanceof Date ? v.toISOString() : v;
  }
  let data: unknown = event.data ?? null;
  if (ArrayBuffer.isView(data)) data = new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
  const ext = (event as unknown as Record<string, unknown>).eddainstanceid;
  const target = typeof ext === "string" && ext.length > 0 ? ext : null;
  const handler = engine.eventHandler(event.type);
  const input = handler ? engine.validateInput(handler, data) : undefined;
  return { event, data, metadata, target, handler, input };
}

async function ingest(engine: Engine, p: PreparedEvent, scope: DispatchScope | undefined) {
  const { event } = p;
  const result = await engine.storage.transaction(async (tx) => {
    if (!(await tx.recordCloudEvent(event.source, event.id))) return { id: event.id, duplicate: true as const };
    const msg = await tx.publishMessage({ channel: event.type, data: toPayload(p.data), metadata: toJson(p.metadata), targetInstanceId: p.target });
    let started: { instanceId: string; created: boolean } | null = null;
    if (p.handler) started = await engine.createValidated(tx, p.handler, p.input, {});
    tx.afterCommit(() => {
      engine.notifyPublished(event.type, scope);
      if (started?.created && p.handler) engine.afterStart(p.handler, started.instanceId, p.input, scope);
    });
    return { id: event.id, duplicate: false as const, messageId: msg.messageId, ...(started ? { instanceId: started.instanceId } : {}) };
  });
  return result;
}

// Not z.record: it drops a `__proto__` key, and metadata round-trips unchanged.
const metadataObject = z
  .unknown()
  .refine((v) => typeof v === "object" && v !== null && !Array.isArray(v), "metadata must be a JSON object")
  .meta({ type: "object" } as never);
const instanceMessage = z.object({
  channel: z.string().min(1).max(255),
  data: z.unknown().optional(),
  metadata: metadataObject.optional(),
});
const channelMessage = z.object({ data: z.unknown().optional(), metadata: metadataObject.optional() });

export function cloudEventRoutes(app: Hono, h: RouteHelpers): void {
  const receive = async (c: Context) => {
    const raw = new Uint8Array(await c.req.arrayBuffer());
    const headers: Record<string, string> = {};
    c.req.raw.headers.forEach((v, k) => (headers[k] = v));
    const contentType = headers["content-type"] ?? "";
    let body: string | Uint8Array;
    if (TEXTUAL.test(contentType) || contentType === "") {
      try {
        body = new TextDecoder("utf-8", { fatal: true }).decode(raw);
      } catch {
        return badEvent(c, "request body is not valid UTF-8");
      }
      if (jsonTooDeep(body)) return badEvent(c, `request body nests deeper than ${MAX_JSON_DEPTH} levels`);
    } else {
      body = Buffer.from(raw);
    }
    let events: CloudEvent[];
    try {
      const parsed = HTTP.toEvent({ headers, body: body as string });
      events = (Array.isArray(parsed) ? parsed : [parsed]) as CloudEvent[];
      for (const e of events) {
        e.validate();
        // The SDK lets some spec versions through without these; they key the dedupe record and the channel.
        for (const k of ["id", "source", "type"] as const) {
          if (typeof e[k] !== "string" || e[k].length === 0) throw new TypeError(`attribute "${k}" must be a non-empty string`);
        }
      }
    } catch (err) {
      const detail = err instanceof Error ? err.message : String(err);
      return badEvent(c, `not a valid CloudEvent: ${detail.slice(0, 300)}`);
    }
    if (events.length === 0) return badEvent(c, "empty CloudEvents batch");
    if (events.length > 1000) return badEvent(c, "CloudEvents batch larger than 1000 events");
    const engine = await h.engine(c);
    let prepared: PreparedEvent[];
    try {
      prepared = events.map((e) => prepare(engine, e));
    } catch (err) {
      if (err instanceof ValidationError) return badEvent(c, err.message);
      throw err;
    }
    const results = [];
    for (const p of prepared) results.push(await ingest(engine, p, h.scope(c)));
    const batch = /cloudevents-batch/i.test(contentType);
    return c.json(batch ? { status: "accepted", events: results } : { status: "accepted", ...results[0] }, 202);
  };
  const ingestion = (operationId: string) =>
    documented({
      operationId,
      summary: "Ingest CloudEvents (binary, structured or batch mode)",
      description:
        "Each event is published on the channel named by its type (the `eddainstanceid` extension makes it point-to-point) and starts the workflow registered as its handler. A repeated `(source, id)` is accepted and ignored. A batch with one invalid event is rejected whole.",
      tags: ["events"],
      auth: "events",
      rawBody: {
        description: "a CloudEvent (binary mode: `ce-*` headers and any body; structured: application/cloudevents+json; batch: application/cloudevents-batch+json)",
        content: {
          "application/cloudevents+json": { schema: { type: "object", required: ["specversion", "id", "source", "type"] } },
          "application/cloudevents-batch+json": { schema: { type: "array", items: { type: "object", required: ["specversion", "id", "source", "type"] }, maxItems: 1000 } },
          "*/*": { schema: {} },
        },
      },
      responses: {
        202: {
          description: "accepted (one event: its result; a batch: `events`)",
          schema: z.object({ status: z.literal("accepted"), id: z.string().optional(), duplicate: z.boolean().optional(), messageId: z.string().optional(), instanceId: z.string().optional(), events: z.array(z.unknown()).optional() }),
        },
      },
    });
  app.post("/", ingestion("ingestEvent"), receive);
  app.post("/events", ingestion("ingestEventAt"), receive);

  app.post(
    "/instances/:id/messages",
    documented({
      operationId: "sendMessage",
      summary: "Send a point-to-point message to an instance, on a channel",
      tags: ["messages"],
      auth: "api",
      params: z.object({ id: z.string() }),
      body: instanceMessage,
      bodyName: "message",
      responses: { 202: { description: "persisted; the instance wakes if it waits on the channel", schema: accepted }, 404: { description: "unknown instance" } },
    }),
    async (c) => {
      const body = c.var.valid.body;
      const engine = await h.engine(c);
      const id = c.var.valid.params.id;
      if (!(await engine.storage.getInstance(id))) throw new NotFoundError(`instance "${id}" not found`);
      const messageId = await engine.publish(body.channel, body.data ?? null, { targetInstanceId: id, ...(body.metadata ? { metadata: body.metadata as Record<string, unknown> } : {}) }, h.scope(c));
      return c.json({ status: "accepted", messageId }, 202);
    },
  );

  app.post(
    "/channels/:channel/messages",
    documented({
      operationId: "publish",
      summary: "Publish a message on a channel",
      tags: ["messages"],
      auth: "api",
      params: z.object({ channel: z.string() }),
      body: channelMessage,
      bodyName: "message",
      responses: { 202: { description: "persisted; waiting subscribers wake after the commit", schema: accepted } },
    }),
    async (c) => {
      const channel = c.var.valid.params.channel;
      if (channel.length > 255) throw new ValidationError("channel name too long", [{ path: ["channel"], message: "at most 255 characters" }]);
      const body = c.var.valid.body;
      const engine = await h.engine(c);
      const messageId = await engine.publish(channel, body.data ?? null, body.metadata ? { metadata: body.metadata as Record<string, unknown> } : {}, h.scope(c));
      return c.json({ status: "accepted", messageId }, 202);
    },
  );
}
