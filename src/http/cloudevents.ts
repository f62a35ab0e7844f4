/**
 * CloudEvents ingestion (`POST /`, `POST /events`) in binary, structured and
 * batch modes, plus the message routes.
 *
 * Every event of the request is validated (cloudevent-modes.ts, the rules of
 * core/cloudevent.ts) before anything is written; then the whole request is
 * ONE transaction: per event the `(source, id)` dedupe record (a duplicate is
 * accepted and ignored), the message on the channel named by its type
 * (`ce_*` metadata; `eddainstanceid` makes it point-to-point) and the start of
 * an event-handler workflow. A bad event — or a failure anywhere — stores
 * nothing of the batch.
 */
import type { Context, Hono } from "hono";
import * as z from "zod";
import { INGESTION_LIMITS, type CloudEventRecord } from "../core/cloudevent.ts";
import { InvalidCloudEventError, NotFoundError, ValidationError } from "../core/errors.ts";
import type { Engine } from "../engine/engine.ts";
import type { DispatchScope } from "../engine/dispatcher.ts";
import type { IngestResult, PreparedEvent } from "../engine/ingestion.ts";
import type { RouteHelpers } from "./routes.ts";
import { callerOf } from "./auth.ts";
import { readCloudEvents } from "./cloudevent-modes.ts";
import { documented } from "./openapi.ts";
import { BadRequestError, problem } from "./problem.ts";
import { accepted } from "./schemas.ts";

export type { IngestResult };

function badEvent(c: Context, err: InvalidCloudEventError, status: 400 | 403 = 400) {
  return problem(c, status, err.message, status === 403 ? "Forbidden" : "InvalidCloudEvent", {
    retryable: false,
    ...(err.attribute !== undefined ? { attribute: err.attribute } : {}),
    ...(err.index !== undefined ? { index: err.index } : {}),
  });
}

function prepare(engine: Engine, event: CloudEventRecord): PreparedEvent {
  const { attributes } = event;
  const metadata: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(attributes)) metadata[`ce_${k}`] = v;
  const target = typeof attributes.eddainstanceid === "string" ? attributes.eddainstanceid : null;
  const handler = engine.eventHandler(attributes.type);
  let input: unknown;
  try {
    input = handler ? engine.validateInput(handler, event.data ?? null) : undefined;
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    throw new InvalidCloudEventError(`the data does not match the input of the "${handler!.workflowName}" event handler: ${err.message}`, { attribute: "data" });
  }
  return { event, id: attributes.id, source: attributes.source, type: attributes.type, metadata, target, handler, input };
}

/**
 * Events from another front door (a verified webhook delivery) into the same
 * ingestion: validated as CloudEvents, then stored in one transaction.
 * An InvalidCloudEventError (400) when an event is not acceptable.
 */
export async function ingestCloudEvents(engine: Engine, events: CloudEventRecord[], scope: DispatchScope | undefined): Promise<IngestResult[]> {
  return engine.ingestEvents(events.map((e) => prepare(engine, e)), scope);
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

/**
 * A CloudEvent in the JSON format (CloudEvents 1.0 §3): the context attributes
 * with their types, `data` or `data_base64`, and extension attributes as more
 * members. Documentation: the validation itself is core/cloudevent.ts.
 */
const CLOUDEVENT_SCHEMA = {
  type: "object",
  required: ["specversion", "id", "source", "type"],
  properties: {
    specversion: { type: "string", const: "1.0" },
    id: { type: "string", minLength: 1 },
    source: { type: "string", minLength: 1, format: "uri-reference" },
    type: { type: "string", minLength: 1 },
    subject: { type: "string", minLength: 1 },
    time: { type: "string", format: "date-time" },
    datacontenttype: { type: "string", minLength: 1 },
    dataschema: { type: "string", format: "uri" },
    data: { description: "any JSON value (with a JSON datacontenttype) or a string" },
    data_base64: { type: "string", contentEncoding: "base64" },
    eddainstanceid: { type: "string", description: "deliver to this instance only (needs the API token, or EDDA_EVENTS_TOKEN_TARGETING)" },
  },
  additionalProperties: { description: "an extension attribute: lower-case a-z0-9 name, a string, number or boolean value" },
} as const;

export function cloudEventRoutes(app: Hono, h: RouteHelpers): void {
  const receive = async (c: Context) => {
    let received;
    try {
      received = await readCloudEvents(c.req.raw, INGESTION_LIMITS);
    } catch (err) {
      if (err instanceof InvalidCloudEventError) return badEvent(c, err);
      if (err instanceof BadRequestError && err.status === 415) return problem(c, 415, err.message, "UnsupportedMediaType", { retryable: false });
      throw err;
    }
    const { events, batch } = received;
    const caller = callerOf(c);
    if (caller.kind === "events" && !caller.mayTarget) {
      const index = events.findIndex((e) => e.attributes.eddainstanceid !== undefined);
      if (index >= 0) {
        const where = batch ? `batch member ${index}: ` : "";
        const err = new InvalidCloudEventError(`${where}the events token may not target instances (eddainstanceid); use the API token, or allow it with EDDA_EVENTS_TOKEN_TARGETING=1`, { attribute: "eddainstanceid", ...(batch ? { index } : {}) });
        return badEvent(c, err, 403);
      }
    }
    if (events.length === 0) return c.json({ status: "accepted", events: [] }, 202);
    const engine = await h.engine(c);
    const prepared: PreparedEvent[] = [];
    for (const [i, e] of events.entries()) {
      try {
        prepared.push(prepare(engine, e));
      } catch (err) {
        if (!(err instanceof InvalidCloudEventError)) throw err;
        return badEvent(c, batch ? new InvalidCloudEventError(`batch member ${i}: ${err.message}`, { attribute: "data", index: i }) : err);
      }
    }
    const results = await engine.ingestEvents(prepared, h.scope(c));
    return c.json(batch ? { status: "accepted", events: results } : { status: "accepted", ...results[0] }, 202);
  };
  const ingestion = (operationId: string) =>
    documented({
      operationId,
      summary: "Ingest CloudEvents (binary, structured or batch mode)",
      description:
        "Each event is published on the channel named by its type (the `eddainstanceid` extension makes it point-to-point) and starts the workflow registered as its handler. A repeated `(source, id)` is accepted and ignored. Events are validated against the CloudEvents 1.0 spec; an invalid one is a 400 naming the `attribute` (and, in a batch, the member's `index`). A batch (at most 100 events, `[]` accepted) is stored in one transaction, all or nothing.",
      tags: ["events"],
      auth: "events",
      rawBody: {
        description: "a CloudEvent (binary mode: `ce-*` headers and any body; structured: application/cloudevents+json; batch: application/cloudevents-batch+json)",
        content: {
          "application/cloudevents+json": { schema: CLOUDEVENT_SCHEMA },
          "application/cloudevents-batch+json": { schema: { type: "array", items: CLOUDEVENT_SCHEMA, maxItems: 100 } },
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
      if (!(await engine.instanceExists(id))) throw new NotFoundError(`instance "${id}" not found`);
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
