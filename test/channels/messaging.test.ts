// Channels, messages, groups, recur and CloudEvents through the public API and
// HTTP (app.request), on PGlite and real Postgres.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  activity,
  ChannelModeConflictError,
  joinGroup,
  publish,
  publishToGroup,
  receive,
  sendTo,
  sleep,
  subscribe,
  TerminalError,
  waitMessage,
  workflow,
  type Workflow,
} from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { workflows as examples } from "../../functions/workflows/index.ts";
import { makeTestApp, openTestDatabase, type DriverKind, type TestApp } from "../support/engine.ts";

const binaryEcho = workflow("m_binary", async (ctx) => {
  const m = await waitMessage<Uint8Array>(ctx, "bytes");
  return { isBytes: m.data instanceof Uint8Array, bytes: Array.from(m.data) };
});
const publishThenFail = activity("m_publish_then_fail", async (ctx, fail: boolean) => {
  await publish(ctx, "m_tx", { fail });
  if (fail) throw new TerminalError("rolled back");
});
const txPublisher = workflow("m_tx_publisher", async (ctx, fail: boolean) => {
  try {
    await publishThenFail(ctx, fail);
  } catch {
    return "failed";
  }
  return "ok";
});
const txListener = workflow("m_tx_listener", async (ctx) => {
  await subscribe(ctx, "m_tx", "broadcast");
  const m = await receive(ctx, "m_tx", { timeoutSeconds: 1 });
  return m.data;
});
const modeA = workflow("m_mode_a", async (ctx) => {
  await subscribe(ctx, "m_mode", "broadcast");
  await sleep(ctx, 3600);
});
const modeB = workflow("m_mode_b", async (ctx) => {
  try {
    await subscribe(ctx, "m_mode", "competing");
    return "subscribed";
  } catch (e) {
    return { name: (e as Error).name, isClass: e instanceof ChannelModeConflictError };
  }
});
const member = workflow("m_member", async (ctx, group: string) => {
  await joinGroup(ctx, group);
  const m = await waitMessage(ctx, "announce");
  return m.data;
});
const announcer = workflow("m_announcer", async (ctx, group: string) => publishToGroup(ctx, group, "announce", { hello: group }));
const p2pSender = workflow("m_p2p_sender", async (ctx, target: string) => sendTo(ctx, target, "p2p", "for you only"));
const p2pSnooper = workflow("m_p2p_snooper", async (ctx) => {
  await subscribe(ctx, "p2p", "broadcast");
  try {
    return (await receive(ctx, "p2p", { timeoutSeconds: 1 })).data;
  } catch (e) {
    return (e as Error).name;
  }
});

const workflows: Workflow[] = [...examples, binaryEcho, txPublisher, txListener, modeA, modeB, member, announcer, p2pSender, p2pSnooper];

describe.each<DriverKind>(["pglite", "postgres-js"])("messaging on %s", (kind) => {
  let t: TestApp;
  const post = async (path: string, body: unknown, headers: Record<string, string> = { "content-type": "application/json" }): Promise<Response> =>
    t.edda.app.request(path, { method: "POST", headers, body: typeof body === "string" || body instanceof Uint8Array ? (body as BodyInit) : JSON.stringify(body) });
  const count = async (table: string) => Number((await queryRows<{ n: number }>(t.database.db, sql.raw(`SELECT count(*)::int AS n FROM ${table}`)))[0]!.n);

  beforeAll(async () => {
    t = makeTestApp(await openTestDatabase(kind, `messaging_${kind}`), { workflows });
  });
  afterAll(async () => {
    await t.edda.close();
    await t.database.close();
  });

  it("approval: a message sent before the wait is not lost; a timeout returns status timeout", async () => {
    const { instanceId } = await t.edda.start("approval", { requestId: "a1", timeoutSeconds: 30 }, { instanceId: `ap-${kind}` });
    const r = await post(`/instances/${instanceId}/messages`, { channel: "approval", data: { approved: false, approver: "bob" } });
    expect(r.status).toBe(202);
    expect((await t.waitFor(instanceId)).output).toEqual({ status: "rejected", approver: "bob" });
    const late = await t.edda.start("approval", { requestId: "a2", timeoutSeconds: 0.3 });
    expect((await t.waitFor(late.instanceId)).output).toEqual({ status: "timeout" });
    expect((await post("/instances/nope/messages", { channel: "approval", data: 1 })).status).toBe(404);
    expect((await post(`/instances/${instanceId}/messages`, { data: 1 })).status).toBe(422);
  });

  it("binary message payloads round-trip byte-exact", async () => {
    const { instanceId } = await t.edda.start(binaryEcho, null);
    const bytes = new Uint8Array(256).map((_, i) => i);
    await sendTo(t.edda, instanceId, "bytes", bytes);
    expect((await t.waitFor(instanceId)).output).toEqual({ isBytes: true, bytes: Array.from(bytes) });
  });

  it("publish inside a transactional activity wakes subscribers after commit, never after rollback", async () => {
    const a = await t.edda.start(txListener, null);
    await t.waitFor(a.instanceId, ["waiting_for_message"]);
    await t.waitFor((await t.edda.start(txPublisher, true)).instanceId);
    const b = await t.edda.start(txListener, null);
    await t.waitFor(b.instanceId, ["waiting_for_message"]);
    await t.waitFor((await t.edda.start(txPublisher, false)).instanceId);
    // a saw only the committed message (the rolled-back one never existed)
    expect((await t.waitFor(a.instanceId)).output).toEqual({ fail: false });
    expect((await t.waitFor(b.instanceId)).output).toEqual({ fail: false });
  });

  it("a mode conflict raises ChannelModeConflictError in the workflow", async () => {
    const a = await t.edda.start(modeA, null);
    await t.waitFor(a.instanceId, ["waiting_for_timer"]);
    const b = await t.edda.start(modeB, null);
    expect((await t.waitFor(b.instanceId)).output).toEqual({ name: "ChannelModeConflictError", isClass: true });
    await t.edda.cancel(a.instanceId);
  });

  it("groups: publishToGroup reaches every member and reports the count; members leave when they finish", async () => {
    const g = `g-${kind}`;
    const members = await Promise.all([1, 2, 3].map(() => t.edda.start(member, g)));
    for (const m of members) await t.waitFor(m.instanceId, ["waiting_for_message"]);
    const ann = await t.edda.start(announcer, g);
    expect((await t.waitFor(ann.instanceId)).output).toBe(3);
    for (const m of members) expect((await t.waitFor(m.instanceId)).output).toEqual({ hello: g });
    const left = await queryRows(t.database.db, sql`SELECT 1 FROM workflow_group_memberships WHERE group_name = ${g}`);
    expect(left).toEqual([]);
  });

  it("a point-to-point message is never visible to another subscriber", async () => {
    const snoop = await t.edda.start(p2pSnooper, null);
    await t.waitFor(snoop.instanceId, ["waiting_for_message"]);
    const target = await t.edda.start(binaryEcho, null);
    await t.waitFor((await t.edda.start(p2pSender, target.instanceId)).instanceId);
    expect((await t.waitFor(snoop.instanceId)).output).toBe("MessageTimeoutError");
    const subs = await queryRows(t.database.db, sql`SELECT 1 FROM channel_subscriptions WHERE instance_id = ${snoop.instanceId}`);
    expect(subs).toEqual([]);
    await t.edda.cancel(target.instanceId);
  });

  it("CloudEvents: binary, structured and batch modes; eddainstanceid targets one instance; duplicates accepted once", async () => {
    const waiting = await Promise.all(["p1", "p2"].map((o) => t.edda.start("payment_wait", { orderId: `${o}-${kind}` })));
    for (const w of waiting) await t.waitFor(w.instanceId, ["waiting_for_message"]);
    const binary = await post("/events", JSON.stringify({ amount: 7 }), {
      "content-type": "application/json",
      "ce-specversion": "1.0",
      "ce-type": "payment.completed",
      "ce-source": "/test",
      "ce-id": `bin-${kind}`,
      "ce-eddainstanceid": waiting[0]!.instanceId,
    });
    expect(binary.status).toBe(202);
    expect((await t.waitFor(waiting[0]!.instanceId)).output).toEqual({ orderId: `p1-${kind}`, amount: 7 });
    const before = await count("channel_messages");
    const dup = await post("/events", JSON.stringify({ amount: 7 }), {
      "content-type": "application/json",
      "ce-specversion": "1.0",
      "ce-type": "payment.completed",
      "ce-source": "/test",
      "ce-id": `bin-${kind}`,
    });
    expect(dup.status).toBe(202);
    expect(await dup.json()).toMatchObject({ duplicate: true });
    expect(await count("channel_messages")).toBe(before);
    const structured = await post(
      "/",
      { specversion: "1.0", type: "payment.completed", source: "/test", id: `st-${kind}`, data: { amount: 9 }, eddainstanceid: waiting[1]!.instanceId },
      { "content-type": "application/cloudevents+json" },
    );
    expect(structured.status).toBe(202);
    expect((await t.waitFor(waiting[1]!.instanceId)).output).toEqual({ orderId: `p2-${kind}`, amount: 9 });
    const batch = await post(
      "/events",
      [
        { specversion: "1.0", type: "m.batch", source: "/test", id: `b1-${kind}`, data: 1 },
        { specversion: "1.0", type: "m.batch", source: "/test", id: `b2-${kind}`, data: 2 },
      ],
      { "content-type": "application/cloudevents-batch+json" },
    );
    expect(batch.status).toBe(202);
    expect(((await batch.json()) as { events: unknown[] }).events).toHaveLength(2);
  });

  it("CloudEvents: malformed bodies are 400 with retryable:false and change nothing", async () => {
    const before = await count("channel_messages");
    const bad = [
      post("/events", "{not json", { "content-type": "application/cloudevents+json" }),
      post("/events", { specversion: "1.0", type: "x" }, { "content-type": "application/cloudevents+json" }),
      post("/", "{}", { "content-type": "application/json" }),
      post("/events", new Uint8Array([0xff, 0xfe, 0x80]), { "content-type": "application/cloudevents+json" }),
    ];
    for (const r of await Promise.all(bad)) {
      expect(r.status).toBe(400);
      expect(await r.json()).toMatchObject({ error_type: "InvalidCloudEvent", retryable: false });
    }
    expect(await count("channel_messages")).toBe(before);
  });

  it("recur keeps the subscription: a job published between runs is not missed", async () => {
    const w = await t.edda.start("job_worker", { workerId: `solo-${kind}`, remaining: 3 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(await publish(t.edda, "jobs", { i }));
      await new Promise((r) => setTimeout(r, 30));
    }
    const done = await t.waitFor(w.instanceId);
    expect(done.run).toBe(4);
    expect((done.output as { processed: string[] }).processed.sort()).toEqual(ids.sort());
  });
});
