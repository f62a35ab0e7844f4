CREATE TABLE "viewer_session_revocations" (
	"session_id" varchar(64) PRIMARY KEY NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "idx_viewer_session_revocations_expires" ON "viewer_session_revocations" USING btree ("expires_at");