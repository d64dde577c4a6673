-- FerretDB v1 (the dev/CI stand-in for MongoDB) pushes equality filters down to PostgreSQL as
-- `_jsonb -> $key @> $value`. Its own btree indexes cannot serve that operator, so every lookup would scan
-- the whole collection. This event trigger gives FerretDB's tables the GIN expression indexes that can
-- (jsonb_path_ops, fastupdate off: no pending list to scan):
--   * every table, one on `_id` (FerretDB looks documents up by `_id` through the same operator);
--   * every btree index FerretDB creates for a service's `createIndex`, one per field it covers: exactly
--     the fields the services index on MongoDB, and no others — each GIN index costs every insert.
-- Production MongoDB uses the indexes the services create themselves; nothing here changes query results.
CREATE OR REPLACE FUNCTION toolgate_ferretdb_gin() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
  obj record;
  idx record;
  field text;
BEGIN
  FOR obj IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE command_tag IN ('CREATE TABLE', 'CREATE INDEX') LOOP
    IF obj.command_tag = 'CREATE TABLE' AND obj.object_type = 'table' THEN
      IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = obj.objid AND attname = '_jsonb' AND NOT attisdropped) THEN
        EXECUTE format('CREATE INDEX ON %s USING gin ((_jsonb -> %L) jsonb_path_ops) WITH (fastupdate = off)', obj.object_identity, '_id');
      END IF;
    ELSIF obj.command_tag = 'CREATE INDEX' AND obj.object_type = 'index' THEN
      -- Only FerretDB's btree indexes: the GIN indexes made here fire this trigger too, and are left alone.
      SELECT i.indrelid AS table_oid, t.relname AS table_name, n.nspname AS schema_name, pg_get_indexdef(i.indexrelid) AS def
        INTO idx
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid
        JOIN pg_am am ON am.oid = c.relam
        JOIN pg_class t ON t.oid = i.indrelid
        JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE i.indexrelid = obj.objid AND am.amname = 'btree';
      IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = idx.table_oid AND attname = '_jsonb' AND NOT attisdropped) THEN
        CONTINUE;
      END IF;
      FOR field IN SELECT replace(m[1], '''''', '''') FROM regexp_matches(idx.def, '_jsonb -> ''((?:[^'']|'''')+)''::text', 'g') AS m LOOP
        CONTINUE WHEN field = '_id';
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I.%I USING gin ((_jsonb -> %L) jsonb_path_ops) WITH (fastupdate = off)',
          left(idx.table_name, 40) || '_' || left(md5(field), 10) || '_gin', idx.schema_name, idx.table_name, field);
      END LOOP;
    END IF;
  END LOOP;
END $$;
DROP EVENT TRIGGER IF EXISTS toolgate_ferretdb_gin;
CREATE EVENT TRIGGER toolgate_ferretdb_gin ON ddl_command_end WHEN TAG IN ('CREATE TABLE', 'CREATE INDEX') EXECUTE FUNCTION toolgate_ferretdb_gin();
