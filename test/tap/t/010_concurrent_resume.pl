# 010_concurrent_resume.pl -- two sessions resume the same run at once.
#
# Both pass the session-side check (the run is 'cancelled', nothing trains
# it), so both start a coordinator.  A third session holds the run's row
# lock while they start, so the two coordinators queue on it and claim the
# run one after the other.  The second must see that the first owns the run
# now and refuse with 55006: two coordinators would train every model twice
# (duplicate sub-epochs, models failed).  The run then finishes once, with
# every model done and no sub-epoch trained twice.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX ();

my $node = PostgreSQL::Test::Cluster->new('resume2');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
fsync = off
client_min_messages = warning
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION mop;
CREATE TABLE pts AS
SELECT (i % 4)::text AS label,
       ARRAY(SELECT ((i % 4) * 0.2 + sin(i * 5 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 12000) i;
SELECT dataset_name FROM mop_prepare('pts', 'label', ARRAY['v'], partitions => 2, buffer_rows => 256);
});
my $space = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 4}]}, "learning_rate": [0.01, 0.001], "batch_size": 16, "seed": 1}';
my $epochs = 12;

sub sql
{
	return $node->safe_psql('postgres', $_[0],
		timeout => $PostgreSQL::Test::Utils::timeout_default);
}

# SQL in a session of its own, in the background (SQLSTATEs shown); output to $file
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

my $r = sql("SELECT DISTINCT run_id FROM mop_grid_search('pts', '$space', epochs => $epochs, workers => 2, wait => false)");
like($r, qr/^\d+$/, "run $r started");
ok($node->poll_query_until('postgres', "SELECT count(*) >= 2 FROM mop.hops WHERE run_id = $r"),
	"run $r trains");
is(sql("SELECT mop_cancel($r)"), 'cancelled', "run $r cancelled");
my $hops_before = sql("SELECT count(*) FROM mop.hops WHERE run_id = $r");

# a third session holds the run's row while both resumes start
my $holder = session("$dir/holder",
	"BEGIN; SELECT 1 FROM mop.runs WHERE id = $r FOR UPDATE; SELECT pg_sleep(4); COMMIT;");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%pg_sleep(4)%' AND pid <> pg_backend_pid()"),
	'a session holds the run row');
my @pids = map { session("$dir/resume$_", "SELECT count(*) FROM mop_resume($r, wait => false)") } (1, 2);
waitpid($_, 0) for @pids;
waitpid($holder, 0);
my @out = map { slurp_file("$dir/resume$_") } (1, 2);
my $all = join('', map { "resume $_: $out[$_ - 1]" } (1, 2));
my $started = grep { /^\d+\s*$/ } @out;
my $refused = grep { /55006: run $r is being resumed by another session/ } @out;
is($started, 1, 'one resume started the run') or diag($all);
is($refused, 1, "the other was refused: 55006, run $r is being resumed by another session") or diag($all);
ok((grep { /HINT:  Wait for it with mop_wait\($r\)/ } @out), 'with a hint to wait for it') or diag($all);

is(sql("SELECT mop_wait($r)"), 'done', "run $r finished");
is(sql("SELECT string_agg(DISTINCT status, ',') FROM mop.models WHERE run_id = $r"), 'done',
	'every model done, none failed');
is(sql("SELECT count(*) FROM mop.hops WHERE run_id = $r"), 2 * $epochs * 2,
	"each sub-epoch trained once ($hops_before kept from before the cancel)");
is(sql("SELECT count(*) FROM mop.epochs e JOIN mop.models m ON m.id = e.model_id WHERE m.run_id = $r"),
	2 * $epochs, 'each epoch recorded once');
is(sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'mop%'"), 0,
	'no mop process left');
ok(!$node->log_contains(qr/duplicate key|mop run $r failed/), 'no duplicate sub-epoch, no failure in the server log');

$node->stop;
done_testing();
