DROP INDEX "idx_instances_rate";--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "admitted_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "singleton_key" varchar(255);--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "debounce_key" varchar(255);--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "not_before" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "idx_instances_singleton" ON "workflow_instances" USING btree ("singleton_key","status") WHERE "workflow_instances"."singleton_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "idx_instances_debounce" ON "workflow_instances" USING btree ("debounce_key","not_before") WHERE "workflow_instances"."debounce_key" IS NOT NULL AND "workflow_instances"."status" = 'queued';--> statement-breakpoint
CREATE INDEX "idx_instances_rate" ON "workflow_instances" USING btree ("rate_key","admitted_at") WHERE "workflow_instances"."rate_key" IS NOT NULL;