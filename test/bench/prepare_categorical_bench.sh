#!/bin/bash
# prepare_categorical_bench.sh -- one-hot preparation throughput: mop_prepare
# on a table with text columns, in one throwaway cluster (pg_virtualenv, mop
# installed), all in ONE database session (so one mop.so is loaded for the
# whole run, whatever is installed meanwhile).  Table cb(label, 4 numeric
# columns, 4 text columns of 5, 50, 1,000 and 50,000 distinct values), ROWS
# rows.  Alternating, ROUNDS times:
#   copy     COPY (SELECT * FROM cb) TO '/dev/null' (reading the table, server side)
#   numeric  mop_prepare over the 4 numeric columns only
#   onehot   mop_prepare over the 4 numeric and the 4 text columns
#            (max_categories 32: 5 + 32 + 32 + 32 one-hot inputs)
#   view     what a user wrote before: the same one-hot by hand, a view of
#            (col = 'value')::int columns for the same vocabularies (the
#            values of the onehot dataset, "other" as NOT IN), prepared as
#            numeric columns (mop standardises them too, as any number)
#   wide     the view materialized (a table of 105 numeric columns),
#            prepared: packing as many inputs with no encoding at all
# Prints MACHINE, SETUP and RESULT lines (seconds, rows/s), and CHECK lines:
# the view's buffers are byte-identical to the onehot dataset's.
#   pg_virtualenv -t -v 15 bash test/bench/prepare_categorical_bench.sh
set -eu
ROWS=${ROWS:-200000}
ROUNDS=${ROUNDS:-5}
P="psql -X -q -At -v ON_ERROR_STOP=1"
echo "MACHINE $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(psql -XAtc 'SELECT version()' | cut -d, -f1), $(date -u +%FT%TZ)"
{
cat <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS mop;
SELECT 'LOAD ' || round(l::numeric, 2) FROM (SELECT split_part(pg_read_file('/proc/loadavg'), ' ', 1)::float8 AS l) s;
SELECT 'MOP ' || extversion FROM pg_extension WHERE extname = 'mop';
DROP TABLE IF EXISTS cb CASCADE;
CREATE TABLE cb AS
SELECT i AS id, (i % 7)::text AS label,
       sin(i)::float8 AS n1, cos(i * 3)::float8 AS n2, (i % 101)::float8 AS n3, (i * 0.001)::float8 AS n4,
       'colour_' || (abs(hashint4(i)) % 5) AS t5,
       'region_' || (abs(hashint4(i + 1)) % 50) AS t50,
       'city_' || (abs(hashint4(i + 2)) % 1000) AS t1000,
       'user_' || (abs(hashint4(i + 3)) % 50000) AS t50000
  FROM generate_series(1, $ROWS) i;
VACUUM ANALYZE cb;
SELECT 'SETUP rows=' || count(*) || ' table_mb=' || round(pg_table_size('cb') / 1e6, 1)
       || ' distinct=' || count(DISTINCT t5) || '/' || count(DISTINCT t50) || '/' || count(DISTINCT t1000) || '/' || count(DISTINCT t50000)
  FROM cb;
-- the onehot dataset once, for its vocabularies; the hand-written view over them
SELECT 'SETUP onehot n_features=' || n_features FROM mop_prepare('cb', 'label',
  ARRAY['n1', 'n2', 'n3', 'n4', 't5', 't50', 't1000', 't50000'], 'cb_vocab', partitions => 2, seed => 1);
CREATE FUNCTION cb_view_sql() RETURNS text LANGUAGE sql AS \$\$
  SELECT 'CREATE VIEW cb_view AS SELECT label, n1, n2, n3, n4, '
         || string_agg(cols, ', ' ORDER BY ord) || ' FROM cb'
    FROM (SELECT f.ord,
                 (SELECT string_agg(CASE WHEN v.val IS NULL THEN format('(%I IS NULL)::int AS %I', f.col, f.col || '_null')
                                         ELSE format('(%I = %L)::int AS %I', f.col, v.val, f.col || '_' || v.k) END,
                                    ', ' ORDER BY v.k)
                    FROM jsonb_array_elements_text(d.categories->f.col->'values') WITH ORDINALITY v(val, k))
                 || CASE WHEN d.categories->f.col->'other' <> 'null'
                         THEN format(', (%I IS NULL OR %I <> ALL (%L::text[]))::int AS %I', f.col, f.col,
                                     ARRAY(SELECT jsonb_array_elements_text(d.categories->f.col->'values')), f.col || '_other')
                         ELSE '' END AS cols
            FROM mop.datasets d, unnest(ARRAY['t5', 't50', 't1000', 't50000']) WITH ORDINALITY f(col, ord)
           WHERE d.name = 'cb_vocab') s \$\$;
SELECT cb_view_sql() \gexec
SELECT 'SETUP view columns=' || count(*) FROM information_schema.columns WHERE table_name = 'cb_view';
CREATE TABLE cb_wide AS SELECT * FROM cb_view;
VACUUM ANALYZE cb_wide;
SELECT 'SETUP wide table_mb=' || round(pg_table_size('cb_wide') / 1e6, 1);
-- the same rows, packed: without standardisation (the view's one-hot
-- columns are numbers to mop, which it would standardise) both datasets'
-- buffers must be byte-identical
SELECT count(*) FROM mop_prepare('cb_view', 'label', NULL, 'cb_view_check', partitions => 2, seed => 1, standardize => false);
SELECT count(*) FROM mop_prepare('cb', 'label', ARRAY['n1', 'n2', 'n3', 'n4', 't5', 't50', 't1000', 't50000'], 'cb_onehot_check', partitions => 2, seed => 1, standardize => false);
SELECT 'CHECK view_buffers_identical=' || bool_and(a.x = b.x AND a.y = b.y) || ' buffers=' || count(*)
  FROM mop.buffers a JOIN mop.buffers b USING (split, partition, buffer_no)
 WHERE a.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'cb_view_check')
   AND b.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'cb_onehot_check');
SELECT mop_drop_dataset('cb_view_check'), mop_drop_dataset('cb_onehot_check');
CREATE FUNCTION cb_time(what text, q text) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz := clock_timestamp(); s float8;
BEGIN
  EXECUTE q;
  s := extract(epoch FROM clock_timestamp() - t0);
  RETURN format('RESULT way=%s seconds=%s rows_per_s=%s', what, round(s::numeric, 3), round($ROWS / s));
END \$\$;
SQL
for r in $(seq "$ROUNDS"); do
	ways="copy numeric onehot view wide"
	[ $((r % 2)) -eq 0 ] && ways="wide view onehot numeric copy"
	for w in $ways; do
		case $w in
		copy) echo "SELECT cb_time('copy round=$r', \$q\$COPY (SELECT * FROM cb) TO '/dev/null'\$q\$);" ;;
		numeric) echo "SELECT cb_time('numeric round=$r', \$q\$SELECT mop_prepare('cb', 'label', ARRAY['n1', 'n2', 'n3', 'n4'], 'cb_num', partitions => 2, seed => 1)\$q\$);"
			echo "SELECT mop_drop_dataset('cb_num') IS NULL;" ;;
		onehot) echo "SELECT cb_time('onehot round=$r', \$q\$SELECT mop_prepare('cb', 'label', ARRAY['n1', 'n2', 'n3', 'n4', 't5', 't50', 't1000', 't50000'], 'cb_hot', partitions => 2, seed => 1)\$q\$);"
			echo "SELECT mop_drop_dataset('cb_hot') IS NULL;" ;;
		wide) echo "SELECT cb_time('wide round=$r', \$q\$SELECT mop_prepare('cb_wide', 'label', NULL, 'cb_w', partitions => 2, seed => 1)\$q\$);"
			echo "SELECT mop_drop_dataset('cb_w') IS NULL;" ;;
		view) echo "SELECT cb_time('view round=$r', \$q\$SELECT mop_prepare('cb_view', 'label', NULL, 'cb_v', partitions => 2, seed => 1)\$q\$);"
			echo "SELECT mop_drop_dataset('cb_v') IS NULL;" ;;
		esac
	done
done
cat <<'SQL'
SELECT 'LOAD ' || round(l::numeric, 2) FROM (SELECT split_part(pg_read_file('/proc/loadavg'), ' ', 1)::float8 AS l) s;
SQL
} | $P | grep -E '^(MOP|SETUP|RESULT|CHECK|LOAD)'
