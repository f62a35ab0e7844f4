CREATE TABLE "workflow_webhooks" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"token_hash" varchar(64) NOT NULL,
	"instance_id" varchar(255) NOT NULL,
	"run" integer NOT NULL,
	"hook_id" varchar(255) NOT NULL,
	"status" varchar(20) DEFAULT 'open' NOT NULL,
	"expires_at" timestamp with time zone,
	"payload" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"fired_at" timestamp with time zone,
	CONSTRAINT "unique_webhook_token" UNIQUE("token_hash"),
	CONSTRAINT "unique_webhook_hook" UNIQUE("instance_id","run","hook_id"),
	CONSTRAINT "webhook_valid_status" CHECK ("workflow_webhooks"."status" IN ('open', 'fired', 'expired', 'cancelled'))
);
--> statement-breakpoint
ALTER TABLE "workflow_instances" DROP CONSTRAINT "valid_status";--> statement-breakpoint
ALTER TABLE "workflow_webhooks" ADD CONSTRAINT "workflow_webhooks_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_webhooks_expiry" ON "workflow_webhooks" USING btree ("expires_at") WHERE "workflow_webhooks"."status" = 'open' AND "workflow_webhooks"."expires_at" IS NOT NULL;--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD CONSTRAINT "valid_status" CHECK ("workflow_instances"."status" IN ('running', 'waiting_for_timer', 'waiting_for_message', 'waiting_for_child', 'waiting_for_webhook', 'compensating', 'completed', 'failed', 'cancelled', 'parked', 'quarantined', 'queued'));