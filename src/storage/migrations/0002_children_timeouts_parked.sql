ALTER TABLE "workflow_instances" DROP CONSTRAINT "valid_status";--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "parent_instance_id" varchar(255);--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "parent_activity_id" varchar(255);--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "detached" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "deadline_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "parked_hash" varchar(64);--> statement-breakpoint
CREATE INDEX "idx_instances_parent" ON "workflow_instances" USING btree ("parent_instance_id") WHERE "workflow_instances"."parent_instance_id" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "idx_instances_deadline" ON "workflow_instances" USING btree ("deadline_at") WHERE "workflow_instances"."deadline_at" IS NOT NULL;--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD CONSTRAINT "valid_status" CHECK ("workflow_instances"."status" IN ('running', 'waiting_for_timer', 'waiting_for_message', 'waiting_for_child', 'compensating', 'completed', 'failed', 'cancelled', 'parked'));