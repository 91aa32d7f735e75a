# 008_search_path_owner.pl -- a database owner's search_path cannot make a
# superuser run the owner's code through mop.
#
# A role that is no superuser creates a database (CREATE DATABASE ...
# OWNER), in which a superuser installs mop in a schema of its own ("ml",
# as docs/sql.md advises: public belongs to the database owner, who could
# put overloads of mop's functions there).  The owner then plants, in a
# schema "evil" of their own, an operator of the same argument types in
# front of every operator of pg_catalog (jsonb ->> text, bigint = bigint,
# text = text, ...), operators pg_catalog lacks for mixed arithmetic
# (float8 * bigint, float8 / bigint, ...; an exact match beats a cast),
# functions of the same signature as the pg_catalog functions mop's code
# calls (now(), clock_timestamp(), random(), format(text, text), round,
# jsonb_set, ...) and aggregates (count(*), count, sum, avg, max, min,
# bool_and, string_agg), each recording its call in evil.calls, and sets
# ALTER DATABASE ... SET search_path = evil, pg_catalog, public.
# A superuser then calls every mop entry point in that database -- in the
# calling session, in mop's background coordinator and workers, in the
# short worker that marks orphaned runs and in the automatic resume after
# an immediate stop (mop is preloaded) -- and after each, evil.calls must
# be empty: no planted object ever ran.  (The superuser names mop's
# functions and its tables schema-qualified: a name the caller writes is
# resolved in the caller's search_path, as in any SQL.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('owner');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'mop'
max_worker_processes = 16
fsync = off
restart_after_crash = on
client_min_messages = warning
});
$node->start;

# the owner: no superuser, no role creation, may create databases
$node->safe_psql('postgres', 'CREATE ROLE dbowner LOGIN CREATEDB NOSUPERUSER NOCREATEROLE');
$node->safe_psql('postgres', 'CREATE DATABASE victim OWNER dbowner',
	connstr => $node->connstr('postgres') . ' user=dbowner');
is($node->safe_psql('postgres',
	"SELECT r.rolsuper FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = 'victim'"),
	'f', 'database "victim" belongs to dbowner, no superuser');

# the superuser installs mop and makes the data
$node->safe_psql('victim', q{
CREATE SCHEMA ml;
CREATE EXTENSION mop SCHEMA ml;
CREATE TABLE public.pts AS
SELECT (i % 3)::text AS label,
       ARRAY(SELECT ((i % 3) * 0.3 + sin(i * 5 + j))::real FROM generate_series(1, 16) j) AS v
  FROM generate_series(1, 600) i;
});

# the owner plants its objects and sets the database's search_path
my @funcs = qw(abs array_agg avg bool_and bool_or ceil clock_timestamp count dense_rank exp extract floor format generate_series isfinite jsonb_array_elements_text jsonb_each jsonb_pretty jsonb_set jsonb_typeof lag left ln log ltrim max md5 min now pg_column_size pg_extension_config_dump pg_get_serial_sequence power random rank round row_number rtrim sqrt string_agg sum to_char to_json to_jsonb to_regtype xmlagg);
my $plant = <<'SQL';
CREATE SCHEMA evil;
CREATE TABLE evil.calls (what text, by_role name DEFAULT current_user, at timestamptz DEFAULT pg_catalog.clock_timestamp());
GRANT USAGE ON SCHEMA evil TO PUBLIC;
GRANT INSERT ON evil.calls TO PUBLIC;
CREATE FUNCTION evil.rec(w text) RETURNS void LANGUAGE sql
  AS $$ INSERT INTO evil.calls (what) VALUES (w) $$;
DO $plant$
DECLARE
  o record; f record; n int := 0; nf int := 0; na int := 0; fn text; sig text; args text;
BEGIN
  -- every operator of pg_catalog, with its exact argument types
  FOR o IN SELECT p.oid, p.oprname, p.oprleft, p.oprright, p.oprresult FROM pg_catalog.pg_operator p
            WHERE p.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace LOOP
    fn := 'evil.op_' || o.oid;
    BEGIN
      IF o.oprleft OPERATOR(pg_catalog.=) 0 THEN
        EXECUTE pg_catalog.format('CREATE FUNCTION %s(b %s) RETURNS %s LANGUAGE sql AS %L', fn,
          o.oprright::regtype, o.oprresult::regtype,
          pg_catalog.format('SELECT evil.rec(%L); SELECT OPERATOR(pg_catalog.%s) $1',
            o.oprname || ' ' || o.oprright::regtype, o.oprname));
        EXECUTE pg_catalog.format('CREATE OPERATOR evil.%s (RIGHTARG = %s, FUNCTION = %s)', o.oprname, o.oprright::regtype, fn);
      ELSE
        EXECUTE pg_catalog.format('CREATE FUNCTION %s(a %s, b %s) RETURNS %s LANGUAGE sql AS %L', fn,
          o.oprleft::regtype, o.oprright::regtype, o.oprresult::regtype,
          pg_catalog.format('SELECT evil.rec(%L); SELECT $1 OPERATOR(pg_catalog.%s) $2',
            o.oprleft::regtype || ' ' || o.oprname || ' ' || o.oprright::regtype, o.oprname));
        EXECUTE pg_catalog.format('CREATE OPERATOR evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)',
          o.oprname, o.oprleft::regtype, o.oprright::regtype, fn);
      END IF;
      n := n OPERATOR(pg_catalog.+) 1;
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END LOOP;
  -- mixed-type arithmetic pg_catalog lacks (an exact match beats an implicit cast)
  FOR o IN SELECT * FROM (VALUES ('*', 'float8', 'bigint'), ('/', 'float8', 'bigint'), ('+', 'float8', 'bigint'),
                                 ('-', 'float8', 'bigint'), ('*', 'bigint', 'float8'), ('/', 'bigint', 'float8'),
                                 ('*', 'float8', 'integer'), ('/', 'float8', 'integer'), ('*', 'integer', 'float8'),
                                 ('/', 'integer', 'float8'), ('+', 'float8', 'integer'), ('-', 'float8', 'integer'))
                     v(oprname, l, r) LOOP
    fn := pg_catalog.format('evil.mixed_%s', n);
    n := n OPERATOR(pg_catalog.+) 1;
    EXECUTE pg_catalog.format('CREATE FUNCTION %s(a %s, b %s) RETURNS float8 LANGUAGE sql AS %L', fn, o.l, o.r,
      pg_catalog.format('SELECT evil.rec(%L); SELECT $1::float8 OPERATOR(pg_catalog.%s) $2::float8',
        o.l || ' ' || o.oprname || ' ' || o.r, o.oprname));
    EXECUTE pg_catalog.format('CREATE OPERATOR evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)', o.oprname, o.l, o.r, fn);
  END LOOP;
  -- every ordinary pg_catalog function of a name mop's code calls, same signature
  FOR f IN SELECT p.oid, p.proname, p.proretset, p.prorettype,
                  pg_catalog.string_agg(pg_catalog.format('a%s %s', a.i, a.t::regtype), ', ' ORDER BY a.i) FILTER (WHERE a.i IS NOT NULL) AS decl,
                  pg_catalog.string_agg(pg_catalog.format('$%s', a.i), ', ' ORDER BY a.i) FILTER (WHERE a.i IS NOT NULL) AS pass
             FROM pg_catalog.pg_proc p
             LEFT JOIN LATERAL pg_catalog.unnest(p.proargtypes::oid[]) WITH ORDINALITY a(t, i) ON true
            WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace AND p.prokind OPERATOR(pg_catalog.=) 'f'
              AND p.proallargtypes IS NULL AND p.provariadic OPERATOR(pg_catalog.=) 0
              AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY[@FUNCS@]::name[])
            GROUP BY p.oid, p.proname, p.proretset, p.prorettype LOOP
    fn := 'evil.fn_' || f.oid;
    BEGIN
      EXECUTE pg_catalog.format('CREATE FUNCTION evil.%I(%s) RETURNS %s%s LANGUAGE sql AS %L', f.proname,
        COALESCE(f.decl, ''), CASE WHEN f.proretset THEN 'SETOF ' ELSE '' END, f.prorettype::regtype,
        pg_catalog.format('SELECT evil.rec(%L); SELECT %s pg_catalog.%I(%s)', f.proname || '(' || COALESCE(f.decl, '') || ')',
          CASE WHEN f.proretset THEN '* FROM' ELSE '' END, f.proname, COALESCE(f.pass, '')));
      nf := nf OPERATOR(pg_catalog.+) 1;
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END LOOP;
  RAISE NOTICE 'planted % operators, % functions', n, nf;
END
$plant$;
-- format() with typed arguments (pg_catalog's is VARIADIC "any": a typed one wins)
CREATE FUNCTION evil.format(f text, a text) RETURNS text LANGUAGE sql
  AS $$ SELECT evil.rec('format(text, text)'); SELECT pg_catalog.format($1, $2) $$;
CREATE FUNCTION evil.format(f text, a bigint) RETURNS text LANGUAGE sql
  AS $$ SELECT evil.rec('format(text, bigint)'); SELECT pg_catalog.format($1, $2) $$;
CREATE FUNCTION evil.format(f text, a text, b text) RETURNS text LANGUAGE sql
  AS $$ SELECT evil.rec('format(text, text, text)'); SELECT pg_catalog.format($1, $2, $3) $$;
-- aggregates
CREATE FUNCTION evil.count_step(s bigint) RETURNS bigint LANGUAGE sql
  AS $$ SELECT evil.rec('count(*)'); SELECT $1 OPERATOR(pg_catalog.+) 1 $$;
CREATE AGGREGATE evil.count(*) (SFUNC = evil.count_step, STYPE = bigint, INITCOND = '0');
@AGGS@
SQL
my $aggs = '';
my $k = 0;
for my $t ('bigint', 'integer', 'float8', 'numeric', 'real', 'text', 'timestamptz')
{
	for my $a ('sum', 'avg', 'max', 'min')
	{
		next if $t =~ /text|timestamptz/ && $a =~ /sum|avg/;
		$k++;
		$aggs .= qq{CREATE FUNCTION evil.agg_$k(s $t, v $t) RETURNS $t LANGUAGE sql
  AS \$\$ SELECT evil.rec('$a($t)'); SELECT \$2 \$\$;
CREATE AGGREGATE evil.$a($t) (SFUNC = evil.agg_$k, STYPE = $t);
};
	}
}
for my $t ('bigint', 'integer', 'float8', 'text', 'jsonb', 'boolean', 'timestamptz')
{
	$k++;
	$aggs .= qq{CREATE FUNCTION evil.agg_$k(s bigint, v $t) RETURNS bigint LANGUAGE sql
  AS \$\$ SELECT evil.rec('count($t)'); SELECT \$1 OPERATOR(pg_catalog.+) 1 \$\$;
CREATE AGGREGATE evil.count($t) (SFUNC = evil.agg_$k, STYPE = bigint, INITCOND = '0');
};
}
$aggs .= q{CREATE FUNCTION evil.agg_b(s boolean, v boolean) RETURNS boolean LANGUAGE sql
  AS $$ SELECT evil.rec('bool_and/bool_or(boolean)'); SELECT $2 $$;
CREATE AGGREGATE evil.bool_and(boolean) (SFUNC = evil.agg_b, STYPE = boolean);
CREATE AGGREGATE evil.bool_or(boolean) (SFUNC = evil.agg_b, STYPE = boolean);
CREATE FUNCTION evil.agg_s(s text, v text, d text) RETURNS text LANGUAGE sql
  AS $$ SELECT evil.rec('string_agg(text, text)'); SELECT $2 $$;
CREATE AGGREGATE evil.string_agg(text, text) (SFUNC = evil.agg_s, STYPE = text);
};
my $fl = join(', ', map { "'$_'" } @funcs);
$plant =~ s/\@FUNCS\@/$fl/;
$plant =~ s/\@AGGS\@/$aggs/;
my $owner = $node->connstr('victim') . ' user=dbowner';
$node->safe_psql('victim', $plant . 'ALTER DATABASE victim SET search_path = evil, pg_catalog, public;',
	connstr => $owner);
my ($planted_ops, $planted_funcs) = split /\|/, $node->safe_psql('victim', q{
SET search_path = pg_catalog;
SELECT (SELECT count(*) FROM pg_operator WHERE oprnamespace = 'evil'::regnamespace),
       (SELECT count(*) FROM pg_proc WHERE pronamespace = 'evil'::regnamespace AND proname !~ '^(op|mixed|agg)_')});
cmp_ok($planted_ops, '>=', 700, "the owner planted $planted_ops operators");
cmp_ok($planted_funcs, '>=', 60, "the owner planted $planted_funcs functions and aggregates");

# what the planted objects recorded (read with a safe search_path), then forget it
sub calls
{
	my $c = $node->safe_psql('victim',
		'SET search_path = pg_catalog; SELECT count(*) FROM evil.calls');
	if ($c ne '0')
	{
		diag($node->safe_psql('victim',
			q{SET search_path = pg_catalog; SELECT string_agg(DISTINCT what || ' (as ' || by_role || ')', ', ') FROM evil.calls}));
		$node->safe_psql('victim', 'TRUNCATE evil.calls');
	}
	return $c;
}

# a query with the safe search_path (the test's own reads)
sub q_safe
{
	return $node->safe_psql('victim', "SET search_path = pg_catalog, public; $_[0]",
		timeout => $PostgreSQL::Test::Utils::timeout_default);
}

# until run $run has at least $n hops (a query that runs no planted object)
sub wait_hops
{
	my ($run, $n) = @_;
	return $node->poll_query_until('victim',
		"SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) $n FROM mop.hops WHERE run_id OPERATOR(pg_catalog.=) $run");
}

# a mop call by the superuser in a session with the owner's search_path
sub call
{
	my ($label, $sql) = @_;
	my ($rc, $out, $err) = $node->psql('victim', $sql,
		timeout => $PostgreSQL::Test::Utils::timeout_default);
	is($rc, 0, "$label: succeeds") or diag($err);
	is(calls(), 0, "$label: no planted object ran");
	return $out;
}

# the trap works: unqualified SQL of the superuser runs the owner's objects
$node->safe_psql('victim', q{SELECT '{"a": 1}'::jsonb ->> 'a', 2.0::float8 * 3::bigint, now()});
cmp_ok(
	$node->safe_psql('victim', 'SET search_path = pg_catalog; SELECT count(*) FROM evil.calls; TRUNCATE evil.calls'),
	'>=', 3, "the trap works: the superuser's own unqualified SQL ran the planted ->>, * and now()");
is($node->safe_psql('victim', 'SHOW search_path'), 'evil, pg_catalog, public',
	"the superuser's sessions have the owner's search_path");

my $model = '{"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]}';
my $space = qq({"model": $model, "learning_rate": [0.01, 0.003], "batch_size": 16, "seed": 1});
my $rspace = qq({"model": $model, "learning_rate": {"loguniform": [0.0001, 0.1]}, "batch_size": [16, 32]});

call('mop_prepare', "SELECT dataset_name FROM ml.mop_prepare('public.pts', 'label', ARRAY['v'], partitions => 2, buffer_rows => 128)");
call('mop_prepare of a second dataset',
	"SELECT dataset_name FROM ml.mop_prepare('public.pts', 'label', ARRAY['v'], dataset => 'pts2', partitions => 2)");
my $m = call('mop_train', qq{SELECT ml.mop_train('pts', '{"model": $model, "learning_rate": 0.01}', 2)});
my $grid = call('mop_grid_search (blocking)',
	"SELECT DISTINCT run_id FROM ml.mop_grid_search('pts', '$space', epochs => 2, workers => 2)");
my $bg = call('mop_grid_search (wait => false)',
	"SELECT DISTINCT run_id FROM ml.mop_grid_search('pts', '$space', epochs => 2, workers => 2, wait => false)");
is(call('mop_wait', "SELECT ml.mop_wait($bg)"), 'done', 'mop_wait: the run is done');
call('mop_random_search', "SELECT DISTINCT run_id FROM ml.mop_random_search('pts', '$rspace', trials => 2, epochs => 1, workers => 2, seed => 2)");
call('mop_hyperband_plan', 'SELECT * FROM ml.mop_hyperband_plan(9, 3)');
call('mop_hyperband', "SELECT DISTINCT run_id FROM ml.mop_hyperband('pts', '$rspace', max_resource => 3, eta => 3, workers => 2, seed => 1)");
call('mop_asha', "SELECT DISTINCT run_id FROM ml.mop_asha('pts', '$rspace', max_resource => 3, eta => 3, max_trials => 4, workers => 2, seed => 1)");
my $tpe = call('mop_tpe', "SELECT DISTINCT run_id FROM ml.mop_tpe('pts', '$rspace', trials => 4, epochs => 1, n_startup => 2, workers => 2, seed => 1)");
my $pbt = call('mop_pbt', qq{SELECT DISTINCT run_id FROM ml.mop_pbt('pts', '{"model": $model, "optimizer": "sgd", "learning_rate": {"loguniform": [0.0001, 0.1]}, "batch_size": [16, 32]}', population => 4, epochs => 2, "interval" => 1, workers => 2, seed => 1)});
call('mop_pbt_schedule', "SELECT * FROM ml.mop_pbt_schedule((SELECT pg_catalog.min(id) FROM mop.models WHERE run_id OPERATOR(pg_catalog.=) $pbt))");
call('mop_replay', "SELECT DISTINCT run_id FROM ml.mop_replay($grid)");
call('mop_resume with add => (a finished run)',
	qq{SELECT DISTINCT run_id FROM ml.mop_resume($grid, add => '{"model": $model, "learning_rate": 0.05}')});
call('mop_gpu_devices', 'SELECT * FROM ml.mop_gpu_devices()');

# a long run: mop.progress while it trains, mop_cancel, mop_resume of the cancelled run
my $long = call('mop_grid_search of a long run (wait => false)',
	"SELECT DISTINCT run_id FROM ml.mop_grid_search('pts', '{\"model\": $model, \"learning_rate\": [0.01, 0.003], \"batch_size\": 1}', epochs => 100000, workers => 2, wait => false)");
ok(wait_hops($long, 4), "run $long trains");
call('mop.progress read while a run trains', 'SELECT * FROM mop.progress');
call('mop.run_progress read while a run trains', 'SELECT * FROM mop.run_progress');
is(call('mop_cancel', "SELECT ml.mop_cancel($long)"), 'cancelled', 'mop_cancel: the run is cancelled');
my $h = q_safe("SELECT count(*) FROM mop.hops WHERE run_id = $long");
call('mop_resume of the cancelled run (wait => false)', "SELECT DISTINCT run_id FROM ml.mop_resume($long, wait => false)");
ok(wait_hops($long, $h + 4), "resumed run $long trains");
is(calls(), 0, 'the resumed run trained: no planted object ran');
is(call('mop_cancel of the resumed run', "SELECT ml.mop_cancel($long)"), 'cancelled', 'mop_cancel: the resumed run is cancelled');

# models
call('mop_predict', "SELECT ml.mop_predict($m, ARRAY[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]::float8[])");
call('mop_predict (typed)', "SELECT ml.mop_predict($m, ARRAY[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]::float8[], NULL::int)");
call('mop_predict_proba', "SELECT ml.mop_predict_proba($m, ARRAY[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]::float8[])");
is(call('mop_predict_table', "SELECT ml.mop_predict_table($m, 'public.pts', 'public.preds')"), 600, 'mop_predict_table: 600 rows written');
call('mop_evaluate', "SELECT * FROM ml.mop_evaluate($m, 'public.pts')");

# reads and pictures
call('mop.leaderboard read', 'SELECT * FROM mop.leaderboard');
call('mop.best read', 'SELECT * FROM mop.best');
call('mop.progress read', 'SELECT * FROM mop.progress');
call('mop.run_progress read', 'SELECT * FROM mop.run_progress');
call('mop_plot_gantt', "SELECT ml.mop_plot_gantt($grid)");
call('mop_plot_curves', "SELECT ml.mop_plot_curves($grid), ml.mop_plot_curves($grid, y => 'train_loss', x => 'seconds')");
call('mop_plot_history', "SELECT ml.mop_plot_history($tpe)");
call('mop_plot_parallel', "SELECT ml.mop_plot_parallel($tpe)");
call('mop_report', "SELECT ml.mop_report($grid), ml.mop_report($pbt)");

# the automatic resume after an immediate stop (mop is preloaded)
my $auto = call('mop_grid_search of a run to be stopped (wait => false)',
	"SELECT DISTINCT run_id FROM ml.mop_grid_search('pts', '{\"model\": $model, \"learning_rate\": [0.01, 0.003], \"batch_size\": 1}', epochs => 100000, workers => 2, wait => false)");
ok(wait_hops($auto, 4), "run $auto trains");
$h = q_safe("SELECT count(*) FROM mop.hops WHERE run_id = $auto");
my $log_offset = -s $node->logfile;
$node->stop('immediate');
$node->start;
ok(wait_hops($auto, $h + 4),
	"run $auto trains again after an immediate stop, by itself");
my $said = 0;
for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
{
	last if ($said = $node->log_contains(qr/mop run $auto resumed after a restart/, $log_offset));
	usleep(100_000);
}
ok($said, "run $auto resumed automatically (the server log says so)");
is(calls(), 0, 'the automatic resume: no planted object ran');
is(call('mop_cancel of the automatically resumed run', "SELECT ml.mop_cancel($auto)"), 'cancelled',
	'mop_cancel: the resumed run is cancelled');

# without preloading: the first mop call after a restart marks the orphaned
# run in a short worker of its own
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->restart;
my $orph = call('mop_grid_search of a run to be orphaned (wait => false)',
	"SELECT DISTINCT run_id FROM ml.mop_grid_search('pts', '{\"model\": $model, \"learning_rate\": [0.01, 0.003], \"batch_size\": 1}', epochs => 100000, workers => 2, wait => false)");
ok(wait_hops($orph, 4), "run $orph trains");
$node->stop('immediate');
$node->start;
call('mop.progress read after a restart (marks the orphaned run)', 'SELECT * FROM mop.progress');
ok($node->poll_query_until('victim',
	"SELECT status OPERATOR(pg_catalog.=) 'interrupted' FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $orph"),
	"run $orph marked interrupted");
is(calls(), 0, 'marking the orphaned run: no planted object ran');
call('mop_resume of the interrupted run (wait => false)', "SELECT DISTINCT run_id FROM ml.mop_resume($orph, wait => false)");
is(call('mop_cancel of the resumed run', "SELECT ml.mop_cancel($orph)"), 'cancelled', 'mop_cancel: the resumed run is cancelled');

call('mop_drop_dataset', "SELECT ml.mop_drop_dataset('pts2')");
is(q_safe("SELECT count(*) FROM mop.datasets WHERE name = 'pts2'"), 0, 'mop_drop_dataset: the dataset is gone');
# a dataset with runs: their deletion fires mop's trigger on mop.runs
call('mop_drop_dataset of a dataset with runs', "SELECT ml.mop_drop_dataset('pts')");
is(q_safe("SELECT count(*) FROM mop.runs"), 0, 'mop_drop_dataset: its runs are gone');
# DROP EXTENSION fires mop's event trigger
call('DROP EXTENSION mop', 'DROP EXTENSION mop');
is(calls(), 0, 'at the end: evil.calls is empty');

$node->stop;
done_testing();
