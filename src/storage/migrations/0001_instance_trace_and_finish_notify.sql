ALTER TABLE "workflow_instances" ADD COLUMN "trace_context" varchar(512);--> statement-breakpoint
-- A NOTIFY when an instance reaches a terminal status, sent at commit: long-poll
-- result requests LISTEN for it instead of polling. Whatever path finishes an
-- instance (a step, a cancel, the sweeper) goes through this UPDATE.
CREATE OR REPLACE FUNCTION edda_notify_instance_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('edda_instance_finished', NEW.instance_id);
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER edda_instance_finished AFTER UPDATE OF status ON workflow_instances
  FOR EACH ROW WHEN (NEW.status IN ('completed', 'failed', 'cancelled') AND OLD.status IS DISTINCT FROM NEW.status)
  EXECUTE FUNCTION edda_notify_instance_finished();
