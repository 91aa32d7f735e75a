# 002_hung_worker.pl -- a worker that stops making progress (SIGSTOP) is
# replaced after mop.task_timeout: its sub-epoch is run again by a new
# process, the run finishes with nothing trained twice and models
# bit-identical to an uninterrupted deterministic run, and the stopped
# process, once continued, exits without committing anything.  A worker
# given up inside its commit (a synchronous standby that never answers)
# whose commit stands: the epoch it committed counts with its validation.
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
wal_level = replica
max_wal_senders = 2
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

# 2. a worker given up inside its commit, which stands: a synchronous
# standby that never answers makes every commit wait after its record is
# written, and the worker is continued once given up, its commit still in
# place.  With one partition every sub-epoch ends an epoch, and
# Hyperband's first bracket stops or promotes each trial on its first
# epoch: the epoch committed by the process given up counts with the
# validation it recorded, whether its replacement finds the model finished
# when it reads it or the sub-epoch committed once it holds the model's row
# (was: none, so Hyperband ranked that trial as failed; and the first case
# failed the task, the model being 'done').  Labels partly noisy, so that
# the trials' scores differ.
$node->safe_psql('postgres', q{
CREATE TABLE small AS
SELECT (((i % 10) + CASE WHEN i % 3 = 0 THEN i % 7 ELSE 0 END) % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 16000) i;
SELECT dataset_name FROM mop_prepare('small', 'label', ARRAY['v'], 'one', partitions => 1, buffer_rows => 256);
});
my $hb_space = '{"model": {"layers": [{"type": "dense", "units": 512, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": {"loguniform": [0.0001, 0.1]}, "batch_size": 32}';
my $hb_call = "mop_hyperband('one', '$hb_space', max_resource => 9, eta => 3, workers => 1, seed => 4, deterministic => true";
# each trial's score at its first rung, by configuration: what Hyperband
# ranked (the ranks themselves may differ where scores tie, as the order in
# which tied trials report moves when one of them is run again)
sub rung_scores
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(format('%s %s %s', m.config->>'learning_rate', d.score, d.rung_size), ',' "
		  . "ORDER BY m.config->>'learning_rate', d.bracket) FROM mop.decisions d JOIN mop.models m ON m.id = d.model_id "
		  . "WHERE d.run_id = $_[0] AND d.rung = 0 AND d.action IN ('continue', 'stop')");
}
my $hb_ref = $node->safe_psql('postgres', "SELECT DISTINCT run_id FROM $hb_call)");
cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM mop.decisions WHERE run_id = $hb_ref AND action = 'continue'"),
	'>', 0, 'the reference Hyperband run promoted trials');

# One try: a worker training the first epoch of a trial whose rung ends
# there is caught, the standby named, and once its commit waits for the
# standby the worker is stopped (SIGSTOP) and given up.  The coordinator
# finds the sub-epoch not committed (the stopped commit is not visible) and
# runs it again.  'load': the stopped worker is continued at once, its
# commit stands and it exits, and then the standby goes: the replacement
# reads a model its commit finished.  'lock': the standby goes first, the
# replacement trains and waits for the model's row, which the stopped
# worker holds, and then it is continued and commits.  Returns the model
# given up, or 0 if the moment was missed.
sub given_up_in_commit
{
	my ($mode, $run) = @_;
	my ($pid, $model) = (0, 0);
	for (1 .. 1000)
	{
		my $row = $node->safe_psql('postgres',
			"SELECT format('%s %s', w.pid, w.model_id) FROM mop.progress w WHERE w.run_id = $run AND w.epoch = 1 "
			  . "AND w.rows_done > 0 AND w.rows_done < w.rows_total / 2 AND EXISTS (SELECT 1 FROM mop.decisions d "
			  . "WHERE d.model_id = w.model_id AND d.action = 'new' AND d.to_resource = 1)");
		if ($row)
		{
			($pid, $model) = split / /, $row;
			last;
		}
		last if $node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $run") ne 'running';
	}
	return 0 unless $pid;
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()");
	my $waiting = $node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_stat_activity a JOIN mop.progress w ON w.pid = a.pid "
		  . "WHERE a.pid = $pid AND a.wait_event = 'SyncRep' AND w.model_id = $model AND w.epoch = 1");
	my $replaced = 0;
	if ($waiting)
	{
		kill 'STOP', $pid;
		for (1 .. 150)
		{
			$replaced = $node->log_contains(
				qr/made no progress on model $model for 2000 ms; replacing it\n.*It was committing epoch 1 /, $offset);
			last if $replaced;
			usleep(100_000);
		}
	}
	if ($mode eq 'load')
	{
		kill 'CONT', $pid;
		$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid");
	}
	$node->safe_psql('postgres', "ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()");
	if ($mode eq 'lock')
	{
		# the replacement waits for the row the stopped worker holds
		$node->poll_query_until('postgres',
			"SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'mop worker' "
			  . "AND wait_event_type = 'Lock' AND pid <> $pid") if $replaced;
		kill 'CONT', $pid;
	}
	$node->poll_query_until('postgres', "SELECT status FROM mop.runs WHERE id = $run", 'done')
	  or die "run $run did not finish";
	return $replaced ? $model : 0;
}

for my $mode ('load', 'lock')
{
	my ($run, $model) = (0, 0);
	for my $try (1 .. 3)
	{
		$run = $node->safe_psql('postgres',
			"SET mop.task_timeout = '2s'; SELECT DISTINCT run_id FROM $hb_call, wait => false)");
		$model = given_up_in_commit($mode, $run);
		last if $model;
	}
	ok($model, "$mode: a worker was given up inside the commit of a rung's last epoch (model $model)");
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM mop.hops WHERE model_id = $model AND epoch = 1"), '1',
		"$mode: that epoch committed once");
	is(rung_scores($run), rung_scores($hb_ref),
		"$mode: every score of the first rungs as without the fault (the trial given up counted with its recorded validation)");
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM mop.decisions WHERE run_id = $run AND action IN ('continue', 'stop') "
		  . "AND (score IS NULL OR score = 'NaN')"), '0',
		"$mode: no decision saw a missing score");
	cmp_ok($node->safe_psql('postgres',
		"SELECT count(*) FROM mop.decisions d JOIN mop.epochs e ON e.model_id = d.model_id AND e.epoch = 1 "
		  . "WHERE d.model_id = $model AND d.rung = 0 AND d.action IN ('continue', 'stop') "
		  . "AND d.score = e.valid_metric"), '==', 1,
		"$mode: the trial given up was ranked on the validation its first epoch recorded");
	is(states($run), states($hb_ref), "$mode: models bit-identical to the uninterrupted run");
}
$node->stop;
done_testing();
