# 003_search_faults.pl -- model hopper runs survive faults (without
# preloading mop, so nothing resumes by itself):
#   1. pg_cancel_backend on a blocking mop_grid_search stops its workers
#      within a minibatch and marks the run cancelled; committed hops stay;
#   2. mop.progress shows what each worker trains; a worker killed mid-run
#      (pg_terminate_backend) is replaced and the run completes with every
#      MOP invariant intact;
#   3. an immediate server stop mid-run loses no committed checkpoint, and
#      mop_resume completes the run with exactly the models of an
#      uninterrupted deterministic run;
#   4-7. Hyperband, ASHA, TPE and PBT runs stopped immediately resume by
#      replaying their recorded decisions and results into a fresh driver,
#      and finish without retraining anything committed;
#   8. deterministic TPE and PBT runs resumed after an immediate stop end
#      bit-identical to uninterrupted runs.
# Every stop in 3-8 is checked to have come mid-run (the run not done, with
# sub-epochs left) and mop_resume to have trained the rest, so none of them
# passes without a resume; each run is sized to have most of its sub-epochs
# left when it is stopped (a deterministic TPE run of 6 trials used to
# finish all 24 before the stop).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX ();
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('faults');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
restart_after_crash = on
client_min_messages = warning
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION mop;
CREATE TABLE big AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 12000) i;
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], partitions => 2, buffer_rows => 512);
});
my $space = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": [0.001, 0.0005], "batch_size": [16, 32], "seed": 3}';

# a query; one that hangs (a run that never ends) fails the test
sub sql
{
	return $node->safe_psql('postgres', $_[0],
		timeout => $PostgreSQL::Test::Utils::timeout_default);
}

sub hops { return sql("SELECT count(*) FROM mop.hops WHERE run_id = $_[0]"); }

sub wait_hops
{
	my ($run, $n) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) >= $n FROM mop.hops WHERE run_id = $run");
}

# "ok" if MOP's invariants hold for a run of $epochs epochs and $models models
sub invariants
{
	my ($run, $epochs, $models) = @_;
	return sql(qq{
SELECT CASE WHEN
  (SELECT count(*) FROM mop.hops WHERE run_id = $run) = $epochs * $models * 2
  AND (SELECT bool_and(n = 2 AND p = 2) FROM (SELECT count(*) n, count(DISTINCT partition) p
        FROM mop.hops WHERE run_id = $run GROUP BY model_id, epoch) s)
  AND NOT EXISTS (SELECT 1 FROM mop.hops a JOIN mop.hops b ON a.id < b.id AND a.run_id = b.run_id
        AND (a.model_id = b.model_id OR a.worker = b.worker)
        AND tstzrange(a.started_at, a.finished_at) && tstzrange(b.started_at, b.finished_at)
        WHERE a.run_id = $run)
  AND (SELECT bool_and(status = 'done' AND epochs_done = $epochs) FROM mop.models WHERE run_id = $run)
THEN 'ok' ELSE 'broken' END});
}

# stop the server immediately (no shutdown checkpoint) and start it again
sub crash
{
	$node->stop('immediate');
	$node->start;
}

# mop_resume a run that an immediate stop interrupted.  The stop must have
# come mid-run, or nothing here would test a resume: the run is not 'done'
# and has sub-epochs left; mop_resume then trains more sub-epochs and ends
# the run 'done'.  Returns the status the stop left the run in.
sub resume_after_stop
{
	my ($run, $what) = @_;
	my $st = sql("SELECT status FROM mop.runs WHERE id = $run");
	my $before = hops($run);
	isnt($st, 'done', "$what: the stop came mid-run (run left '$st' after $before committed sub-epochs)");
	sql("SELECT count(*) FROM mop_resume($run)") if $st ne 'done';
	my $after = hops($run);
	cmp_ok($after, '>', $before, "$what: mop_resume trained the rest ($before sub-epochs before, $after after)");
	is(sql("SELECT status FROM mop.runs WHERE id = $run"), 'done', "$what: the resumed run is done");
	return $st;
}

# t when every model trained each committed sub-epoch exactly once
sub no_retraining
{
	return sql("SELECT sum(h.n) = sum(m.epochs_done) * 2 FROM mop.models m JOIN (SELECT model_id, count(*) AS n FROM mop.hops GROUP BY model_id) h ON h.model_id = m.id WHERE m.run_id = $_[0]");
}

# a psql in the background, its output in $file; returns its pid
sub bg_psql
{
	my ($file, @cmds) = @_;
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		open(STDOUT, '>', $file) or POSIX::_exit(127);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(127);
		exec('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-At', '-d',
			$node->connstr('postgres'), map { ('-c', $_) } @cmds)
		  or POSIX::_exit(127);
	}
	return $pid;
}

# 1. cancel a blocking search
{
	my $out = $node->basedir . '/victim.out';
	my $victim = bg_psql($out, "SET application_name = 'mop_search_victim'",
		"SELECT count(*) FROM mop_grid_search('big', '$space', epochs => 50, workers => 2)");
	my $r = '';
	for (1 .. 300)
	{
		$r = sql("SELECT max(id) FROM mop.runs WHERE status = 'running'");
		last if $r ne '';
		usleep(100_000);
	}
	ok($r ne '' && wait_hops($r, 2), 'cancel: the blocking search trained');
	my $t0 = time;
	sql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'mop_search_victim'");
	waitpid($victim, 0);
	my $secs = sprintf('%.2f', time - $t0);
	like(slurp_file($out), qr/canceling statement due to user request/,
		"cancel: the search ended with 'canceling statement due to user request'");
	my $status = sql("SELECT status FROM mop.runs WHERE id = $r");
	my $workers = sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('mop worker', 'mop coordinator')");
	is($status, 'cancelled', "cancel: pg_cancel_backend stopped run $r in $secs s; " . hops($r) . ' committed sub-epochs kept');
	is($workers, '0', 'cancel: no mop worker or coordinator left');
	sql("UPDATE mop.runs SET status = 'failed' WHERE id = $r");
}

# 2. a worker dies mid-run: it is replaced and the run completes
{
	my $r = sql("SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => 6, workers => 2, wait => false)");
	# mop.progress shows what each worker trains right now
	my $prog = '';
	for (1 .. 200)
	{
		$prog = sql("SELECT bool_and(rows_done <= rows_total AND rows_total > 0 AND partition % 2 = worker AND pid > 0 AND epoch >= 1) FROM mop.progress WHERE run_id = $r AND model_id IS NOT NULL");
		last if $prog eq 't';
		usleep(50_000);
	}
	is($prog, 't', "mop.progress shows each worker's model, partition and rows done of total");
	ok(wait_hops($r, 2), 'killed worker: the run trained');
	my $log_offset = -s $node->logfile;
	sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'mop worker' LIMIT 1");
	is(sql("SELECT mop_wait($r)"), 'done', 'killed worker: the run completed');
	is(invariants($r, 6, 4), 'ok', "killed worker: MOP's invariants hold");
	ok($node->log_contains(qr/restarted worker/, $log_offset), 'killed worker: its replacement is logged');
}

# 3. immediate stop mid-run, restart, resume: nothing committed is lost
{
	my $call = "mop_grid_search('big', '$space', epochs => 30, workers => 2, seed => 5, deterministic => true";
	my $ref = sql("SELECT DISTINCT run_id FROM $call)");
	my $r = sql("SELECT DISTINCT run_id FROM $call, wait => false)");
	ok(wait_hops($r, 5), 'immediate stop: the run trained');
	my $list = "SELECT model_id || ':' || epoch || ':' || partition FROM mop.hops WHERE run_id = $r ORDER BY 1";
	my @before = split /\n/, sql($list);
	crash();
	my %after = map { $_ => 1 } split /\n/, sql($list);
	my $lost = grep { !$after{$_} } @before;
	is($lost, 0, 'immediate stop: ' . scalar(@before) . ' committed sub-epochs, none lost');
	my $st = resume_after_stop($r, 'immediate stop');
	is(invariants($r, 30, 4), 'ok', "immediate stop: mop_resume completed the run (left '$st') with MOP's invariants");
	is(sql("SELECT count(*) FILTER (WHERE a.state = b.state) || '/' || count(*) FROM mop.models a JOIN mop.models b ON a.config = b.config WHERE a.run_id = $ref AND b.run_id = $r"),
		'4/4', 'immediate stop: models bit-identical to an uninterrupted run');
}

# 4. an adaptive run survives an immediate stop too: Hyperband resumes by
#    replaying its recorded decisions and results, and follows its plan
{
	my $r = sql(q{SELECT DISTINCT run_id FROM mop_hyperband('big', '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": {"loguniform": [0.0001, 0.01]}}', max_resource => 9, workers => 2, wait => false)});
	ok(wait_hops($r, 12), 'hyperband: the run trained');
	crash();
	my $before = sql("SELECT count(*) FILTER (WHERE action = 'report') || ' results, ' || count(*) FILTER (WHERE action = 'continue') || ' promotions' FROM mop.decisions WHERE run_id = $r");
	my $st = resume_after_stop($r, 'hyperband');
	is(sql("SELECT string_agg(status || ':' || epochs_done || ':' || n, ' ' ORDER BY epochs_done, status) FROM (SELECT status, epochs_done, count(*) AS n FROM mop.models WHERE run_id = $r GROUP BY 1, 2) s"),
		'stopped:1:6 stopped:3:6 done:9:5',
		"hyperband: stopped immediately (run left '$st', $before recorded), resumed by replaying its decisions, finished its plan");
	is(no_retraining($r), 't', 'hyperband: no retraining');
}

# 5. the same for ASHA
{
	my $r = sql(q{SELECT DISTINCT run_id FROM mop_asha('big', '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": {"loguniform": [0.0001, 0.01]}}', max_resource => 9, max_trials => 24, workers => 2, wait => false)});
	ok(wait_hops($r, 10), 'asha: the run trained');
	crash();
	my $st = resume_after_stop($r, 'asha');
	is(sql("SELECT count(*) || ' ' || bool_and(status IN ('done', 'stopped') AND epochs_done IN (1, 3, 9)) || ' ' || (count(*) FILTER (WHERE epochs_done >= 3) >= 8) FROM mop.models WHERE run_id = $r"),
		'24 true true',
		"asha: stopped immediately (run left '$st'), resumed by replay: 24 trials on their rungs, top third promoted");
	is(no_retraining($r), 't', 'asha: no retraining');
}

# 6. TPE: resumed by replaying its asks and tells into a fresh sampler (each
#    replayed proposal is checked against the stored configuration), then
#    proposes the remaining trials
my $tspace = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": {"loguniform": [0.0001, 0.01]}, "batch_size": {"choice": [16, 32]}}';
{
	my $r = sql("SELECT DISTINCT run_id FROM mop_tpe('big', '$tspace', trials => 12, epochs => 2, n_startup => 3, workers => 2, seed => 4, wait => false)");
	ok(wait_hops($r, 9), 'tpe: the run trained');
	crash();
	my $before = sql("SELECT count(*) FROM mop.decisions WHERE run_id = $r AND action = 'report'");
	my $st = resume_after_stop($r, 'tpe');
	is(sql("SELECT count(*) || ' ' || bool_and(status = 'done' AND epochs_done = 2) || ' ' || count(DISTINCT config) FROM mop.models WHERE run_id = $r"),
		'12 true 12',
		"tpe: stopped immediately ($before results recorded, run left '$st'), resumed by replaying its sampler: 12 distinct trials done");
	is(sql("SELECT count(*) FROM mop.decisions WHERE run_id = $r AND action = 'report'"), '12', 'tpe: 12 results recorded');
	is(no_retraining($r), 't', 'tpe: no retraining');
}

# 7. PBT: resumed by replaying the recorded interval results into a fresh
#    population (each replayed exploit checked against its record)
my $pspace = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": {"loguniform": [0.0001, 0.05]}}';
{
	my $r = sql("SELECT DISTINCT run_id FROM mop_pbt('big', '$pspace', population => 4, epochs => 6, quantile => 0.5, workers => 2, seed => 2, wait => false)");
	ok(wait_hops($r, 14), 'pbt: the run trained');
	crash();
	my $before = sql("SELECT count(*) FILTER (WHERE action = 'report') || ' results, ' || count(*) FILTER (WHERE action = 'exploit') || ' exploits' FROM mop.decisions WHERE run_id = $r");
	my $st = resume_after_stop($r, 'pbt');
	is(sql("SELECT count(*) || ' ' || bool_and(status = 'done' AND epochs_done = 6) FROM mop.models WHERE run_id = $r"),
		'4 true',
		"pbt: stopped immediately ($before recorded, run left '$st'), resumed by replaying its population: 4 members done");
	is(sql("SELECT (count(*) FILTER (WHERE action = 'report') BETWEEN 18 AND 20) || ' ' || (count(*) FILTER (WHERE action = 'exploit') >= 1) FROM mop.decisions WHERE run_id = $r"),
		'true true', 'pbt: 18-20 results and at least one exploit recorded');
	is(no_retraining($r), 't', 'pbt: no retraining');
	is(sql("SELECT count(*) > 0 FROM mop_pbt_schedule((SELECT model_id FROM mop.best WHERE run_id = $r))"),
		't', 'pbt: lineage readable (mop_pbt_schedule)');
}

# 8. deterministic TPE and PBT stopped immediately and resumed end exactly
#    like uninterrupted runs with the same seed (bit-identical models)
for my $algo ('tpe', 'pbt')
{
	my ($call, $n) =
	  $algo eq 'tpe'
	  ? ("mop_tpe('big', '$tspace', trials => 10, epochs => 2, n_startup => 2, workers => 2, seed => 6, deterministic => true", 10)
	  : ("mop_pbt('big', '$pspace', population => 4, epochs => 8, quantile => 0.5, workers => 2, seed => 6, deterministic => true", 4);
	my $ref = sql("SELECT DISTINCT run_id FROM $call)");
	my $r = sql("SELECT DISTINCT run_id FROM $call, wait => false)");
	ok(wait_hops($r, 9), "deterministic $algo: the run trained");
	crash();
	my $st = resume_after_stop($r, "deterministic $algo");
	is(sql("SELECT count(*) FILTER (WHERE x.state = y.state AND x.config = y.config) || '/' || count(*) FROM (SELECT row_number() OVER (ORDER BY id) rn, * FROM mop.models WHERE run_id = $ref) x JOIN (SELECT row_number() OVER (ORDER BY id) rn, * FROM mop.models WHERE run_id = $r) y USING (rn)"),
		"$n/$n",
		"deterministic $algo: stopped immediately (run left '$st') and resumed: models bit-identical to an uninterrupted run");
}

# 9. patience early stopping across an immediate stop: the resumed run
#    rebuilds each model's count from its epochs and stops the same models
#    at the same epochs as an uninterrupted run
{
	my $espace = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "optimizer": "sgd", "learning_rate": 1e-9, "batch_size": [16, 32], "early_stopping": [{"patience": 5}, null], "seed": 3}';
	my $call = "mop_grid_search('big', '$espace', epochs => 12, workers => 2, seed => 5, deterministic => true";
	my $ref = sql("SELECT DISTINCT run_id FROM $call)");
	my $r = sql("SELECT DISTINCT run_id FROM $call, wait => false)");
	ok(wait_hops($r, 6), 'patience: the run trained');
	crash();
	my $st = resume_after_stop($r, 'patience');
	my $models = "SELECT string_agg(m.status || ':' || m.epochs_done, ' ' ORDER BY m.config::text) FROM mop.models m WHERE m.run_id = ";
	is(sql("$models$r"), sql("$models$ref"), "patience: stopped immediately (run left '$st') and resumed: the same stops as an uninterrupted run");
	is(sql("$models$r"), 'done:12 stopped:6 done:12 stopped:6', 'patience: the models with patience 5 stopped after epoch 6');
	is(sql("SELECT count(*) FROM mop.decisions WHERE run_id = $r AND action = 'stop' AND why = 'patience'"), '2', 'patience: two patience decisions');
	is(no_retraining($r), 't', 'patience: no retraining');
}

$node->stop;
done_testing();
