CREATE TABLE "deployments" (
	"deployment" varchar(255) PRIMARY KEY NOT NULL,
	"first_seen_at" timestamp with time zone NOT NULL,
	"last_seen_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "replay_refused_by" varchar(255);--> statement-breakpoint
ALTER TABLE "workflow_instances" ADD COLUMN "replay_refused_error" text;