// Encryption at rest (engine/payload-sealing.ts, core/payload-codec.ts) on
// real Postgres and PGlite: with a key set, canary strings in an input, an
// activity result, a message, compensation arguments and an output are in the
// API's answers and nowhere in a pg_dump of the database; rotation with two
// keys reads old values and runs on; a deployment without the right key
// answers a typed PayloadDecryptionError, never the stored envelope.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, createWebhook, emit, registerCompensation, sleep, waitEvent, waitMessage, workflow } from "../../src/index.ts";
import { toBase64 } from "../../src/core/serialization.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import { findPostgresBin } from "../support/postgres-cluster.ts";

const CANARY = { input: "canary-input-4d1f", result: "canary-result-9b2e", message: "canary-message-77c0", comp: "canary-comp-31aa", output: "canary-output-e5d3" };

const undo = activity("undo_fetch", async (_ctx, _what: string) => undefined);
const fetchSecret = activity("fetch_secret", async (_ctx, _q: string) => ({ note: CANARY.result }));
const canaryFlow = workflow("canary_flow", async (ctx, { secret }: { secret: string }) => {
  const r = await fetchSecret(ctx, secret);
  await registerCompensation(ctx, undo, CANARY.comp);
  const m = await waitMessage(ctx, "approval", { timeoutSeconds: 3600 });
  return { got: [secret, r.note, (m.data as { text: string }).text], out: CANARY.output };
});

const newKey = () => toBase64(crypto.getRandomValues(new Uint8Array(32)));
const [oldKey, rotatedKey] = [newKey(), newKey()];

const sleepy = workflow("sleepy", async (ctx, { secret }: { secret: string }) => {
  await sleep(ctx, 1);
  return { secret };
});

const onEvent = workflow("on_event", async (ctx, { by }: { by: "subject" | "data" }) => {
  const ev = await waitEvent(ctx, "order.paid", { timeoutSeconds: 3600, match: by === "subject" ? { subject: "o-1" } : { "data.note": "x" } });
  return ev.data;
});

const STREAM_CANARY = "canary-stream-0a9c";
const HOOK_CANARY = "canary-webhook-6d2f";
const streamed = activity("stream_secret", async (ctx) => {
  ctx.stream.write({ token: STREAM_CANARY });
  return null;
});
const extras = workflow("sealed_extras", async (ctx) => {
  await streamed(ctx);
  const hook = await createWebhook(ctx, { expiresIn: 600 });
  await emit(ctx, { path: hook.path });
  return (await hook.wait()).body;
});

let pg: { url: string; open(): Database };
const apps: TestApp[] = [];
const app = (keys: string[] | undefined, name: string) => {
  const a = makeTestApp(pg.open(), { workflows: [canaryFlow, sleepy, onEvent, extras], serviceName: name, ...(keys ? { encryptionKeys: keys } : {}) });
  apps.push(a);
  return a;
};
const api = (a: TestApp, path: string, body?: unknown) =>
  a.edda.fetch(new Request(`http://127.0.0.1${path}`, body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
const dump = () => execFileSync(join(findPostgresBin(), "pg_dump"), ["--no-owner", "--dbname", pg.url], { encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });

/** Start through the API, wait at the message, send it through the API, wait for the end. */
async function runToEnd(a: TestApp, id: string): Promise<void> {
  expect((await api(a, "/workflows/canary_flow/instances", { instanceId: id, input: { secret: CANARY.input } })).status).toBe(201);
  await a.waitFor(id, ["waiting_for_message"]);
  expect((await api(a, `/instances/${id}/messages`, { channel: "approval", data: { text: CANARY.message } })).status).toBe(202);
  await a.waitFor(id, ["completed", "failed"]);
}

beforeAll(async () => {
  pg = await freshPostgres("encryption");
});
afterAll(async () => {
  for (const a of apps) {
    await a.dispatcher.close();
    await a.database.close();
  }
});

describe("encryption at rest on Postgres", () => {
  it("canaries in the input, an activity result, a message, compensation args and the output are in the API's and the viewer's answers and absent from pg_dump", { timeout: 60_000 }, async () => {
    const a = app([oldKey], "enc-a");
    await runToEnd(a, "enc-1");
    const view = (await (await api(a, "/instances/enc-1?history=1")).json()) as { status: string; input: unknown; output: unknown; history: unknown[] };
    expect(view.status).toBe("completed");
    expect(view.input).toEqual({ secret: CANARY.input });
    expect(view.output).toEqual({ got: [CANARY.input, CANARY.result, CANARY.message], out: CANARY.output });
    const shown = JSON.stringify(view.history);
    expect(shown).toContain(CANARY.result);
    expect(shown).toContain(CANARY.message);
    const engine = await (await import("../../src/edda.ts")).engineOf(a.edda);
    expect((await engine.storage.listCompensations("enc-1")).map((c) => c.args)).toEqual([JSON.stringify([CANARY.comp])]);

    // The viewer reads through the same engine: its instance page shows the decrypted input.
    const page = await (await api(a, "/ui/instances/enc-1")).text();
    expect(page).toContain(CANARY.input);
    expect(page).not.toContain("$enc");

    const text = dump();
    expect(text).toContain("enc-1"); // the dump is of this database, ids in the clear
    expect(text).toContain('{"$enc":"');
    for (const canary of Object.values(CANARY)) expect(text, canary).not.toContain(canary);
    // Names and statuses stay plain, so lists and filters work.
    const list = (await (await api(a, "/instances?workflow=canary_flow&status=completed")).json()) as { instances: { instanceId: string }[] };
    expect(list.instances.map((i) => i.instanceId)).toContain("enc-1");
  });

  it("rotation: with [new, old] an instance started under the old key replays and finishes, its new rows under the new key; the old key alone cannot read them", { timeout: 60_000 }, async () => {
    const before = app([oldKey], "enc-old");
    expect((await api(before, "/workflows/canary_flow/instances", { instanceId: "enc-rot", input: { secret: CANARY.input } })).status).toBe(201);
    await before.waitFor("enc-rot", ["waiting_for_message"]);

    const rotated = app([rotatedKey, oldKey], "enc-rot");
    expect((await api(rotated, "/instances/enc-rot/messages", { channel: "approval", data: { text: CANARY.message } })).status).toBe(202);
    const done = await rotated.waitFor("enc-rot", ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ got: [CANARY.input, CANARY.result, CANARY.message], out: CANARY.output });

    // The output was written with the new key: the old key alone names the key it lacks.
    const res = await api(before, "/instances/enc-rot");
    expect(res.status).toBe(500);
    const problem = (await res.json()) as { error_type: string; reason: string; detail: string };
    expect(problem).toMatchObject({ error_type: "PayloadDecryptionError", reason: "unknown_key" });
    expect(problem.detail).toMatch(/encrypted with key [0-9a-f]{8}, which is not among the configured keys/);
  });

  it("a wrong key and no key are clear typed errors in the API's answers; nothing is handed out encrypted", { timeout: 60_000 }, async () => {
    const a = app([oldKey], "enc-w");
    expect((await api(a, "/workflows/canary_flow/instances", { instanceId: "enc-wrong", input: { secret: CANARY.input } })).status).toBe(201);
    await a.waitFor("enc-wrong", ["waiting_for_message"]);

    const wrong = app([newKey()], "enc-wrong");
    const r1 = await api(wrong, "/instances/enc-wrong");
    expect(r1.status).toBe(500);
    expect(await r1.json()).toMatchObject({ error_type: "PayloadDecryptionError", reason: "unknown_key", retryable: false });
    const none = app(undefined, "enc-none");
    const r2 = await api(none, "/instances/enc-wrong");
    expect(await r2.json()).toMatchObject({ error_type: "PayloadDecryptionError", reason: "no_key" });
    expect(await (await api(none, "/instances/enc-wrong")).text()).not.toContain("$enc");
  });

  it("a step run where the key is missing fails as a step with PayloadDecryptionError (towards quarantine), never replays an envelope", { timeout: 60_000 }, async () => {
    const keyed = app([oldKey], "enc-s");
    const keyless = app(undefined, "enc-s-none");
    await keyed.edda.start("sleepy", { secret: CANARY.input }, { instanceId: "enc-step" });
    await keyed.waitFor("enc-step", ["waiting_for_timer"]);
    await keyed.dispatcher.close(); // its in-process wake-up would run the step with the key
    await new Promise((r) => setTimeout(r, 1100));
    await keyless.edda.sweep(); // fires the timer and runs the step here, without the key
    const failure = async () => (await queryRows<{ failure_count: number; failure_data: string | null }>(keyless.database.db, sql`SELECT failure_count, failure_data FROM workflow_instances WHERE instance_id = 'enc-step'`))[0];
    for (let i = 0; i < 100 && !(await failure())?.failure_count; i++) await new Promise((r) => setTimeout(r, 50));
    const f = await failure();
    expect(f?.failure_count).toBeGreaterThan(0);
    expect(f?.failure_data).toContain("PayloadDecryptionError");
    const [row] = await queryRows<{ status: string; locked_by: string | null }>(keyless.database.db, sql`SELECT status, locked_by FROM workflow_instances WHERE instance_id = 'enc-step'`);
    expect(row).toEqual({ status: "running", locked_by: null }); // the lease went back: the keyed deployment takes it
  });

  it("a broadcast event's sealed data reaches the waiting instance (copied into its history sealed); a match on data fields is refused by name", { timeout: 60_000 }, async () => {
    const a = app([oldKey], "enc-ev");
    await a.edda.start("on_event", { by: "subject" }, { instanceId: "enc-ev-1" });
    await a.waitFor("enc-ev-1", ["waiting_for_message"]);
    const ingest = await a.edda.fetch(
      new Request("http://127.0.0.1/events", {
        method: "POST",
        headers: { "content-type": "application/cloudevents+json" },
        body: JSON.stringify({ specversion: "1.0", id: "e1", source: "/t", type: "order.paid", subject: "o-1", data: { note: CANARY.message } }),
      }),
    );
    expect(ingest.status).toBe(202);
    const done = await a.waitFor("enc-ev-1", ["completed", "failed"]);
    expect(done.output).toEqual({ note: CANARY.message });
    expect(dump()).not.toContain(CANARY.message);

    await a.edda.start("on_event", { by: "data" }, { instanceId: "enc-ev-2" });
    for (let i = 0; i < 100; i++) {
      const [r] = await queryRows<{ failure_data: string | null }>(a.database.db, sql`SELECT failure_data FROM workflow_instances WHERE instance_id = 'enc-ev-2'`);
      if (r?.failure_data) {
        expect(r.failure_data).toContain("EncryptedMatchError");
        return;
      }
      await new Promise((res) => setTimeout(res, 50));
    }
    throw new Error("the data match was not refused");
  });
});

describe("encryption at rest: stream items and webhook deliveries", () => {
  it("a stream item and a webhook's body are sealed in the database and plain where they are read", { timeout: 60_000 }, async () => {
    const a = app([oldKey], "enc-x");
    await a.edda.start("sealed_extras", null, { instanceId: "enc-x1" });
    await a.waitFor("enc-x1", ["waiting_for_webhook"]);
    const engine = await (await import("../../src/edda.ts")).engineOf(a.edda);
    const items = (await engine.storage.readStream("enc-x1", 0, { limit: 10 })).items.map((i) => (i.data.type === "json" ? JSON.parse(i.data.json) : null) as unknown);
    expect(items).toContainEqual({ token: STREAM_CANARY });
    const path = (items.find((i) => typeof (i as { path?: unknown }).path === "string") as { path: string }).path;
    const fired = await a.edda.fetch(new Request(`http://127.0.0.1${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ note: HOOK_CANARY }) }));
    expect(fired.status).toBe(202);
    const done = await a.waitFor("enc-x1", ["completed", "failed"]);
    expect(done.output).toEqual({ note: HOOK_CANARY });
    const text = dump();
    expect(text).toContain("enc-x1");
    expect(text).not.toContain(STREAM_CANARY);
    expect(text).not.toContain(HOOK_CANARY);
  });
});

describe("encryption at rest on PGlite", () => {
  it("runs a workflow to its end with every payload column sealed", { timeout: 60_000 }, async () => {
    const database = await openTestDatabase("pglite", "enc");
    const a = makeTestApp(database, { workflows: [canaryFlow], encryptionKeys: oldKey });
    apps.push(a);
    await runToEnd(a, "enc-lite");
    expect((await a.edda.getInstance("enc-lite"))?.output).toEqual({ got: [CANARY.input, CANARY.result, CANARY.message], out: CANARY.output });
    const rows = await queryRows<Record<string, string | null>>(
      database.db,
      sql`SELECT (SELECT string_agg(coalesce(input_data, '') || coalesce(output_data, ''), '') FROM workflow_instances) AS i,
                 (SELECT string_agg(coalesce(event_data, ''), '') FROM workflow_history) AS h,
                 (SELECT string_agg(args, '') FROM workflow_compensations) AS c,
                 (SELECT string_agg(coalesce(data, ''), '') FROM channel_messages) AS m`,
    );
    const stored = JSON.stringify(rows);
    expect(stored).toContain("$enc");
    for (const canary of Object.values(CANARY)) expect(stored, canary).not.toContain(canary);
  });
});
