CREATE TABLE "workflow_instance_tags" (
	"instance_id" varchar(255) NOT NULL,
	"key" varchar(64) NOT NULL,
	"value" varchar(256) NOT NULL,
	CONSTRAINT "workflow_instance_tags_instance_id_key_pk" PRIMARY KEY("instance_id","key")
);
--> statement-breakpoint
ALTER TABLE "workflow_instance_tags" ADD CONSTRAINT "workflow_instance_tags_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_instance_tags_key_value" ON "workflow_instance_tags" USING btree ("key","value","instance_id");