CREATE TABLE "workflow_payloads" (
	"instance_id" varchar(255) NOT NULL,
	"ref" varchar(64) NOT NULL,
	"size" integer NOT NULL,
	"data" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "workflow_payloads_instance_id_ref_pk" PRIMARY KEY("instance_id","ref")
);
--> statement-breakpoint
ALTER TABLE "workflow_payloads" ADD CONSTRAINT "workflow_payloads_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;