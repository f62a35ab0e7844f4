// What an MCP progress notification says about a stream item (text as it
// is, other JSON as JSON, bytes by size, a retry marker in words), and which
// POST bodies get the SSE answer that carries them: a tasks/result request
// with a progress token, alone or in a batch — not a notification, not a
// tasks/result without a token, not another method with one.
import { describe, expect, it } from "vitest";
import { asksForProgress } from "../../src/http/mcp/index.ts";
import { progressMessage } from "../../src/http/mcp/progress.ts";
import type { StreamItem } from "../../src/engine/records.ts";

const item = (over: Partial<StreamItem>): StreamItem => ({
  seq: 1,
  kind: "chunk",
  source: "generate_summary:1",
  run: 1,
  attempt: 1,
  topic: null,
  data: { type: "json", json: "null" },
  createdAt: new Date(0),
  ...over,
});

describe("progressMessage", () => {
  it("a string item is its text, verbatim (a token keeps its spaces, a lone surrogate stays)", () => {
    expect(progressMessage(item({ data: { type: "json", json: JSON.stringify("durable ") } }))).toBe("durable ");
    expect(progressMessage(item({ data: { type: "json", json: JSON.stringify("\ud800 lone") } }))).toBe("\ud800 lone");
  });
  it("other JSON is its JSON text; bytes are their size", () => {
    expect(progressMessage(item({ kind: "emit", data: { type: "json", json: '{"done":3,"of":10}' } }))).toBe('{"done":3,"of":10}');
    expect(progressMessage(item({ data: { type: "json", json: "42" } }))).toBe("42");
    expect(progressMessage(item({ data: { type: "binary", bytes: new Uint8Array([0, 255, 1]) } }))).toBe("3 bytes");
  });
  it("a retry marker says which activity starts over", () => {
    const marker = item({ kind: "retry", attempt: 2, data: { type: "json", json: JSON.stringify({ activityId: "generate_summary:1", attempt: 2 }) } });
    expect(progressMessage(marker)).toBe("retry: generate_summary:1 attempt 2 starts over");
  });
});

describe("asksForProgress", () => {
  const result = (meta?: object) => ({ jsonrpc: "2.0", id: 7, method: "tasks/result", params: { taskId: "t", ...(meta ? { _meta: meta } : {}) } });
  it("a tasks/result request with a progress token, alone or in a batch", () => {
    expect(asksForProgress(result({ progressToken: 7 }))).toBe(true);
    expect(asksForProgress(result({ progressToken: "p" }))).toBe(true);
    expect(asksForProgress([{ jsonrpc: "2.0", id: 1, method: "tasks/get", params: { taskId: "t" } }, result({ progressToken: 0 })])).toBe(true);
  });
  it("nothing else", () => {
    expect(asksForProgress(result())).toBe(false);
    expect(asksForProgress(result({}))).toBe(false);
    expect(asksForProgress({ ...result({ progressToken: 1 }), id: undefined })).toBe(false);
    expect(asksForProgress({ jsonrpc: "2.0", id: 1, method: "tasks/get", params: { taskId: "t", _meta: { progressToken: 1 } } })).toBe(false);
    expect(asksForProgress({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "x", _meta: { progressToken: 1 } } })).toBe(false);
    for (const odd of [null, 3, "tasks/result", [], [null], { method: "tasks/result", id: 1, params: null }]) expect(asksForProgress(odd)).toBe(false);
  });
});
