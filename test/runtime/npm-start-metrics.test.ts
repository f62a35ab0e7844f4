// `npm start` serves GET /metrics with no setting (issue 40: the README's metrics curl needed a
// restart with EDDA_METRICS=prometheus), on loopback like the rest of the dev server with no
// token; EDDA_METRICS=off turns it off. A real `npm start` process against the test Postgres.
import { afterEach, describe, expect, it } from "vitest";
import { freshPostgres } from "../support/engine.ts";
import { freePort } from "../support/postgres-cluster.ts";
import { spawnServer, type Server } from "./processes.ts";

let server: Server | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

async function npmStart(name: string, env: Record<string, string> = {}): Promise<Server> {
  const { url } = await freshPostgres(name);
  const port = await freePort();
  return spawnServer({ command: "npm", args: ["start", "--silent"], port, env: { PORT: String(port), DATABASE_URL: url, EDDA_SWEEP_INTERVAL_MS: "500", ...env } });
}

describe("npm start's /metrics", { timeout: 90_000 }, () => {
  it("answers the Prometheus text on loopback with no token and no setting, counting a step it ran", async () => {
    server = await npmStart("npm_start_metrics");
    const started = await fetch(`${server.url}/workflows/reminder/instances`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: { seconds: 0 } }) });
    expect(started.status, server.output()).toBe(201);
    const { instanceId } = (await started.json()) as { instanceId: string };
    expect((await fetch(`${server.url}/instances/${instanceId}/result?wait=20`)).status).toBe(200);
    const r = await fetch(`${server.url}/metrics`);
    expect(r.status, server.output()).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await r.text()).toMatch(/^edda_steps_total\{.*\} [1-9]/m);
  });

  it("EDDA_METRICS=off leaves it out", async () => {
    server = await npmStart("npm_start_metrics_off", { EDDA_METRICS: "off" });
    expect((await fetch(`${server.url}/metrics`)).status).toBe(404);
  });
});
