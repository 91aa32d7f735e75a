# 001_recovery.pl -- runs heal themselves after crashes and restarts.
#
# With mop in shared_preload_libraries, a run whose processes die finishes
# without anyone calling mop_resume, with every committed sub-epoch kept
# and, in deterministic mode, bit-identical models:
#   kill -9 of a worker, of the coordinator (the postmaster restarts the
#   server), an immediate stop and start, two crashes in a row (the second
#   during the automatic resume); the resumed run belongs to its owner (an
#   ordinary role), not to a superuser.
# mop.auto_resume = off only marks the run 'interrupted'.  Without
# preloading, the first mop call after a restart marks it 'interrupted'
# (run and models) and mop_resume finishes it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('recovery');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'mop'
max_worker_processes = 16
fsync = off
restart_after_crash = on
client_min_messages = warning
});
$node->start;

# an ordinary role owns the data and the runs
$node->safe_psql('postgres', q{
CREATE EXTENSION mop;
CREATE ROLE tenant LOGIN;
GRANT CREATE ON SCHEMA public TO tenant;
SET ROLE tenant;
CREATE TABLE big AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 12000) i;
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], partitions => 2, buffer_rows => 256);
});

my $space = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": [0.001, 0.0005], "batch_size": 16, "seed": 3}';
my $epochs = 16;
my $hops_per_run = 2 * $epochs * 2;    # models x epochs x partitions

sub q_tenant
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SET ROLE tenant; $sql");
}

sub start_run
{
	return q_tenant(
		"SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => $epochs, workers => 2, deterministic => true, wait => false)"
	);
}

sub hops { return $node->safe_psql('postgres', "SELECT count(*) FROM mop.hops WHERE run_id = $_[0]"); }

sub wait_hops
{
	my ($run, $n) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) >= $n FROM mop.hops WHERE run_id = $run");
}

# the models of a run in configuration order: state checksums
sub states
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(md5(state), ',' ORDER BY config::text) FROM mop.models WHERE run_id = $_[0]");
}

sub kill9
{
	my ($type) = @_;
	my $pid;
	for (1 .. 100)
	{
		$pid = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE backend_type = '$type' ORDER BY pid LIMIT 1");
		last if $pid;
		usleep(100_000);
	}
	return 0 unless $pid;
	kill 'KILL', $pid;
	return 1;
}

sub wait_done
{
	my ($run) = @_;
	return $node->poll_query_until('postgres',
		"SELECT status FROM mop.runs WHERE id = $run", 'done');
}

# the reference: the same deterministic grid, uninterrupted
my $ref = q_tenant(
	"SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => $epochs, workers => 2, deterministic => true)"
);
my $ref_states = states($ref);
is(hops($ref), $hops_per_run, "reference run trained $hops_per_run sub-epochs");

my $log_offset = -s $node->logfile;

# 1. kill -9 a worker: the postmaster restarts the server; the run resumes itself
for my $case (['mop worker', 'a worker'], ['mop coordinator', 'the coordinator'])
{
	my ($type, $what) = @$case;
	my $run = start_run();
	ok(wait_hops($run, 3), "$what: run $run committed sub-epochs before the crash");
	my $before = hops($run);
	my $offset = -s $node->logfile;
	ok(kill9($type), "$what: killed with SIGKILL");
	ok(wait_done($run), "$what: run $run finished without mop_resume");
	ok($node->log_contains(qr/mop run $run resumed after a restart/, $offset),
		"$what: run $run was resumed after the restart (it did not finish before the kill)");
	my $after = hops($run);
	cmp_ok($after, '>=', $before, "$what: the $before sub-epochs committed before the crash are kept");
	is($after, $hops_per_run, "$what: no sub-epoch trained twice ($after hops)");
	is(states($run), $ref_states, "$what: models bit-identical to the uninterrupted run");
}
ok($node->log_contains(qr/mop run \d+ resumed after a restart/, $log_offset),
	'the server log says the runs were resumed');
is($node->safe_psql('postgres', "SELECT DISTINCT owner FROM mop.runs WHERE kind = 'grid'"),
	'tenant', 'resumed runs still belong to their owner');

# 2. an immediate stop and start
{
	my $run = start_run();
	ok(wait_hops($run, 3), "immediate stop: run $run committed sub-epochs");
	my $offset = -s $node->logfile;
	$node->stop('immediate');
	$node->start;
	ok(wait_done($run), "immediate stop: run $run finished after the restart without mop_resume");
	ok($node->log_contains(qr/mop run $run resumed after a restart/, $offset),
		"immediate stop: run $run was resumed after the restart (it did not finish before the stop)");
	is(states($run), $ref_states, 'immediate stop: models bit-identical');
}

# 3. two crashes in a row, the second while the run is being resumed
{
	my $run = start_run();
	ok(wait_hops($run, 2), "double crash: run $run started");
	kill9('mop worker');
	# the automatic resume puts the run back to 'running' with a new segment
	ok($node->poll_query_until('postgres',
		"SELECT status = 'running' AND (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mop worker') > 0 FROM mop.runs WHERE id = $run"),
		'double crash: the run was resumed once');
	ok(kill9('mop worker'), 'double crash: a worker of the resumed run killed too');
	ok(wait_done($run), "double crash: run $run finished");
	is(hops($run), $hops_per_run, 'double crash: no sub-epoch trained twice');
	is(states($run), $ref_states, 'double crash: models bit-identical');
}

# 4. mop.auto_resume = off: marked, not resumed
{
	$node->append_conf('postgresql.conf', "mop.auto_resume = off\n");
	$node->reload;
	my $run = start_run();
	ok(wait_hops($run, 3), "auto_resume off: run $run started");
	$node->stop('immediate');
	$node->start;
	ok($node->poll_query_until('postgres',
		"SELECT status FROM mop.runs WHERE id = $run", 'interrupted'),
		'auto_resume off: the run is marked interrupted at startup');
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM mop.models WHERE run_id = $run AND status NOT IN ('interrupted', 'done')"),
		'0', 'auto_resume off: its unfinished models are interrupted too');
	q_tenant("SELECT count(*) FROM mop_resume($run)");
	is($node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $run"), 'done',
		'auto_resume off: mop_resume finishes it');
	is(states($run), $ref_states, 'auto_resume off: models bit-identical');
}

# 5. without preloading: the first mop call after the restart tells the truth
{
	$node->append_conf('postgresql.conf', "shared_preload_libraries = ''\n");
	$node->restart;
	my $run = start_run();
	ok(wait_hops($run, 3), "not preloaded: run $run started");
	$node->stop('immediate');
	$node->start;
	is($node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $run"), 'running',
		'not preloaded: nothing runs at startup (the row still says running)');
	# the first mop call marks it, in a transaction of its own: a session
	# that keeps its transaction open holds no lock on the run's row
	my $s = $node->background_psql('postgres');
	$s->query_safe('SET ROLE tenant');
	$s->query_safe('BEGIN');
	is($s->query_safe("SELECT mop_wait($run)"), 'interrupted',
		'not preloaded: the first mop call marks the run interrupted');
	is($node->safe_psql('postgres',
		"SET lock_timeout = '3s'; UPDATE mop.runs SET workers = workers WHERE id = $run RETURNING status"),
		'interrupted', 'not preloaded: the marking holds no lock while the calling transaction goes on');
	$s->query_safe('COMMIT');
	$s->quit;
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM mop.models WHERE run_id = $run AND status = 'interrupted'"),
		'2', 'not preloaded: its models are interrupted');
	q_tenant("SELECT count(*) FROM mop_resume($run)");
	is($node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $run"), 'done',
		'not preloaded: mop_resume finishes it');
	is(states($run), $ref_states, 'not preloaded: models bit-identical');
}

$node->stop;
done_testing();
