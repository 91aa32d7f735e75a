# 007_drop_during_run.pl -- dropping what a run uses while it really trains
# in background workers: a clear error (55006) or a correct wait, never a
# deadlock (40P01), never a run left 'running' with nothing behind it.
# Repeated for MOP_DROP_ROUNDS rounds (default 3); in each:
#   1. a grid search trains (wait => false); mop_drop_dataset, DELETE FROM
#      mop.runs, DELETE FROM mop.datasets and DROP EXTENSION mop, all at
#      once from four sessions, each fail with 55006 naming the run, and
#      the run goes on training;
#   2. a finished run of the same dataset is deleted while the other run
#      trains: it goes, with its models, epochs and hops;
#   3. mop_cancel races with a session that retries mop_drop_dataset until
#      it succeeds: every attempt fails with 55006 or drops the dataset, and
#      the catalog is empty afterwards.
# At the end: no deadlock in the server log or in pg_stat_database, no run
# 'running', no mop process left, DROP EXTENSION mop works.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX ();
use Time::HiRes qw(usleep);

my $rounds = $ENV{MOP_DROP_ROUNDS} || 3;

my $node = PostgreSQL::Test::Cluster->new('drop');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
fsync = off
deadlock_timeout = 100ms
client_min_messages = warning
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION mop;
CREATE TABLE pts AS
SELECT (i % 4)::text AS label,
       ARRAY(SELECT ((i % 4) * 0.2 + sin(i * 5 + j))::real FROM generate_series(1, 32) j) AS v
  FROM generate_series(1, 4000) i;
});
my $space = '{"model": {"layers": [{"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 4}]}, "learning_rate": [0.01, 0.001], "batch_size": 32, "seed": 1}';

# a query; one that hangs fails the test
sub sql
{
	return $node->safe_psql('postgres', $_[0],
		timeout => $PostgreSQL::Test::Utils::timeout_default);
}

sub prepare
{
	return sql("SELECT dataset_name FROM mop_prepare('pts', 'label', ARRAY['v'], partitions => 2, buffer_rows => 256)");
}

sub start_run
{
	return sql("SELECT DISTINCT run_id FROM mop_grid_search('pts', '$space', epochs => $_[0], workers => 2, wait => false)");
}

sub hops { return sql("SELECT count(*) FROM mop.hops WHERE run_id = $_[0]"); }

sub wait_hops
{
	my ($run, $n) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) >= $n FROM mop.hops WHERE run_id = $run");
}

# SQL in a session of its own (SQLSTATEs shown), in the background; its
# output goes to $file; returns its pid
my $dir = $node->basedir;

sub session
{
	my ($file, $sql) = @_;
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		open(STDOUT, '>', $file) or POSIX::_exit(127);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(127);
		$ENV{PGOPTIONS} = '-c client_min_messages=warning -c statement_timeout=120s';
		exec('psql', '-X', '-q', '-At', '-v', 'VERBOSITY=verbose', '-d',
			$node->connstr('postgres'), '-c', $sql)
		  or POSIX::_exit(127);
	}
	return $pid;
}

# the same, waited for; returns its output
sub session_out
{
	my ($file, $sql) = @_;
	waitpid(session($file, $sql), 0);
	return slurp_file($file);
}

for my $round (1 .. $rounds)
{
	is(prepare(), 'pts', "round $round: mop_prepare");
	my $r = start_run(100000);
	like($r, qr/^\d+$/, "round $round: run $r started");
	ok(wait_hops($r, 4), "round $round: run $r trains");

	# 1. four drops at once while it trains
	my %what = (
		drop    => "SELECT mop_drop_dataset('pts')",
		delrun  => "DELETE FROM mop.runs WHERE id = $r",
		delds   => "DELETE FROM mop.datasets WHERE name = 'pts'",
		dropext => 'DROP EXTENSION mop');
	my @pids = map { session("$dir/$_", $what{$_}) } sort keys %what;
	waitpid($_, 0) for @pids;
	my %out = map { $_ => slurp_file("$dir/$_") } keys %what;
	my $all = join('', map { "$_: $out{$_}" } sort keys %out);
	ok(!grep({ /40P01|deadlock/ } values %out), "round $round: no drop deadlocked") or diag($all);
	ok( $out{drop} =~ /55006: dataset "pts" is in use by run $r\b/
		  && $out{drop} =~ /HINT:  Cancel the run with mop_cancel\($r\)/
		  && $out{delrun} =~ /55006: run $r is training and cannot be deleted/
		  && $out{delds} =~ /55006: run $r is training and cannot be deleted/
		  && $out{dropext} =~ /55006: extension "mop" is in use by run $r\b/,
		"round $round: mop_drop_dataset, DELETE of the run and of the dataset, DROP EXTENSION at once while run $r trains: 55006 each"
	) or diag($all);
	my $h = hops($r);
	ok(wait_hops($r, $h + 2), "round $round: run $r trains on after the refused drops");
	is(sql("SELECT status FROM mop.runs WHERE id = $r"), 'running', "round $round: run $r is still running");

	# 2. a finished run of the same dataset goes while run $r trains
	my $f = start_run(1);
	is(sql("SELECT mop_wait($f)"), 'done', "round $round: short run $f finished");
	is(session_out("$dir/delfinished", "DELETE FROM mop.runs WHERE id = $f"), '',
		"round $round: finished run $f deleted while run $r trains on the same dataset");
	is(sql(qq{SELECT (SELECT count(*) FROM mop.runs WHERE id = $f) + (SELECT count(*) FROM mop.models WHERE run_id = $f)
	                + (SELECT count(*) FROM mop.hops WHERE run_id = $f)}), 0,
		"round $round: no row of deleted run $f left (run, models, hops)");
	$h = hops($r);
	ok(wait_hops($r, $h + 2), "round $round: run $r trains on after run $f was deleted");

	# 3. cancel races with a drop retried until it succeeds
	my $pc = fork() // die "fork: $!";
	if ($pc == 0)
	{
		usleep(int(rand(10)) * 100_000);
		open(STDOUT, '>', "$dir/cancel") or POSIX::_exit(127);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(127);
		exec('psql', '-X', '-q', '-At', '-d', $node->connstr('postgres'),
			'-c', "SELECT mop_cancel($r)")
		  or POSIX::_exit(127);
	}
	my ($dropped, $bad, $tries) = (0, '', 0);
	for my $i (1 .. 300)
	{
		my $o = session_out("$dir/try$i", "SELECT mop_drop_dataset('pts')");
		$tries = $i - 1;
		if ($o =~ /40P01|deadlock/) { $bad = "deadlocked: $o"; last; }
		if ($o eq "t\n") { $dropped = 1; last; }
		if ($o !~ /55006: dataset "pts" is in use by run $r\b/) { $bad = $o; last; }
		usleep(50_000);
	}
	waitpid($pc, 0);
	is($bad, '', "round $round: every mop_drop_dataset racing with mop_cancel($r) refused with 55006 or dropped ($tries refused)");
	ok($dropped, "round $round: the dataset dropped after mop_cancel($r)");
	is(slurp_file("$dir/cancel"), "cancelled\n", "round $round: mop_cancel($r) says cancelled");
	is(sql(qq{SELECT (SELECT count(*) FROM mop.datasets) + (SELECT count(*) FROM mop.buffers) + (SELECT count(*) FROM mop.runs)
	                + (SELECT count(*) FROM mop.models) + (SELECT count(*) FROM mop.epochs) + (SELECT count(*) FROM mop.hops)}), 0,
		"round $round: no catalog row left after the drop");
}

# nothing of mop may outlive its runs, and no deadlock may have happened anywhere
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type LIKE 'mop %'"),
	"$rounds rounds: no mop process left after the runs ended");
my ($rc, $out, $err) = $node->psql('postgres', 'DROP EXTENSION mop');
is($rc, 0, 'DROP EXTENSION mop once no run trains') or diag($err);
sleep 1;
is(sql('SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()'), 0,
	'no deadlock in pg_stat_database');
my $log = slurp_file($node->logfile);
ok($log !~ /deadlock detected/, 'no "deadlock detected" in the server log')
  or diag(join("\n", grep { /deadlock/ } split /\n/, $log));

$node->stop;
done_testing();
