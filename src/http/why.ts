/**
 * `GET /instances/:id/why`: why an instance is not moving and what will move it (engine/why.ts
 * decides; this route only answers). Read-only and bounded, like the instance view that carries
 * the same reason as `why`.
 */
import type { Hono } from "hono";
import type { RouteHelpers } from "./routes.ts";
import { documented } from "./openapi.ts";
import { instanceNotFound } from "./problem.ts";
import { instanceIdParam, whyView } from "./schemas.ts";

export function whyRoutes(api: Hono, h: RouteHelpers): void {
  api.get(
    "/instances/:id/why",
    documented({
      operationId: "instanceWhy",
      summary: "Why an instance is not moving, and what will move it",
      description:
        "`reason.kind` names what it waits for: `running` (a step holds its lease), `timer`, `message`, `event`, `child`, `webhook` (its wait), `concurrency`, `rate_limit`, `debounce` (queued by flow control), `retry_backoff` (an activity's next attempt), `leased` (the lease expired with its engine; the sweep retakes it), `dispatch_pending` (runnable, its follow-up not delivered; the sweep picks it up), `pinned` (its workflow is not registered in this app), `parked` (replay diverged), `quarantined`, or `none` (finished). `until`: when it moves by itself, if it will; `blockedBy`: the instances (or engines, keys) it waits behind; `detail` and `next` are one sentence each; `facts` holds the kind's fields.",
      tags: ["instances"],
      auth: "api",
      params: instanceIdParam,
      responses: { 200: { description: "the reason", schema: whyView }, 404: { description: "unknown instance" } },
    }),
    async (c) => {
      const { params } = c.var.valid;
      const e = await h.engine(c);
      const why = await e.why(params.id);
      if (!why) return instanceNotFound(c, params.id);
      return c.json(why);
    },
  );
}
