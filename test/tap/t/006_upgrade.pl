# 006_upgrade.pl -- ALTER EXTENSION mop UPDATE from 0.1 to 0.2 (needs both
# versions' scripts installed, as make install installs them):
#   1. a 0.1 catalog with data (a superuser and two tenants: prepared
#      datasets, a mop_train model, a grid search with hops and epochs, a
#      decision) is upgraded without losing a row, a checkpoint or a
#      prediction, and training goes on (mop_resume adds a model, mop_train
#      makes a new one, identities continue);
#   2. after the upgrade the views are readable by ordinary roles (own rows
#      only) and a tenant can no longer write rows that refer to another
#      role's run or model (0.1 let it: checked before the upgrade), and the
#      upgrade warned about the row 0.1 let in;
#   3. CREATE EXTENSION mop (0.2) and CREATE EXTENSION mop VERSION '0.1' +
#      ALTER EXTENSION mop UPDATE give the same catalog: members, columns,
#      constraints, indexes, policies, views, functions, grants, initial
#      privileges, comments and pg_dump settings.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $up = 'mop_upgraded';
my $fresh = 'mop_fresh';

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
client_min_messages = warning
});
$node->start;
$node->safe_psql('postgres', qq{
CREATE DATABASE $up;
CREATE DATABASE $fresh;
CREATE ROLE mop_up_alice LOGIN;
CREATE ROLE mop_up_bob LOGIN;
});

# a query in $up, as the superuser or as a role; one that hangs fails the test
sub su
{
	return $node->safe_psql($up, $_[0],
		timeout => $PostgreSQL::Test::Utils::timeout_default);
}
sub as { my ($role, $sql) = @_; return su("SET ROLE $role; $sql"); }

# "SQLSTATE|message|detail" of a statement that must fail (or "no error")
sub attempt
{
	my ($role, $stmt) = @_;
	return as($role, "SELECT err(\$q\$$stmt\$q\$)");
}

# -- 0.1 with data -------------------------------------------------------------
my $cfg = '{"model": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}], "learning_rate": 0.05, "seed": 1}';
my $space = '{"model": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}], "learning_rate": [0.05, 0.01], "seed": 2}';
su(qq{
CREATE EXTENSION mop VERSION '0.1';
CREATE FUNCTION err(q text) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE d text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || '|' || SQLERRM || '|' || d;
END \$\$;
CREATE TABLE pts AS
SELECT (i % 3)::text AS label, sin(i) + (i % 3) AS x, cos(i * 1.3) - (i % 3) AS y
  FROM generate_series(1, 300) i;
GRANT SELECT ON pts TO mop_up_alice, mop_up_bob;
-- the superuser's own dataset and model
SELECT dataset_id FROM mop_prepare('pts', 'label', dataset => 'su_pts', partitions => 2, seed => 3);
SELECT mop_train('su_pts', '$cfg', 2);
SET ROLE mop_up_alice;
SELECT dataset_id FROM mop_prepare('pts', 'label', dataset => 'a_pts', partitions => 2, seed => 1);
SELECT mop_train('a_pts', '$cfg', 3);
-- longest-first reads the planner's profiles and the dataset's placement:
-- neither table is in a 0.1 catalog
SELECT count(*) FROM mop_grid_search('a_pts', '$space', epochs => 2, workers => 2, scheduler => 'longest');
-- a decision of her own (adaptive searches write these)
INSERT INTO mop.decisions (run_id, model_id, action, why, reason)
SELECT run_id, id, 'report', 'test', 'written by hand' FROM mop.models WHERE run_id = (SELECT max(id) FROM mop.runs);
RESET ROLE;
SET ROLE mop_up_bob;
SELECT dataset_id FROM mop_prepare('pts', 'label', dataset => 'b_pts', partitions => 2, seed => 2);
SELECT mop_train('b_pts', '$cfg', 1);
RESET ROLE;
});
my $a_run = su("SELECT max(id) FROM mop.runs WHERE owner = 'mop_up_alice' AND kind <> 'train'");
my $a_model = su("SELECT min(id) FROM mop.models WHERE owner = 'mop_up_alice'");
my $b_ds = su("SELECT id FROM mop.datasets WHERE name = 'b_pts'");
my $b_run = su("SELECT id FROM mop.runs WHERE owner = 'mop_up_bob'");
my $b_model = su("SELECT id FROM mop.models WHERE owner = 'mop_up_bob'");
ok($a_run ne '' && $a_model ne '' && $b_run ne '' && $b_model ne '',
	'0.1: the setup made runs and models for both tenants')
  or die 'upgrade: the setup made no runs';

# what 0.1 allowed: bob puts a model into alice's run; alice cannot read mop.best
my $plant_model = "INSERT INTO mop.models (run_id, dataset_id, config, metric, higher_is_better, status) VALUES ($a_run, $b_ds, '{}', 'accuracy', true, 'training')";
my $plant_hop = "INSERT INTO mop.hops (run_id, model_id, epoch, partition, worker, started_at, finished_at, rows) VALUES ($b_run, $a_model, 99, 0, 0, now(), now(), 1)";
is(attempt('mop_up_bob', $plant_model), 'no error',
	"0.1: a tenant can put a model into another's run (what 0.2 fixes; else this is not 0.1)");
like(attempt('mop_up_alice', 'SELECT count(*) FROM mop.best'), qr/^42501/,
	'0.1: a tenant cannot read mop.best (what 0.2 fixes)');

# -- the state before ---------------------------------------------------------
my $snap = q{SELECT (SELECT count(*) FROM mop.datasets) || ' ' || (SELECT count(*) FROM mop.buffers) || ' ' ||
              (SELECT count(*) FROM mop.runs) || ' ' || (SELECT count(*) FROM mop.models) || ' ' ||
              (SELECT count(*) FROM mop.epochs) || ' ' || (SELECT count(*) FROM mop.hops) || ' ' ||
              (SELECT count(*) FROM mop.decisions) || ' ' ||
              (SELECT md5(string_agg(id || ':' || status || ':' || coalesce(md5(state), '-'), ',' ORDER BY id)) FROM mop.models) || ' ' ||
              (SELECT md5(string_agg(md5(x) || md5(y), ',' ORDER BY dataset_id, split, partition, buffer_no)) FROM mop.buffers) || ' ' ||
              (SELECT md5(string_agg(model_id || ':' || epoch || ':' || valid_metric, ',' ORDER BY model_id, epoch)) FROM mop.epochs)};
my $pred = qq{SELECT string_agg(mop_predict($a_model, ARRAY[x, y]), ',' ORDER BY i) || ' ' ||
             (SELECT round(loss::numeric, 12) || ' ' || metric || ' ' || rows FROM mop_evaluate($a_model, 'pts'))
        FROM (SELECT row_number() OVER () AS i, x, y FROM pts LIMIT 20) s};
my $snap_before = su($snap);
my $pred_before = as('mop_up_alice', $pred);
my $ids_before = su('SELECT max(id) FROM mop.models');
isnt($pred_before, '', '0.1: the tenant predicts and evaluates before the upgrade');

# -- the upgrade --------------------------------------------------------------
my ($rc, $stdout, $stderr) = $node->psql($up, 'ALTER EXTENSION mop UPDATE');
is($rc, 0, 'ALTER EXTENSION mop UPDATE succeeded') or diag($stderr);
is(su("SELECT extversion FROM pg_extension WHERE extname = 'mop'"), '0.2', 'the update went to 0.2');
like($stderr, qr/WARNING:  mop: 1 rows of mop\.models refer to a dataset, run or model of another role/,
	"the update warned about the row 0.1 let one tenant write into another's run");

is(su($snap), $snap_before, 'every row, checkpoint, buffer and epoch kept');
is(as('mop_up_alice', $pred), $pred_before, 'predictions and mop_evaluate unchanged');

# -- training goes on ---------------------------------------------------------
is(as('mop_up_alice',
	qq{SELECT count(*) || ' ' || bool_and(status = 'done') FROM mop_resume($a_run, add => '{"model": [{"type": "dense", "units": 3}], "learning_rate": 0.02}')}),
	'3 true', 'mop_resume adds and trains a configuration');
my $m = as('mop_up_alice', "SELECT mop_train('a_pts', '$cfg', 1)");
cmp_ok($m, '>', $ids_before, "mop_train makes model $m (ids continue after $ids_before)");
is(su("SELECT epochs_done || ' ' || status FROM mop.models WHERE run_id = $a_run AND owner = 'mop_up_bob'"),
	'0 training', "the resume left the model planted by another tenant alone");

# -- 0.2's grants and policies are in force -----------------------------------
my $mine = as('mop_up_alice', q{SELECT (SELECT count(*) FROM mop.best) || ' ' || (SELECT count(*) FROM mop.leaderboard) || ' ' ||
                                  (SELECT count(*) FROM mop.progress) || ' ' ||
                                  (SELECT count(*) FROM mop.best b WHERE b.run_id NOT IN (SELECT id FROM mop.runs))});
my $want = su(q{SELECT (SELECT count(DISTINCT run_id) FROM mop.models WHERE owner = 'mop_up_alice' AND best_valid_metric IS NOT NULL) || ' ' ||
                                (SELECT count(*) FROM mop.models WHERE owner = 'mop_up_alice' AND run_id IS NOT NULL) || ' 0 0'});
is($mine, $want, 'after it, a tenant reads mop.best, leaderboard and progress (own rows only)');
is(attempt('mop_up_bob', $plant_model), '42501|new row violates row-level security policy for table "models"|',
	"after it, a tenant cannot put a model into another's run");
is(attempt('mop_up_bob', $plant_hop), '42501|new row violates row-level security policy for table "hops"|',
	"after it, a tenant cannot record a hop on another's model");

# -- a fresh 0.2 and an upgraded 0.1 have the same catalog --------------------
my $catalog = <<'SQL';
WITH ext AS (SELECT * FROM pg_extension WHERE extname = 'mop'),
members AS (SELECT d.classid, d.objid FROM pg_depend d JOIN ext ON d.refobjid = ext.oid
             WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'),
rels AS (SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'mop'::regnamespace)
SELECT 'extension ' || extversion || ' schema=' || extnamespace::regnamespace || ' relocatable=' || extrelocatable FROM ext
UNION ALL SELECT 'member ' || pg_describe_object(classid, objid, 0) FROM members
UNION ALL SELECT 'schema mop acl=' || coalesce(nspacl::text, '') FROM pg_namespace WHERE nspname = 'mop'
UNION ALL SELECT 'relation ' || c.oid::regclass || ' kind=' || c.relkind::text || ' rls=' || c.relrowsecurity
              || ' force=' || c.relforcerowsecurity || ' options=' || coalesce(c.reloptions::text, '')
              || ' acl=' || coalesce(c.relacl::text, '') || ' owner=' || c.relowner::regrole
            FROM pg_class c JOIN rels USING (oid)
UNION ALL SELECT 'column ' || a.attrelid::regclass || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
              || ' notnull=' || a.attnotnull || ' identity=' || a.attidentity::text || ' storage=' || a.attstorage::text
              || ' default=' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '') || ' acl=' || coalesce(a.attacl::text, '')
            FROM pg_attribute a JOIN rels ON rels.oid = a.attrelid
            LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
           WHERE a.attnum > 0 AND NOT a.attisdropped
UNION ALL SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
            FROM pg_constraint WHERE connamespace = 'mop'::regnamespace
UNION ALL SELECT 'index ' || pg_get_indexdef(indexrelid) FROM pg_index JOIN rels ON rels.oid = indrelid
UNION ALL SELECT 'policy ' || polrelid::regclass || ' ' || polname || ' cmd=' || polcmd::text || ' permissive=' || polpermissive
              || ' roles=' || polroles::regrole[]::text || ' using=' || coalesce(pg_get_expr(polqual, polrelid), '')
              || ' check=' || coalesce(pg_get_expr(polwithcheck, polrelid), '')
            FROM pg_policy JOIN rels ON rels.oid = polrelid
UNION ALL SELECT 'view ' || c.oid::regclass || ' ' || pg_get_viewdef(c.oid) FROM pg_class c JOIN rels USING (oid) WHERE c.relkind = 'v'
UNION ALL SELECT 'function ' || pg_get_functiondef(p.oid) || ' acl=' || coalesce(p.proacl::text, '')
            FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid WHERE p.prokind <> 'a'
UNION ALL SELECT 'aggregate ' || a.aggfnoid::regprocedure || ' ' || a.aggtransfn || ' ' || a.aggfinalfn || ' '
              || a.aggtranstype::regtype || ' ' || a.aggfinalmodify::text || ' acl=' || coalesce(p.proacl::text, '')
            FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
UNION ALL SELECT 'type ' || t.oid::regtype || ' ' || t.typtype::text || ' acl=' || coalesce(t.typacl::text, '')
            FROM pg_type t JOIN members m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
UNION ALL SELECT 'comment ' || pg_describe_object(classoid, objoid, objsubid) || ': ' || description
            FROM pg_description WHERE objoid IN (SELECT objid FROM members UNION SELECT oid FROM rels)
UNION ALL SELECT 'initprivs ' || pg_describe_object(classoid, objoid, objsubid) || ' ' || initprivs::text
            FROM pg_init_privs WHERE privtype = 'e'
UNION ALL SELECT 'config ' || c::regclass || ' ' || w FROM ext, unnest(extconfig, extcondition) AS u(c, w)
ORDER BY 1;
SQL
$node->safe_psql($fresh, 'CREATE EXTENSION mop');
my $cat_up = $node->safe_psql($up, $catalog);
my $cat_fresh = $node->safe_psql($fresh, $catalog);
my $lines = () = $cat_fresh =~ /^/mg;
# exact comparison; on a difference, show the first lines of a diff
my $same = $cat_fresh eq $cat_up;
ok($same, "CREATE EXTENSION mop and 0.1 + ALTER EXTENSION mop UPDATE give the same catalog ($lines lines compared)")
  or do
{
	my $dir = PostgreSQL::Test::Utils::tempdir();
	PostgreSQL::Test::Utils::append_to_file("$dir/catalog.fresh", "$cat_fresh\n");
	PostgreSQL::Test::Utils::append_to_file("$dir/catalog.upgraded", "$cat_up\n");
	my @diff = split /\n/, `diff -u $dir/catalog.fresh $dir/catalog.upgraded`;
	diag(join("\n", grep { defined } @diff[0 .. 39]));
};
# (the description covers what the upgrade changes: a policy per table, the
# views' grant, column grants and their initial privileges)
my $policies = () = $cat_fresh =~ /^policy /mg;
is($policies, 10, 'the catalog description covers the policies (one per table)');
like($cat_fresh, qr/^relation mop\.best kind=v .*options=\{security_invoker=true\} acl=\{.*,=r\//m,
	"the catalog description covers the views' options and grants");
like($cat_fresh, qr/^initprivs column kind of table mop\.runs \{=aw\//m,
	'the catalog description covers column grants and their initial privileges');

$node->stop;
done_testing();
