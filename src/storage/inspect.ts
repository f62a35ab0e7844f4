/**
 * Read-only views for operators (the viewer, tooling): what an instance waits
 * on, its subscriptions, groups and archived runs, counts per status, and the
 * state of channels. Nothing here takes a lock or changes a row, so these
 * queries can run beside live traffic; each is bounded by a limit or by one
 * instance's rows.
 */
import { sql, type SQL } from "drizzle-orm";
import { INSTANCE_STATUSES } from "./schema.ts";
import { availableTo } from "./channel-rules.ts";
import { queryRows, type Executor } from "./database.ts";
import { instanceFilter } from "./instances.ts";
import { MESSAGE_COLUMNS, SUBSCRIPTION_COLUMNS, toChannelMessage, toDate, toJsonValue, toNullableDate, toNumber, toSubscription, type Row } from "./rows.ts";
import type { ChannelMessageRecord, ChannelMode, InstanceFilter, InstanceStatus, SubscriptionRecord } from "./records.ts";

export interface TimerRecord {
  timerId: string;
  /** The history activity id the firing records. */
  activityId: string;
  expiresAt: Date;
}

export interface GroupMembership {
  group: string;
  joinedAt: Date;
}

/** One finished `recur` run whose history was archived. */
export interface ArchivedRunSummary {
  run: number;
  events: number;
  firstEventAt: Date;
  archivedAt: Date;
}

export interface ChannelSummary {
  channel: string;
  /** Modes of the current subscriptions (empty when nobody subscribes). */
  modes: ChannelMode[];
  subscribers: number;
  /** Subscribers currently suspended in a receive on this channel. */
  waiting: number;
  /** Messages stored (within the retention window). */
  messages: number;
  /**
   * Messages not yet received: point-to-point ones nobody claimed, broadcast
   * ones past some subscriber's cursor, and — on a channel without broadcast
   * subscribers — queue messages nobody claimed.
   */
  pending: number;
  lastPublishedAt: Date | null;
}

export interface ChannelSubscriber extends SubscriptionRecord {
  workflowName: string;
  status: InstanceStatus;
  /** Messages this subscriber could take now. */
  available: number;
}

/** Read-only views for operators: no locks, each bounded. */
export interface InspectArea {
  /** Instances per status under the filter (statuses with none are 0). */
  countInstancesByStatus(filter: InstanceFilter): Promise<Record<InstanceStatus, number>>;
  listSubscriptions(instanceId: string): Promise<SubscriptionRecord[]>;
  listTimers(instanceId: string): Promise<TimerRecord[]>;
  listGroups(instanceId: string): Promise<GroupMembership[]>;
  /** Archived `recur` runs, newest first. */
  listArchivedRuns(instanceId: string): Promise<ArchivedRunSummary[]>;
  /** Channels with messages or subscribers, most recently active first. */
  channelOverview(limit: number): Promise<ChannelSummary[]>;
  channelSubscribers(channel: string, limit: number): Promise<ChannelSubscriber[]>;
  /** Pending messages of a channel (see ChannelSummary.pending), oldest first. */
  pendingMessages(channel: string, limit: number): Promise<ChannelMessageRecord[]>;
}

/** Whether message `m` has not been received yet (ChannelSummary.pending). */
function pending(m: string): SQL {
  const msg = sql.raw(m);
  const unclaimed = sql`NOT EXISTS (SELECT 1 FROM channel_message_claims cl WHERE cl.message_id = ${msg}.message_id)`;
  const broadcastSubs = sql`channel_subscriptions bs WHERE bs.channel = ${msg}.channel AND bs.mode = 'broadcast'`;
  return sql`(CASE WHEN ${msg}.target_instance_id IS NOT NULL THEN ${unclaimed}
      ELSE EXISTS (SELECT 1 FROM ${broadcastSubs} AND ${msg}.id > coalesce(bs.cursor_message_id, 0))
        OR (NOT EXISTS (SELECT 1 FROM ${broadcastSubs}) AND ${unclaimed}) END)`;
}

export function inspectArea(ex: Executor): InspectArea {
  return {
    async countInstancesByStatus(filter) {
      const where = instanceFilter(filter);
      const whereSql = where.length ? sql`WHERE ${sql.join(where, sql` AND `)}` : sql``;
      const rows = await queryRows<{ status: string; n: unknown }>(ex, sql`SELECT status, count(*)::int AS n FROM workflow_instances ${whereSql} GROUP BY status`);
      const counts = Object.fromEntries(INSTANCE_STATUSES.map((s) => [s, 0])) as Record<InstanceStatus, number>;
      for (const r of rows) counts[r.status as InstanceStatus] = toNumber(r.n);
      return counts;
    },

    async listSubscriptions(instanceId) {
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT ${SUBSCRIPTION_COLUMNS}
            FROM channel_subscriptions WHERE instance_id = ${instanceId} ORDER BY subscribed_at, id`,
      );
      return rows.map(toSubscription);
    },

    async listTimers(instanceId) {
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT timer_id, coalesce(activity_id, timer_id) AS activity_id, expires_at
            FROM workflow_timer_subscriptions WHERE instance_id = ${instanceId} ORDER BY expires_at, id`,
      );
      return rows.map((r) => ({ timerId: String(r.timer_id), activityId: String(r.activity_id), expiresAt: toDate(r.expires_at) }));
    },

    async listGroups(instanceId) {
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT group_name, joined_at FROM workflow_group_memberships WHERE instance_id = ${instanceId} ORDER BY joined_at, id`,
      );
      return rows.map((r) => ({ group: String(r.group_name), joinedAt: toDate(r.joined_at) }));
    },

    async listArchivedRuns(instanceId) {
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT run, count(*)::int AS events, min(created_at) AS first_at, max(archived_at) AS archived_at
            FROM workflow_history_archive WHERE instance_id = ${instanceId} GROUP BY run ORDER BY run DESC`,
      );
      return rows.map((r) => ({ run: toNumber(r.run), events: toNumber(r.events), firstEventAt: toDate(r.first_at), archivedAt: toDate(r.archived_at) }));
    },

    async channelOverview(limit) {
      const rows = await queryRows<Row>(
        ex,
        sql`
        WITH chans AS (
          SELECT channel FROM channel_messages GROUP BY channel
          UNION SELECT channel FROM channel_subscriptions GROUP BY channel
        )
        SELECT c.channel,
          (SELECT coalesce(json_agg(DISTINCT s.mode), '[]'::json) FROM channel_subscriptions s WHERE s.channel = c.channel) AS modes,
          (SELECT count(*)::int FROM channel_subscriptions s WHERE s.channel = c.channel) AS subscribers,
          (SELECT count(*)::int FROM channel_subscriptions s WHERE s.channel = c.channel AND s.activity_id IS NOT NULL) AS waiting,
          (SELECT count(*)::int FROM channel_messages m WHERE m.channel = c.channel) AS messages,
          (SELECT count(*)::int FROM channel_messages m WHERE m.channel = c.channel AND ${pending("m")}) AS pending,
          (SELECT max(m.published_at) FROM channel_messages m WHERE m.channel = c.channel) AS last_published_at
        FROM chans c
        ORDER BY last_published_at DESC NULLS LAST, c.channel
        LIMIT ${Math.max(1, Math.trunc(limit))}::int`,
      );
      return rows.map((r) => ({
        channel: String(r.channel),
        modes: toJsonValue<ChannelMode[]>(r.modes).sort(),
        subscribers: toNumber(r.subscribers),
        waiting: toNumber(r.waiting),
        messages: toNumber(r.messages),
        pending: toNumber(r.pending),
        lastPublishedAt: toNullableDate(r.last_published_at),
      }));
    },

    async channelSubscribers(channel, limit) {
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT s.instance_id, s.channel, s.mode, s.activity_id, s.cursor_message_id, s.timeout_at, s.subscribed_at,
                   i.workflow_name, i.status,
                   (SELECT count(*)::int FROM channel_messages m WHERE ${availableTo("m", "s")}) AS available
            FROM channel_subscriptions s JOIN workflow_instances i ON i.instance_id = s.instance_id
            WHERE s.channel = ${channel}
            ORDER BY s.subscribed_at, s.id
            LIMIT ${Math.max(1, Math.trunc(limit))}::int`,
      );
      return rows.map((r) => ({ ...toSubscription(r), workflowName: String(r.workflow_name), status: String(r.status) as InstanceStatus, available: toNumber(r.available) }));
    },

    async pendingMessages(channel, limit) {
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT ${MESSAGE_COLUMNS} FROM channel_messages m
            WHERE m.channel = ${channel} AND ${pending("m")}
            ORDER BY m.id LIMIT ${Math.max(1, Math.trunc(limit))}::int`,
      );
      return rows.map(toChannelMessage);
    },
  };
}
