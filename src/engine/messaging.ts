/**
 * Channels, messages and groups as user-facing operations.
 *
 * In workflow code, operations with database effects (subscribe, publish,
 * joinGroup…) are built-in activities: recorded in history, executed once,
 * in the step transaction. In activity code they join the activity's
 * transaction. From a client (the `Edda` object, or an engine) they run
 * directly. Subscribers are woken only after the publishing transaction
 * commits — never after a rollback.
 */
import { checkStoredName } from "../core/errors.ts";
import { activity, type Activity } from "../core/definitions.ts";
import type { ActivityContext, WorkflowContext } from "../core/context.ts";
import { encodeIdPart } from "../core/ids.ts";
import { callActivityAt, isWorkflowContext, operationId } from "../core/operation.ts";
import { toStoredJson, toStoredPayload } from "../core/serialization.ts";
import type { ChannelMode } from "../core/model.ts";
import { activityInternalsOf, isActivityContext } from "./execute.ts";

export interface PublishOptions {
  metadata?: Record<string, unknown>;
  /** Point-to-point: only this instance can receive the message. */
  targetInstanceId?: string;
}

/** Anything that can publish: workflow code, activity code, or a client (the `Edda` app). */
export type Publisher = WorkflowContext | ActivityContext | { publish(channel: string, data: unknown, opts?: PublishOptions): Promise<string> };

const internals = activityInternalsOf;

async function publishIn(ctx: ActivityContext, channel: string, data: unknown, opts: PublishOptions): Promise<string> {
  const rt = internals(ctx);
  const msg = await rt.storage.publishMessage({
    channel,
    data: toStoredPayload(data, `message data on channel "${channel}"`),
    metadata: opts.metadata ? toStoredJson(opts.metadata, `message metadata on channel "${channel}"`) : null,
    targetInstanceId: opts.targetInstanceId ?? null,
  });
  rt.afterCommit(() => rt.notify.published(channel));
  return msg.messageId;
}

const subscribeActivity = activity("edda.subscribe", async (ctx, channel: string, mode: ChannelMode) => {
  await internals(ctx).storage.subscribe(ctx.instanceId, channel, mode);
  return null;
});
const unsubscribeActivity = activity("edda.unsubscribe", async (ctx, channel: string) => {
  await internals(ctx).storage.unsubscribe(ctx.instanceId, channel);
  return null;
});
const publishActivity = activity("edda.publish", (ctx, channel: string, data: unknown, opts: PublishOptions) => publishIn(ctx, channel, data, opts));
const joinGroupActivity = activity("edda.join_group", async (ctx, group: string) => {
  await internals(ctx).storage.joinGroup(ctx.instanceId, group);
  return null;
});
const leaveGroupActivity = activity("edda.leave_group", async (ctx, group: string) => {
  await internals(ctx).storage.leaveGroup(ctx.instanceId, group);
  return null;
});
const publishToGroupActivity = activity("edda.publish_to_group", async (ctx, group: string, channel: string, data: unknown, metadata?: Record<string, unknown>) => {
  const members = await internals(ctx).storage.groupMembers(group);
  for (const target of members) await publishIn(ctx, channel, data, { targetInstanceId: target, ...(metadata ? { metadata } : {}) });
  return members.length;
});

/** Built-in activities take ids like `publish_{channel}:n`, the user's text escaped (ids.ts). */
function builtin<A extends unknown[], R>(ctx: WorkflowContext, def: Activity<A, R>, op: string, text: string, args: A): Promise<R> {
  return callActivityAt(ctx, def, args, operationId(ctx, `${op}_${encodeIdPart(text)}`));
}

const checkName = (what: string, v: string) => checkStoredName(what, v);

const isActivityCtx = isActivityContext;

/** Subscribe this instance to a channel (`broadcast` | `competing` | `direct`). */
export function subscribe(ctx: WorkflowContext, channel: string, mode: ChannelMode = "broadcast"): Promise<void> {
  checkName("channel", channel);
  if (!["broadcast", "competing", "direct"].includes(mode)) throw new TypeError(`mode must be broadcast, competing or direct, got ${String(mode)}`);
  return builtin(ctx, subscribeActivity, "subscribe", channel, [channel, mode]).then(() => undefined);
}

export function unsubscribe(ctx: WorkflowContext, channel: string): Promise<void> {
  checkName("channel", channel);
  return builtin(ctx, unsubscribeActivity, "unsubscribe", channel, [channel]).then(() => undefined);
}

/** Publish a message; returns its id. Subscribers wake after the publishing transaction commits. */
export async function publish(from: Publisher, channel: string, data: unknown, opts: PublishOptions = {}): Promise<string> {
  checkName("channel", channel);
  if (isWorkflowContext(from)) return builtin(from, publishActivity, "publish", channel, [channel, data, opts]);
  if (isActivityCtx(from)) return publishIn(from, channel, data, opts);
  return from.publish(channel, data, opts);
}

/** Send a point-to-point message to one instance. */
export function sendTo(from: Publisher, targetInstanceId: string, channel: string, data: unknown, opts: { metadata?: Record<string, unknown> } = {}): Promise<string> {
  checkName("targetInstanceId", targetInstanceId);
  return publish(from, channel, data, { ...opts, targetInstanceId });
}

export function joinGroup(ctx: WorkflowContext, group: string): Promise<void> {
  checkName("group", group);
  return builtin(ctx, joinGroupActivity, "join_group", group, [group]).then(() => undefined);
}

export function leaveGroup(ctx: WorkflowContext, group: string): Promise<void> {
  checkName("group", group);
  return builtin(ctx, leaveGroupActivity, "leave_group", group, [group]).then(() => undefined);
}

/** Send a message to every member of a group; returns how many members it reached. */
export function publishToGroup(ctx: WorkflowContext, group: string, channel: string, data: unknown, opts: { metadata?: Record<string, unknown> } = {}): Promise<number> {
  checkName("group", group);
  checkName("channel", channel);
  return builtin(ctx, publishToGroupActivity, "publish_to_group", group, [group, channel, data, opts.metadata]);
}
