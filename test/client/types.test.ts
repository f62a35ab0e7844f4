// Type inference of the typed client, checked by tsc (`npm run typecheck`
// covers test/): names, inputs and outputs come from the workflow
// definitions; each @ts-expect-error line must be an error. The runtime part
// only proves the calls are well-formed against a fetch that records them.
import { z } from "zod";
import { describe, expect, expectTypeOf, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { createClient, type InstanceOutcome, type StartedInstance } from "../../src/client/index.ts";

const charge = activity("types_charge", async (_ctx, amount: number) => ({ charged: amount, at: new Date() }));
const order = workflow(
  "types_order",
  { input: z.object({ orderId: z.string(), amount: z.number(), currency: z.string().default("EUR") }) },
  async (ctx, { amount }) => {
    const r = await charge(ctx, amount);
    return { total: r.charged, when: r.at, note: undefined as string | undefined };
  },
);
const ping = workflow("types_ping", async (_ctx, input: { n: number }) => input.n + 1);
const workflows = [order, ping];

const calls: { url: string; body: unknown }[] = [];
const fake = async (url: string, init: RequestInit) => {
  calls.push({ url, body: init.body ? JSON.parse(init.body as string) : undefined });
  return new Response(JSON.stringify({ instanceId: "i", status: "running" }), { status: 201 });
};

describe("createClient<typeof workflows>", () => {
  it("infers names, inputs and outputs", async () => {
    const edda = createClient<typeof workflows>({ baseUrl: "http://x", fetch: fake });

    // A schema default makes the field optional for the caller.
    const run = await edda.start("types_order", { orderId: "o", amount: 5 });
    expectTypeOf(run).toEqualTypeOf<StartedInstance<{ total: number; when: string; note?: string }>>();
    await edda.start("types_ping", { n: 1 }, { instanceId: "p1" });
    // result() is typed when told the workflow, unknown otherwise.
    expectTypeOf<ReturnType<typeof edda.result<"types_ping">>>().resolves.toEqualTypeOf<InstanceOutcome<number>>();
    expectTypeOf<ReturnType<typeof edda.result<never>>>().resolves.toEqualTypeOf<InstanceOutcome<unknown>>();

    // @ts-expect-error unknown workflow name
    await edda.start("types_nope", {});
    // @ts-expect-error amount must be a number
    await edda.start("types_order", { orderId: "o", amount: "5" });
    // @ts-expect-error orderId is required
    await edda.start("types_order", { amount: 5 });
    // @ts-expect-error ping's input is { n: number }
    await edda.start("types_ping", { orderId: "o" });
    // @ts-expect-error list filters by a registered workflow name
    void edda.list({ workflow: "types_nope" });

    // An object of workflows works too.
    const byKey = createClient<{ order: typeof order }>({ baseUrl: "http://x", fetch: fake });
    await byKey.start("types_order", { orderId: "o", amount: 1, currency: "USD" });
    // @ts-expect-error keys are not names: the name is the workflow's own
    await byKey.start("order", { orderId: "o", amount: 1 });

    expect(calls.map((c) => c.url)).toEqual([
      "http://x/workflows/types_order/instances",
      "http://x/workflows/types_ping/instances",
      "http://x/workflows/types_nope/instances",
      "http://x/workflows/types_order/instances",
      "http://x/workflows/types_order/instances",
      "http://x/workflows/types_ping/instances",
      "http://x/instances?workflow=types_nope",
      "http://x/workflows/types_order/instances",
      "http://x/workflows/order/instances",
    ]);
    expect(workflows.map((w) => w.workflowName)).toEqual(["types_order", "types_ping"]);
    expect(calls[1]!.body).toEqual({ input: { n: 1 }, instanceId: "p1" });
  });
});
