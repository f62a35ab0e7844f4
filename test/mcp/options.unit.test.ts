// The `mcp` option of createEdda, decided when the app is built or routed,
// with no database: without it there is no /mcp route; unknown workflow
// names, clashing tool names and the option it replaced are refused before
// anything is served. Moved from exposure.test.ts, which keeps what the
// endpoint serves on PGlite.
import { afterAll, describe, expect, it } from "vitest";
import { workflow } from "../../src/index.ts";
import { createEdda } from "../../src/edda.ts";
import { orderSaga } from "../../functions/workflows/order-saga.ts";
import { mcp } from "../../src/mcp.ts";
import { appWithoutDatabase, noDatabase } from "../support/no-database.ts";

const { database, touched } = noDatabase();
const hidden = appWithoutDatabase({ workflows: [orderSaga] });
afterAll(async () => {
  await hidden.edda.close();
  expect([...touched, ...hidden.touched]).toEqual([]);
});

describe("mcp option", () => {
  it("without it there is no /mcp route", async () => {
    const res = await hidden.request("/mcp", { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" });
    expect(res.status).toBe(404);
  });

  it("unknown workflow names and clashing tool names are refused when the app is built", async () => {
    const clash = workflow("order_saga_status", async () => null);
    expect(() => createEdda({ workflows: [orderSaga], database, mcp: mcp(["order_sagas"]) })).toThrow(/unknown workflow "order_sagas"/);
    expect(() => createEdda({ workflows: [orderSaga, clash], database, mcp: mcp({ tools: "per-workflow" }) })).toThrow(/tool name "order_saga_status" .* already taken/);
    expect(() => createEdda({ workflows: [workflow("list_workflows", async () => null)], database, mcp: mcp({ tools: "per-workflow" }) })).toThrow(/tool name "list_workflows"/);
    expect(() => createEdda({ workflows: [orderSaga], database, mcp: mcp({ tools: ["order_sagas"] }) })).toThrow(/"order_sagas" in tools is not a workflow MCP serves/);
    // With the default tools a workflow's name is an argument, never a tool name: nothing to clash.
    const fine = createEdda({ workflows: [orderSaga, clash, workflow("list_workflows", async () => null)], database, mcp: mcp() });
    await fine.close();
  });

  it("the option it replaced (`mcp: true`, a list) is refused with how to write it now, and builds no app", () => {
    for (const old of [true, ["order_saga"]]) {
      expect(() => createEdda({ workflows: [orderSaga], database, mcp: old as never })).toThrow(/mcp\(\) or mcp\(\["name", …\]\) from "edda-edge\/mcp"/);
    }
  });
});
