ALTER TABLE "workflow_instances" ADD COLUMN "deployment" varchar(255);--> statement-breakpoint
CREATE INDEX "idx_instances_deployment" ON "workflow_instances" USING btree ("deployment","status");