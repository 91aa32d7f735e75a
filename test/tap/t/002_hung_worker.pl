# 002_hung_worker.pl -- a worker that stops making progress (SIGSTOP) is
# replaced after mop.task_timeout: its sub-epoch is run again by a new
# process, the run finishes with nothing trained twice and models
# bit-identical to an uninterrupted deterministic run, and the stopped
# process, once continued, exits without committing anything.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('hung');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
fsync = off
client_min_messages = warning
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION mop;
CREATE TABLE big AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 40000) i;
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], partitions => 2, buffer_rows => 256);
});
my $space = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": [0.001, 0.0005], "batch_size": 16, "seed": 3}';
my $hops_per_run = 2 * 8 * 2;

sub states
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(md5(state), ',' ORDER BY config::text) FROM mop.models WHERE run_id = $_[0]");
}

my $ref = $node->safe_psql('postgres',
	"SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => 8, workers => 2, deterministic => true)");

my $run = $node->safe_psql('postgres',
	"SET mop.task_timeout = '2s'; SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => 8, workers => 2, deterministic => true, wait => false)");
ok($node->poll_query_until('postgres',
	"SELECT count(*) >= 2 FROM mop.hops WHERE run_id = $run"), "run $run is training");
# a worker in the middle of a sub-epoch's training, stopped there: a
# sub-epoch lasts a few tens of milliseconds, so the worker seen training may
# have reached its validation or commit by the time the signal lands; then
# it is continued and another moment is tried.  Once stopped, its progress
# row is frozen and tells the truth.
my $pid;
my $stopped_mid_training = 0;
for (1 .. 200)
{
	$pid = $node->safe_psql('postgres',
		"SELECT w.pid FROM mop.progress w WHERE w.run_id = $run AND w.rows_done > 0 AND w.rows_done < w.rows_total ORDER BY w.pid LIMIT 1");
	if ($pid)
	{
		kill 'STOP', $pid;
		usleep(50_000);
		$stopped_mid_training = $node->safe_psql('postgres',
			"SELECT count(*) FROM mop.progress w WHERE w.pid = $pid AND w.rows_done > 0 AND w.rows_done < w.rows_total");
		if ($stopped_mid_training)
		{
			# stopped inside a read of the server's buffers, holding a lock
			# the others need (PostgreSQL's lightweight locks wait for their
			# holder, stopped or not): another moment
			usleep(300_000);
			last if $node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'LWLock' AND pid <> $pid") == 0;
			$stopped_mid_training = 0;
		}
		kill 'CONT', $pid;
	}
	usleep(20_000);
}
ok($stopped_mid_training, "a worker stopped mid-sub-epoch: pid $pid");
ok($node->poll_query_until('postgres', "SELECT status FROM mop.runs WHERE id = $run", 'done'),
	"run $run finished while worker $pid was stopped");
ok($node->log_contains(qr/made no progress on model \d+ for 2000 ms; replacing it/),
	'the coordinator replaced the stopped worker');
is($node->safe_psql('postgres', "SELECT count(*) FROM mop.hops WHERE run_id = $run"), $hops_per_run,
	'no sub-epoch trained twice');
is(states($run), states($ref), 'models bit-identical to the uninterrupted run');
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
