ALTER TABLE "workflow_instances" DROP CONSTRAINT "valid_status";--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "failure_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "failure_data" text;--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD CONSTRAINT "valid_status" CHECK ("workflow_instances"."status" IN ('running', 'waiting_for_timer', 'waiting_for_message', 'waiting_for_child', 'compensating', 'completed', 'failed', 'cancelled', 'parked', 'quarantined'));