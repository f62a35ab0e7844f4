// An HTTP server for a fetch handler on 127.0.0.1 and a free port (Node's
// server via @hono/node-server), for tests that need a real URL.
import { serve, type ServerType } from "@hono/node-server";
import type { TestApp } from "./engine.ts";

export interface Listening {
  url: string;
  close(): Promise<void>;
}

export async function listen(fetch: (req: Request) => Response | Promise<Response>): Promise<Listening> {
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  const addr = server.address();
  return {
    url: `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A test app served on 127.0.0.1 (`route` may answer some paths before the
 * app, e.g. static files for a browser); close() stops the server, then the
 * app and its database.
 */
export async function serveTestApp(t: TestApp, route?: (req: Request) => Response | undefined): Promise<Listening> {
  const server = await listen((req) => route?.(req) ?? t.edda.app.fetch(req));
  return {
    url: server.url,
    async close() {
      await server.close();
      await t.edda.close();
      await t.database.close();
    },
  };
}
