/**
 * Response shapes of the HTTP API, as zod schemas for the OpenAPI document
 * (responses are built by the engine's typed views; these describe them).
 * Request schemas live beside the routes they validate.
 */
import * as z from "zod";
import { INSTANCE_STATUSES, WHY_KINDS } from "../core/model.ts";

export const instanceStatus = z.enum(INSTANCE_STATUSES);

export const instanceId = z.string().min(1).max(200).describe("instance id (A-Z a-z 0-9 _ . : -)");

/** The `:id` path parameter of the instance routes. */
export const instanceIdParam = z.object({ id: z.string().describe("instance id") });

export const storedError = z
  .object({ error_type: z.string(), error_message: z.string() })
  .loose()
  .describe("the recorded error (type and message; what else is revealed depends on the server's settings)");

export const historyEntry = z.object({ id: z.number(), activityId: z.string(), eventType: z.string(), data: z.unknown(), createdAt: z.iso.datetime() });

export const instanceFailure = z
  .object({
    task: z.enum(["step", "timers", "message_timeouts", "webhook_expiry", "channel_delivery", "retention"]),
    errorType: z.string(),
    message: z.string(),
    at: z.string(),
    attempts: z.number().int().describe("failures in a row"),
    previousStatus: instanceStatus.nullable().describe("for a quarantined instance: the status a resume puts it back in"),
  })
  .describe("the latest failure counted against the instance (poison isolation); null when none");

export const whyReason = z
  .object({
    kind: z.enum(WHY_KINDS),
    since: z.iso.datetime().nullable().describe("since when it has been in this state"),
    until: z.iso.datetime().optional().describe("when it moves by itself, if it will (a timer, a timeout, a rate window, a lease's end)"),
    blockedBy: z.array(z.string()).optional().describe("the instance ids (or engines, flow-control keys) it waits behind"),
    detail: z.string().describe("what it waits for, in one sentence"),
    next: z.string().describe("what will move it, in one sentence, with what an operator can do"),
    facts: z.record(z.string(), z.unknown()).describe("the kind's own fields (the typed client names them per kind)"),
  })
  .describe("why the instance is not moving and what will move it");

export const deploymentsView = z.object({
  current: z.string().describe("the deployment answering this request"),
  deployments: z.array(
    z.object({
      id: z.string().nullable().describe("EDDA_DEPLOYMENT, else the platform's version id, else `code:` and the workflows' code hash; null: instances from before deployments were recorded"),
      current: z.boolean(),
      startedAt: z.string().nullable().describe("when its oldest stored instance started; null for the current deployment before its first start"),
      instances: z.record(z.string(), z.number().int()).describe("its unfinished instances by status"),
      draining: z.boolean().describe("not current, and it still has unfinished instances"),
    }),
  ),
});

export const whyView = z.object({ instanceId: z.string(), status: z.enum(INSTANCE_STATUSES), reason: whyReason });

export const instanceView = z.object({
  instanceId: z.string(),
  workflowName: z.string(),
  status: instanceStatus,
  run: z.number().int().describe("recur generation (0 for the first run)"),
  input: z.unknown(),
  output: z.unknown().describe("the workflow's return value once completed, else null"),
  error: z.union([storedError, z.null()]),
  cancellation: z.unknown().describe("{ cancelled_by, cancelled_at, previous_status } once cancelled, else null"),
  currentActivityId: z.string().nullable(),
  runnable: z.boolean().describe("no step holds it and it is ready to run"),
  failure: instanceFailure.nullable(),
  startedAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
  parentInstanceId: z.string().nullable().describe("the instance that started this one as a child (invoke, startChild), else null"),
  deadlineAt: z.iso.datetime().nullable().describe("with the workflow's timeoutSeconds: when an unfinished run fails with WorkflowTimeoutError"),
  flowControl: z
    .object({
      concurrencyKey: z.string().nullable(),
      rateKey: z.string().nullable(),
      admittedAt: z.iso.datetime().nullable().describe("rateLimit: when it left the queue (the instant its window counts); null while queued"),
      singletonKey: z.string().nullable(),
      debounceKey: z.string().nullable(),
      notBefore: z.iso.datetime().nullable().describe("debounce: while pending, the earliest start (pushed back by each start of the key)"),
    })
    .nullable()
    .describe("the keys its flow-control options (concurrency, rateLimit, singleton, debounce) gave it, and when a queued instance may start; null without flow control"),
  rerunOf: z.string().nullable().describe("POST /instances/{id}/rerun: the instance this one reran, else null"),
  forkOf: z
    .object({ instanceId: z.string(), fromActivityId: z.string() })
    .nullable()
    .describe("POST /instances/{id}/fork: the instance whose history before fromActivityId this one continues, else null"),
  priority: z.number().int().describe("order within a flow-control key's queue: higher first, then oldest (default 0)"),
  deployment: z.string().nullable().describe("the deployment that started it (GET /deployments); null for instances from before deployments were recorded"),
  children: z
    .array(z.object({ instanceId: z.string(), workflowName: z.string(), status: instanceStatus, detached: z.boolean() }))
    .optional()
    .describe("GET /instances/{id} only: the children it started, oldest first (at most 100)"),
  webhooks: z
    .array(
      z.object({
        id: z.string().describe("the createWebhook operation (webhook:1, or its explicit id); its wait is {id}:wait"),
        run: z.number().int(),
        status: z.enum(["open", "fired", "expired", "cancelled"]),
        expiresAt: z.iso.datetime().nullable(),
        createdAt: z.iso.datetime(),
        firedAt: z.iso.datetime().nullable(),
      }),
    )
    .optional()
    .describe("GET /instances/{id} only: its per-wait webhook URLs (createWebhook), oldest first (at most 100); never the URL, whose token is not stored"),
  tags: z.record(z.string(), z.string()).optional().describe("GET /instances/{id} only: its tags (search attributes), by key"),
  why: whyReason.optional().describe("GET /instances/{id} only: why it is not moving (GET /instances/{id}/why's reason)"),
  history: z.array(historyEntry).optional().describe("with ?history=1: the first page (at most 500 entries)"),
  historyNextCursor: z.string().nullable().optional().describe("with ?history=1: pass as `after` to GET /instances/{id}/history for the rest"),
});

export const instancePage = z.object({
  instances: z.array(instanceView.partial({ input: true, output: true }).describe("input and output only with ?include=payloads")),
  nextCursor: z.string().nullable(),
});

export const started = z.object({ instanceId: z.string(), status: instanceStatus });

export const accepted = z.object({ status: z.literal("accepted"), messageId: z.string() });

export const TERMINAL_STATUSES = ["completed", "failed", "cancelled"] as const;

export const instanceResult = z.object({
  instanceId: z.string(),
  workflowName: z.string(),
  status: z.enum(TERMINAL_STATUSES),
  output: z.unknown(),
  error: z.union([storedError, z.null()]),
  cancellation: z.unknown(),
});

export const instancePending = z.object({ instanceId: z.string(), workflowName: z.string(), status: instanceStatus });
