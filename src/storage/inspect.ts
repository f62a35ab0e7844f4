/**
 * Read-only views for operators (the viewer, tooling): what an instance waits
 * on, its subscriptions, groups and archived runs, counts per status, and the
 * state of channels. Nothing here takes a lock or changes a row, so these
 * queries can run beside live traffic; each is bounded by a limit or by one
 * instance's rows.
 */
import { sql, type SQL } from "drizzle-orm";
import { INSTANCE_STATUSES } from "./schema.ts";
import { TERMINAL_STATUSES } from "./records.ts";
import { availableTo } from "./channel-rules.ts";
import { queryRows, type Executor } from "./database.ts";
import { instanceFilter } from "./instances.ts";
import { DB_NOW, MESSAGE_COLUMNS, SUBSCRIPTION_COLUMNS, toChannelMessage, toDate, toHistoryEvent, toJsonValue, toNullableDate, toNumber, toSubscription, type Row } from "./rows.ts";
import type { ChannelMessageRecord, ChannelMode, HistoryEvent, InstanceFilter, InstanceStatus, SubscriptionRecord } from "./records.ts";

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

/** An open channel wait of one instance (`GET /instances/:id/why`): what it takes and the latest message it could see. */
export interface ChannelWait {
  channel: string;
  mode: ChannelMode;
  /** The receive's operation id. */
  activityId: string;
  timeoutAt: Date | null;
  /** The event match (core/match.ts document), null when any message will do. */
  match: unknown;
  /** Set for an event wait's subscription: only messages published after this count. */
  lookbackFrom: Date | null;
  /** The newest message on the channel this instance may see (broadcast or addressed to it), or null. */
  lastMessage: { messageId: string; publishedAt: Date } | null;
}

/** Who holds or stands before one instance of a flow-control key (`GET /instances/:id/why`). */
export interface FlowKeyPeers {
  /**
   * Concurrency: the unfinished, unqueued instances holding the key's slots (oldest first). Rate limit:
   * the instances admitted in the current window (newest first), each with its admission.
   */
  holders: { instanceId: string; status: InstanceStatus; admittedAt: Date | null }[];
  /** Queued instances of the key that leave the queue before this one (the first few), and how many. */
  ahead: string[];
  aheadCount: number;
}

/** Read-only views for operators: no locks, each bounded. */
/** A deployment that started instances (`GET /deployments`): its id (null: before deployments were recorded). */
export interface DeploymentSummary {
  deployment: string | null;
  /** When its first instance still stored started. */
  startedAt: Date;
  /** Its unfinished instances by status (finished ones are not counted). */
  unfinished: Partial<Record<InstanceStatus, number>>;
}

export interface InspectArea {
  /** Instances per status under the filter (statuses with none are 0). */
  countInstancesByStatus(filter: InstanceFilter): Promise<Record<InstanceStatus, number>>;
  /** Every deployment with instances stored, the most recently started first (at most `limit`). */
  listDeployments(limit: number): Promise<DeploymentSummary[]>;
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
  /** The instance's open channel waits (subscriptions with a receive in progress), with the newest message each could see. */
  channelWaits(instanceId: string): Promise<ChannelWait[]>;
  /**
   * Flow-control peers of a queued instance: for `concurrency`, the key's slot holders; for `rate`, the
   * instances admitted in the last `periodSeconds`; both with the queue ahead of it (admission order:
   * priority, then start). At most `limit` of each.
   */
  flowKeyPeers(option: "concurrency" | "rate", key: string, instanceId: string, opts: { limit: number; periodSeconds?: number }): Promise<FlowKeyPeers>;
  /** One record of the instance's current history by its activity id, or null. */
  historyRecord(instanceId: string, activityId: string): Promise<HistoryEvent | null>;
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

const TERMINAL = sql.raw(TERMINAL_STATUSES.map((s) => `'${s}'`).join(", "));

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

    async listDeployments(limit) {
      const rows = await queryRows<{ deployment: string | null; started_at: unknown; counts: unknown }>(
        ex,
        sql`SELECT deployment, min(started_at) AS started_at,
                   coalesce(json_object_agg(status, n) FILTER (WHERE status NOT IN (${TERMINAL})), '{}'::json) AS counts
            FROM (SELECT deployment, status, min(started_at) AS started_at, count(*)::int AS n FROM workflow_instances GROUP BY deployment, status) d
            GROUP BY deployment ORDER BY min(started_at) DESC LIMIT ${limit}::int`,
      );
      return rows.map((r) => ({
        deployment: r.deployment,
        startedAt: toDate(r.started_at),
        unfinished: (typeof r.counts === "string" ? JSON.parse(r.counts) : r.counts) as Partial<Record<InstanceStatus, number>>,
      }));
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

    async channelWaits(instanceId) {
      // The newest visible message rides idx_channel_messages_channel_id backwards (one row per wait).
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT s.channel, s.mode, s.activity_id, s.timeout_at, s.match, s.lookback_from, last.message_id AS last_id, last.published_at AS last_at
            FROM channel_subscriptions s
            LEFT JOIN LATERAL (
              SELECT m.message_id, m.published_at FROM channel_messages m
              WHERE m.channel = s.channel AND (m.target_instance_id IS NULL OR m.target_instance_id = s.instance_id)
              ORDER BY m.id DESC LIMIT 1
            ) last ON true
            WHERE s.instance_id = ${instanceId} AND s.activity_id IS NOT NULL
            ORDER BY s.subscribed_at, s.id LIMIT 20`,
      );
      return rows.map((r) => ({
        channel: String(r.channel),
        mode: String(r.mode) as ChannelMode,
        activityId: String(r.activity_id),
        timeoutAt: toNullableDate(r.timeout_at),
        match: r.match === null || r.match === undefined ? null : toJsonValue<unknown>(r.match),
        lookbackFrom: toNullableDate(r.lookback_from),
        lastMessage: r.last_id === null || r.last_id === undefined ? null : { messageId: String(r.last_id), publishedAt: toDate(r.last_at) },
      }));
    },

    async flowKeyPeers(option, key, instanceId, opts) {
      const limit = Math.max(1, Math.trunc(opts.limit));
      const column = sql.raw(option === "concurrency" ? "concurrency_key" : "rate_key");
      const holders =
        option === "concurrency"
          ? sql`SELECT instance_id, status, admitted_at FROM workflow_instances
                WHERE concurrency_key = ${key} AND status NOT IN ('completed', 'failed', 'cancelled', 'queued')
                ORDER BY started_at, instance_id LIMIT ${limit}::int`
          : sql`SELECT instance_id, status, admitted_at FROM workflow_instances
                WHERE rate_key = ${key} AND admitted_at > ${DB_NOW} - make_interval(secs => ${opts.periodSeconds ?? 0}::float8)
                ORDER BY admitted_at DESC LIMIT ${limit}::int`;
      // The queue's order is the promotion's (storage/flow-control.ts): priority first, then the oldest start.
      const before = sql`q.${column} = ${key} AND q.status = 'queued' AND q.instance_id <> me.instance_id
              AND (q.priority > me.priority OR (q.priority = me.priority AND (q.started_at, q.instance_id) < (me.started_at, me.instance_id)))`;
      const [held, ahead, counted] = await Promise.all([
        queryRows<Row>(ex, holders),
        queryRows<Row>(
          ex,
          sql`SELECT q.instance_id FROM workflow_instances q, workflow_instances me
              WHERE me.instance_id = ${instanceId} AND ${before}
              ORDER BY q.priority DESC, q.started_at, q.instance_id LIMIT ${limit}::int`,
        ),
        queryRows<Row>(ex, sql`SELECT count(*)::int AS n FROM workflow_instances q, workflow_instances me WHERE me.instance_id = ${instanceId} AND ${before}`),
      ]);
      return {
        holders: held.map((r) => ({ instanceId: String(r.instance_id), status: String(r.status) as InstanceStatus, admittedAt: toNullableDate(r.admitted_at) })),
        ahead: ahead.map((r) => String(r.instance_id)),
        aheadCount: toNumber(counted[0]?.n ?? 0),
      };
    },

    async historyRecord(instanceId, activityId) {
      const [row] = await queryRows<Row>(
        ex,
        sql`SELECT id, activity_id, event_type, data_type, event_data, event_data_binary, created_at
            FROM workflow_history WHERE instance_id = ${instanceId} AND activity_id = ${activityId}`,
      );
      return row ? toHistoryEvent(row) : null;
    },
  };
}
