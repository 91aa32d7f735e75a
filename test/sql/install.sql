-- install: the extension, its catalog and its search_path safety
CREATE EXTENSION mop;
-- the tests' helper for bad input (later files use it): err(q) runs q and
-- returns "SQLSTATE: message" (or "no error")
CREATE FUNCTION err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT extname, extversion, n.nspname AS schema, extrelocatable
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE extname = 'mop';
-- not trusted: only superusers may install it
SELECT name, version, trusted, superuser FROM pg_available_extension_versions WHERE name = 'mop' ORDER BY version;
-- catalog tables, each with a primary key and a comment
SELECT c.relname, obj_description(c.oid, 'pg_class') IS NOT NULL AS commented,
       EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p') AS has_pk,
       c.relrowsecurity AS rls
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'mop' AND c.relkind = 'r' ORDER BY 1;
-- foreign keys
SELECT conrelid::regclass AS from_table, confrelid::regclass AS to_table
  FROM pg_constraint WHERE contype = 'f' AND connamespace = 'mop'::regnamespace
 ORDER BY 1, 2;
-- uncompressed storage for the packed buffers and checkpoints
SELECT attrelid::regclass, attname, attstorage FROM pg_attribute
 WHERE attrelid IN ('mop.buffers'::regclass, 'mop.models'::regclass)
   AND attname IN ('x', 'y', 'state') ORDER BY 1, 2;
-- user-facing functions are callable unqualified with the default search_path
SHOW search_path;
SELECT p.oid::regprocedure AS function, p.prosecdef AS security_definer, p.proconfig
  FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'mop'
 ORDER BY 1::text;
-- GUC
SHOW mop.blas_threads;
