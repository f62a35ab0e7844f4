CREATE TABLE "channel_delivery_cursors" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"channel" varchar(255) NOT NULL,
	"instance_id" varchar(255) NOT NULL,
	"last_delivered_id" bigint NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "unique_channel_delivery_cursor" UNIQUE("channel","instance_id")
);
--> statement-breakpoint
CREATE TABLE "channel_message_claims" (
	"message_id" varchar(255) PRIMARY KEY NOT NULL,
	"instance_id" varchar(255) NOT NULL,
	"claimed_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "channel_messages" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"channel" varchar(255) NOT NULL,
	"message_id" varchar(255) NOT NULL,
	"data_type" varchar(10) NOT NULL,
	"data" text,
	"data_binary" "bytea",
	"metadata" text,
	"target_instance_id" varchar(255),
	"published_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "channel_messages_message_id_unique" UNIQUE("message_id"),
	CONSTRAINT "channel_valid_data_type" CHECK ("channel_messages"."data_type" IN ('json', 'binary')),
	CONSTRAINT "channel_data_type_consistency" CHECK (("channel_messages"."data_type" = 'json' AND "channel_messages"."data" IS NOT NULL AND "channel_messages"."data_binary" IS NULL) OR ("channel_messages"."data_type" = 'binary' AND "channel_messages"."data" IS NULL AND "channel_messages"."data_binary" IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "channel_subscriptions" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"instance_id" varchar(255) NOT NULL,
	"channel" varchar(255) NOT NULL,
	"mode" varchar(20) NOT NULL,
	"activity_id" varchar(255),
	"cursor_message_id" bigint,
	"timeout_at" timestamp with time zone,
	"subscribed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "unique_channel_instance_channel" UNIQUE("instance_id","channel"),
	CONSTRAINT "channel_valid_mode" CHECK ("channel_subscriptions"."mode" IN ('broadcast', 'competing', 'direct'))
);
--> statement-breakpoint
CREATE TABLE "cloudevent_dedupe" (
	"source" varchar(1024) NOT NULL,
	"event_id" varchar(255) NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "cloudevent_dedupe_source_event_id_pk" PRIMARY KEY("source","event_id")
);
--> statement-breakpoint
CREATE TABLE "outbox_events" (
	"event_id" varchar(255) PRIMARY KEY NOT NULL,
	"event_type" varchar(255) NOT NULL,
	"event_source" varchar(255) NOT NULL,
	"data_type" varchar(10) NOT NULL,
	"event_data" text,
	"event_data_binary" "bytea",
	"content_type" varchar(100) DEFAULT 'application/json' NOT NULL,
	"extensions" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"published_at" timestamp with time zone,
	"status" varchar(50) DEFAULT 'pending' NOT NULL,
	"retry_count" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_error" text,
	CONSTRAINT "outbox_valid_status" CHECK ("outbox_events"."status" IN ('pending', 'processing', 'published', 'failed', 'invalid', 'expired')),
	CONSTRAINT "outbox_valid_data_type" CHECK ("outbox_events"."data_type" IN ('json', 'binary')),
	CONSTRAINT "outbox_data_type_consistency" CHECK (("outbox_events"."data_type" = 'json' AND "outbox_events"."event_data" IS NOT NULL AND "outbox_events"."event_data_binary" IS NULL) OR ("outbox_events"."data_type" = 'binary' AND "outbox_events"."event_data" IS NULL AND "outbox_events"."event_data_binary" IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "schema_version" (
	"version" integer PRIMARY KEY NOT NULL,
	"applied_at" timestamp with time zone DEFAULT now() NOT NULL,
	"description" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "system_locks" (
	"lock_name" varchar(255) PRIMARY KEY NOT NULL,
	"locked_by" varchar(255),
	"locked_at" timestamp with time zone,
	"lock_expires_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "workflow_compensations" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"instance_id" varchar(255) NOT NULL,
	"activity_id" varchar(255) NOT NULL,
	"activity_name" varchar(255) NOT NULL,
	"args" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "unique_instance_compensation" UNIQUE("instance_id","activity_id")
);
--> statement-breakpoint
CREATE TABLE "workflow_definitions" (
	"workflow_name" varchar(255) NOT NULL,
	"source_hash" varchar(64) NOT NULL,
	"source_code" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "workflow_definitions_workflow_name_source_hash_pk" PRIMARY KEY("workflow_name","source_hash")
);
--> statement-breakpoint
CREATE TABLE "workflow_group_memberships" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"instance_id" varchar(255) NOT NULL,
	"group_name" varchar(255) NOT NULL,
	"joined_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "unique_instance_group" UNIQUE("instance_id","group_name")
);
--> statement-breakpoint
CREATE TABLE "workflow_history" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"instance_id" varchar(255) NOT NULL,
	"activity_id" varchar(255) NOT NULL,
	"event_type" varchar(100) NOT NULL,
	"data_type" varchar(10) NOT NULL,
	"event_data" text,
	"event_data_binary" "bytea",
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "unique_instance_activity" UNIQUE("instance_id","activity_id"),
	CONSTRAINT "history_valid_data_type" CHECK ("workflow_history"."data_type" IN ('json', 'binary')),
	CONSTRAINT "history_data_type_consistency" CHECK (("workflow_history"."data_type" = 'json' AND "workflow_history"."event_data" IS NOT NULL AND "workflow_history"."event_data_binary" IS NULL) OR ("workflow_history"."data_type" = 'binary' AND "workflow_history"."event_data" IS NULL AND "workflow_history"."event_data_binary" IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "workflow_history_archive" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"instance_id" varchar(255) NOT NULL,
	"run" integer NOT NULL,
	"activity_id" varchar(255) NOT NULL,
	"event_type" varchar(100) NOT NULL,
	"data_type" varchar(10) NOT NULL,
	"event_data" text,
	"event_data_binary" "bytea",
	"created_at" timestamp with time zone NOT NULL,
	"archived_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "workflow_instances" (
	"instance_id" varchar(255) PRIMARY KEY NOT NULL,
	"workflow_name" varchar(255) NOT NULL,
	"source_hash" varchar(64) NOT NULL,
	"owner_service" varchar(255) NOT NULL,
	"status" varchar(50) DEFAULT 'running' NOT NULL,
	"current_activity_id" varchar(255),
	"continued_from" varchar(255),
	"run" integer DEFAULT 1 NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"input_data" text NOT NULL,
	"output_data" text,
	"error_data" text,
	"cancel_data" text,
	"locked_by" varchar(255),
	"locked_at" timestamp with time zone,
	"lock_token" bigint DEFAULT 0 NOT NULL,
	"lock_timeout_seconds" integer,
	"lock_expires_at" timestamp with time zone,
	CONSTRAINT "valid_status" CHECK ("workflow_instances"."status" IN ('running', 'waiting_for_timer', 'waiting_for_message', 'compensating', 'completed', 'failed', 'cancelled'))
);
--> statement-breakpoint
CREATE TABLE "workflow_timer_subscriptions" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"instance_id" varchar(255) NOT NULL,
	"timer_id" varchar(255) NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"activity_id" varchar(255),
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "unique_instance_timer" UNIQUE("instance_id","timer_id")
);
--> statement-breakpoint
ALTER TABLE "channel_delivery_cursors" ADD CONSTRAINT "channel_delivery_cursors_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "channel_message_claims" ADD CONSTRAINT "channel_message_claims_message_id_channel_messages_message_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."channel_messages"("message_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "channel_message_claims" ADD CONSTRAINT "channel_message_claims_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "channel_subscriptions" ADD CONSTRAINT "channel_subscriptions_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_compensations" ADD CONSTRAINT "workflow_compensations_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_group_memberships" ADD CONSTRAINT "workflow_group_memberships_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_history" ADD CONSTRAINT "workflow_history_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_history_archive" ADD CONSTRAINT "workflow_history_archive_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD CONSTRAINT "workflow_instances_workflow_name_source_hash_workflow_definitions_workflow_name_source_hash_fk" FOREIGN KEY ("workflow_name","source_hash") REFERENCES "public"."workflow_definitions"("workflow_name","source_hash") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_timer_subscriptions" ADD CONSTRAINT "workflow_timer_subscriptions_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_channel_delivery_cursors_channel" ON "channel_delivery_cursors" USING btree ("channel");--> statement-breakpoint
CREATE INDEX "idx_channel_message_claims_instance" ON "channel_message_claims" USING btree ("instance_id");--> statement-breakpoint
CREATE INDEX "idx_channel_messages_channel" ON "channel_messages" USING btree ("channel","published_at");--> statement-breakpoint
CREATE INDEX "idx_channel_messages_channel_id" ON "channel_messages" USING btree ("channel","id");--> statement-breakpoint
CREATE INDEX "idx_channel_messages_target" ON "channel_messages" USING btree ("target_instance_id");--> statement-breakpoint
CREATE INDEX "idx_channel_subscriptions_channel" ON "channel_subscriptions" USING btree ("channel");--> statement-breakpoint
CREATE INDEX "idx_channel_subscriptions_instance" ON "channel_subscriptions" USING btree ("instance_id");--> statement-breakpoint
CREATE INDEX "idx_channel_subscriptions_waiting" ON "channel_subscriptions" USING btree ("channel","activity_id");--> statement-breakpoint
CREATE INDEX "idx_channel_subscriptions_timeout" ON "channel_subscriptions" USING btree ("timeout_at");--> statement-breakpoint
CREATE INDEX "idx_cloudevent_dedupe_received" ON "cloudevent_dedupe" USING btree ("received_at");--> statement-breakpoint
CREATE INDEX "idx_outbox_status" ON "outbox_events" USING btree ("status","next_attempt_at");--> statement-breakpoint
CREATE INDEX "idx_outbox_created" ON "outbox_events" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "idx_system_locks_expires" ON "system_locks" USING btree ("lock_expires_at");--> statement-breakpoint
CREATE INDEX "idx_compensations_instance" ON "workflow_compensations" USING btree ("instance_id","created_at");--> statement-breakpoint
CREATE INDEX "idx_definitions_name" ON "workflow_definitions" USING btree ("workflow_name");--> statement-breakpoint
CREATE INDEX "idx_definitions_hash" ON "workflow_definitions" USING btree ("source_hash");--> statement-breakpoint
CREATE INDEX "idx_group_memberships_group" ON "workflow_group_memberships" USING btree ("group_name");--> statement-breakpoint
CREATE INDEX "idx_group_memberships_instance" ON "workflow_group_memberships" USING btree ("instance_id");--> statement-breakpoint
CREATE INDEX "idx_history_instance" ON "workflow_history" USING btree ("instance_id","id");--> statement-breakpoint
CREATE INDEX "idx_history_archive_instance" ON "workflow_history_archive" USING btree ("instance_id","run");--> statement-breakpoint
CREATE INDEX "idx_history_archive_archived" ON "workflow_history_archive" USING btree ("archived_at");--> statement-breakpoint
CREATE INDEX "idx_instances_status" ON "workflow_instances" USING btree ("status");--> statement-breakpoint
CREATE INDEX "idx_instances_workflow" ON "workflow_instances" USING btree ("workflow_name");--> statement-breakpoint
CREATE INDEX "idx_instances_owner" ON "workflow_instances" USING btree ("owner_service");--> statement-breakpoint
CREATE INDEX "idx_instances_started" ON "workflow_instances" USING btree ("started_at");--> statement-breakpoint
CREATE INDEX "idx_instances_lock_expires" ON "workflow_instances" USING btree ("lock_expires_at");--> statement-breakpoint
CREATE INDEX "idx_instances_updated" ON "workflow_instances" USING btree ("updated_at");--> statement-breakpoint
CREATE INDEX "idx_instances_hash" ON "workflow_instances" USING btree ("source_hash");--> statement-breakpoint
CREATE INDEX "idx_instances_continued_from" ON "workflow_instances" USING btree ("continued_from");--> statement-breakpoint
CREATE INDEX "idx_instances_resumable" ON "workflow_instances" USING btree ("status","locked_by");--> statement-breakpoint
CREATE INDEX "idx_timer_subscriptions_expires" ON "workflow_timer_subscriptions" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "idx_timer_subscriptions_instance" ON "workflow_timer_subscriptions" USING btree ("instance_id");