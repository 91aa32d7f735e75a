# 013_segments.pl -- model hopper parallelism across PostgreSQL servers.
#
# A coordinator and two segment servers on loopback (foreign servers of
# postgres_fdw on the coordinator):
#   1. placement with replicas: each training partition on `replicas`
#      distinct segments, byte for byte the local buffers; mop.segments;
#      partitions 'local' does not hold leave this server;
#   2. a deterministic grid search over segments satisfies the MOP
#      invariants, trains on the segments, and ends with models
#      bit-identical to the same search over the local dataset;
#   3. a segment stopped mid-run with replicas => 2: the run finishes, the
#      segment's sub-epoch runs again on another copy, the models are still
#      bit-identical; the events are recorded;
#   4. with replicas => 1 the run waits for the partition's only copy
#      (mop.segment_wait), ends 'interrupted', and mop_resume finishes it
#      once the segment is back, again bit-identical;
#   2b. mop.progress shows each worker's segment and a remote sub-epoch's
#      rows; mop_set_workers gives each segment more workers and then fewer
#      mid-run, and the models are still bit-identical;
#   5. elastic membership: a segment joins a running run (mop_add_segment)
#      and one leaves it (mop_remove_segment); the models are unchanged;
#   6. credentials: no user mapping (42704), a wrong password (28P01, and
#      the password in no log), a mapping without a password for a
#      non-superuser (2F003); one tenant never reaches another's buffers on
#      a segment, even with a forged placement row;
#   7. mop_drop_dataset drops the copies on the segments.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

# log_statement none: a leaked password would show in the logs (checked below),
# and a segment would log every model state sent to it as a parameter
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
# alice and bob authenticate to seg1 with a password; everyone else is trusted
$seg1->append_conf('pg_hba.conf', '');
{
	my $hba = $seg1->data_dir . '/pg_hba.conf';
	my $old = slurp_file($hba);
	open my $fh, '>', $hba or die;
	print $fh "local all alice scram-sha-256\nlocal all bob scram-sha-256\n" . $old;
	close $fh;
}
$_->start for ($coord, $seg1, $seg2);

sub sq { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql, timeout => $PostgreSQL::Test::Utils::timeout_default); }

for my $n ($seg1, $seg2)
{
	sq($n, 'CREATE EXTENSION mop');
}
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
SELECT (i % 3)::text AS label,
       ARRAY(SELECT ((i % 3) * 0.3 + sin(i * 7 + j))::real FROM generate_series(1, 32) j) AS v
  FROM generate_series(1, 12000) i;
SELECT 1 FROM mop_prepare('pts', 'label', ARRAY['v'], dataset => 'here', partitions => 4,
                          buffer_rows => 256, seed => 5);
SELECT 1 FROM mop_prepare('pts', 'label', ARRAY['v'], dataset => 'spread', partitions => 4,
                          buffer_rows => 256, seed => 5,
                          segments => ARRAY['local', 'seg1', 'seg2'], replicas => 2);
SELECT 1 FROM mop_prepare('pts', 'label', ARRAY['v'], dataset => 'single', partitions => 4,
                          buffer_rows => 256, seed => 5,
                          segments => ARRAY['seg1', 'local'], replicas => 1);
});

# 1. placement ----------------------------------------------------------------
is(sq($coord, q{SELECT string_agg(format('%s:%s', segment, partitions), ' ' ORDER BY segment)
                 FROM mop.segments WHERE dataset = 'spread'}),
   'local:{0,2,3} seg1:{0,1,3} seg2:{1,2}',
   'replicas => 2: partition p on segments p and p + 1 (of local, seg1, seg2)');
is(sq($coord, q{SELECT count(*) FROM (SELECT partition FROM mop.dataset_segments s
                 JOIN mop.datasets d ON d.id = s.dataset_id WHERE d.name = 'spread'
                 GROUP BY partition HAVING count(*) = 2) x}), '4', 'every partition has two copies');
is(sq($coord, q{SELECT string_agg(DISTINCT partition::text, ',') FROM mop.buffers b
                 JOIN mop.datasets d ON d.id = b.dataset_id WHERE d.name = 'spread' AND split = 'train'}),
   '0,2,3', "partitions 'local' does not hold left this server");
is(sq($coord, q{SELECT count(*) > 0 FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id
                 WHERE d.name = 'spread' AND split = 'valid' AND partition = 1}),
   't', 'the validation split stays here');
# the copies are the local buffers, byte for byte
my $local_md5 = sq($coord, q{SELECT partition, md5(string_agg(md5(x) || md5(y), ',' ORDER BY buffer_no))
                              FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id
                             WHERE d.name = 'here' AND split = 'train' AND partition IN (0, 1, 3)
                             GROUP BY partition ORDER BY partition});
my $seg1_md5 = sq($seg1, q{SELECT partition, md5(string_agg(md5(x) || md5(y), ',' ORDER BY buffer_no))
                            FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id
                           WHERE d.name LIKE 'spread@%' AND split = 'train'
                           GROUP BY partition ORDER BY partition});
is($seg1_md5, $local_md5, "seg1's copies of partitions 0, 1, 3 are the local buffers");
is(sq($seg1, q{SELECT count(*) FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id
               WHERE d.name LIKE 'spread@%' AND split = 'valid'}), '0', 'no validation rows on segments');

# bad arguments
my ($ret, $out, $err) = $coord->psql('postgres',
	q{SELECT mop_place('spread', ARRAY['local', 'seg1'], 3)});
like($err, qr/replicas must be between 1 and the number of segments \(2\), not 3/, 'replicas > segments refused');
($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_place('here', ARRAY['local', 'nosuch'])});
like($err, qr/segment "nosuch" does not exist/, 'an unknown segment is named');
($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_place('spread', ARRAY['local', 'local'])});
like($err, qr/segment "local" is named twice/, 'a segment named twice is refused');

($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_train('spread', '{"model": [{"type": "dense", "units": 3}]}', 1)});
like($err, qr/mop_train cannot train on dataset "spread": its partition 1 is only on segments/,
	'mop_train refuses a dataset with partitions only elsewhere');

# 2. a deterministic grid over segments = the same grid over local data -------
my $space = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.003], "batch_size": [16, 32], "seed": 3}';
sub grid
{
	my ($ds, $epochs, $wait) = @_;
	$wait //= 'true';
	return sq($coord, qq{SELECT DISTINCT run_id FROM mop_grid_search('$ds', '$space', epochs => $epochs,
		deterministic => true, seed => 11, wait => $wait)});
}
sub states
{
	return sq($coord, qq{SELECT string_agg(md5(state), ',' ORDER BY config::text) FROM mop.models WHERE run_id = $_[0]});
}
sub invariants_ok
{
	my ($run, $models, $epochs, $what) = @_;
	is(sq($coord, qq{SELECT count(*) FROM (SELECT model_id, epoch, partition FROM mop.hops WHERE run_id = $run
	                  GROUP BY 1, 2, 3 HAVING count(*) <> 1) x}), '0', "$what: no partition visited twice in an epoch");
	is(sq($coord, qq{SELECT count(*) FROM mop.hops WHERE run_id = $run}), $models * $epochs * 4,
		"$what: every model visited every partition in every epoch");
}
my $scans = sub { sq($_[0], q{SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0) FROM pg_stat_user_tables WHERE relname = 'buffers'}) };
my $before1 = $scans->($seg1);
my $local_run = grid('here', 3);
my $seg_run = grid('spread', 3);
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $seg_run"), 'done', 'the run over segments is done');
invariants_ok($seg_run, 4, 3, 'segments');
is(states($seg_run), states($local_run), 'deterministic: the models over segments are bit-identical to local ones');
is(sq($coord, "SELECT count(DISTINCT worker) FROM mop.hops WHERE run_id = $seg_run"), '3',
	'three workers: one per segment');
sleep 1;
cmp_ok($scans->($seg1), '>', $before1, "seg1's buffers were read: it trained");
is(sq($coord, "SELECT count(*) FROM mop.segment_events WHERE run_id = $seg_run"), '0', 'no segment events');
($ret, $out, $err) = $coord->psql('postgres', qq{SET client_min_messages = notice;
	SELECT count(*) FROM mop_grid_search('spread', '$space', epochs => 1, workers => 1)});
like($err, qr/dataset "spread" is placed on 3 segments: the run has mop.workers_per_segment \(1\) workers on each, not the workers argument/,
	'a workers argument that does not apply is said so');

# 2b. mop.progress over segments, and mop_set_workers: the workers per segment --
# (sub-epochs long enough for the segments' heartbeats to show in mop.progress)
my $big = '{"model": {"layers": [{"type": "dense", "units": 2048, "activation": "relu"}, {"type": "dense", "units": 512, "activation": "relu"}, {"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.003], "batch_size": [64, 128], "seed": 3}';
sub big_grid
{
	my ($ds, $wait) = @_;
	return sq($coord, qq{SELECT DISTINCT run_id FROM mop_grid_search('$ds', '$big', epochs => 4,
		deterministic => true, seed => 11, wait => $wait)});
}
my $big_ref = big_grid('here', 'true');
my $big_run = big_grid('spread', 'false');
ok($coord->poll_query_until('postgres', qq{SELECT string_agg(DISTINCT segment, ',' ORDER BY segment) = 'local,seg1,seg2'
                                                  AND bool_and(segment_state = 'up')
                                             FROM mop.progress WHERE run_id = $big_run}),
   "mop.progress names each worker's segment, up");
ok($coord->poll_query_until('postgres', qq{SELECT count(*) > 0 FROM mop.progress WHERE run_id = $big_run
                                             AND segment <> 'local' AND state = 'training'
                                             AND rows_done > 0 AND rows_total IS NULL}),
   "and a remote sub-epoch's rows done from the segment's heartbeats (its total unknown)");
is(sq($coord, "SELECT format('%s %s', workers, segments_down) FROM mop.run_progress WHERE run_id = $big_run"), '3 {}',
   'mop.run_progress: 3 workers, no segment down');
($ret, $out, $err) = $coord->psql('postgres', "\\set VERBOSITY verbose\nSELECT mop_set_workers($big_run, 6)");
like($err, qr/22023: workers must be between 1 and 5 for run $big_run, not 6/, 'over segments, the cap is per segment');
like($err, qr/HINT:  The run trains on 3 segments, each given that many workers/, 'and the hint says so');
is(sq($coord, "SELECT mop_set_workers($big_run, 2)"), '2', 'mop_set_workers(run, 2): 2 workers per segment');
# The new workers are there at once; which of them get work is the
# scheduler's choice (4 models for 6 workers), so one trains is what is sure.
ok($coord->poll_query_until('postgres', qq{SELECT string_agg(format('%s:%s', segment, n), ' ' ORDER BY segment) = 'local:2 seg1:2 seg2:2'
                                             FROM (SELECT segment, count(*) AS n FROM mop.progress WHERE run_id = $big_run GROUP BY 1) x}),
   'two workers on each segment');
ok($coord->poll_query_until('postgres', "SELECT count(DISTINCT worker) > 3 FROM mop.hops WHERE run_id = $big_run"),
   'the added workers train');
is(sq($coord, "SELECT mop_set_workers($big_run, 1)"), '1', 'and back to 1 per segment');
ok($coord->poll_query_until('postgres', "SELECT count(*) = 3 FROM mop.progress WHERE run_id = $big_run"),
   'the extra workers leave');
$coord->poll_query_until('postgres', "SELECT status <> 'running' FROM mop.runs WHERE id = $big_run")
	or die 'the run did not end';
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $big_run"), 'done', 'the run finished');
is(sq($coord, qq{SELECT count(*) FROM (SELECT model_id, epoch, partition FROM mop.hops WHERE run_id = $big_run
                  GROUP BY 1, 2, 3 HAVING count(*) <> 1) x}), '0', 'no partition visited twice in an epoch');
is(sq($coord, "SELECT count(*) FROM mop.hops WHERE run_id = $big_run"), 4 * 4 * 4, 'every visit made');
is(states($big_run), states($big_ref), 'the models are bit-identical to local ones');
is(sq($coord, qq{SELECT string_agg(format('%s %s', segment, detail), '; ' ORDER BY id) FROM mop.segment_events
                  WHERE run_id = $big_run AND event = 'workers'}),
   'local 2 workers (were 1); seg1 2 workers (were 1); seg2 2 workers (were 1); local 1 workers (were 2); seg1 1 workers (were 2); seg2 1 workers (were 2)',
   'each segment whose workers changed has an event');

# 3. a segment stopped mid-run, replicas => 2 ------------------------------------
my $ref = grid('here', 16);
my $run = grid('spread', 16, 'false');
$coord->poll_query_until('postgres', "SELECT count(*) >= 8 FROM mop.hops WHERE run_id = $run")
	or die 'no progress';
$seg2->stop('immediate');
my $left = sq($coord, "SELECT status FROM mop.runs WHERE id = $run");
is($left, 'running', 'seg2 stopped mid-run');
$coord->poll_query_until('postgres', "SELECT status <> 'running' FROM mop.runs WHERE id = $run")
	or die 'the run did not end';
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'done', 'replicas => 2: the run finished without seg2');
invariants_ok($run, 4, 16, 'seg2 down');
is(states($run), states($ref), 'the models are still bit-identical to the local ones');
is(sq($coord, "SELECT count(*) > 0 FROM mop.segment_events WHERE run_id = $run AND segment = 'seg2' AND event = 'down'"),
	't', 'seg2 down is recorded');
$seg2->start;

# 4. replicas => 1: the run waits for the only copy, then ends interrupted ----
$ref = grid('here', 12);
$run = sq($coord, qq{SET mop.segment_wait = '3s';
	SELECT DISTINCT run_id FROM mop_grid_search('single', '$space', epochs => 12,
		deterministic => true, seed => 11, wait => false)});
$coord->poll_query_until('postgres', "SELECT count(*) >= 8 FROM mop.hops WHERE run_id = $run")
	or die 'no progress';
$seg1->stop('immediate');
$coord->poll_query_until('postgres', "SELECT status <> 'running' FROM mop.runs WHERE id = $run")
	or die 'the run did not end';
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'interrupted',
	"replicas => 1: the run ends interrupted when the partition's only copy stays down");
like(sq($coord, "SELECT error FROM mop.runs WHERE id = $run"), qr/mop\.segment_wait/, 'and says why');
is(sq($coord, "SELECT count(DISTINCT event) FROM mop.segment_events WHERE run_id = $run AND segment = 'seg1'
               AND event IN ('down', 'waiting', 'gave_up')"), '3', 'down, waiting and gave_up are recorded');
is(sq($coord, "SELECT string_agg(DISTINCT status, ',') FROM mop.models WHERE run_id = $run"), 'interrupted',
	'its models are interrupted');
$seg1->start;
sq($coord, "SELECT mop_resume($run)");
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'done', 'mop_resume finishes it once seg1 is back');
invariants_ok($run, 4, 12, 'resumed');
is(states($run), states($ref), 'the resumed models are bit-identical to the local ones');

# 5. elastic membership: a segment joins and one leaves during a run -----------
sq($coord, q{SELECT 1 FROM mop_prepare('pts', 'label', ARRAY['v'], dataset => 'elastic', partitions => 4,
                                      buffer_rows => 256, seed => 5,
                                      segments => ARRAY['local', 'seg1'], replicas => 1)});
($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_remove_segment('elastic', 'seg1')});
like($err, qr/segment "seg1" holds the only copy of partition 1 of dataset "elastic"/,
	"a segment holding a partition's only copy cannot leave");
($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_place('elastic', ARRAY['local'])});
like($err, qr/has training partitions only on segments/, 'placing again needs the partitions here');
# a slower model, so that the run is still going while segments come and go
my $fast = $space;
$space =~ s/"units": 256/"units": 2048/;
$ref = grid('here', 20);
$run = grid('elastic', 20, 'false');
$coord->poll_query_until('postgres', "SELECT count(*) >= 4 FROM mop.hops WHERE run_id = $run")
	or die 'no progress';
is(sq($coord, q{SELECT string_agg(p::text, ',') FROM mop_add_segment('elastic', 'seg2'), unnest(partitions) p}),
	'0,1,2,3', 'seg2 joins with copies of every partition (1 and 3 relayed from seg1)');
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'running', 'while the run goes on');
$coord->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM mop.hops h WHERE run_id = $run AND worker = 2")
	or diag 'seg2 trained nothing';
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'running', 'seg2 trains in the running run');
is(sq($coord, "SELECT count(*) FROM mop.segment_events WHERE run_id = $run AND segment = 'seg2' AND event = 'joined'"),
	'1', 'the join is recorded');
cmp_ok(sq($coord, "SELECT count(*) FROM mop.hops WHERE run_id = $run AND worker = 2"), '>', 0,
	"the joined segment's worker trains in the running run");
$coord->psql('postgres', q{SET client_min_messages = notice; SELECT mop_remove_segment('elastic', 'seg1')},
	stderr => \$err);
like($err, qr/the copy "elastic@.*" on segment "seg1" is kept: a run over dataset "elastic" is running/,
	'seg1 leaves; its copy stays while the run reads it');
$coord->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM mop.segment_events WHERE run_id = $run AND segment = 'seg1' AND event = 'left'")
	or die 'seg1 never left';
my $left_at = sq($coord, "SELECT at FROM mop.segment_events WHERE run_id = $run AND segment = 'seg1' AND event = 'left'");
$coord->poll_query_until('postgres', "SELECT status <> 'running' FROM mop.runs WHERE id = $run")
	or die 'the run did not end';
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $run"), 'done', 'the elastic run is done');
cmp_ok(sq($coord, "SELECT count(*) FROM mop.hops WHERE run_id = $run AND worker = 1 AND started_at > '$left_at'"),
	'==', 0, 'the segment that left gets no sub-epoch after it left');
invariants_ok($run, 4, 20, 'elastic');
is(states($run), states($ref), 'a join and a leave change nothing in the models (deterministic)');
is(sq($seg1, q{SELECT count(*) FROM mop.datasets WHERE name LIKE 'elastic@%'}), '1', "seg1's copy was kept");
$space = $fast;

# 6. credentials and tenants ----------------------------------------------------
sq($seg1, q{CREATE ROLE alice LOGIN PASSWORD 'alice-S3cret'; CREATE ROLE bob LOGIN PASSWORD 'bob-S3cret';});
sq($coord, q{
CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN;
GRANT USAGE ON FOREIGN SERVER seg1 TO alice, bob;
GRANT SELECT ON pts TO alice, bob;
});
sub as
{
	my ($role, $sql) = @_;
	my ($r, $o, $e) = $coord->psql('postgres', "SET ROLE $role; $sql", extra_params => ['-v', 'VERBOSITY=verbose']);
	return ($r, $o, $e);
}
my $prep = q{SELECT 1 FROM mop_prepare('pts', 'label', ARRAY['v'], dataset => '%s', partitions => 2,
             buffer_rows => 256, segments => ARRAY['local', 'seg1'], replicas => 2)};
($ret, $out, $err) = as('alice', sprintf($prep, 'a1'));
like($err, qr/42704.*user mapping not found/s, 'no user mapping: 42704');
sq($coord, q{CREATE USER MAPPING FOR alice SERVER seg1 OPTIONS (user 'alice')});
($ret, $out, $err) = as('alice', sprintf($prep, 'a1'));
like($err, qr/2F003.*password is required/s, 'a non-superuser mapping without a password: 2F003');
sq($coord, q{ALTER USER MAPPING FOR alice SERVER seg1 OPTIONS (ADD password 'wrong-Passw0rd')});
($ret, $out, $err) = as('alice', sprintf($prep, 'a1'));
like($err, qr/28P01.*could not connect to segment "seg1"/s, 'a wrong password: 28P01');
unlike($err, qr/wrong-Passw0rd/, 'the password is not in the error');
sq($coord, q{ALTER USER MAPPING FOR alice SERVER seg1 OPTIONS (SET password 'alice-S3cret')});
($ret, $out, $err) = as('alice', sprintf($prep, 'a1'));
is($ret, 0, 'alice places her dataset with her mapping') or diag $err;
sq($coord, q{CREATE USER MAPPING FOR bob SERVER seg1 OPTIONS (user 'bob', password 'bob-S3cret')});
is(sq($seg1, q{SET ROLE bob; SELECT count(*) FROM mop.buffers}), '0', "bob sees none of alice's buffers on the segment");
cmp_ok(sq($seg1, q{SET ROLE alice; SELECT count(*) FROM mop.buffers}), '>', 0, 'alice sees hers');
# bob forges a placement row pointing at alice's copy: training finds nothing
my $alice_remote = sq($coord, q{SELECT remote_dataset_id FROM mop.dataset_segments s JOIN mop.datasets d
                                ON d.id = s.dataset_id WHERE d.name = 'a1' AND segment = 'seg1' LIMIT 1});
($ret, $out, $err) = as('bob', qq{SELECT 1 FROM mop_prepare('pts', 'label', ARRAY['v'], dataset => 'b1', partitions => 2, buffer_rows => 256);
	DELETE FROM mop.buffers WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'b1') AND split = 'train';
	INSERT INTO mop.dataset_segments (dataset_id, segment, partition, remote_dataset_id, remote_name, buffers, bytes)
	SELECT id, 'seg1', p, $alice_remote, 'x', 1, 1 FROM mop.datasets, generate_series(0, 1) p WHERE name = 'b1';
	SELECT status FROM mop_grid_search('b1', '$space', epochs => 1);});
is(sq($coord, q{SELECT count(*) FROM mop.hops h JOIN mop.runs r ON r.id = h.run_id
                JOIN mop.datasets d ON d.id = r.dataset_id WHERE d.name = 'b1'}), '0',
	"bob's forged placement trains nothing on alice's copy");
my $log = slurp_file($coord->logfile) . slurp_file($seg1->logfile);
unlike($log, qr/alice-S3cret|bob-S3cret|wrong-Passw0rd/, 'no password in any server log');

# 7. dropping a dataset drops its copies --------------------------------------
sq($coord, q{SELECT mop_drop_dataset('spread')});
is(sq($seg1, q{SELECT count(*) FROM mop.datasets WHERE name LIKE 'spread@%'}), '0', "the copy on seg1 is dropped");
is(sq($seg2, q{SELECT count(*) FROM mop.datasets WHERE name LIKE 'spread@%'}), '0', "the copy on seg2 is dropped");

done_testing();
