# 018_handover.pl -- mop.checkpoint_every: models handed from worker to
# worker in shared memory, committed every N sub-epochs.
#
# A deterministic grid over 4 partitions with mop.checkpoint_every = 3 hands
# each model over after the first two sub-epochs of every epoch and commits
# the third (with the first two's mop.hops rows, in one transaction) and the
# fourth (the epoch's end).  Checked against the same grid with every
# sub-epoch committed (mop.checkpoint_every = 1):
#   - the models (latest and best states, best epochs, every mop.epochs row)
#     are bit-identical, and every sub-epoch is in mop.hops exactly once;
#   - the sub-epochs were committed in half as many transactions (the
#     xmin of their mop.hops rows);
#   - kill -9 of a worker (the postmaster restarts the server, the shared
#     memory is gone) or of the coordinator: the run resumes itself from
#     what was committed, trains the lost sub-epochs again, and ends with
#     the same models and no sub-epoch recorded twice;
#   - a worker given up by mop.task_timeout, still alive (SIGSTOP): its
#     sub-epoch runs again first and commits, then the model is handed
#     over again; the same models.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('handover');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'mop'
max_worker_processes = 16
fsync = off
restart_after_crash = on
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
  FROM generate_series(1, 12000) i;
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], partitions => 4, buffer_rows => 256);
});

my $space = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": [0.03, 0.01], "batch_size": 16, "seed": 3}';
my $epochs = 10;
my $hops_per_run = 2 * $epochs * 4;    # models x epochs x partitions

sub q_tenant
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SET ROLE tenant; $sql");
}

sub run_grid
{
	my ($every, $wait) = @_;
	return q_tenant("SET mop.checkpoint_every = $every; "
		  . "SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => $epochs, "
		  . "workers => 2, deterministic => true, wait => $wait)");
}

sub hops { return $node->safe_psql('postgres', "SELECT count(*) FROM mop.hops WHERE run_id = $_[0]"); }

# the transactions that committed a run's sub-epochs
sub hop_commits
{
	return $node->safe_psql('postgres',
		"SELECT count(DISTINCT xmin::text) FROM mop.hops WHERE run_id = $_[0]");
}

# every sub-epoch once: (model, epoch, partition) never twice
sub hops_twice
{
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM (SELECT 1 FROM mop.hops WHERE run_id = $_[0] "
		  . "GROUP BY model_id, epoch, partition HAVING count(*) > 1) d");
}

# the models of a run in configuration order: states, best states and epochs
sub models
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(format('%s %s %s %s', md5(state), md5(coalesce(best_state, state)), "
		  . "best_epoch, epochs_done), ',' ORDER BY config::text) FROM mop.models WHERE run_id = $_[0]");
}

sub epochs
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(format('%s/%s %s %s %s %s', m.config->>'learning_rate', e.epoch, "
		  . "e.train_loss, e.valid_loss, e.valid_metric, e.train_rows), ',' "
		  . "ORDER BY m.config::text, e.epoch) "
		  . "FROM mop.epochs e JOIN mop.models m ON m.id = e.model_id WHERE m.run_id = $_[0]");
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

# the reference: every sub-epoch committed
my $ref = run_grid(1, 'true');
is(hops($ref), $hops_per_run, "reference run trained $hops_per_run sub-epochs");
is(hop_commits($ref), $hops_per_run, 'reference run: one commit per sub-epoch');
my $ref_models = models($ref);
my $ref_epochs = epochs($ref);
# the comparison of best states means something: a model's best is not its last
cmp_ok($node->safe_psql('postgres',
	"SELECT count(*) FROM mop.models WHERE run_id = $ref AND best_state IS NOT NULL "
	  . "AND best_epoch < epochs_done"), '>=', 1,
	'reference run: a model whose best epoch is not its last');

# 1. committed every 3 sub-epochs and at each epoch's end
my $run = run_grid(3, 'true');
is($node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $run"), 'done',
	'checkpoint_every 3: the run is done');
is(hops($run), $hops_per_run, "checkpoint_every 3: every sub-epoch recorded ($hops_per_run)");
is(hops_twice($run), 0, 'checkpoint_every 3: no sub-epoch recorded twice');
is(hop_commits($run), $hops_per_run / 2,
	'checkpoint_every 3: two of every four sub-epochs handed over, committed with the third');
is($node->safe_psql('postgres', "SELECT options->>'checkpoint_every' FROM mop.runs WHERE id = $run"), '3',
	'checkpoint_every 3: recorded in the run\'s options');
is($node->safe_psql('postgres', "SELECT options ? 'checkpoint_every' FROM mop.runs WHERE id = $ref"), 'f',
	'checkpoint_every 1: not recorded (the default)');
is(models($run), $ref_models, 'checkpoint_every 3: models bit-identical (latest, best, best epoch)');
is(epochs($run), $ref_epochs, 'checkpoint_every 3: every epoch row identical');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM mop.hops h JOIN mop.models m ON m.id = h.model_id "
	  . "WHERE h.run_id = $run AND (h.finished_at < h.started_at OR h.worker NOT IN (0, 1) "
	  . "OR h.rows <= 0 OR h.loss IS NULL)"), 0,
	'checkpoint_every 3: the handed-over sub-epochs recorded with their own times, worker, rows and loss');

# every sub-epoch of an epoch but its last handed over (checkpoint_every 4
# and more, 4 partitions): the epoch's end keeps the previous epoch's state
# as the best when it was
for my $every (4, 64)
{
	my $run = run_grid($every, 'true');
	is(hops($run), $hops_per_run, "checkpoint_every $every: every sub-epoch recorded");
	is(hop_commits($run), $hops_per_run / 4,
		"checkpoint_every $every: one commit per epoch");
	is(models($run), $ref_models, "checkpoint_every $every: models bit-identical (latest, best, best epoch)");
	is(epochs($run), $ref_epochs, "checkpoint_every $every: every epoch row identical");
}

# 2. kill -9 mid-run: what was handed over is lost and trained again
for my $case (['mop worker', 'a worker'], ['mop coordinator', 'the coordinator'])
{
	my ($type, $what) = @$case;
	my $run = run_grid(3, 'false');
	ok($node->poll_query_until('postgres',
			"SELECT count(*) >= 6 FROM mop.hops WHERE run_id = $run"),
		"$what: run $run committed sub-epochs before the crash");
	my $before = hops($run);
	my $offset = -s $node->logfile;
	ok(kill9($type), "$what: killed with SIGKILL");
	ok(wait_done($run), "$what: run $run finished without mop_resume");
	ok($node->log_contains(qr/mop run $run resumed after a restart/, $offset),
		"$what: run $run was resumed after the restart");
	my $after = hops($run);
	cmp_ok($after, '>=', $before, "$what: the $before sub-epochs committed before the crash are kept");
	is($after, $hops_per_run, "$what: every sub-epoch recorded once ($after hops)");
	is(hops_twice($run), 0, "$what: no sub-epoch recorded twice");
	is(models($run), $ref_models, "$what: models bit-identical to the uninterrupted run");
	is(epochs($run), $ref_epochs, "$what: every epoch row identical");
	is($node->safe_psql('postgres', "SELECT options->>'checkpoint_every' FROM mop.runs WHERE id = $run"), '3',
		"$what: resumed with the run's own mop.checkpoint_every (3), not the server's (1)");
	# two commits per epoch of 4 partitions, as without the crash (each
	# model may commit once more in the epoch it was resumed in); with every
	# sub-epoch committed after the resume it would be about twice as many
	my $commits = hop_commits($run);
	cmp_ok($commits, '<=', $hops_per_run / 2 + 2,
		"$what: after the resume, sub-epochs handed over again ($commits commits for $hops_per_run sub-epochs)");
}

# 3. a model that diverges after sub-epochs were handed over keeps the
# state it was handed (the last finite one), as with every sub-epoch
# committed: one partition's training rows overflow every layer
$node->safe_psql('postgres', q{
SET ROLE tenant;
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], 'bad', partitions => 4, buffer_rows => 256);
UPDATE mop.buffers b SET x = decode(repeat('e6b1617f', length(b.x) / 4), 'hex')
  FROM mop.datasets d WHERE d.id = b.dataset_id AND d.name = 'bad' AND b.split = 'train' AND b.partition = 2;
});
my %div;
for my $every (1, 4)
{
	my $run = q_tenant("SET mop.checkpoint_every = $every; "
		  . "SELECT DISTINCT run_id FROM mop_grid_search('bad', '$space', epochs => 3, "
		  . "workers => 2, deterministic => true)");
	$div{$every} = $node->safe_psql('postgres',
		"SELECT string_agg(format('%s %s %s', status, md5(state), "
		  . "(SELECT count(*) FROM mop.hops h WHERE h.model_id = m.id)), ',' ORDER BY config::text) "
		  . "FROM mop.models m WHERE run_id = $run");
	$div{"hops $every"} = $node->safe_psql('postgres',
		"SELECT string_agg(format('%s/%s/%s', m.config->>'learning_rate', h.epoch, h.partition), ',' "
		  . "ORDER BY m.config::text, h.epoch, h.partition) "
		  . "FROM mop.hops h JOIN mop.models m ON m.id = h.model_id WHERE h.run_id = $run");
}
like($div{1}, qr/^diverged [0-9a-f]+ \d+,diverged /, 'a partition that overflows: both models diverge');
cmp_ok($node->safe_psql('postgres',
	"SELECT count(*) FROM mop.hops h JOIN mop.runs r ON r.id = h.run_id JOIN mop.datasets d ON d.id = r.dataset_id "
	  . "WHERE d.name = 'bad' AND h.partition <> 2 AND h.xmin::text IN (SELECT x.xmin::text FROM mop.hops x WHERE x.partition = 2)"),
	'>=', 1, 'checkpoint_every 4: a model diverged with sub-epochs handed over before it');
is($div{4}, $div{1}, 'checkpoint_every 4: the diverged models keep the same state and hops as with 1');
is($div{"hops 4"}, $div{"hops 1"}, 'checkpoint_every 4: the same sub-epochs recorded');

# 4. PBT and its replays commit every sub-epoch, whatever the setting: an
# exploit copies the parent's latest committed checkpoint, and a replay
# checks it copies the same one (with learning rates from 1e-5 to 0.1 the bottom
# quantile of 6 members trails, so some member exploits, as in adaptive.sql)
my $pbt = q_tenant("SET mop.checkpoint_every = 4; SELECT DISTINCT run_id FROM mop_pbt('big', "
	  . "'{\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 32, \"activation\": \"relu\"}, "
	  . "{\"type\": \"dense\", \"units\": 10}]}, \"optimizer\": \"sgd\", "
	  . "\"learning_rate\": {\"loguniform\": [0.00001, 0.1]}, \"batch_size\": [16, 32]}', "
	  . "population => 6, epochs => 6, \"interval\" => 2, workers => 2, seed => 5)");
cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM mop.decisions WHERE run_id = $pbt AND action = 'exploit'"),
	'>', 0, 'PBT with checkpoint_every 4: members exploited');
is(hop_commits($pbt), hops($pbt), 'PBT with checkpoint_every 4: every sub-epoch committed');
my $replay = q_tenant("SET mop.checkpoint_every = 4; SELECT DISTINCT run_id FROM mop_replay($pbt, workers => 2)");
is($node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $replay"), 'done',
	'its replay with checkpoint_every 4 replays every exploit');
is(hop_commits($replay), hops($replay), 'the replay: every sub-epoch committed');

# 5. a run cancelled with models in the middle of an epoch keeps what they
# had handed over: the coordinator commits it as the run ends, and
# mop_resume goes on from there (tried up to 3 times: at the moment of the
# cancel a model may happen to be at an epoch's end)
my ($flushed, $crun) = (0, 0);
for my $try (1 .. 3)
{
	$crun = run_grid(4, 'false');
	$node->poll_query_until('postgres', "SELECT count(*) >= 8 FROM mop.hops WHERE run_id = $crun")
	  or die "run $crun did not start";
	my $offset = -s $node->logfile;
	q_tenant("SELECT mop_cancel($crun)");
	$node->poll_query_until('postgres', "SELECT status <> 'running' FROM mop.runs WHERE id = $crun")
	  or die "run $crun did not stop";
	$flushed = $node->log_contains(qr/mop run $crun: committed the states \d+ models had handed over/, $offset);
	last if $flushed;
}
ok($flushed, "cancelled with checkpoint_every 4: the coordinator committed the states handed over");
is($node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $crun"), 'cancelled', 'the run is cancelled');
cmp_ok($node->safe_psql('postgres',
	"SELECT count(*) FROM (SELECT 1 FROM mop.hops WHERE run_id = $crun GROUP BY model_id "
	  . "HAVING count(*) % 4 <> 0) x"), '>', 0,
	'a model committed in the middle of an epoch');
is(hops_twice($crun), 0, 'cancelled: no sub-epoch recorded twice');
q_tenant("SET mop.checkpoint_every = 4; SELECT count(*) FROM mop_resume($crun)");
is($node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $crun"), 'done', 'resumed: done');
is(hops($crun), $hops_per_run, 'resumed: every sub-epoch recorded once');
is(hops_twice($crun), 0, 'resumed: no sub-epoch recorded twice');
is(models($crun), $ref_models, 'resumed: models bit-identical to the uninterrupted run');
is(epochs($crun), $ref_epochs, 'resumed: every epoch row identical');

# 6. a worker given up (mop.task_timeout) while it trains a sub-epoch that
# would be handed over.  That process may still be alive and commit the
# sub-epoch once it runs again (stopped inside its commit, or after a
# hand-over that found no room), so the replacement runs that sub-epoch
# before any other of the model's and commits it, in a transaction of its
# own rather than with the epoch's end: the model's row lock orders it
# after anything the old process commits.  After that the model is handed
# over again, the old process still stopped.  A sub-epoch that ends its
# epoch commits anyway and shows nothing: then the run is tried again.
my $space_slow = '{"model": {"layers": [{"type": "dense", "units": 1024, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": [0.03, 0.01], "batch_size": 16, "seed": 3}';
my $slow_epochs = 12;
my $slow_hops = 2 * $slow_epochs * 4;
my $slow_ref = q_tenant("SELECT DISTINCT run_id FROM mop_grid_search('big', '$space_slow', "
	  . "epochs => $slow_epochs, workers => 2, deterministic => true)");
my ($hrun, $pid, $m, $e, $p, $conclusive, $hops_stopped) = (0, 0, 0, 0, 0, 0, 0);
for my $try (1 .. 6)
{
	my $offset = -s $node->logfile;
	$hrun = q_tenant("SET mop.checkpoint_every = 4; SET mop.task_timeout = '2s'; "
		  . "SELECT DISTINCT run_id FROM mop_grid_search('big', '$space_slow', epochs => $slow_epochs, "
		  . "workers => 2, deterministic => true, wait => false)");
	# a worker in the middle of a sub-epoch's training in the run's first
	# third, stopped there (as in 002_hung_worker.pl: continued and tried
	# again when it stopped holding a lightweight lock others wait for)
	my $stopped = 0;
	for (1 .. 300)
	{
		$pid = $node->safe_psql('postgres',
			"SELECT w.pid FROM mop.progress w WHERE w.run_id = $hrun AND w.epoch <= 4 "
			  . "AND w.rows_done > 0 AND w.rows_done < w.rows_total ORDER BY w.pid LIMIT 1");
		if ($pid)
		{
			kill 'STOP', $pid;
			usleep(50_000);
			my $row = $node->safe_psql('postgres',
				"SELECT format('%s %s %s', w.model_id, w.epoch, w.partition) FROM mop.progress w "
				  . "WHERE w.pid = $pid AND w.rows_done > 0 AND w.rows_done < w.rows_total");
			if ($row)
			{
				usleep(300_000);
				if ($node->safe_psql('postgres',
					"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'LWLock' AND pid <> $pid") == 0)
				{
					($m, $e, $p) = split / /, $row;
					$stopped = 1;
					last;
				}
			}
			kill 'CONT', $pid;
		}
		last if $node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $hrun") ne 'running';
		usleep(10_000);
	}
	if (!$stopped)
	{
		wait_done($hrun);
		next;
	}
	ok($node->wait_for_log(qr/made no progress on model $m for 2000 ms; replacing it/, $offset),
		"try $try: worker $pid, stopped training model $m (epoch $e, partition $p), was replaced");
	ok(wait_done($hrun), "try $try: run $hrun finished while worker $pid was stopped");
	$hops_stopped = hops($hrun);
	kill 'CONT', $pid;
	ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
		"try $try: worker $pid exited once continued");
	# the epoch's end commits whatever it is: that sub-epoch shows nothing
	my $last = $node->safe_psql('postgres',
		"SELECT partition FROM mop.hops WHERE model_id = $m AND epoch = $e ORDER BY finished_at DESC LIMIT 1");
	if ($last ne '' && $last != $p)
	{
		$conclusive = 1;
		last;
	}
}
ok($conclusive, "a worker was given up in a sub-epoch that would have been handed over (model $m, epoch $e, partition $p)");
is($node->safe_psql('postgres',
	"SELECT count(DISTINCT xmin::text) FROM mop.hops WHERE model_id = $m AND epoch = $e "
	  . "AND (partition = $p OR finished_at = (SELECT max(finished_at) FROM mop.hops WHERE model_id = $m AND epoch = $e))"),
	'2', 'the replacement committed that sub-epoch in its own transaction, not handed over with the epoch');
cmp_ok($node->safe_psql('postgres',
	"SELECT count(*) FROM (SELECT epoch FROM mop.hops WHERE model_id = $m AND epoch > $e GROUP BY epoch "
	  . "HAVING count(DISTINCT xmin::text) = 1) x"),
	'>', 0, 'then, the old process still stopped, the model was handed over again (a later epoch in one commit)');
is($hops_stopped, $slow_hops, "every sub-epoch recorded ($slow_hops)");
is(hops($hrun), $slow_hops, 'the old process, continued, committed nothing');
is(hops_twice($hrun), 0, 'no sub-epoch recorded twice');
is($node->safe_psql('postgres', "SELECT string_agg(DISTINCT status, ',') FROM mop.models WHERE run_id = $hrun"),
	'done', 'every model done, none marked failed');
is(models($hrun), models($slow_ref), 'models bit-identical to the uninterrupted run');

# 7. the setting's bounds
my ($rc, $out, $err) = $node->psql('postgres', 'SET mop.checkpoint_every = 0');
like($err, qr/0 is outside the valid range for parameter "mop.checkpoint_every" \(1 \.\. 64\)/,
	'mop.checkpoint_every = 0 is refused');

$node->stop;
done_testing();
