// Opening an instance's event stream (GET /instances/:id/stream), the answers
// decided before storage: a Last-Event-ID or `after` that is not a sequence
// number, or a topic a channel cannot be, is a 400; past EDDA_MAX_STREAMS open
// streams a new one is a 503 with Retry-After, the slot freed for the next —
// and none of them asks the database for anything. The streams themselves
// (resumes, many readers, unknown instances): stream.test.ts on Postgres.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { StreamGate } from "../../src/http/stream-gate.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const t = appWithoutDatabase({ workflows: [pipeline], maxOpenStreams: 0 });
const bounded = appWithoutDatabase({ workflows: [pipeline] });
afterEach(() => expect([...t.touched, ...bounded.touched]).toEqual([]));
afterAll(async () => {
  await t.edda.close();
  await bounded.edda.close();
});

const open = (app: typeof t, headers: Record<string, string> = {}, query = "") => app.request(`http://localhost/instances/i-1/stream${query}`, { headers });

describe("stream requests", () => {
  it("a resume point that is not a sequence number, or a bad topic, is a 400", async () => {
    for (const [headers, query] of [[{ "last-event-id": "not-a-number" }, ""], [{ "last-event-id": "-3" }, ""], [{}, "?after=-1"], [{}, "?after=1.5"], [{}, `?topic=${encodeURIComponent("a\u0000b")}`]] as const) {
      const r = await open(bounded, headers, query);
      expect(r.status, JSON.stringify([headers, query])).toBe(400);
      expect(r.headers.get("content-type")).toBe("application/problem+json");
    }
  });

  it("past the cap on open streams: 503 with Retry-After, before any read", async () => {
    const r = await open(t);
    expect(r.status).toBe(503);
    expect(r.headers.get("retry-after")).toBe("5");
    expect(await r.json()).toMatchObject({ error_type: "ServiceUnavailable" });
  });

  it("the gate: a slot per open stream, given back once however often released", () => {
    const gate = new StreamGate(2);
    const a = gate.take()!;
    const b = gate.take()!;
    expect(gate.take()).toBeNull();
    a();
    a();
    expect(gate.count).toBe(1);
    expect(gate.take()).not.toBeNull();
    expect(gate.take()).toBeNull();
    b();
    expect(gate.count).toBe(1);
  });
});
