# 017_segment_xact.pl -- the segments' copies follow the caller's
# transaction, and a frozen segment's probes do not stall a run
# (a coordinator and two segment servers on loopback):
#   1. mop_drop_dataset, mop_place, mop_prepare(segments => ...),
#      mop_add_segment and mop_remove_segment rolled back leave every
#      segment's copies as they were, and the placement naming them;
#      committed, they take effect;
#   2. an ERROR or a cancel (pg_cancel_backend) after one segment got its
#      copy, or dropped it, leaves that segment as it was, closes every
#      connection, and crashes nothing;
#   3. subtransactions: a savepoint rolled back undoes its own work on the
#      segments and keeps the work before it, on the same segment too; a
#      PL/pgSQL exception block likewise; PREPARE TRANSACTION is refused;
#   4. a frozen segment (SIGSTOP) while a run trains with replicas => 2:
#      the coordinator goes on assigning sub-epochs while its probes of
#      the segment wait (no gap of a probe's connect timeout between two
#      sub-epochs' starts); the sub-epoch rates with and without the frozen
#      segment are noted.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);

my $conf = qq{
max_worker_processes = 16
max_prepared_transactions = 2
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
$_->start for ($coord, $seg1, $seg2);

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

sub prep_sql
{
	my ($name, $segs, $rep) = @_;
	my $s = $segs ? ", segments => ARRAY[$segs], replicas => $rep" : '';
	return qq{SELECT 1 FROM mop_prepare('pts', 'label', ARRAY['v'], dataset => '$name', partitions => 4,
	          buffer_rows => 128, seed => 5 $s)};
}
sub prep { sq($coord, prep_sql(@_)); }

# a segment's copies of a dataset: id, partitions and buffers' digests
sub copies
{
	my ($node, $ds) = @_;
	return sq($node, qq{SELECT coalesce(string_agg(format('%s/%s/%s', d.id, b.partition, md5(b.x || b.y)), ' '
	                                    ORDER BY d.id, b.partition, b.buffer_no), '-')
	                      FROM mop.datasets d LEFT JOIN mop.buffers b ON b.dataset_id = d.id
	                     WHERE d.name LIKE '$ds\@%'});
}
# the coordinator's placement of a dataset
sub placement
{
	my ($ds) = @_;
	return sq($coord, qq{SELECT coalesce(string_agg(format('%s:%s:%s', s.segment, s.partition, s.remote_dataset_id), ' '
	                                     ORDER BY s.segment, s.partition), '-')
	                       FROM mop.dataset_segments s JOIN mop.datasets d ON d.id = s.dataset_id
	                      WHERE d.name = '$ds'});
}
# the state of a dataset everywhere
sub everywhere { my ($ds) = @_; return join(' | ', placement($ds), copies($seg1, $ds), copies($seg2, $ds)); }
# every copy the placement names is on its segment, and no other
sub consistent
{
	my ($ds) = @_;
	for my $pair (['seg1', $seg1], ['seg2', $seg2])
	{
		my ($name, $node) = @$pair;
		my $want = sq($coord, qq{SELECT coalesce(string_agg(DISTINCT s.remote_dataset_id::text, ','), '')
		                           FROM mop.dataset_segments s JOIN mop.datasets d ON d.id = s.dataset_id
		                          WHERE d.name = '$ds' AND s.segment = '$name'});
		my $have = sq($node, qq{SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM mop.datasets
		                         WHERE name LIKE '$ds\@%'});
		return "$name holds copies [$have], the placement names [$want]" if $want ne $have;
	}
	return 'consistent';
}
# no connection of mop's left on the segments
sub no_connections
{
	for my $n ($seg1, $seg2)
	{
		return 0 unless $n->poll_query_until('postgres',
			q{SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'mop'});
	}
	return 1;
}

# 1. rolled back, nothing changes on the segments --------------------------------
prep('d', q{'local', 'seg1', 'seg2'}, 2);
my $before = everywhere('d');
like($before, qr/^local.*seg1.*seg2.* \| \d+\/0\/.* \| \d+\//, 'd placed on local, seg1 and seg2');
sq($coord, q{BEGIN; SELECT mop_drop_dataset('d'); ROLLBACK;});
is(everywhere('d'), $before, 'mop_drop_dataset rolled back: the copies are still on the segments');
is(consistent('d'), 'consistent', 'and the placement names them');

prep('p', undef, 0);
sq($coord, q{SELECT 1 FROM mop_place('p', ARRAY['local', 'seg1'], 2)});
$before = everywhere('p');
sq($coord, q{BEGIN; SELECT 1 FROM mop_place('p', ARRAY['local', 'seg1', 'seg2'], 3); ROLLBACK;});
is(everywhere('p'), $before, 'mop_place rolled back: the old copy stays, none is added');
is(consistent('p'), 'consistent', "and the placement's copy ids are the segments'");

sq($coord, 'BEGIN; ' . prep_sql('q', q{'seg1', 'seg2'}, 1) . '; ROLLBACK;');
is(copies($seg1, 'q') . ' ' . copies($seg2, 'q'), '- -', 'mop_prepare(segments => ...) rolled back: no copy anywhere');

sq($coord, q{BEGIN; SELECT 1 FROM mop_add_segment('p', 'seg2'); ROLLBACK;});
is(everywhere('p'), $before, 'mop_add_segment rolled back: no copy on the segment');
sq($coord, q{BEGIN; SELECT mop_remove_segment('p', 'seg1'); ROLLBACK;});
is(everywhere('p'), $before, 'mop_remove_segment rolled back: the copy stays');

sq($coord, q{BEGIN; SELECT 1 FROM mop_add_segment('p', 'seg2'); COMMIT;});
like(copies($seg2, 'p'), qr/^\d+\/0\/\S+ .*\/3\//, 'mop_add_segment committed: the copy is on the segment');
is(consistent('p'), 'consistent', 'and in the placement');
sq($coord, q{SELECT mop_remove_segment('p', 'seg2')});
is(copies($seg2, 'p'), '-', 'mop_remove_segment committed: the copy is dropped');
ok(no_connections(), 'no connection is left on the segments');

# 2. an ERROR or a cancel half way -------------------------------------------------
# seg2 refuses the buffers of a dataset named err
sq($seg2, q{CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
              BEGIN
                IF (SELECT name FROM mop.datasets WHERE id = NEW.dataset_id) LIKE 'err@%' THEN
                  RAISE EXCEPTION 'refused here';
                END IF;
                RETURN NEW;
              END $$;
            CREATE TRIGGER refuse BEFORE INSERT ON mop.buffers FOR EACH ROW EXECUTE FUNCTION public.refuse()});
my ($ret, $out, $err) = pq($coord, prep_sql('err', q{'seg1', 'seg2'}, 1));
like($err, qr/segment "seg2": refused here/, "mop_prepare fails on seg2's buffers");
is(copies($seg1, 'err'), '-', 'seg1, which had its copy already, keeps none');
($ret, $out, $err) = pq($coord, q{BEGIN; SELECT 1 FROM mop_add_segment('p', 'seg2');
	SELECT 1/0; ROLLBACK;});
like($err, qr/division by zero/, 'an ERROR later in the transaction');
is(everywhere('p'), $before, 'undoes the copies made before it');
ok(no_connections(), 'no connection is left on the segments');
sq($seg2, q{DROP TRIGGER refuse ON mop.buffers});

# a session holding seg2's mop.buffers (or mop.datasets) locked
sub lock_table
{
	my ($node, $table) = @_;
	my ($in, $o, $e) = ('', '', '');
	my $h = IPC::Run::start(['psql', '-X', '-d', $node->connstr('postgres'), '-c',
		"BEGIN; LOCK TABLE $table; SELECT pg_sleep(120); COMMIT;"], \$in, \$o, \$e);
	$node->poll_query_until('postgres', qq{SELECT count(*) > 0 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
	                                       WHERE c.oid = '$table'::regclass AND l.mode = 'AccessExclusiveLock' AND l.granted});
	return $h;
}
sub unlock
{
	my ($node, $h) = @_;
	sq($node, q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(120)%' AND pid <> pg_backend_pid()});
	$h->finish;
}
# start sql on the coordinator, cancel it once it waits on seg2 (a mop
# connection there waiting for a lock), return its stderr
sub cancel_while_waiting
{
	my ($sql) = @_;
	my ($in, $o, $e) = ('', '', '');
	my $h = IPC::Run::start(['psql', '-X', '-d', $coord->connstr('postgres'), '-c', $sql], \$in, \$o, \$e);
	$seg2->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_stat_activity
	                                       WHERE application_name = 'mop' AND wait_event_type = 'Lock'})
		or die 'mop never waited on seg2';
	sq($coord, q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%mop_%' AND pid <> pg_backend_pid()
	              AND backend_type = 'client backend'});
	$h->finish;
	return $e;
}
prep('c', undef, 0);
my $lock = lock_table($seg2, 'mop.buffers');
$err = cancel_while_waiting(q{SELECT 1 FROM mop_place('c', ARRAY['seg1', 'seg2'], 1)});
like($err, qr/canceling statement due to user request/, "mop_place cancelled while it waits on seg2");
is(copies($seg1, 'c'), '-', 'seg1, which had its copy already, keeps none');
ok(no_connections(), 'no connection is left on the segments');
unlock($seg2, $lock);

prep('e', q{'seg1', 'seg2'}, 2);
$before = everywhere('e');
$lock = lock_table($seg2, 'mop.datasets');
$err = cancel_while_waiting(q{SELECT mop_drop_dataset('e')});
like($err, qr/canceling statement due to user request/, "mop_drop_dataset cancelled while it waits on seg2");
unlike($err, qr/WARNING/, 'the cancel is not a warning');
is(copies($seg1, 'e'), (split / \| /, $before)[1], "seg1's copy, dropped before the cancel, is still there");
ok(no_connections(), 'no connection is left on the segments');
unlock($seg2, $lock);
is(everywhere('e'), $before, 'and so is every copy and the placement');
is(crashes(), 0, 'no crash');

# 3. subtransactions ---------------------------------------------------------------
sq($coord, q{BEGIN; SAVEPOINT a; SELECT mop_drop_dataset('e'); ROLLBACK TO a; COMMIT;});
is(everywhere('e'), $before, 'mop_drop_dataset under a savepoint rolled back: the copies stay');

sq($coord, q{BEGIN; SELECT 1 FROM mop_add_segment('p', 'seg2'); SAVEPOINT a;
	SELECT mop_remove_segment('p', 'seg1'); ROLLBACK TO a; COMMIT;});
like(copies($seg2, 'p'), qr/\/3\//, 'the work before the savepoint commits (seg2 added)');
like(copies($seg1, 'p'), qr/\/3\//, "the savepoint's is undone (seg1 not removed)");
is(consistent('p'), 'consistent', 'the placement names both');

# the same segment before and under the savepoint
sq($coord, q{BEGIN; SELECT 1 FROM mop_place('p', ARRAY['local', 'seg1'], 2); SAVEPOINT a;
	SELECT mop_remove_segment('p', 'seg1'); ROLLBACK TO a; SAVEPOINT b; SAVEPOINT c;
	SELECT 1 FROM mop_add_segment('p', 'seg2'); RELEASE c; RELEASE b; COMMIT;});
is(consistent('p'), 'consistent', "one segment's work before a savepoint stays, its work under it goes");
like(copies($seg1, 'p'), qr/\/3\//, 'seg1 holds the copy placed before the savepoint');
like(copies($seg2, 'p'), qr/\/3\//, 'seg2 holds the copy added under released savepoints');
$before = everywhere('p');

sq($coord, q{DO $$ BEGIN PERFORM mop_drop_dataset('p'); PERFORM 1/0;
	EXCEPTION WHEN division_by_zero THEN NULL; END $$});
is(everywhere('p'), $before, 'a PL/pgSQL exception block undoes its drop on the segments');

($ret, $out, $err) = pq($coord, q{\set VERBOSITY verbose
	BEGIN; SELECT mop_drop_dataset('p'); PREPARE TRANSACTION 'x';});
like($err, qr/0A000: cannot prepare a transaction that changed copies on segments/, 'PREPARE TRANSACTION is refused');
is(sq($coord, 'SELECT count(*) FROM pg_prepared_xacts'), '0', 'nothing is prepared')
	or sq($coord, q{ROLLBACK PREPARED 'x'});
is(everywhere('p'), $before, 'and the copies stay');
ok(no_connections(), 'no connection is left on the segments');

sq($coord, q{SELECT mop_drop_dataset('p'); SELECT mop_drop_dataset('d'); SELECT mop_drop_dataset('e')});
is(join('', map { copies($seg1, $_) . copies($seg2, $_) } qw(p d e)), '------',
   'committed, mop_drop_dataset drops the copies');
is(crashes(), 0, 'no crash in all of it');

# 4. a frozen segment's probes do not stall the run --------------------------------
sub freeze
{
	my ($node, $sig) = @_;
	my $pm = (split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0];
	my @pids = ($pm, grep { /\d/ } split /\s+/, `ps -o pid= --ppid $pm`);
	kill $sig, @pids;
}
# sub-epochs started in the last $secs seconds
sub rate
{
	my ($run, $secs) = @_;
	my $n0 = sq($coord, "SELECT count(*) FROM mop.hops WHERE run_id = $run");
	sleep $secs;
	my $n1 = sq($coord, "SELECT count(*) FROM mop.hops WHERE run_id = $run");
	return ($n1 - $n0) / $secs;
}
my $space = '{"model": {"layers": [{"type": "dense", "units": 8}, {"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.003], "batch_size": [64, 128], "seed": 3}';
prep('spread', q{'local', 'seg1', 'seg2'}, 2);
my $run = sq($coord, qq{SET mop.segment_timeout = '2s';
	SELECT DISTINCT run_id FROM mop_grid_search('spread', '$space', epochs => 100000, wait => false)});
$coord->poll_query_until('postgres', "SELECT count(*) >= 20 FROM mop.hops WHERE run_id = $run") or die 'no progress';
my $up = rate($run, 8);
freeze($seg2, 'STOP');
$coord->poll_query_until('postgres', qq{SELECT count(*) > 0 FROM mop.segment_events
                                         WHERE run_id = $run AND segment = 'seg2' AND event = 'down'})
	or die 'seg2 never went down';
my $down_at = sq($coord, qq{SELECT max(at) FROM mop.segment_events WHERE run_id = $run AND segment = 'seg2' AND event = 'down'});
# 10 s: probes every 2 s, each waiting 2 s for its connection
my $frozen = rate($run, 10);
my $gap = sq($coord, qq{SELECT round(extract(epoch FROM max(g))::numeric, 3) FROM (
	SELECT started_at - lag(started_at) OVER (ORDER BY started_at) AS g FROM mop.hops
	 WHERE run_id = $run AND started_at > '$down_at'::timestamptz) x});
my $n = sq($coord, "SELECT count(*) FROM mop.hops WHERE run_id = $run AND started_at > '$down_at'::timestamptz");
freeze($seg2, 'CONT');
note sprintf('sub-epochs per second: %.0f with every segment up, %.0f with seg2 frozen; the longest gap between two sub-epochs started since seg2 went down: %s s (%d sub-epochs)',
	$up, $frozen, $gap, $n);
cmp_ok($n, '>', 20, 'sub-epochs go on while seg2 is frozen');
cmp_ok($gap, '<', 1.0, "no sub-epoch waits for a probe of the frozen segment (each waits 2 s for its connection)");
is(sq($coord, qq{SELECT status FROM mop.runs WHERE id = $run}), 'running', 'the run is still running');
$coord->poll_query_until('postgres', qq{SELECT count(*) > 0 FROM mop.segment_events
                                         WHERE run_id = $run AND segment = 'seg2' AND event = 'up'})
	or diag 'seg2 did not come back';
is(sq($coord, "SELECT mop_cancel($run)"), 'cancelled', 'the run is cancelled');
is(crashes(), 0, 'no crash');

done_testing();
