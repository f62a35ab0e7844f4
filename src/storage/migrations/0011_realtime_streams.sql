CREATE TABLE "workflow_stream_chunks" (
	"instance_id" varchar(255) NOT NULL,
	"seq" bigint NOT NULL,
	"kind" varchar(16) NOT NULL,
	"source" varchar(255) NOT NULL,
	"run" integer DEFAULT 1 NOT NULL,
	"attempt" integer DEFAULT 1 NOT NULL,
	"topic" varchar(255),
	"data_type" varchar(10) NOT NULL,
	"data" text,
	"data_binary" "bytea",
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "workflow_stream_chunks_instance_id_seq_pk" PRIMARY KEY("instance_id","seq"),
	CONSTRAINT "stream_valid_kind" CHECK ("workflow_stream_chunks"."kind" IN ('chunk', 'emit', 'retry')),
	CONSTRAINT "stream_data_type_consistency" CHECK (("workflow_stream_chunks"."data_type" = 'json' AND "workflow_stream_chunks"."data" IS NOT NULL AND "workflow_stream_chunks"."data_binary" IS NULL) OR ("workflow_stream_chunks"."data_type" = 'binary' AND "workflow_stream_chunks"."data" IS NULL AND "workflow_stream_chunks"."data_binary" IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "workflow_streams" (
	"instance_id" varchar(255) PRIMARY KEY NOT NULL,
	"last_seq" bigint DEFAULT 0 NOT NULL,
	"total_bytes" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
ALTER TABLE "workflow_stream_chunks" ADD CONSTRAINT "workflow_stream_chunks_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_streams" ADD CONSTRAINT "workflow_streams_instance_id_workflow_instances_instance_id_fk" FOREIGN KEY ("instance_id") REFERENCES "public"."workflow_instances"("instance_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "uq_stream_emit" ON "workflow_stream_chunks" USING btree ("instance_id","run","source") WHERE "workflow_stream_chunks"."kind" = 'emit';--> statement-breakpoint
CREATE INDEX "idx_stream_source" ON "workflow_stream_chunks" USING btree ("instance_id","source");