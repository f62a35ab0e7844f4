// Issue 38, item 1: every instance records the deployment that started it, and GET /deployments
// lists each deployment with its unfinished instances by status — two apps on one real Postgres,
// each its own deployment (EDDA_DEPLOYMENT), a third naming none (the code's hash), and the
// refusals of a deployment id that cannot be stored.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEdda, sleep, workflow, type Edda } from "../../src/index.ts";
import { deploymentOf } from "../../src/engine/deployment.ts";
import { withEnvironment, readConfig } from "../../src/platform/env.ts";
import { deploymentLines } from "../../src/platform/cli/remote.ts";
import type { Database } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const nap = workflow("dep_nap", async (ctx) => {
  await sleep(ctx, 3600);
});
const quick = workflow("dep_quick", async () => "done");
const quickV2 = workflow("dep_quick", async () => "done, differently");

const TOKEN = "dep-token";
let pg: { url: string; open(): Database };
let v1: TestApp;
let v2: TestApp;
let unnamed: TestApp;

const api = async (edda: Edda, path: string) => {
  const res = await edda.fetch(new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${TOKEN}` } }));
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};
type Listed = { current: string; deployments: { id: string | null; current: boolean; startedAt: string | null; instances: Record<string, number>; draining: boolean }[] };

beforeAll(async () => {
  pg = await freshPostgres("deployments");
  v1 = makeTestApp(pg.open(), { workflows: [nap, quick], apiToken: TOKEN, deployment: "release-1" });
  v2 = makeTestApp(pg.open(), { workflows: [nap, quick], apiToken: TOKEN, deployment: "release-2" });
  unnamed = makeTestApp(pg.open(), { workflows: [nap, quick], apiToken: TOKEN });
});
afterAll(async () => {
  for (const x of [v1, v2, unnamed]) await x.edda.close();
  for (const x of [v1, v2, unnamed]) await x.database.close();
});

describe("deployments", () => {
  it("each instance records the deployment that started it; the view shows it", async () => {
    const a = await v1.edda.start("dep_nap", undefined, { instanceId: "dep-nap-1" });
    const b = await v2.edda.start("dep_quick", undefined, { instanceId: "dep-quick-2" });
    await v1.waitFor(a.instanceId, ["waiting_for_timer"]);
    await v2.waitFor(b.instanceId);
    // Whoever reads it, the instance names the deployment that started it.
    expect((await api(v2.edda, "/instances/dep-nap-1")).body.deployment).toBe("release-1");
    expect((await api(v1.edda, "/instances/dep-quick-2")).body.deployment).toBe("release-2");
    expect((await v1.edda.getInstance("dep-quick-2"))?.deployment).toBe("release-2");
  });

  it("GET /deployments: each with its unfinished instances by status; an older one with work is draining", async () => {
    await v1.edda.start("dep_nap", undefined, { instanceId: "dep-nap-1b" });
    await v1.waitFor("dep-nap-1b", ["waiting_for_timer"]);
    const asV2 = await api(v2.edda, "/deployments");
    expect(asV2.status).toBe(200);
    const listed = asV2.body as unknown as Listed;
    expect(listed.current).toBe("release-2");
    const r1 = listed.deployments.find((d) => d.id === "release-1")!;
    const r2 = listed.deployments.find((d) => d.id === "release-2")!;
    expect(r1).toMatchObject({ current: false, draining: true, instances: { waiting_for_timer: 2 } });
    // release-2's only instance completed: listed, nothing unfinished, not draining (it is the current one anyway).
    expect(r2).toMatchObject({ current: true, draining: false, instances: {} });
    expect(Date.parse(r1.startedAt!)).toBeLessThanOrEqual(Date.parse(r2.startedAt!));
    // Most recent first.
    expect(listed.deployments.map((d) => d.id).indexOf("release-2")).toBeLessThan(listed.deployments.map((d) => d.id).indexOf("release-1"));
    // As release-1 sees it: it is current (and so not draining), release-2 is not.
    const asV1 = (await api(v1.edda, "/deployments")).body as unknown as Listed;
    expect(asV1.deployments.find((d) => d.id === "release-1")).toMatchObject({ current: true, draining: false });
    expect(asV1.deployments.find((d) => d.id === "release-2")).toMatchObject({ current: false, draining: false });
  });

  it("a deployment that names none is its code's hash: the same for the same workflows, another for changed code; listed as current before its first start", async () => {
    const listed = (await api(unnamed.edda, "/deployments")).body as unknown as Listed;
    expect(listed.current).toMatch(/^code:[0-9a-f]{16}$/);
    expect(listed.deployments[0]).toEqual({ id: listed.current, current: true, startedAt: null, instances: {}, draining: false });
    const same = await deploymentOf(undefined, [quick, nap])();
    expect(same).toBe(listed.current);
    expect(await deploymentOf(undefined, [quickV2, nap])()).not.toBe(same);
    const started = await unnamed.edda.start("dep_quick", undefined, { instanceId: "dep-quick-code" });
    await unnamed.waitFor(started.instanceId);
    expect((await unnamed.edda.getInstance("dep-quick-code"))?.deployment).toBe(same);
  });

  it("the environment names it (EDDA_DEPLOYMENT); an explicit option wins; a platform's id is the fallback", () => {
    const config = readConfig({ EDDA_DEPLOYMENT: "from-env" });
    expect(withEnvironment({}, config).deployment).toBe("from-env");
    expect(withEnvironment({ deployment: "explicit" }, config).deployment).toBe("explicit");
    expect(withEnvironment({}, readConfig({}), { deployment: "platform-version" }).deployment).toBe("platform-version");
    expect(withEnvironment({}, config, { deployment: "platform-version" }).deployment).toBe("from-env");
  });

  it("a deployment id that cannot be stored is refused when the app is built, and nothing starts", async () => {
    for (const bad of ["", "   ", "x".repeat(256), "line\nbreak"]) {
      expect(() => createEdda({ workflows: [quick], database: v1.database, secret: "s", deployment: bad })).toThrow(/deployment \(EDDA_DEPLOYMENT\) must be 1–255 printable characters/);
    }
    expect((await api(v1.edda, "/deployments")).status).toBe(200);
  });

  it("the CLI prints one line per deployment", () => {
    const text = deploymentLines({
      deployments: [
        { id: "release-2", current: true, draining: false, startedAt: "2026-12-04T10:00:00.000Z", instances: {} },
        { id: "release-1", current: false, draining: true, startedAt: "2026-12-03T10:00:00.000Z", instances: { waiting_for_timer: 2, running: 1 } },
        { id: null, current: false, draining: false, startedAt: "2026-12-01T10:00:00.000Z", instances: {} },
      ],
    });
    expect(text.split("\n")).toEqual([
      "release-2 [current] since 2026-12-04T10:00:00.000Z: no unfinished instances",
      "release-1 [draining] since 2026-12-03T10:00:00.000Z: 2 waiting_for_timer, 1 running",
      "(unrecorded) since 2026-12-01T10:00:00.000Z: no unfinished instances",
    ]);
  });
});
