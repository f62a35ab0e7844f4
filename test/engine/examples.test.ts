// The timeout and upgrade examples (functions/workflows/export-report.ts,
// send-invoice.ts) on real Postgres, with two engines serving the same
// database and sweeping at once: typed timeouts with the draft discarded
// once; an instance that took the old path before a deploy replays it under
// the new code while new ones take the new path, and replay verification
// says which code fits which history.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportReport } from "../../functions/workflows/export-report.ts";
import { emailInvoicePdf, sendInvoice } from "../../functions/workflows/send-invoice.ts";
import { engineOf } from "../../src/edda.ts";
import { verifyReplay } from "../../src/engine/verify.ts";
import { activity, waitMessage, workflow } from "../../src/index.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

/** send_invoice as it was before the payment-link change. */
const sendInvoiceV1 = workflow("send_invoice", async (ctx, { invoiceId }: { invoiceId: string }) => {
  const delivery = await emailInvoicePdf(ctx, invoiceId);
  const payment = await waitMessage(ctx, "paid", { timeoutSeconds: 30 * 24 * 3600 });
  return { invoiceId, sent: delivery.sent, paid: payment.data };
});
/** The same change made without patched(). */
const link = activity("send_payment_link", async (_ctx, invoiceId: string) => ({ sent: "link" as const, invoiceId }));
const sendInvoiceCareless = workflow("send_invoice", async (ctx, { invoiceId }: { invoiceId: string }) => {
  const delivery = await link(ctx, invoiceId);
  const payment = await waitMessage(ctx, "paid", { timeoutSeconds: 30 * 24 * 3600 });
  return { invoiceId, sent: delivery.sent, paid: payment.data };
});

let pg: { url: string; open(): Database };
const apps: TestApp[] = [];
const app = (workflows: Parameters<typeof makeTestApp>[1]["workflows"], name: string) => {
  const a = makeTestApp(pg.open(), { workflows, serviceName: name });
  apps.push(a);
  return a;
};

beforeAll(async () => {
  pg = await freshPostgres("examples");
});
afterAll(async () => {
  for (const a of apps) {
    await a.dispatcher.close();
    await a.database.close();
  }
});

const compensationResults = async (db: Database, id: string) =>
  (await queryRows<{ data: string }>(db.db, sql`SELECT event_data AS data FROM workflow_history WHERE instance_id = ${id} AND event_type = 'CompensationExecuted'`)).map((r) => JSON.parse(r.data) as unknown);

describe("export_report (timeouts)", () => {
  it("an attempt past 1 s and a run past 5 s fail typed, the draft discarded once, while two engines sweep", { timeout: 40_000 }, async () => {
    const [a, b] = [app([exportReport], "ex-a"), app([exportReport], "ex-b")];
    await a.edda.start("export_report", { name: "s", renderMs: 1500 }, { instanceId: "ex-slow" });
    await b.edda.start("export_report", { name: "l", waitSeconds: 60 }, { instanceId: "ex-late" });
    const sweeping = setInterval(() => void Promise.all([a.edda.sweep(), b.edda.sweep()]).catch(() => undefined), 300);
    try {
      const slow = await a.waitFor("ex-slow", ["failed", "completed"], 20_000);
      expect(slow.error).toMatchObject({ error_type: "RetryExhaustedError", cause: { name: "ActivityTimeoutError" } });
      const late = await b.waitFor("ex-late", ["failed", "completed"], 20_000);
      expect(late.error).toMatchObject({ error_type: "WorkflowTimeoutError" });
    } finally {
      clearInterval(sweeping);
    }
    expect(await compensationResults(a.database, "ex-slow")).toEqual([{ name: "discard_draft", result: { discarded: "draft-s-ex-slow" } }]);
    expect(await compensationResults(a.database, "ex-late")).toEqual([{ name: "discard_draft", result: { discarded: "draft-l-ex-late" } }]);
  });
});

describe("send_invoice (safe code upgrades)", () => {
  it("an instance that e-mailed its PDF before the deploy replays that path under the new code; new ones send the link", { timeout: 40_000 }, async () => {
    const old = app([sendInvoiceV1], "inv-v1");
    await old.edda.start("send_invoice", { invoiceId: "i-old" }, { instanceId: "inv-old" });
    await old.waitFor("inv-old", ["waiting_for_message"]);
    await old.dispatcher.close();

    // Deploy: two engines with the new code; replay verification approves it, the careless variant not.
    const [a, b] = [app([sendInvoice], "inv-v2a"), app([sendInvoice], "inv-v2b")];
    const engine = await engineOf(a.edda);
    const instance = (await engine.storage.getInstance("inv-old"))!;
    const history = await engine.storage.loadHistory("inv-old");
    expect(await verifyReplay(sendInvoice, instance, history)).toMatchObject({ ok: true });
    const careless = await verifyReplay(sendInvoiceCareless, instance, history);
    expect(careless.ok).toBe(false);
    expect(!careless.ok && careless.error).toMatch(/email_invoice_pdf[\s\S]*send_payment_link|send_payment_link[\s\S]*email_invoice_pdf/);

    await a.edda.start("send_invoice", { invoiceId: "i-new" }, { instanceId: "inv-new" });
    await b.waitFor("inv-new", ["waiting_for_message"]);
    for (const id of ["inv-old", "inv-new"]) await fetchSend(a, id);
    expect((await b.waitFor("inv-old")).output).toMatchObject({ invoiceId: "i-old", sent: "pdf" });
    expect((await a.waitFor("inv-new")).output).toMatchObject({ invoiceId: "i-new", sent: "link" });
  });
});

/** POST /instances/:id/messages, as the README's curl does. */
async function fetchSend(a: TestApp, id: string) {
  const res = await a.edda.fetch(new Request(`http://localhost/instances/${encodeURIComponent(id)}/messages`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ channel: "paid", data: { amount: 120 } }) }));
  expect(res.status).toBeLessThan(300);
  await res.text();
}
