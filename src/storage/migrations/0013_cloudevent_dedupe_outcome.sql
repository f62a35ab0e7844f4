ALTER TABLE "cloudevent_dedupe" ADD COLUMN "event_type" varchar(255);--> statement-breakpoint
ALTER TABLE "cloudevent_dedupe" ADD COLUMN "event_time" varchar(64);--> statement-breakpoint
ALTER TABLE "cloudevent_dedupe" ADD COLUMN "message_id" varchar(255);--> statement-breakpoint
ALTER TABLE "cloudevent_dedupe" ADD COLUMN "started_instance_id" varchar(255);