// History paging: GET /instances/:id/history pages with a cursor and a cap,
// ?history=1 returns only the first page, and the typed client walks the
// pages. On real Postgres.
import { afterAll, beforeAll, expect, it } from "vitest";
import { createClient } from "../../src/client/index.ts";
import { activity, workflow } from "../../src/index.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

let t: TestApp;
const N = 130;
const echo = activity("hp_echo", async (_ctx, n: number) => n);
const wide = workflow("hp_wide", async (ctx) => (await Promise.all(Array.from({ length: N }, (_, i) => echo(ctx, i)))).length);

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("postgres-js", "history_paging"), { workflows: [wide] });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

it("pages the history in order with a cursor; the cap and bad cursors are 4xx that change nothing", async () => {
  const { instanceId } = await t.edda.start("hp_wide", null, { instanceId: "hp-1" });
  expect((await t.waitFor(instanceId)).output).toBe(N);

  const ids: string[] = [];
  let after: string | null = null;
  let pages = 0;
  do {
    const res = await t.edda.app.request(`/instances/${instanceId}/history?limit=50${after ? `&after=${after}` : ""}`);
    expect(res.status).toBe(200);
    const page = (await res.json()) as { history: { activityId: string; id: number }[]; nextCursor: string | null };
    expect(page.history.length).toBeLessThanOrEqual(50);
    ids.push(...page.history.map((h) => h.activityId));
    after = page.nextCursor;
    pages++;
  } while (after);
  expect(pages).toBe(3);
  expect(ids).toHaveLength(N);
  expect(new Set(ids).size).toBe(N);

  for (const bad of ["limit=501", "limit=0", "after=abc", "after=-1"]) {
    const res = await t.edda.app.request(`/instances/${instanceId}/history?${bad}`);
    expect(res.status, bad).toBe(400);
    expect(await res.text()).not.toMatch(/\n\s+at /);
  }
  expect((await t.edda.app.request("/instances/nope/history")).status).toBe(404);

  const first = (await (await t.edda.app.request(`/instances/${instanceId}?history=1`)).json()) as { history: unknown[]; historyNextCursor: string | null };
  expect(first.history).toHaveLength(N);
  expect(first.historyNextCursor).toBeNull();
});

it("the client walks the pages", async () => {
  const client = createClient({ baseUrl: "http://localhost", fetch: (input, init) => Promise.resolve(t.edda.app.request(input, init)) });
  const seen: string[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await client.history("hp-1", { limit: 100, ...(after ? { after } : {}) });
    seen.push(...page.history.map((h) => h.activityId));
    if (!page.nextCursor) break;
    after = page.nextCursor;
  }
  expect(seen).toHaveLength(N);
  await expect(client.resume("hp-1")).rejects.toMatchObject({ status: 409 });
});
