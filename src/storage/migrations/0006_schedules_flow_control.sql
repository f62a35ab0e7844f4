CREATE TABLE "workflow_schedules" (
	"workflow_name" varchar(255) PRIMARY KEY NOT NULL,
	"cron" varchar(255) NOT NULL,
	"timezone" varchar(64) NOT NULL,
	"missed" varchar(10) NOT NULL,
	"next_run_at" timestamp with time zone,
	"last_run_at" timestamp with time zone,
	"last_instance_id" varchar(255),
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "workflow_instances" DROP CONSTRAINT "valid_status";--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "concurrency_key" varchar(255);--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "rate_key" varchar(255);--> statement-breakpoint
CREATE INDEX "idx_workflow_schedules_next" ON "workflow_schedules" USING btree ("next_run_at");--> statement-breakpoint
CREATE INDEX "idx_instances_concurrency" ON "workflow_instances" USING btree ("concurrency_key","status","started_at") WHERE "workflow_instances"."concurrency_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "idx_instances_rate" ON "workflow_instances" USING btree ("rate_key","started_at") WHERE "workflow_instances"."rate_key" IS NOT NULL;--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD CONSTRAINT "valid_status" CHECK ("workflow_instances"."status" IN ('running', 'waiting_for_timer', 'waiting_for_message', 'waiting_for_child', 'compensating', 'completed', 'failed', 'cancelled', 'parked', 'quarantined', 'queued'));