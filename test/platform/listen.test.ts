// serveNode on a port something else holds: a ConfigurationError that names
// the port and the setting (not an unhandled EADDRINUSE stack), with the app
// and its database closed behind it; the same call on a free port serves.
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, test } from "vitest";
import { ConfigurationError } from "../../src/core/errors.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";

/** Nothing listens here; postgres.js connects on the first statement only. */
const env = { DATABASE_URL: "postgres://edda:edda@127.0.0.1:9/none", EDDA_API_TOKEN: "t0ken" };
let holder: Server | undefined;
let node: NodeServer | undefined;
afterAll(async () => {
  await node?.close();
  holder?.close();
});

test("a taken port is a ConfigurationError naming it and PORT; once free, the same call serves", async () => {
  holder = createServer();
  await new Promise<void>((r) => holder!.listen(0, "127.0.0.1", r));
  const port = (holder.address() as { port: number }).port;
  const refused = await serveNode({ workflows: [], env, port, sweepIntervalMs: 0 }).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(ConfigurationError);
  expect((refused as ConfigurationError).message).toBe(`port ${port} is in use on 127.0.0.1; set PORT (or the port option) to another one`);
  expect((refused as ConfigurationError).variable).toBe("PORT");
  expect((refused as ConfigurationError).stack).toBe(`ConfigurationError: port ${port} is in use on 127.0.0.1; set PORT (or the port option) to another one`);

  // As a consumer's `node server.mjs` meets it: exit 1, the message, no stack frames.
  const fixture = join(import.meta.dirname, "fixtures", "serve-on-port.ts");
  const run = await promisify(execFile)(process.execPath, ["--import", "tsx", fixture], { env: { ...process.env, PORT: String(port) } }).then(
    () => ({ code: 0, stderr: "" }),
    (e: { code: number; stderr: string }) => e,
  );
  expect(run.code).toBe(1);
  expect(run.stderr).toContain(`ConfigurationError: port ${port} is in use on 127.0.0.1; set PORT`);
  expect(run.stderr).not.toMatch(/^\s+at /m);

  await new Promise<void>((r) => holder!.close(() => r()));
  holder = undefined;
  node = await serveNode({ workflows: [], env, port, sweepIntervalMs: 0 });
  expect(node.port).toBe(port);
  expect((await fetch(`http://127.0.0.1:${port}/instances`)).status).toBe(401);
});
