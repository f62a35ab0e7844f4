/**
 * Real Node servers (`serveNode`, @hono/node-server on 127.0.0.1) sharing one
 * Postgres, follow-up steps travelling between them as signed HTTP requests
 * in a ring (server i dispatches to server i+1). Used by the http scenario and
 * meant for the chaos driver, which runs the same servers in child processes.
 */
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

/** POST /workflows/:name/instances on `baseUrl`; returns the instance id. */
export async function startViaHttp(baseUrl: string, workflowName: string, input: unknown): Promise<string> {
  const res = await fetch(`${baseUrl}/workflows/${encodeURIComponent(workflowName)}/instances`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input }),
  });
  const body = (await res.json()) as { instanceId?: string };
  if (res.status !== 201 || !body.instanceId) throw new Error(`start ${workflowName} → HTTP ${res.status} ${JSON.stringify(body)}`);
  return body.instanceId;
}
