// Failed bearer tokens are throttled per client (issue 42): 20 wrong tokens
// from one address are 401s, the ones after are 429 with Retry-After — and
// the right token is compared first, so it passes from that very address
// again and again, and another client's failures count apart. The throttle is
// the app's own (per app, per process); no database takes part, and none is
// asked for. The viewer's login under the same throttle, and a throttled
// client's start running to its end: front-doors.test.ts.
import { afterAll, describe, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const step = activity("fd_step", async (_ctx, v: unknown) => v);
const echo = workflow("fd_echo", async (ctx, input: unknown) => step(ctx, input));
const t = appWithoutDatabase({ workflows: [echo], apiToken: "throttle-token", viewer: false });
afterAll(() => t.edda.close());

// /openapi.json needs the token like every API route, and no database.
const from = (ip: string, token: string) => t.request("/openapi.json", { headers: { authorization: `Bearer ${token}`, "cf-connecting-ip": ip } });

describe("failed credentials are throttled, never the right one", () => {
  it("25 wrong bearer tokens from one address, then the right token from it: 200 (the wrong ones past 20 get 429)", async () => {
    const wrong: number[] = [];
    for (let i = 0; i < 25; i++) wrong.push((await from("203.0.113.7", `wrong-${i}`)).status);
    expect(wrong).toEqual([...Array<number>(20).fill(401), ...Array<number>(5).fill(429)]);
    const throttled = await from("203.0.113.7", "wrong-again");
    expect(throttled.status).toBe(429);
    expect(Number(throttled.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await throttled.json()).toMatchObject({ status: 429 });
    // Compared first: the right token from the very same address passes, again and again.
    for (let i = 0; i < 3; i++) expect((await from("203.0.113.7", "throttle-token")).status).toBe(200);
    expect((await from("198.51.100.2", "wrong")).status).toBe(401); // another client's failures count apart
    expect(t.touched).toEqual([]);
  });
});
