CREATE TABLE "bulk_operations" (
	"operation_id" varchar(255) PRIMARY KEY NOT NULL,
	"action" varchar(16) NOT NULL,
	"filter" text NOT NULL,
	"status" varchar(16) DEFAULT 'running' NOT NULL,
	"total" integer NOT NULL,
	"done" integer DEFAULT 0 NOT NULL,
	"skipped" integer DEFAULT 0 NOT NULL,
	"failed" integer DEFAULT 0 NOT NULL,
	"cursor" varchar(255),
	"snapshot_at" timestamp with time zone NOT NULL,
	"errors" text DEFAULT '[]' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "bulk_valid_status" CHECK ("bulk_operations"."status" IN ('running', 'completed'))
);
--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "origin_instance_id" varchar(255);--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "origin_kind" varchar(10);--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "origin_activity_id" varchar(255);--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "priority" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "workflow_schedules" ADD COLUMN "paused_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "idx_bulk_operations_status" ON "bulk_operations" USING btree ("status");