/**
 * The outbox's dead letters (engine/dead-letters.ts) in the API: a bounded,
 * paged list (at most 100 a page, newest first, payload-free unless
 * `?include=payloads`) with each row's stored error, and the two operator
 * actions, redeliver (re-arm and relay now) and discard.
 */
import type { Hono } from "hono";
import * as z from "zod";
import { discardDeadLetter, listDeadLetters, redeliverDeadLetter } from "../engine/dead-letters.ts";
import { DEAD_LETTER_STATUSES } from "../engine/records.ts";
import type { RouteHelpers } from "./routes.ts";
import { documented } from "./openapi.ts";

/** A page is bounded work, as for the instance list. */
const MAX_PAGE = 100;

export const deadLetterStatus = z.enum(DEAD_LETTER_STATUSES);

export const deadLetterView = z.object({
  eventId: z.string(),
  type: z.string(),
  source: z.string(),
  status: deadLetterStatus,
  attempts: z.number().int().describe("failed delivery attempts since it was written or last re-armed"),
  lastError: z.string().nullable().describe("why it was set aside: the broker's answer, or why it is not a valid CloudEvent"),
  createdAt: z.iso.datetime(),
  rearmedAt: z.iso.datetime().nullable().describe("when an operator last re-armed it"),
  contentType: z.string(),
  data: z.unknown().optional().describe("with ?include=payloads: the event data (JSON)"),
  dataBase64: z.string().optional().describe("with ?include=payloads: binary event data"),
  extensions: z.unknown().optional().describe("with ?include=payloads: extra CloudEvents attributes, or null"),
});

const listQuery = z.object({
  status: z
    .string()
    .transform((s) => s.split(",").filter(Boolean))
    .pipe(z.array(deadLetterStatus))
    .optional()
    .describe("invalid, expired or both (default both)"),
  type: z.string().min(1).max(255).optional().describe("only events of this type"),
  limit: z.coerce.number().int().min(1).max(MAX_PAGE).optional().describe(`page size, at most ${MAX_PAGE} (default 50)`),
  cursor: z.string().min(1).max(1000).optional().describe("nextCursor of the previous page"),
  include: z.enum(["payloads"]).optional().describe("payloads: also return each event's data and extensions (left out by default)"),
});

const eventParam = z.object({ eventId: z.string().min(1).max(255).describe("the outbox event's CloudEvents id") });

export function outboxRoutes(api: Hono, h: RouteHelpers): void {
  api.get(
    "/outbox/dead-letters",
    documented({
      operationId: "listDeadLetters",
      summary: "List the outbox's dead letters (invalid or expired events), newest first",
      description: `An event is \`invalid\` when the broker refused it (a 4xx other than 408/429) or it is not a valid CloudEvent, \`expired\` when it ran out of attempts or age. At most ${MAX_PAGE} per page; pass \`nextCursor\` as \`cursor\` for the next.`,
      tags: ["outbox"],
      auth: "api",
      query: listQuery,
      responses: { 200: { description: "a page of dead letters", schema: z.object({ events: z.array(deadLetterView), nextCursor: z.string().nullable() }) } },
    }),
    async (c) => {
      const q = c.var.valid.query;
      const e = await h.engine(c);
      return c.json(
        await listDeadLetters(
          e,
          { ...(q.status ? { status: q.status } : {}), ...(q.type ? { eventType: q.type } : {}), limit: q.limit ?? 50, ...(q.cursor ? { cursor: q.cursor } : {}) },
          { payloads: q.include === "payloads" },
        ),
      );
    },
  );

  api.post(
    "/outbox/dead-letters/:eventId/redeliver",
    documented({
      operationId: "redeliverDeadLetter",
      summary: "Re-arm a dead letter: back to pending with its attempts reset, relayed now",
      description: "The event goes through the relay again like a freshly committed one (same CloudEvents id, so a broker that dedupes sees one event). If the broker keeps failing it ends a dead letter again after the usual retries.",
      tags: ["outbox"],
      auth: "api",
      params: eventParam,
      responses: {
        200: { description: "re-armed", schema: z.object({ status: z.literal("pending") }) },
        404: { description: "no such outbox event" },
        409: { description: "the event is not a dead letter (pending, being sent, or published)" },
      },
    }),
    async (c) => c.json(await redeliverDeadLetter(await h.engine(c), c.var.valid.params.eventId, h.scope(c))),
  );

  api.post(
    "/outbox/dead-letters/:eventId/discard",
    documented({
      operationId: "discardDeadLetter",
      summary: "Discard a dead letter (the row is deleted)",
      tags: ["outbox"],
      auth: "api",
      params: eventParam,
      responses: {
        200: { description: "discarded", schema: z.object({ discarded: z.literal(true) }) },
        404: { description: "no such outbox event" },
        409: { description: "the event is not a dead letter" },
      },
    }),
    async (c) => c.json(await discardDeadLetter(await h.engine(c), c.var.valid.params.eventId)),
  );
}
