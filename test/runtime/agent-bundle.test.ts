// The agent helper stays out of a Worker that does not import it: the
// README's Worker (which imports `edda-edge`, every definition and operation)
// holds none of the AI SDK and none of src/agent, and neither does the
// example Worker (functions/worker.ts: the agent examples are served by the
// Node entry only); the same Worker with a workflow that runs an agent from
// `edda-edge/agent` holds both — so the check sees the SDK when it is there —
// and, its agent having no `mcp`, none of the MCP client.
import { describe, expect, it } from "vitest";
import { buildWorkerBundle, type WorkerBundle } from "../support/worker-bundle.ts";

const AI_SDK = /^(ai|@ai-sdk\/.*)$/;
const aiPackages = (b: WorkerBundle) => b.contributors.map(([name]) => name).filter((n) => AI_SDK.test(n));
const agentSources = (b: WorkerBundle) => b.inputs.filter((f) => f.startsWith("src/agent/"));

describe("the agent helper in Worker bundles", () => {
  it("the README's Worker and the example Worker hold no AI SDK and no src/agent", { timeout: 240_000 }, async () => {
    for (const variant of ["recipe", "examples"] as const) {
      const bundle = await buildWorkerBundle(variant);
      expect(aiPackages(bundle), variant).toEqual([]);
      expect(agentSources(bundle), variant).toEqual([]);
    }
  });

  it("a Worker that runs an agent holds the AI SDK and the agent loop — and no MCP client, its agent having no mcp — and builds without warnings", { timeout: 120_000 }, async () => {
    const bundle = await buildWorkerBundle("recipe+agent");
    expect(aiPackages(bundle)).toContain("ai");
    expect(agentSources(bundle)).toEqual(expect.arrayContaining(["src/agent/agent.ts", "src/agent/model-call.ts"]));
    // Regression: a lazy import() of the MCP client put it in every agent Worker, where its zod schemas then failed to initialise in workerd.
    expect(agentSources(bundle)).not.toContain("src/agent/mcp-client.ts");
    expect(bundle.contributors.map(([n]) => n)).not.toContain("@modelcontextprotocol/sdk");
    expect(bundle.warnings).toEqual([]);
  });
});
