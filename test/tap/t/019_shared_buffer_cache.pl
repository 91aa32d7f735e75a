# 019_shared_buffer_cache.pl -- the server's cache of detoasted training
# buffers (mop.shared_buffer_cache_mb, with mop preloaded).
#
#   - the first backend to train on a dataset loads its buffers into the
#     cache; a new backend training on it loads nothing and trains
#     bit-identically to one that reads every buffer out of TOAST itself
#     (mop.buffer_cache_mb = 0) and to a server without the cache;
#   - a backend holds the entries it uses until its transaction ends (or
#     it calls mop.buffer_cache_reset());
#   - a run's workers use the entries too, with the same models;
#   - when the cache is full, entries nobody holds are evicted, least
#     recently used first, and a buffer that finds no room is read by the
#     backend itself (still bit-identical); lowering the setting or turning
#     it off evicts the entries it no longer allows;
#   - a backend that finds a buffer being loaded by another reads it
#     itself; a load cancelled or terminated while it waits gives its
#     entry back;
#   - a run's workers follow a change of the setting; after a restart the
#     cache is loaded again with the buffers it held;
#   - without mop in shared_preload_libraries the cache is off and
#     mop.shared_buffer_cache() says so with NULL counts; a process's own
#     cache checks its entries once per transaction as well.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('sbc');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'mop'
max_worker_processes = 16
fsync = off
client_min_messages = warning
});
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION mop;
CREATE ROLE tenant LOGIN;
GRANT CREATE ON SCHEMA public TO tenant;
SET ROLE tenant;
CREATE TABLE big AS
SELECT (((i % 10) + CASE WHEN i % 3 = 0 THEN i % 7 ELSE 0 END) % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 8000) i;
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], 'big', partitions => 2, buffer_rows => 256);
CREATE TABLE other AS SELECT label, ARRAY(SELECT x * 2 FROM unnest(v) x)::real[] AS v FROM big;
});

my $config = '{"model": {"layers": [{"type": "dense", "units": 32, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": 0.01, "batch_size": 16, "seed": 3}';

sub q_tenant
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SET ROLE tenant; $sql");
}

sub stats
{
	my $r = $node->safe_psql('postgres',
		"SELECT entries, bytes, pinned, hits, loads, refused, evicted, stale FROM mop.shared_buffer_cache()");
	my %s;
	@s{qw(entries bytes pinned hits loads refused evicted stale)} = split /\|/, $r;
	return \%s;
}

# the values stored out of line in mop.buffers (every buffer of every
# dataset prepared so far: training and validation, x and y where large),
# and their bytes
sub toasted
{
	return split /\|/, $node->safe_psql('postgres',
		"SELECT count(DISTINCT chunk_id), sum(octet_length(chunk_data)) FROM "
		  . "(SELECT reltoastrelid::regclass AS t FROM pg_class WHERE oid = 'mop.buffers'::regclass) r, "
		  . "LATERAL (SELECT * FROM mop_toast_rows(r.t)) c");
}

# a model's state and every epoch row, to compare trainings
sub trained
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT md5(state) || ' ' || (SELECT string_agg(format('%s %s %s', epoch, train_loss, valid_metric), ',' ORDER BY epoch) "
		  . "FROM mop.epochs WHERE model_id = $id) FROM mop.models WHERE id = $id");
}

sub wait_unpinned
{
	ok($node->poll_query_until('postgres', "SELECT pinned = 0 FROM mop.shared_buffer_cache()"),
		"$_[0]: no entry held once its backends are gone");
}

# the TOAST table's rows, whatever its name
$node->safe_psql('postgres', q{
CREATE FUNCTION mop_toast_rows(t regclass) RETURNS TABLE (chunk_id oid, chunk_data bytea)
LANGUAGE plpgsql AS $$ BEGIN RETURN QUERY EXECUTE format('SELECT chunk_id, chunk_data FROM %s', t); END $$;
});
my ($n_buffers, $n_bytes) = toasted();
cmp_ok($n_buffers, '>', 8, "dataset big has $n_buffers buffer values stored out of line");

my $s0 = stats();
is("$s0->{entries} $s0->{loads} $s0->{hits}", '0 0 0', 'the cache starts empty');

# 1. the first backend loads every buffer; it holds them until its
# transaction ends
my ($m1, $pinned, $pinned_after) = split /\n/, q_tenant(
	"BEGIN; SELECT mop_train('big', '$config', epochs => 2); SELECT pinned FROM mop.shared_buffer_cache(); "
	  . "COMMIT; SELECT pinned FROM mop.shared_buffer_cache()");
my $s1 = stats();
is($s1->{loads}, $n_buffers, "the first backend loaded each of the $n_buffers buffers once");
is($s1->{entries}, $n_buffers, 'one entry per buffer');
is($s1->{bytes}, $n_bytes, "the entries hold the buffers' bytes ($n_bytes)");
is($pinned, $n_buffers, 'the backend held every entry during its transaction');
is($pinned_after, 0, 'and none once it had ended');

# 2. a new backend uses them: no load, the same model
my $m2 = q_tenant("SELECT mop_train('big', '$config', epochs => 2)");
my $s2 = stats();
is($s2->{loads}, $s1->{loads}, 'a new backend loaded nothing');
is($s2->{hits}, $s1->{hits} + $n_buffers, 'it used every entry, once');
is(trained($m2), trained($m1), 'its model is bit-identical to the first one');
is($s2->{stale}, 0, 'every entry matched its TOAST value');

# 2b. VACUUM FULL moves every TOAST value (same OIDs, new tuples): the
# entries are found stale on their next use, dropped and loaded again
my $toast_before = $node->safe_psql('postgres', "SELECT reltoastrelid FROM pg_class WHERE oid = 'mop.buffers'::regclass");
$node->safe_psql('postgres', 'VACUUM FULL mop.buffers');
my $toast_after = $node->safe_psql('postgres', "SELECT reltoastrelid FROM pg_class WHERE oid = 'mop.buffers'::regclass");
my $m2b = q_tenant("SELECT mop_train('big', '$config', epochs => 2)");
my $s2b = stats();
diag("TOAST relation $toast_before -> $toast_after; stale $s2b->{stale}, loads $s2b->{loads}");
is($s2b->{stale}, $n_buffers, 'after VACUUM FULL every entry was found stale');
is($s2b->{loads}, $s2->{loads} + $n_buffers, 'and every buffer loaded again');
is(trained($m2b), trained($m1), 'the model trained after it is the same');

# 3. a backend without any cache reads every buffer itself: the same model
my $m3 = q_tenant("SET mop.buffer_cache_mb = 0; SELECT mop_train('big', '$config', epochs => 2)");
is(trained($m3), trained($m1), 'a backend reading every buffer out of TOAST trains the same model');
is(stats()->{hits}, $s2->{hits}, 'a backend with mop.buffer_cache_mb = 0 does not use the cache');

# 4. mop.buffer_cache_reset() lets go of the entries
my @reset = split /\n/, q_tenant(
	"BEGIN; SELECT mop_train('big', '$config', epochs => 1); SELECT pinned FROM mop.shared_buffer_cache(); "
	  . "SELECT mop.buffer_cache_reset() >= 0; SELECT pinned FROM mop.shared_buffer_cache(); COMMIT");
is("$reset[1] $reset[3]", "$n_buffers 0", 'mop.buffer_cache_reset() lets go of every entry held');

# 5. a run's workers use the entries, and train the models of a server
# without the cache
my $space = '{"model": {"layers": [{"type": "dense", "units": 32, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": [0.03, 0.01], "batch_size": 16, "seed": 3}';
my $s5 = stats();
my $run = q_tenant("SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => 2, "
	  . "workers => 2, deterministic => true)");
my $s5b = stats();
is($s5b->{loads}, $s5->{loads}, 'the run\'s workers loaded nothing');
cmp_ok($s5b->{hits}, '>', $s5->{hits}, 'the run\'s workers used the entries');
my $models_sql = "SELECT string_agg(md5(state), ',' ORDER BY config::text) FROM mop.models WHERE run_id = ";
my $with_cache = $node->safe_psql('postgres', $models_sql . $run);
is($s5b->{stale}, $s2b->{stale}, 'no entry was found stale since');

q_tenant("SELECT dataset_name FROM mop_prepare('other', 'label', ARRAY['v'], 'other', partitions => 2, buffer_rows => 256)");
my ($all_values, $all_bytes) = toasted();
my $other_bytes = $all_bytes - $n_bytes;

# 6. full: entries nobody holds are evicted, least recently used first;
# a buffer that finds no room is read by the backend itself
my $mb = int(($n_bytes > $other_bytes ? $n_bytes : $other_bytes) / (1024 * 1024)) + 1;
# the setting lowered below what the cache holds: the next use evicts
# the entries no one holds down to it
my $s_low = stats();
cmp_ok($s_low->{bytes}, '>', 1024 * 1024, 'the cache holds more than 1 MB');
$node->safe_psql('postgres', "ALTER SYSTEM SET mop.shared_buffer_cache_mb = 1");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT size_mb = 1 FROM mop.shared_buffer_cache()"),
	"the cache's size lowered to 1 MB");
my $m_low = q_tenant("SELECT mop_train('big', '$config', epochs => 1)");
my $s_low2 = stats();
cmp_ok($s_low2->{evicted}, '>', $s_low->{evicted}, 'lowering the size evicted entries');
cmp_ok($s_low2->{bytes}, '<=', 1024 * 1024, 'down to the new size');
$node->safe_psql('postgres', "ALTER SYSTEM SET mop.shared_buffer_cache_mb = $mb");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT size_mb = $mb FROM mop.shared_buffer_cache()"),
	"the cache's size lowered to $mb MB");
wait_unpinned('before eviction');
my $s6 = stats();
my $o1 = q_tenant("SELECT mop_train('other', '$config', epochs => 1)");
my $s6b = stats();
cmp_ok($s6b->{evicted}, '>', $s6->{evicted}, 'a second dataset evicted entries of the first');
cmp_ok($s6b->{bytes}, '<=', $mb * 1024 * 1024, 'the entries stay within the size');
my $o2 = q_tenant("SET mop.buffer_cache_mb = 0; SELECT mop_train('other', '$config', epochs => 1)");
is(trained($o1), trained($o2), 'the second dataset trained the same as without the cache');

# both datasets held by one backend: what does not fit is refused, and
# that backend reads it itself
my @lines = split /\n/, q_tenant(
	"BEGIN; SELECT mop_train('big', '$config', epochs => 2); SELECT mop_train('other', '$config', epochs => 1); COMMIT");
my $s6c = stats();
cmp_ok($s6c->{refused}, '>', $s6b->{refused},
	'one backend holding both datasets: buffers that found no room were refused');
is(trained($lines[0]), trained($m1), 'the first dataset trains the same');
is(trained($lines[1]), trained($o1), 'the second, partly refused, trains the same');
wait_unpinned('after the full cache');

# 7. the cache off: the same models
$node->safe_psql('postgres', "ALTER SYSTEM SET mop.shared_buffer_cache_mb = 0");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT size_mb = 0 FROM mop.shared_buffer_cache()"),
	'the cache turned off');
my $hits_off = stats()->{hits};
my $run_off = q_tenant("SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => 2, "
	  . "workers => 2, deterministic => true)");
is(stats()->{hits}, $hits_off, 'with the cache off nothing uses it');
is(stats()->{bytes}, 0, 'and its entries were dropped');
is($node->safe_psql('postgres', $models_sql . $run_off), $with_cache,
	'a run without the cache trains the same models as the run that used it');

# 8. least recently used first: room for two datasets, a third evicts
# the entries of the one used longest ago, not those of the one used since
$node->safe_psql('postgres', q{
SET ROLE tenant;
CREATE TABLE third AS SELECT label, ARRAY(SELECT x * 3 FROM unnest(v) x)::real[] AS v FROM big;
SELECT dataset_name FROM mop_prepare('third', 'label', ARRAY['v'], 'third', partitions => 2, buffer_rows => 256);
});
my $two = int(($n_bytes + $other_bytes) / (1024 * 1024)) + 1;
cmp_ok($two * 1024 * 1024, '<', $n_bytes + 2 * $other_bytes, "$two MB hold two of the datasets, not three");
$node->safe_psql('postgres', "ALTER SYSTEM SET mop.shared_buffer_cache_mb = $two");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT size_mb = $two FROM mop.shared_buffer_cache()"),
	"the cache on again, $two MB");
q_tenant("SELECT mop_train('big', '$config', epochs => 1)");
q_tenant("SELECT mop_train('other', '$config', epochs => 1)");
my $s8 = stats();
is($s8->{entries}, $all_values, 'big and other in the cache');
q_tenant("SELECT mop_train('big', '$config', epochs => 1)");
my $t1 = q_tenant("SELECT mop_train('third', '$config', epochs => 1)");
my $s8b = stats();
cmp_ok($s8b->{evicted}, '>', $s8->{evicted}, 'the third dataset evicted entries');
q_tenant("SELECT mop_train('big', '$config', epochs => 1)");
my $s8c = stats();
is($s8c->{loads}, $s8b->{loads}, 'none of big, used after other: it trains again without a load');
q_tenant("SELECT mop_train('other', '$config', epochs => 1)");
cmp_ok(stats()->{loads}, '>', $s8c->{loads}, 'other, used longest ago, was what made room');
my $t2 = q_tenant("SET mop.buffer_cache_mb = 0; SELECT mop_train('third', '$config', epochs => 1)");
is(trained($t1), trained($t2), 'the third dataset trained the same as without the cache');
wait_unpinned('after least recently used');

# 9. a load in progress.  A transaction holding the TOAST index of
# mop.buffers (REINDEX) makes a backend wait inside its load, with the
# entry reserved but not ready.
$node->safe_psql('postgres', "ALTER SYSTEM SET mop.shared_buffer_cache_mb = 64");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT size_mb = 64 FROM mop.shared_buffer_cache()"),
	'the cache at 64 MB');
q_tenant('SELECT mop.buffer_cache_reset()');
my $toast_index = $node->safe_psql('postgres', q{
SELECT i.indexrelid::regclass FROM pg_index i JOIN pg_class c ON c.reltoastrelid = i.indrelid
 WHERE c.oid = 'mop.buffers'::regclass});
my $fourth_sql = q{
SET ROLE tenant;
CREATE TABLE fourth AS SELECT label, ARRAY(SELECT x * 4 FROM unnest(v) x)::real[] AS v FROM big;
SELECT dataset_name FROM mop_prepare('fourth', 'label', ARRAY['v'], 'fourth', partitions => 2, buffer_rows => 256);
};
my ($values_before) = toasted();
$node->safe_psql('postgres', $fourth_sql);
my ($values_after) = toasted();
my $fourth_values = $values_after - $values_before;
my $reference = q_tenant("SET mop.buffer_cache_mb = 0; SELECT mop_train('fourth', '$config', epochs => 2)");

# the backend that waits in its load
sub waiting_load
{
	my ($what, $dataset) = @_;
	my $holder = $node->background_psql('postgres');
	$holder->query_safe('BEGIN');
	$holder->query_safe("REINDEX INDEX $toast_index");
	my $loader = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $loader->query_safe('SELECT pg_backend_pid()');
	$loader->query_safe('SET ROLE tenant');
	$loader->{stdin} .= "SELECT mop_train('$dataset', '$config', epochs => 2);\n";
	$loader->{run}->pump_nb();
	ok($node->poll_query_until('postgres',
			"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid"),
		"$what: the backend waits for the TOAST index inside its load");
	return ($holder, $loader, $pid);
}

# 9a. another backend finds the entry being loaded: it reads the buffer
# itself and keeps nothing; each buffer is loaded once, both models the same
my $s9 = stats();
my ($holder, $loader, $pid) = waiting_load('busy', 'fourth');
my $s9a = stats();
is($s9a->{entries}, $s9->{entries} + 1, 'the entry it loads is reserved');
is($s9a->{loads}, $s9->{loads}, 'and not loaded yet');
my $second = $node->background_psql('postgres');
my $pid2 = $second->query_safe('SELECT pg_backend_pid()');
$second->query_safe('SET ROLE tenant');
$second->{stdin} .= "SELECT mop_train('fourth', '$config', epochs => 2);\n";
$second->{run}->pump_nb();
ok($node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid2"),
	'a second backend, finding the entry being loaded, reads the buffer itself (and waits too)');
is(stats()->{entries}, $s9->{entries} + 1, 'it reserved no entry of its own');
$holder->query_safe('COMMIT');
$holder->quit;
my ($f1) = ($loader->query_safe('SELECT 1') =~ /^(\d+)/m);
my ($f2) = ($second->query_safe('SELECT 1') =~ /^(\d+)/m);
$loader->quit;
$second->quit;
my $s9b = stats();
is($s9b->{loads} - $s9->{loads}, $fourth_values, "each of fourth's $fourth_values buffers loaded once");
is(trained($f1), trained($reference), 'the loading backend trained the model of a backend without the cache');
is(trained($f2), trained($reference), 'so did the backend that found it being loaded');
wait_unpinned('after the busy load');

# 9b. a load cancelled or terminated while it waits gives its entry back
($fourth_sql = $fourth_sql) =~ s/fourth/fifth/g;
$node->safe_psql('postgres', $fourth_sql);
$reference = q_tenant("SET mop.buffer_cache_mb = 0; SELECT mop_train('fifth', '$config', epochs => 2)");
for my $how ('cancel', 'terminate')
{
	my $before = stats();
	($holder, $loader, $pid) = waiting_load($how, 'fifth');
	is(stats()->{entries}, $before->{entries} + 1, "$how: the entry it loads is reserved");
	$node->safe_psql('postgres', "SELECT pg_${how}_backend($pid)");
	ok($node->poll_query_until('postgres',
			"SELECT entries = $before->{entries} AND bytes = $before->{bytes} AND pinned = 0 FROM mop.shared_buffer_cache()"),
		"$how: the load cut short gave its entry and its bytes back");
	$holder->query_safe('COMMIT');
	$holder->quit;
	eval { $loader->quit };		# (psql has gone with its connection when terminated)
	is(stats()->{loads}, $before->{loads}, "$how: nothing counted as loaded");
}
my $s9c = stats();
my $f3 = q_tenant("SELECT mop_train('fifth', '$config', epochs => 2)");
is(trained($f3), trained($reference), 'after them, a backend loads the dataset and trains the same model');
is(stats()->{loads} - $s9c->{loads}, $fourth_values, 'loading each of its buffers once');

# 9c. a run's workers, which never read the configuration file again,
# follow a change made while they run: the launcher publishes it
my $h9 = stats()->{hits};
my $long = $node->background_psql('postgres', on_error_stop => 0);
$long->query_safe('SET ROLE tenant');
$long->{stdin} .= "SELECT count(*) FROM mop_grid_search('big', '$space', epochs => 1000, workers => 2);\n";
$long->{run}->pump_nb();
ok($node->poll_query_until('postgres',
		"SELECT count(*) >= 4 FROM mop.hops h JOIN mop.runs r ON r.id = h.run_id WHERE r.status = 'running'"),
	'a long run is under way');
my $run9 = $node->safe_psql('postgres', "SELECT max(id) FROM mop.runs");
cmp_ok(stats()->{hits}, '>', $h9, "its workers use the cache");
$node->safe_psql('postgres', "ALTER SYSTEM SET mop.shared_buffer_cache_mb = 0");
$node->reload;
# a backend publishes only a change it sees itself, and these are new:
# the setting in force can only come from the launcher
ok($node->poll_query_until('postgres', "SELECT size_mb = 0 FROM mop.shared_buffer_cache()"),
	'the launcher published the new setting');
my $h9b = stats()->{hits};
my $hops9 = $node->safe_psql('postgres', "SELECT count(*) FROM mop.hops WHERE run_id = $run9");
ok($node->poll_query_until('postgres', "SELECT count(*) >= $hops9 + 10 FROM mop.hops WHERE run_id = $run9"),
	'the run went on 10 sub-epochs');
# (a worker that read the setting just before it changed may count one
# more hit)
cmp_ok(stats()->{hits} - $h9b, '<=', 2, 'and its workers no longer used the cache');
is($node->safe_psql('postgres', "SELECT mop_cancel($run9)") ne '', 1, 'the run cancelled');
$long->query('SELECT 1');
$long->quit;
q_tenant("SELECT mop_train('big', '$config', epochs => 1)");
is(stats()->{bytes}, 0, 'the next use of the cache dropped its entries');
$node->safe_psql('postgres', "ALTER SYSTEM SET mop.shared_buffer_cache_mb = 64");
$node->reload;

# 9d. after a restart the cache is loaded again with what it held
# (mop.prewarm_buffer_cache): the launcher writes its list at shutdown,
# the database's recovery worker loads it
ok($node->poll_query_until('postgres', "SELECT size_mb = 64 FROM mop.shared_buffer_cache()"),
	'the cache at 64 MB again');
q_tenant("SELECT mop_train('big', '$config', epochs => 1)");
is(stats()->{entries}, $n_buffers, "big's $n_buffers buffers in the cache");
$node->restart;
ok(-f $node->data_dir . '/mop_buffer_cache.list', 'the list written at shutdown');
ok($node->poll_query_until('postgres',
		"SELECT entries = $n_buffers AND loads = $n_buffers FROM mop.shared_buffer_cache()"),
	"after the restart the cache was loaded again with the $n_buffers buffers");
my $s9d = stats();
my $m9d = q_tenant("SELECT mop_train('big', '$config', epochs => 2)");
is(stats()->{loads}, $s9d->{loads}, 'the first backend after the restart loaded nothing');
is(trained($m9d), trained($m1), 'and trained the same model');
# a smaller cache after the restart: the most recently used that fit are
# loaded, and nothing is evicted for them
$node->safe_psql('postgres', "ALTER SYSTEM SET mop.shared_buffer_cache_mb = 1");
$node->restart;
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type IN ('mop recovery', 'mop prewarm')"
		  . " AND (SELECT loads > 0 FROM mop.shared_buffer_cache())"),
	'after a restart with a 1 MB cache, the prewarm ended');
my $s9f = stats();
cmp_ok($s9f->{loads}, '<', $n_buffers, "it loaded part of the list ($s9f->{loads} of $n_buffers)");
is("$s9f->{evicted} $s9f->{refused}", '0 0', 'what fits, without evicting or being refused');
cmp_ok($s9f->{bytes}, '<=', 1024 * 1024, 'within the cache');
$node->safe_psql('postgres', "ALTER SYSTEM SET mop.shared_buffer_cache_mb = 64");
$node->safe_psql('postgres', "ALTER SYSTEM SET mop.prewarm_buffer_cache = off");
$node->restart;
my $m9e = q_tenant("SELECT mop_train('big', '$config', epochs => 2)");
my $s9e = stats();
is("$s9e->{hits} $s9e->{loads}", "0 $n_buffers",
	'with mop.prewarm_buffer_cache off the first backend after a restart loads every buffer itself');
is(trained($m9e), trained($m1), 'the same model');
$node->safe_psql('postgres', "ALTER SYSTEM RESET mop.prewarm_buffer_cache");

# the launcher, which lives as long as the server, absorbs the barrier
# DROP DATABASE waits for
$node->safe_psql('postgres', 'CREATE DATABASE dropme');
is($node->safe_psql('postgres', "SET statement_timeout = '60s'; DROP DATABASE dropme; SELECT 'dropped'"),
	'dropped', 'DROP DATABASE with mop preloaded does not wait for mop\'s launcher');

# 10. not preloaded: no cache, NULL counts
$node->safe_psql('postgres', "ALTER SYSTEM RESET mop.shared_buffer_cache_mb");
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->restart;
is($node->safe_psql('postgres',
		"SELECT size_mb IS NOT NULL, entries IS NULL, hits IS NULL FROM mop.shared_buffer_cache()"),
	't|t|t', 'without mop preloaded: no cache, NULL counts');
my $m8 = q_tenant("SELECT mop_train('big', '$config', epochs => 2)");
is(trained($m8), trained($m1), 'and a backend trains the same model');

# a process's own cache checks its entries once per transaction too: after
# VACUUM FULL moved the values, the same session reads them again
my ($out, $err) = ('', '');
$node->psql('postgres', "SET client_min_messages = debug1; SELECT mop_train('big', '$config', epochs => 1); "
	  . "SELECT mop_train('big', '$config', epochs => 1)", stdout => \$out, stderr => \$err);
unlike($err, qr/no longer matches its stored value/, 'its own cache: entries unchanged are used as they are');
($out, $err) = ('', '');
$node->psql('postgres', "SET client_min_messages = debug1; SELECT mop_train('big', '$config', epochs => 1); "
	  . "VACUUM FULL mop.buffers; SELECT mop_train('big', '$config', epochs => 1)",
	stdout => \$out, stderr => \$err);
my @reread = ($err =~ /no longer matches its stored value/g);
is(scalar(@reread), $n_buffers, "its own cache: after VACUUM FULL each of the $n_buffers values read again");
my @ids = grep { /^\d+$/ } split /\n/, $out;
is(trained($ids[1]), trained($ids[0]), 'and the model trained after it is the same');

$node->stop;
done_testing();
