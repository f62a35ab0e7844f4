/**
 * `GET /instances/:id/result?wait=N`: the long-poll a client waits on for a
 * workflow's outcome. 200 with output/error/cancellation once the instance is
 * terminal; 202 with its status if it is still going when `wait` seconds have
 * passed. The wait is bounded (MAX_RESULT_WAIT_SECONDS, under the idle
 * timeouts of common proxies and load balancers) and ends early when the
 * client disconnects; clients loop for longer waits.
 */
import type { Hono } from "hono";
import * as z from "zod";
import { isTerminal } from "../engine/results.ts";
import type { RouteHelpers } from "./routes.ts";
import { documented } from "./openapi.ts";
import { instanceNotFound } from "./problem.ts";
import { instancePending, instanceResult } from "./schemas.ts";

export const MAX_RESULT_WAIT_SECONDS = 30;

export function resultRoutes(api: Hono, h: RouteHelpers): void {
  api.get(
    "/instances/:id/result",
    documented({
      operationId: "instanceResult",
      summary: "Wait (bounded) for an instance's outcome",
      description: `Answers at once when the instance has finished; otherwise waits up to \`wait\` seconds (at most ${MAX_RESULT_WAIT_SECONDS}) for it to finish. On Postgres the wait is a LISTEN on the instance's completion, not a polling loop.`,
      tags: ["instances"],
      auth: "api",
      params: z.object({ id: z.string() }),
      query: z.object({ wait: z.coerce.number().min(0).max(MAX_RESULT_WAIT_SECONDS).optional().describe("seconds to wait for the outcome (default 0)") }),
      responses: {
        200: { description: "finished: output (completed), error (failed) or cancellation (cancelled)", schema: instanceResult },
        202: { description: "still running at the deadline: ask again", schema: instancePending },
        404: { description: "unknown instance" },
      },
    }),
    async (c) => {
      const { params, query } = c.var.valid;
      const e = await h.engine(c);
      const view = await e.awaitInstance(params.id, query.wait ?? 0, c.req.raw.signal);
      if (!view) return instanceNotFound(c, params.id);
      const head = { instanceId: view.instanceId, workflowName: view.workflowName, status: view.status };
      if (!isTerminal(view.status)) return c.json(head, 202, { "retry-after": "0" });
      return c.json({ ...head, output: view.output, error: view.error, cancellation: view.cancellation }, 200);
    },
  );
}
