# 012_hung_validation.pl -- mop.task_timeout in every step of a task, not
# only while a worker trains: a worker stopped (SIGSTOP) while it validates
# an epoch's state on the validation split is replaced after the timeout;
# the run finishes with nothing trained twice and models bit-identical to an
# uninterrupted deterministic run, and the stopped process, once continued,
# exits without committing anything.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('hung_validation');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
fsync = off
client_min_messages = warning
});
$node->start;
# most rows in the validation split and a wide layer, so that validating an
# epoch takes far longer than training a sub-epoch (a window the loop below
# must hit with a psql per look)
$node->safe_psql('postgres', q{
CREATE EXTENSION mop;
CREATE TABLE big AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 60000) i;
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], partitions => 2, validation => 0.9, buffer_rows => 512);
});
my $space = '{"model": {"layers": [{"type": "dense", "units": 1024, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": [0.001, 0.0005], "batch_size": 64, "seed": 5}';
my $epochs = 6;
my $hops_per_run = 2 * $epochs * 2;

sub states
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(md5(state) || '/' || coalesce(md5(best_state), '-') || '/' || best_epoch, ',' ORDER BY config::text) FROM mop.models WHERE run_id = $_[0]");
}

sub validations
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(e.epoch || ':' || e.valid_loss || ':' || e.valid_rows, ',' ORDER BY m.config::text, e.epoch) FROM mop.epochs e JOIN mop.models m ON m.id = e.model_id WHERE m.run_id = $_[0]");
}

my $ref = $node->safe_psql('postgres',
	"SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => $epochs, workers => 2, deterministic => true)");

my $run = $node->safe_psql('postgres',
	"SET mop.task_timeout = '2s'; SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => $epochs, workers => 2, deterministic => true, wait => false)");
# a worker validating an epoch, stopped there: the worker seen validating
# may have reached its commit by the time the signal lands; then it is
# continued and another moment is tried.  Once stopped, its progress row is
# frozen and tells the truth.
my $pid;
my $stopped_validating = 0;
for (1 .. 600)
{
	$pid = $node->safe_psql('postgres',
		"SELECT w.pid FROM mop.progress w WHERE w.run_id = $run AND w.state = 'validating' ORDER BY w.pid LIMIT 1");
	if ($pid)
	{
		kill 'STOP', $pid;
		usleep(50_000);
		$stopped_validating = $node->safe_psql('postgres',
			"SELECT count(*) FROM mop.progress w WHERE w.run_id = $run AND w.pid = $pid AND w.state = 'validating' AND w.rows_done = w.rows_total");
		if ($stopped_validating)
		{
			# stopped inside a read of the server's buffers, holding a lock
			# the others need (PostgreSQL's lightweight locks wait for their
			# holder, stopped or not): another moment
			usleep(300_000);
			last if $node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'LWLock' AND pid <> $pid") == 0;
			$stopped_validating = 0;
		}
		kill 'CONT', $pid;
	}
	last if $node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $run") ne 'running';
	usleep(10_000);
}
ok($stopped_validating, "a worker stopped while validating: pid $pid");
ok($node->poll_query_until('postgres', "SELECT status FROM mop.runs WHERE id = $run", 'done'),
	"run $run finished while worker $pid was stopped");
ok($node->log_contains(qr/made no progress on model \d+ for 2000 ms; replacing it\n.*DETAIL:\s+It was validating epoch/),
	'the coordinator replaced the worker stopped while validating');
is($node->safe_psql('postgres', "SELECT count(*) || ' ' || count(DISTINCT (model_id, epoch, partition)) FROM mop.hops WHERE run_id = $run"),
	"$hops_per_run $hops_per_run", 'no sub-epoch trained twice');
is(states($run), states($ref), 'models bit-identical to the uninterrupted run');
is(validations($run), validations($ref), 'every epoch validated once, as in the uninterrupted run');
# the stopped process, continued, stops without committing anything
kill 'CONT', $pid;
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"), "worker $pid exited once continued");
is($node->safe_psql('postgres', "SELECT count(*) FROM mop.hops WHERE run_id = $run"), $hops_per_run,
	'it committed nothing');
is($node->safe_psql('postgres', "SELECT string_agg(DISTINCT status, ',') FROM mop.models WHERE run_id = $run"),
	'done', 'every model done, none marked failed by it');
is(states($run), states($ref), 'models still bit-identical');
$node->stop;
done_testing();
