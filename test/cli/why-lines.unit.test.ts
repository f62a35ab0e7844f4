// `edda-edge why <id>` prints GET /instances/:id/why in two lines (the CLI's runtime test runs it
// against a server): the status and reason with what it waits behind, then what will move it.
import { describe, expect, it } from "vitest";
import { whyLines } from "../../src/platform/cli/remote.ts";

describe("edda-edge why: the two lines", () => {
  it("names the instances it waits behind, at most five", () => {
    const view = { instanceId: "sync2", status: "queued", reason: { kind: "concurrency", detail: 'queued on concurrency key "acme" (limit 1): held by sync1', next: "a slot frees when sync1 ends", blockedBy: ["sync1"] } };
    expect(whyLines(view).split("\n")).toEqual(['sync2 queued — concurrency: queued on concurrency key "acme" (limit 1): held by sync1 (behind sync1)', "  next: a slot frees when sync1 ends"]);
    const many = { ...view, reason: { ...view.reason, blockedBy: ["a", "b", "c", "d", "e", "f"] } };
    expect(whyLines(many).split("\n")[0]).toMatch(/\(behind a, b, c, d, e, …\)$/);
  });

  it("without blockedBy, no 'behind'", () => {
    expect(whyLines({ instanceId: "nap1", status: "waiting_for_timer", reason: { kind: "timer", detail: "sleeping at sleep:1", next: "its timer fires" } })).toBe("nap1 waiting_for_timer — timer: sleeping at sleep:1\n  next: its timer fires");
  });
});
