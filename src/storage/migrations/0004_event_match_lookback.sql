CREATE TABLE "channel_message_receipts" (
	"instance_id" varchar(255) NOT NULL,
	"message_id" varchar(255) NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "channel_message_receipts_instance_id_message_id_pk" PRIMARY KEY("instance_id","message_id")
);
--> statement-breakpoint
ALTER TABLE "channel_subscriptions" ADD COLUMN "match" jsonb;--> statement-breakpoint
ALTER TABLE "channel_subscriptions" ADD COLUMN "lookback_from" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "channel_message_receipts" ADD CONSTRAINT "channel_message_receipts_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "channel_message_receipts" ADD CONSTRAINT "channel_message_receipts_message_id_channel_messages_message_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."channel_messages"("message_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_channel_message_receipts_message" ON "channel_message_receipts" USING btree ("message_id");--> statement-breakpoint
-- An event's document for matching (waitEvent's `match`): `{ data, meta }` with
-- the message's JSON data (null for binary data) and its metadata (the CloudEvent
-- attributes as `ce_*`). Built from the stored text, so nothing is stored twice;
-- immutable, so a GIN index can hold it and a wait's match is one containment.
CREATE OR REPLACE FUNCTION edda_message_doc(data_type text, data text, metadata text) RETURNS jsonb
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT ('{"data":' || CASE WHEN data_type = 'json' THEN data ELSE 'null' END || ',"meta":' || coalesce(metadata, 'null') || '}')::jsonb
$$;
--> statement-breakpoint
CREATE INDEX "idx_channel_messages_doc" ON "channel_messages" USING gin (edda_message_doc("data_type", "data", "metadata") jsonb_path_ops);
