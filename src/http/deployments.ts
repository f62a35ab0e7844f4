/**
 * `GET /deployments`: the deployments that started instances, the current
 * one first when it has none yet, each with its unfinished instances by
 * status (engine/deployment.ts). Read-only; one grouped statement.
 */
import type { Hono } from "hono";
import type { RouteHelpers } from "./routes.ts";
import { documented } from "./openapi.ts";
import { deploymentsView } from "./schemas.ts";

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
}
