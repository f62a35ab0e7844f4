/**
 * Real Node servers (`serveNode`, @hono/node-server on 127.0.0.1) sharing one
 * Postgres, follow-up steps travelling between them as signed HTTP requests
 * in a ring (server i dispatches to server i+1). Used by the http scenario and
 * meant for the chaos driver, which runs the same servers in child processes.
 */
import { Agent, request } from "node:http";
import type { Workflow } from "../../src/core/definitions.ts";
import type { EngineHooks } from "../../src/engine/hooks.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { freePort } from "../../test/support/postgres-cluster.ts";

export interface ServerRingOptions {
  count: number;
  databaseUrl: string;
  workflows: Workflow[];
  secret: string;
  hooks?: EngineHooks;
  /** Sweep interval per server (default 2 s): the safety net for a lost dispatch. */
  sweepIntervalMs?: number;
}

export interface ServerRing {
  servers: NodeServer[];
  urls: string[];
  /** Statements issued by all servers' pools so far. */
  statements(): number;
  close(): Promise<void>;
}

export async function startServerRing(opts: ServerRingOptions): Promise<ServerRing> {
  const ports: number[] = [];
  for (let i = 0; i < opts.count; i++) ports.push(await freePort());
  const urls = ports.map((p) => `http://127.0.0.1:${p}`);
  const servers: NodeServer[] = [];
  const close = async () => {
    await Promise.all(servers.map((s) => s.close().catch((err: unknown) => console.error("bench: server close failed", err))));
  };
  try {
    for (let i = 0; i < opts.count; i++) {
      servers.push(
        await serveNode({
          workflows: opts.workflows,
          port: ports[i]!,
          hostname: "127.0.0.1",
          env: { DATABASE_URL: opts.databaseUrl, EDDA_SECRET: opts.secret, EDDA_SERVICE_NAME: `bench-${i}` },
          dispatcher: { http: { baseUrl: urls[(i + 1) % opts.count]! } },
          sweepIntervalMs: opts.sweepIntervalMs ?? 2000,
          ...(opts.hooks ? { hooks: opts.hooks } : {}),
        }),
      );
    }
  } catch (err) {
    await close();
    throw err;
  }
  return {
    servers,
    urls,
    statements: () => servers.reduce((n, s) => n + s.database.stats.statements, 0),
    close,
  };
}

/**
 * The starting client's connections: node:http with keep-alive, as the servers' own follow-ups go. The
 * client runs in the servers' process, so its CPU is in the http scenario's figure; undici's fetch cost
 * about 0.05 ms of this process's CPU per step there (a start per 10 steps), work the local scenario,
 * which starts in process, never pays.
 */
const clientAgent = new Agent({ keepAlive: true });

/** POST /workflows/:name/instances on `baseUrl`; returns the instance id. */
export async function startViaHttp(baseUrl: string, workflowName: string, input: unknown): Promise<string> {
  const url = new URL(`/workflows/${encodeURIComponent(workflowName)}/instances`, baseUrl);
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(url, { method: "POST", agent: clientAgent, headers: { "content-type": "application/json" } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(JSON.stringify({ input }));
  });
  const body = JSON.parse(text) as { instanceId?: string };
  if (status !== 201 || !body.instanceId) throw new Error(`start ${workflowName} → HTTP ${status} ${text.slice(0, 500)}`);
  return body.instanceId;
}
