// The kit as a team would use it, on three of the shipped example workflows
// (functions/workflows/): an approval that times out, a payment that waits
// for a matching CloudEvent, and the 09:00 Berlin daily report schedule.
// One kit for the file: its test time runs on from test to test.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { approval } from "../../functions/workflows/approval.ts";
import { dailyReport } from "../../functions/workflows/daily-report.ts";
import { paymentWait } from "../../functions/workflows/payment-wait.ts";
import { createTestEdda, type TestEdda } from "../../src/testing/index.ts";

let t: TestEdda<typeof approval | typeof paymentWait | typeof dailyReport>;

beforeAll(async () => {
  // 08:00 in Berlin (UTC+1 in winter): the first report tick is an hour away.
  t = await createTestEdda({ workflows: [approval, paymentWait, dailyReport], startAt: "2030-01-07T07:00:00Z" });
});
afterAll(() => t?.close());

describe("shipped workflows under the test kit", () => {
  it("approval: a decision within the timeout approves; none within 7 days ends in timeout", async () => {
    const fast = await t.start(approval, { requestId: "r-1", timeoutSeconds: 7 * 86_400 });
    const slow = await t.start("approval", { requestId: "r-2", timeoutSeconds: 7 * 86_400 });
    await t.advance("2d");
    await t.send(fast, "approval", { approved: true, approver: "ana" });
    expect(await t.result(fast)).toMatchObject({ status: "completed", output: { status: "approved", approver: "ana" } });
    await t.advance("4d23h59m");
    expect((await t.result(slow)).status).toBe("waiting_for_message");
    await t.advance("1m");
    const r = await t.result(slow);
    expect(r).toMatchObject({ status: "completed", output: { status: "timeout" } });
    // Typed from the workflow: `status` is "approved" | "rejected" | "timeout".
    const status: "approved" | "rejected" | "timeout" | undefined = r.output?.status;
    expect(status).toBe("timeout");
  });

  it("payment_wait: only the CloudEvent for its order completes it; a cancelled one stays cancelled", async () => {
    const mine = await t.start(paymentWait, { orderId: "o-7" });
    const other = await t.start(paymentWait, { orderId: "o-8" });
    await t.event({ type: "payment.completed", source: "/psp", data: { orderId: "o-9", amount: 1 } });
    expect((await t.result(mine)).status).toBe("waiting_for_message");
    await t.event({ type: "payment.completed", source: "/psp", data: { orderId: "o-7", amount: 42 } });
    expect(await t.result(mine)).toMatchObject({ status: "completed", output: { orderId: "o-7", amount: 42 } });
    await t.cancel(other);
    await t.advance("10m");
    expect((await t.result(other)).status).toBe("cancelled");
    const history = await t.history(mine);
    expect(history.map((e) => e.eventType)).toEqual(["MessageReceived"]);
  });

  it("daily_report: one instance per day at 09:00 Berlin, whatever the span advanced", async () => {
    await t.advance("3d");
    const reports = (await t.instances({ workflowName: "daily_report" })).map((i) => i.instanceId).sort();
    // Test time began Jan 7 at 08:00 Berlin and is now Jan 17 at 08:10: ticks Jan 7 … Jan 16 have passed.
    const days = reports.map((id) => id.slice("schedule:daily_report:".length));
    expect(days).toEqual(["2030-01-07", "2030-01-08", "2030-01-09", "2030-01-10", "2030-01-11", "2030-01-12", "2030-01-13", "2030-01-14", "2030-01-15", "2030-01-16"].map((d) => `${d}T08:00:00.000Z`));
    for (const id of reports) expect((await t.result(id)).status).toBe("completed");
  });
});
