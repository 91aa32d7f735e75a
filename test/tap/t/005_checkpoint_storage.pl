# 005_checkpoint_storage.pl -- a run's checkpoints do not fill the disk.
#
# Every sub-epoch commits its model's whole state (weights + Adam moments,
# about 4 MB here) as mop.models.state; each commit leaves the old state
# dead.  A grid of 4 such models over 4 short partitions trains 640
# sub-epochs (2.5 GB of states) while this test samples the size of
# mop.models (heap, TOAST table and indexes) and the WAL position:
#   1. blocking mop_grid_search by an ordinary role: the largest size seen
#      stays <= 3 x the live states (each model's latest and best
#      checkpoints; it grew without bound before), and the WAL is about one
#      state per state written (<= 1.5 x): one per sub-epoch, and one more
#      per epoch that beat its model's best (its best checkpoint);
#   2. the same with wait => false and another session blocked in mop_wait
#      for the whole run: the same bound;
#   3. mop_train over 30 epochs (one transaction) stores two states (the
#      first and the last) and the best when it is not the last, not 31;
#   4. another session holds the horizon back (a transaction with an id,
#      open for the whole run): nothing can be reclaimed, and the
#      coordinator's VACUUMs, which would read the dead states again every
#      time, back off (far fewer than one per sub-epoch, said in the log);
#      the run still finishes.
# autovacuum is off in this server: the bound must come from mop itself.
# The checks print the measured numbers.  MOP_STORAGE_EPOCHS (default 40)
# sets the epochs of the searches.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX ();
use Time::HiRes qw(time usleep);

my $epochs = $ENV{MOP_STORAGE_EPOCHS} || 40;

my $node = PostgreSQL::Test::Cluster->new('storage');
$node->init;
# wal_level as in a default cluster (the framework's default is minimal)
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
wal_level = replica
autovacuum = off
client_min_messages = warning
});
$node->start;

# one database per measurement, so that each starts from an empty mop.models
$node->safe_psql('postgres',
	'CREATE ROLE trainer LOGIN; CREATE DATABASE st1; CREATE DATABASE st2; CREATE DATABASE st3; CREATE DATABASE st4;');
for my $db ('st1', 'st2', 'st3', 'st4')
{
	$node->safe_psql($db, q{
CREATE EXTENSION mop;
CREATE TABLE t AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 400) i;
GRANT SELECT ON t TO trainer;
SET ROLE trainer;
SELECT dataset_name FROM mop_prepare('t', 'label', ARRAY['v'], partitions => 4, validation => 0.1);
});
}
# 64 -> 1024 -> 256 -> 10 with Adam: 331,274 parameters, a state of about 4 MB
my $model = '[{"type": "dense", "units": 1024, "activation": "relu"}, {"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]';
my $space = qq({"model": $model, "optimizer": "adam", "learning_rate": [0.001, 0.0001], "batch_size": [64, 128]});

sub size { return $node->safe_psql($_[0], "SELECT pg_total_relation_size('mop.models')"); }
sub lsn  { return $node->safe_psql($_[0], 'SELECT pg_current_wal_lsn()'); }

# a psql as trainer in the background, its output in $file; returns its pid
sub bg_psql
{
	my ($db, $file, $sql) = @_;
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		open(STDOUT, '>', $file) or POSIX::_exit(127);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(127);
		exec('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-At', '-d',
			$node->connstr($db) . ' user=trainer', '-c', $sql)
		  or POSIX::_exit(127);
	}
	return $pid;
}

# sample the size of mop.models every 0.2 s until the session $pid ends;
# returns the largest size seen and the session's exit status
sub watch_run
{
	my ($db, $pid) = @_;
	my $max = 0;
	my $status;
	while (1)
	{
		my $s = size($db);
		$max = $s if $s > $max;
		if (waitpid($pid, POSIX::WNOHANG()) == $pid)
		{
			$status = $?;
			last;
		}
		usleep(200_000);
	}
	my $s = size($db);
	$max = $s if $s > $max;
	return ($max, $status);
}

sub mb { return sprintf('%.1f MB', $_[0] / 1048576); }

# check one run: label, database, run id, wal start, largest size seen, seconds
sub check
{
	my ($label, $db, $run, $lsn0, $max, $secs) = @_;
	my ($hops, $live, $live_best, $n, $done, $wal) = split /\|/, $node->safe_psql($db, qq{
SELECT (SELECT count(*) FROM mop.hops WHERE run_id = $run),
       (SELECT sum(pg_column_size(state)) FROM mop.models WHERE run_id = $run),
       (SELECT coalesce(sum(pg_column_size(best_state)), 0) FROM mop.models WHERE run_id = $run),
       (SELECT count(*) FROM mop.models WHERE run_id = $run),
       (SELECT bool_and(status = 'done') FROM mop.models WHERE run_id = $run),
       pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn0')::bigint});
	is($hops, $epochs * 16, "$label: run $run trained every sub-epoch ($hops in $secs s)");
	is($done, 't', "$label: every model of run $run done");
	my $st = $live / $n;
	# the epochs that wrote a best checkpoint: better than every earlier
	# epoch of the model (accuracy: higher), or as good with a lower loss
	my $bests = 0;
	my %best;
	for my $row (split /\n/, $node->safe_psql($db,
		"SELECT e.model_id, e.valid_metric, e.valid_loss FROM mop.epochs e JOIN mop.models m ON m.id = e.model_id "
		  . "WHERE m.run_id = $run ORDER BY e.model_id, e.epoch"))
	{
		my ($m, $vm, $vl) = split /\|/, $row;
		next if $vm eq '';
		if (!defined $best{$m} || $vm > $best{$m}[0] || ($vm == $best{$m}[0] && $vl < $best{$m}[1]))
		{
			$best{$m} = [ $vm, $vl ];
			$bests++;
		}
	}
	# what a run keeps at most: each model's latest checkpoint and, once an
	# epoch that was the best is replaced, its best one (best_state is NULL
	# while the latest is the best, as it often is at the end)
	my $keep = 2 * $live;
	my $ratio = $max / $keep;
	my $wps = $wal / ($hops + $bests) / $st;
	cmp_ok($ratio, '<=', 3,
		sprintf('%s: %s of states written; at most 2 live states per model (latest and best; at the end %s) = %s, mop.models at most %s = %.2f x that (bound: 3 x)',
			$label, mb(($hops + $bests) * $st), mb($live + $live_best), mb($keep), mb($max), $ratio));
	cmp_ok($wps, '<=', 1.5,
		sprintf('%s: WAL %s per sub-epoch = %.2f states for %d sub-epochs and %d best checkpoints = %.2f per state written (bound: 1.5)',
			$label, mb($wal / $hops), $wal / $hops / $st, $hops, $bests, $wps));
}

# 1. a blocking search, as the role that owns it
{
	my $lsn0 = lsn('st1');
	my $t0 = time;
	my $out = $node->basedir . '/run1.out';
	my $pid = bg_psql('st1', $out,
		"SELECT count(*) FROM mop_grid_search('t', '$space', epochs => $epochs, workers => 2)");
	my ($max, $status) = watch_run('st1', $pid);
	my $secs = sprintf('%.1f', time - $t0);
	is($status, 0, 'blocking search: mop_grid_search succeeded') or diag(slurp_file($out));
	my $run = $node->safe_psql('st1', 'SELECT max(id) FROM mop.runs');
	check('blocking search', 'st1', $run, $lsn0, $max, $secs);
}

# 2. wait => false, and another session blocked in mop_wait meanwhile
{
	my $lsn0 = lsn('st2');
	my $t0 = time;
	my $run = $node->safe_psql('st2',
		"SET ROLE trainer; SELECT DISTINCT run_id FROM mop_grid_search('t', '$space', epochs => $epochs, workers => 2, wait => false)");
	my $out = $node->basedir . '/run2.out';
	my $pid = bg_psql('st2', $out, "SELECT mop_wait($run)");
	my ($max, $status) = watch_run('st2', $pid);
	my $secs = sprintf('%.1f', time - $t0);
	is($status, 0, 'background search + mop_wait: mop_wait succeeded') or diag(slurp_file($out));
	check('background search + mop_wait', 'st2', $run, $lsn0, $max, $secs);
}

# 3. mop_train: one transaction, one stored state
{
	my $before = size('st3');
	my $id = $node->safe_psql('st3',
		qq(SET ROLE trainer; SELECT mop_train('t', '{"model": $model, "optimizer": "adam"}', 30)));
	my ($st, $has_best, $grew) = split /\|/, $node->safe_psql('st3',
		"SELECT pg_column_size(state), (best_state IS NOT NULL)::int, pg_total_relation_size('mop.models') - $before FROM mop.models WHERE id = $id");
	cmp_ok($grew, '<=', (2.5 + $has_best) * $st,
		sprintf('mop_train, 30 epochs: mop.models grew by %s = %.2f states of %s (the first, the last%s; bound: %.1f states)',
			mb($grew), $grew / $st, mb($st), $has_best ? ' and the best' : '', 2.5 + $has_best));
}

# 4. the horizon held by another session for the whole run
{
	my $ep = 10;
	my $hold = $node->basedir . '/hold.out';
	my $holder = bg_psql('st4', $hold,
		"SET application_name = 'horizon_holder'; BEGIN; SELECT pg_current_xact_id(); SELECT pg_sleep(3600); COMMIT;");
	$node->poll_query_until('st4',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'horizon_holder' AND backend_xid IS NOT NULL")
	  or die 'the horizon holder did not start';
	my $v0 = $node->safe_psql('st4', "SELECT vacuum_count FROM pg_stat_all_tables WHERE relid = 'mop.models'::regclass");
	my $log0 = -s $node->logfile;
	my $t0 = time;
	my $out = $node->basedir . '/run4.out';
	my $pid = bg_psql('st4', $out,
		"SELECT count(*) FROM mop_grid_search('t', '$space', epochs => $ep, workers => 2)");
	waitpid($pid, 0);
	is($?, 0, 'horizon held: mop_grid_search succeeded') or diag(slurp_file($out));
	my $secs = sprintf('%.1f', time - $t0);
	my ($hops, $vac, $dead) = split /\|/, $node->safe_psql('st4', qq{
SELECT (SELECT count(*) FROM mop.hops WHERE run_id = (SELECT max(id) FROM mop.runs)),
       (SELECT vacuum_count FROM pg_stat_all_tables WHERE relid = 'mop.models'::regclass) - $v0,
       (SELECT n_dead_tup FROM pg_stat_all_tables WHERE relid = (SELECT reltoastrelid FROM pg_class WHERE oid = 'mop.models'::regclass))});
	is($hops, $ep * 16, "horizon held: every sub-epoch trained ($hops in $secs s)");
	cmp_ok($dead, '>', 0, "horizon held: $dead dead TOAST chunks could not be reclaimed");
	cmp_ok($vac, '<=', $hops / 8,
		"horizon held: $vac VACUUMs of mop.models for $hops sub-epochs (one per sub-epoch when nothing holds the horizon; bound: 1 per 8)");
	like(slurp_file($node->logfile, $log0), qr/VACUUM could not remove the checkpoints this run superseded/,
		'horizon held: the server log says why the checkpoints stay');
	$node->safe_psql('st4', "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'horizon_holder'");
	waitpid($holder, 0);
}

$node->stop;
done_testing();
