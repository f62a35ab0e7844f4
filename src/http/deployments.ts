/**
 * `GET /deployments`: the deployments that started instances, the current
 * one first when it has none yet, each with its unfinished instances by
 * status (engine/deployment.ts). Read-only; one grouped statement.
 */
import type { Hono } from "hono";
import type { RouteHelpers } from "./routes.ts";
import { documented } from "./openapi.ts";
import * as z from "zod";
import { deploymentsView, instanceIdParam } from "./schemas.ts";

const upgraded = z.object({
  instanceId: z.string(),
  from: z.string().nullable().describe("the deployment it was on (null: from before deployments were recorded)"),
  deployment: z.string().describe("the deployment it is on now: the one answering"),
  moved: z.boolean().describe("false: it was on this deployment already (nothing changed)"),
  next: z.string().describe("where its replay on this deployment's code stopped: what it does next"),
  runnable: z.boolean().describe("its next step runs now (dispatched here); false: it waits (a timer, a message …) and this deployment runs it when the wait ends"),
});

export function deploymentRoutes(api: Hono, h: RouteHelpers): void {
  api.get(
    "/deployments",
    documented({
      operationId: "listDeployments",
      summary: "Deployments and their unfinished instances",
      description:
        "Each deployment that started instances still stored (`EDDA_DEPLOYMENT`, else the platform's version id, else `code:` and a hash of the workflows' code), most recent first (at most 100), with its unfinished instances by status. `draining`: an older deployment that still has work.",
      tags: ["instances"],
      auth: "api",
      responses: { 200: { description: "the deployments", schema: deploymentsView } },
    }),
    async (c) => {
      const e = await h.engine(c);
      return c.json(await e.deployments());
    },
  );

  api.post(
    "/instances/:id/upgrade",
    documented({
      operationId: "upgradeInstance",
      summary: "Move an unfinished instance to this deployment, when its history replays with this deployment's code",
      description:
        "The verify-replay check runs first, on the code of the deployment answering: it passes, and the instance moves here (its `deployment` becomes this one, a refusal recorded by an earlier check is cleared) and this deployment's engines run it from its next step; it fails, and nothing changes (409 with the mismatch). For a `pinned` workflow too: the operator decides. Several at once: `POST /instances/bulk` with `action: upgrade` and a filter (e.g. `{deployment}`).",
      tags: ["instances"],
      auth: "api",
      params: instanceIdParam,
      responses: {
        200: { description: "it is on this deployment now", schema: upgraded },
        404: { description: "unknown instance" },
        409: { description: "its history does not replay with this deployment's code (the problem's detail names the mismatch), it has finished, its workflow is not registered here, or a step ran while it was checked" },
      },
    }),
    async (c) => {
      const e = await h.engine(c);
      return c.json(await e.upgrade(c.var.valid.params.id, h.scope(c)));
    },
  );
}
