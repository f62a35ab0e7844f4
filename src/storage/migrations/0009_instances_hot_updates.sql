DROP INDEX "idx_instances_status";--> statement-breakpoint
DROP INDEX "idx_instances_workflow";--> statement-breakpoint
DROP INDEX "idx_instances_owner";--> statement-breakpoint
DROP INDEX "idx_instances_lock_expires";--> statement-breakpoint
DROP INDEX "idx_instances_hash";--> statement-breakpoint
DROP INDEX "idx_instances_continued_from";--> statement-breakpoint
CREATE INDEX "idx_instances_definition" ON "workflow_instances" USING btree ("workflow_name","source_hash");--> statement-breakpoint
CREATE INDEX "idx_instances_leased" ON "workflow_instances" USING btree ("locked_by") WHERE "workflow_instances"."locked_by" IS NOT NULL;--> statement-breakpoint
-- Room on every page for the new version of a row a step rewrites, so the update can stay on its page (HOT).
ALTER TABLE "workflow_instances" SET (fillfactor = 80);
