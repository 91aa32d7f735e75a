# 014_segment_faults.pl -- segments that misbehave, and cancels while mop
# waits on one (a coordinator and two segment servers on loopback):
#   1. mop_place's result rows (read after SPI is gone they were garbage,
#      and with freed memory scribbled on, a crash);
#   2. a cancel (statement_timeout) while mop_place or mop_drop_dataset waits
#      on a segment: a clean 57014, no double PQfinish (a crash), the drop
#      not carried on, and the segment's backend gone within seconds;
#   3. a segment whose INSERT ... RETURNING id returns no row: an ERROR, no
#      NULL dereference;
#   4. a segment frozen mid-run (SIGSTOP on its whole server): with
#      replicas => 2 the run finishes after mop.segment_timeout, not after
#      mop.task_timeout, the segment recorded down; mop_cancel of a run
#      whose segment is frozen ends it (PQcancel waited for ever);
#   5. mop_train and class_weight "balanced" over a dataset some of whose
#      partitions are only on segments: refused (0A000), not trained or
#      weighed on a part of the data;
#   6. errors of the work on a segment (a copy's buffer corrupted, a copy's
#      partition deleted) fail the models with the segment's name, message
#      and SQLSTATE, and the run ends failed, instead of the segment being
#      marked down and the work given to it again for ever; a segment's
#      backend terminated mid-run (57P01) is the segment going down, not
#      an error of the work: the sub-epoch runs again elsewhere.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);

my $conf = qq{
max_worker_processes = 16
client_min_messages = warning
log_statement = none
};
my $coord = PostgreSQL::Test::Cluster->new('coord');
my $seg1 = PostgreSQL::Test::Cluster->new('seg1');
my $seg2 = PostgreSQL::Test::Cluster->new('seg2');
for my $n ($coord, $seg1, $seg2)
{
	$n->init;
	$n->append_conf('postgresql.conf', $conf);
}
$_->start for ($seg1, $seg2);
{
	# freed memory scribbled on: a read after free shows
	local $ENV{MALLOC_PERTURB_} = 165;
	$coord->start;
}

sub sq { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql, timeout => 180); }
sub pq { my ($n, $sql) = @_; my ($r, $o, $e) = $n->psql('postgres', $sql, timeout => 180); return ($r, $o, $e); }
sub crashes { my $n = () = slurp_file($coord->logfile) =~ /terminated by signal/g; return $n; }

sq($_, 'CREATE EXTENSION mop') for ($seg1, $seg2);
my $su = sq($coord, 'SELECT current_user');
sq($coord, qq{
CREATE EXTENSION mop;
CREATE EXTENSION postgres_fdw;
CREATE SERVER seg1 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '@{[$seg1->host]}', port '@{[$seg1->port]}', dbname 'postgres');
CREATE SERVER seg2 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '@{[$seg2->host]}', port '@{[$seg2->port]}', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER seg1 OPTIONS (user '$su');
CREATE USER MAPPING FOR CURRENT_USER SERVER seg2 OPTIONS (user '$su');
CREATE TABLE pts AS
SELECT (CASE WHEN i % 10 = 0 THEN 0 ELSE 1 + i % 2 END)::text AS label,
       ARRAY(SELECT ((i % 3) * 0.3 + sin(i * 7 + j))::real FROM generate_series(1, 32) j) AS v
  FROM generate_series(1, 4000) i;
});
my $space = '{"model": {"layers": [{"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.003], "batch_size": [16, 32], "seed": 3}';
sub prep
{
	my ($name, $segs, $rep, $parts) = @_;
	$parts //= 4;
	my $s = $segs ? ", segments => ARRAY[$segs], replicas => $rep" : '';
	sq($coord, qq{SELECT 1 FROM mop_prepare('pts', 'label', ARRAY['v'], dataset => '$name', partitions => $parts,
	              buffer_rows => 128, seed => 5 $s)});
}
# a session on a segment holding mop.buffers' lock for a while
sub lock_buffers
{
	my ($node, $secs) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(['psql', '-X', '-d', $node->connstr('postgres'), '-c',
		"BEGIN; LOCK TABLE mop.buffers; SELECT pg_sleep($secs); COMMIT;"], \$in, \$out, \$err);
	$node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
	                                       WHERE c.relname = 'buffers' AND l.mode = 'AccessExclusiveLock' AND l.granted});
	return $h;
}
# a whole server stopped (SIGSTOP) or continued; its processes
sub freeze
{
	my ($node, $sig) = @_;
	my $pm = (split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0];
	my @pids = ($pm, grep { /\d/ } split /\s+/, `ps -o pid= --ppid $pm`);
	kill $sig, @pids;
}

# 1. mop_place's rows ---------------------------------------------------------
prep('many', undef, 0, 400);
is(sq($coord, q{SELECT string_agg(format('%s:%s:%s:%s', segment, array_length(partitions, 1), buffers, bytes), ' ')
                  FROM mop_place('many', ARRAY['local', 'seg1'], 2)}),
   sq($coord, q{SELECT string_agg(format('%s:%s:%s:%s', segment, array_length(partitions, 1), buffers, bytes), ' ' ORDER BY segment)
                  FROM mop.segments WHERE dataset = 'many'}),
   "mop_place returns the placement that mop.segments shows");
is(crashes(), 0, 'and the server is fine');

# 2. cancels while mop waits on a segment -------------------------------------
prep('locked', undef, 0);
prep('dropme', q{'seg1', 'local'}, 1);
my $h = lock_buffers($seg1, 120);
my ($ret, $out, $err) = pq($coord, q{SET statement_timeout = '1s'; SELECT segment FROM mop_place('locked', ARRAY['seg1'])});
like($err, qr/canceling statement due to statement timeout/, 'mop_place waiting on a segment is cancelled');
is(crashes(), 0, 'without a crash (the connection is closed once)');
ok($seg1->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'mop'}),
   "the segment's backend is gone while the lock is still held");
is(sq($coord, q{SELECT count(*) FROM mop.dataset_segments s JOIN mop.datasets d ON d.id = s.dataset_id WHERE d.name = 'locked'}),
   '0', 'nothing placed');

($ret, $out, $err) = pq($coord, q{SET statement_timeout = '1s'; SELECT mop_drop_dataset('dropme')});
like($err, qr/canceling statement due to statement timeout/, 'mop_drop_dataset waiting on a segment is cancelled');
unlike($err, qr/WARNING/, 'the cancel is not turned into a warning');
is(crashes(), 0, 'without a crash');
is(sq($coord, q{SELECT count(*) FROM mop.datasets WHERE name = 'dropme'}), '1', 'the dataset is not dropped');
sq($seg1, q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()});
$h->finish;
$seg1->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                                      WHERE c.relname = 'buffers' AND l.mode = 'AccessExclusiveLock'});
sq($coord, q{SELECT mop_drop_dataset('dropme')});
is(sq($seg1, q{SELECT count(*) FROM mop.datasets WHERE name LIKE 'dropme@%'}), '0', 'dropped once the segment answers');

# 3. a segment that answers an INSERT ... RETURNING with no row -------------------
sq($seg2, q{CREATE FUNCTION public.skip() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
            CREATE TRIGGER skip BEFORE INSERT ON mop.datasets FOR EACH ROW
                WHEN (NEW.name LIKE 'skipped@%') EXECUTE FUNCTION public.skip()});
prep('skipped', undef, 0);
($ret, $out, $err) = pq($coord, q{SELECT segment FROM mop_place('skipped', ARRAY['seg2'])});
like($err, qr/segment "seg2" did not create the copy of the dataset/, 'no row from the segment: an ERROR');
is(crashes(), 0, 'not a crash');
sq($seg2, q{DROP TRIGGER skip ON mop.datasets});

# 4. a frozen segment ------------------------------------------------------------
prep('spread', q{'local', 'seg1', 'seg2'}, 2);
my $run = sq($coord, qq{SET mop.segment_timeout = '2s'; SET mop.task_timeout = '10min';
	SELECT DISTINCT run_id FROM mop_grid_search('spread', '$space', epochs => 300, wait => false)});
$coord->poll_query_until('postgres', "SELECT count(*) >= 4 FROM mop.hops WHERE run_id = $run") or die 'no progress';
freeze($seg2, 'STOP');
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'running', 'seg2 frozen mid-run');
my $t0 = time;
$coord->poll_query_until('postgres', "SELECT status <> 'running' FROM mop.runs WHERE id = $run");
my $took = time - $t0;
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'done', 'seg2 frozen, replicas => 2: the run finishes');
cmp_ok($took, '<', 120, 'within mop.segment_timeout and the probes, not mop.task_timeout');
note "the run took $took s after the freeze";
is(sq($coord, "SELECT count(*) > 0 FROM mop.segment_events WHERE run_id = $run AND segment = 'seg2' AND event = 'down'"),
   't', 'seg2 down is recorded');
is(sq($coord, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mop worker'}), '0', 'no worker is left behind');

$run = sq($coord, qq{SET mop.segment_timeout = '2s';
	SELECT DISTINCT run_id FROM mop_grid_search('spread', '$space', epochs => 100000, wait => false)});
$coord->poll_query_until('postgres', "SELECT count(*) >= 4 FROM mop.hops WHERE run_id = $run") or die 'no progress';
sleep 3;
$t0 = time;
is(sq($coord, "SELECT mop_cancel($run)"), 'cancelled', 'mop_cancel of a run with a frozen segment');
cmp_ok(time - $t0, '<', 15, 'returns promptly');
freeze($seg2, 'CONT');
is(sq($coord, "SELECT string_agg(DISTINCT status, ',') FROM mop.models WHERE run_id = $run"), 'cancelled',
   'its models are cancelled');

# 5. what reads this server's training buffers refuses a dataset partly elsewhere --
my $cfg = '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": 0.01, "batch_size": 32, "seed": 3}';
($ret, $out, $err) = pq($coord, qq{\\set VERBOSITY verbose
	SELECT mop_train('spread', '$cfg', 1)});
like($err, qr/0A000.*mop_train cannot train on dataset "spread": its partition 1 is only on segments/s,
	 'mop_train over a dataset with partitions only on segments: 0A000');
prep('half', q{'seg1', 'local'}, 1);
my $bal = '{"model": {"layers": [{"type": "dense", "units": 3}]}, "class_weight": "balanced", "learning_rate": 0.01, "batch_size": 32, "seed": 3}';
($ret, $out, $err) = pq($coord, qq{\\set VERBOSITY verbose
	SELECT length(mop.init_model('half', '$bal'))});
like($err, qr/0A000.*class_weight "balanced" cannot weigh dataset "half": its partition 0 is only on segments/s,
	 '"balanced" over a dataset with partitions only on segments: 0A000');
prep('whole', q{'local', 'seg1'}, 2);
prep('unplaced', undef, 0);
is(sq($coord, qq{SELECT md5(mop.init_model('whole', '$bal')) = md5(mop.init_model('unplaced', '$bal'))}), 't',
   "with every partition here, 'balanced' weighs as for the dataset unplaced");

# 6. errors of the work on a segment ---------------------------------------------
sub run_until_end
{
	my ($ds) = @_;
	my $r = sq($coord, qq{SET mop.segment_timeout = '2s';
		SELECT DISTINCT run_id FROM mop_grid_search('$ds', '$space', epochs => 3, wait => false)});
	$coord->poll_query_until('postgres', "SELECT status <> 'running' FROM mop.runs WHERE id = $r")
		or die "run $r over $ds did not end";
	return $r;
}
prep('broken', q{'seg1'}, 1, 2);
sq($seg1, q{UPDATE mop.buffers SET x = substring(x FROM 1 FOR 5)
             WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name LIKE 'broken@%') AND partition = 1});
$run = run_until_end('broken');
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'failed', "a corrupt buffer on the segment: the run fails");
like(sq($coord, "SELECT error FROM mop.runs WHERE id = $run"), qr/segment "seg1": .* \(SQLSTATE (?!08)[0-9A-Z]{5}\)/,
     "with the segment's name, message and SQLSTATE") or diag sq($coord, "SELECT error FROM mop.runs WHERE id = $run");
is(sq($coord, "SELECT count(*) FROM mop.segment_events WHERE run_id = $run AND event IN ('down', 'requeued')"), '0',
   'the segment is not marked down');

prep('gone', q{'seg1'}, 1, 2);
sq($seg1, q{DELETE FROM mop.buffers
             WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name LIKE 'gone@%') AND partition = 0});
$run = run_until_end('gone');
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'failed', "a partition missing from the segment's copy: the run fails");
like(sq($coord, "SELECT error FROM mop.runs WHERE id = $run"),
     qr/segment "seg1" has no training buffers of partition 0 in its copy of the dataset \(SQLSTATE [0-9A-Z]{5}\)/,
     'naming the segment and the partition') or diag sq($coord, "SELECT error FROM mop.runs WHERE id = $run");
is(sq($coord, "SELECT count(*) FROM mop.segment_events WHERE run_id = $run AND event IN ('down', 'requeued')"), '0',
   'the segment is not marked down');

# a segment's backend terminated mid-run: the segment is down, the run goes on
$run = sq($coord, qq{SET mop.segment_timeout = '2s';
	SELECT DISTINCT run_id FROM mop_grid_search('spread', '$space', epochs => 40, wait => false)});
$coord->poll_query_until('postgres', "SELECT count(*) >= 4 FROM mop.hops WHERE run_id = $run") or die 'no progress';
$seg1->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'mop'})
	or die 'no connection to seg1';
# (idle between sub-epochs, or in one: the worker meets 57P01 either way)
is(sq($seg1, q{SELECT bool_and(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'mop'}), 't',
   "seg1's backends of the run terminated");
$coord->poll_query_until('postgres', "SELECT status <> 'running' FROM mop.runs WHERE id = $run") or die 'the run did not end';
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'done', "a segment's backend terminated: the run finishes");
is(sq($coord, "SELECT count(*) FROM mop.models WHERE run_id = $run AND status = 'failed'"), '0', 'no model failed');
is(sq($coord, "SELECT count(*) > 0 FROM mop.segment_events WHERE run_id = $run AND segment = 'seg1' AND event = 'down'"),
   't', 'seg1 was marked down');
is(crashes(), 0, 'no crash in all of it');

done_testing();
