-- FerretDB v1 (the dev/CI stand-in for MongoDB) pushes equality filters down to PostgreSQL as
-- `_jsonb -> $key @> $value`. Its own btree indexes cannot serve that operator, so every lookup by _id
-- would scan the whole collection. This event trigger gives each table FerretDB creates a GIN expression
-- index per field Toolgate looks up by (fastupdate off: no pending list to scan). Production MongoDB uses
-- the indexes the services create themselves; nothing here changes query results.
CREATE OR REPLACE FUNCTION toolgate_ferretdb_gin() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
  obj record;
  field text;
BEGIN
  FOR obj IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE TABLE' AND object_type = 'table' LOOP
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = obj.objid AND attname = '_jsonb' AND NOT attisdropped) THEN
      FOREACH field IN ARRAY ARRAY['_id','call_id','run_id','task_id','chain_id','status'] LOOP
        EXECUTE format('CREATE INDEX ON %s USING gin ((_jsonb -> %L) jsonb_path_ops) WITH (fastupdate = off)', obj.object_identity, field);
      END LOOP;
    END IF;
  END LOOP;
END $$;
DROP EVENT TRIGGER IF EXISTS toolgate_ferretdb_gin;
CREATE EVENT TRIGGER toolgate_ferretdb_gin ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION toolgate_ferretdb_gin();
