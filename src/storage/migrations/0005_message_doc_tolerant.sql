-- A message whose JSON text Postgres's jsonb refuses — valid JSON, but a lone
-- surrogate escape (\ud800) or a \u0000 escape — made every insert into
-- channel_messages fail, because the match index evaluates edda_message_doc on
-- insert: one hostile publish was a 500 and a CloudEvent batch holding it was
-- lost. Such a message now gets a document without its data (or none at all
-- when even its metadata is refused): it is stored and delivered like any
-- other, and only a `match` on its data cannot see it. For every other message
-- the document is the same as before, so the index stays valid.
CREATE OR REPLACE FUNCTION edda_message_doc(data_type text, data text, metadata text) RETURNS jsonb
  LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN ('{"data":' || CASE WHEN data_type = 'json' THEN data ELSE 'null' END || ',"meta":' || coalesce(metadata, 'null') || '}')::jsonb;
EXCEPTION WHEN data_exception THEN
  BEGIN
    RETURN ('{"data":null,"meta":' || coalesce(metadata, 'null') || '}')::jsonb;
  EXCEPTION WHEN data_exception THEN
    RETURN NULL;
  END;
END $$;
