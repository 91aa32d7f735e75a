# 016_set_workers.pl -- mop_set_workers: the workers of a running run over
# local data, changed at sub-epoch boundaries without stopping it.
#   1. a deterministic grid that starts with 2 workers, gets 4 and then 1:
#      the new workers train, the ones taken out finish their sub-epoch and
#      train no more, the MOP invariants hold, and the models are
#      bit-identical to those of the same grid run with 2 workers
#      throughout; the changes are events of the run; mop.run_progress and
#      mop.progress show the workers serving it;
#   2. the errors: a number of workers out of range (22023, the cap in the
#      hint), a run that is not running (55000), another role's run (the
#      same as a run that does not exist, 42704), a role that sees the run
#      without the owner's privileges (42501).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
client_min_messages = warning
});
$node->start;

sub sq { my ($sql) = @_; return $node->safe_psql('postgres', $sql, timeout => $PostgreSQL::Test::Utils::timeout_default); }
sub err { my ($sql) = @_; my ($r, $o, $e) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql"); return $e; }

sq(q{
CREATE EXTENSION mop;
CREATE TABLE pts AS
SELECT (i % 3)::text AS label,
       ARRAY(SELECT ((i % 3) * 0.3 + sin(i * 7 + j))::real FROM generate_series(1, 32) j) AS v
  FROM generate_series(1, 8000) i;
SELECT 1 FROM mop_prepare('pts', 'label', ARRAY['v'], dataset => 'pts', partitions => 4,
                          buffer_rows => 256, seed => 5);
});
# sub-epochs of about a tenth of a second: long enough to change the workers mid-run
my $space = '{"model": {"layers": [{"type": "dense", "units": 1024, "activation": "relu"}, {"type": "dense", "units": 512, "activation": "relu"}, {"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.003], "batch_size": [64, 128], "seed": 3}';
my $epochs = 8;
sub grid
{
	my ($wait) = @_;
	return sq(qq{SELECT DISTINCT run_id FROM mop_grid_search('pts', '$space', epochs => $epochs, workers => 2,
		deterministic => true, seed => 11, wait => $wait)});
}
sub states { return sq(qq{SELECT string_agg(md5(state), ',' ORDER BY config::text) FROM mop.models WHERE run_id = $_[0]}); }
sub poll { my ($q, $what) = @_; $node->poll_query_until('postgres', $q) or die "timed out: $what"; }

# 1. 2 workers, then 4, then 1 ---------------------------------------------------
my $ref = grid('true');
my $run = grid('false');
poll("SELECT count(*) >= 8 FROM mop.hops WHERE run_id = $run", 'first hops');
is(sq("SELECT count(DISTINCT worker) FROM mop.hops WHERE run_id = $run"), '2', 'the run starts with 2 workers');
is(sq("SELECT workers || ' ' || coalesce(workers_asked::text, '-') FROM mop.run_progress WHERE run_id = $run"), '2 -',
	'mop.run_progress: 2 workers, none asked for');
is(sq("SELECT mop_set_workers($run, 4)"), '4', 'mop_set_workers(run, 4)');
poll("SELECT count(DISTINCT worker) = 4 FROM mop.hops WHERE run_id = $run", 'the new workers train');
is(sq("SELECT workers || ' ' || workers_asked FROM mop.run_progress WHERE run_id = $run"), '4 4',
	'mop.run_progress: 4 workers, 4 asked for');
is(sq("SELECT count(*) FROM mop.progress WHERE run_id = $run"), '4', 'mop.progress shows 4 workers');
is(sq("SELECT status FROM mop.runs WHERE id = $run"), 'running', 'the run went on');

is(sq("SELECT mop_set_workers($run, 1)"), '1', 'mop_set_workers(run, 1)');
poll("SELECT count(*) = 1 FROM mop.progress WHERE run_id = $run", 'the workers taken out leave');
my $mark = sq("SELECT max(id) FROM mop.hops WHERE run_id = $run");
is(sq("SELECT workers FROM mop.run_progress WHERE run_id = $run"), '1', 'mop.run_progress: 1 worker');
is(sq("SELECT worker FROM mop.progress WHERE run_id = $run"), '0', 'the one left is worker 0');
poll("SELECT status <> 'running' FROM mop.runs WHERE id = $run", 'the run ends');
is(sq("SELECT status FROM mop.runs WHERE id = $run"), 'done', 'the run finished');
cmp_ok(sq("SELECT count(*) FROM mop.hops WHERE run_id = $run AND id > $mark"), '>', 0, 'hops after the change to 1 worker');
is(sq("SELECT string_agg(DISTINCT worker::text, ',') FROM mop.hops WHERE run_id = $run AND id > $mark"), '0',
	'after it, only worker 0 trains');
is(sq(qq{SELECT count(*) FROM (SELECT model_id, epoch, partition FROM mop.hops WHERE run_id = $run
         GROUP BY 1, 2, 3 HAVING count(*) <> 1) x}), '0', 'no partition visited twice in an epoch');
is(sq("SELECT count(*) FROM mop.hops WHERE run_id = $run"), 4 * $epochs * 4, 'every model visited every partition in every epoch');
is(states($run), states($ref), 'deterministic: the models are bit-identical to those of a run that kept 2 workers');
is(sq("SELECT string_agg(format('%s %s %s', segment, event, detail), '; ' ORDER BY id) FROM mop.segment_events WHERE run_id = $run"),
	'local workers 4 workers (were 2), asked for 4; local workers 1 workers (were 4), asked for 1',
	'each change is an event of the run');

# 2. errors ----------------------------------------------------------------------
my $e = err("SELECT mop_set_workers($run, 2)");
like($e, qr/55000: run $run is not running \(status done\)/, 'a finished run: 55000');
like(err("SELECT mop_set_workers(999999, 2)"), qr/42704: run 999999 does not exist/, 'no such run: 42704');

$run = grid('false');
poll("SELECT count(*) >= 2 FROM mop.hops WHERE run_id = $run", 'hops');
$e = err("SELECT mop_set_workers($run, 0)");
like($e, qr/22023: workers must be between 1 and 4 for run $run, not 0/, '0 workers: 22023');
like($e, qr/HINT:  At most one worker per partition \(the dataset has 4\), 64 workers a run, and max_worker_processes \(16\)/,
	'the hint names the caps');
like(err("SELECT mop_set_workers($run, 5)"), qr/22023: workers must be between 1 and 4/, 'more workers than partitions: 22023');
sq(q{CREATE ROLE other LOGIN; CREATE ROLE auditor LOGIN BYPASSRLS; GRANT USAGE ON SCHEMA mop TO auditor});
like(err("SET ROLE other; SELECT mop_set_workers($run, 2)"), qr/42704: run $run does not exist/,
	"another role's run is one that does not exist");
like(err("SET ROLE auditor; SELECT mop_set_workers($run, 2)"),
	qr/42501: permission denied to set the workers of run $run/, 'a role that sees the run without its privileges: 42501');
is(sq("SELECT mop_cancel($run)"), 'cancelled', 'cancelled');
is(sq("SELECT count(*) FROM mop.segment_events WHERE run_id = $run"), '0', 'nothing recorded by the refused calls');

done_testing();
