# 011_pbt_replay.pl -- mop_replay of an asynchronous PBT run.
#
# With more partitions than workers, a member that finishes an interval may
# exploit a parent that is between two epochs: the checkpoint it copies has
# trained part of an epoch (mop.decisions.parent_subepochs).  A replay makes
# every exploit again at the same point -- the member and the parent hold
# there -- so the replayed population is bit-identical: latest and best
# checkpoints, configurations, every epoch's validation metric, lineage.
# A replay cancelled after some of its exploits and resumed makes the rest
# and ends the same; a run whose exploits lack the parent's point is
# refused (0A000) rather than replayed wrongly.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('pbtreplay');
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
  FROM generate_series(1, 24000) i;
SELECT dataset_name FROM mop_prepare('pts', 'label', ARRAY['v'], partitions => 4, buffer_rows => 256);
});
my $space = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 4}]}, "optimizer": "sgd", "learning_rate": {"loguniform": [0.00001, 0.1]}, "momentum": {"uniform": [0.0, 0.9]}}';

sub sql
{
	return $node->safe_psql('postgres', $_[0],
		timeout => $PostgreSQL::Test::Utils::timeout_default);
}

# run b replays run a: same models, checkpoints, metrics and lineage
sub same_replay
{
	my ($a, $b) = @_;
	return sql(qq{
SELECT count(*) || ' models, ' ||
       CASE WHEN bool_and(md5(x.state) = md5(y.state)) THEN 'same states' ELSE 'different states' END || ', ' ||
       CASE WHEN bool_and(md5(x.best_state) IS NOT DISTINCT FROM md5(y.best_state) AND x.best_epoch = y.best_epoch)
            THEN 'same best states' ELSE 'different best states' END || ', ' ||
       CASE WHEN bool_and(x.config = y.config AND x.status = y.status AND x.epochs_done = y.epochs_done)
            THEN 'same configs' ELSE 'different configs' END || ', ' ||
       CASE WHEN bool_and((SELECT array_agg(e.valid_metric ORDER BY e.epoch) FROM mop.epochs e WHERE e.model_id = x.id)
                          = (SELECT array_agg(e.valid_metric ORDER BY e.epoch) FROM mop.epochs e WHERE e.model_id = y.id))
            THEN 'same metrics' ELSE 'different metrics' END || ', ' ||
       CASE WHEN (SELECT array_agg(ARRAY[m.rn, p.rn, d.parent_subepochs] ORDER BY d.id) FROM mop.decisions d
                    JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = $a) m ON m.id = d.model_id
                    JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = $a) p ON p.id = d.parent_model_id
                   WHERE d.run_id = $a AND d.action = 'exploit')
               IS NOT DISTINCT FROM
                 (SELECT array_agg(ARRAY[m.rn, p.rn, d.parent_subepochs] ORDER BY d.id) FROM mop.decisions d
                    JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = $b) m ON m.id = d.model_id
                    JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = $b) p ON p.id = d.parent_model_id
                   WHERE d.run_id = $b AND d.action = 'exploit')
            THEN 'same lineage' ELSE 'different lineage' END
  FROM (SELECT row_number() OVER (ORDER BY id) AS rn, * FROM mop.models WHERE run_id = $a) x
  FULL JOIN (SELECT row_number() OVER (ORDER BY id) AS rn, * FROM mop.models WHERE run_id = $b) y USING (rn)});
}
my $same = '6 models, same states, same best states, same configs, same metrics, same lineage';

# 1. an asynchronous run with an exploit of a parent between two epochs
#    (timing decides which exploits happen: a few seeds until one does)
my ($r, $mid);
for my $seed (1 .. 6)
{
	$r = sql("SELECT DISTINCT run_id FROM mop_pbt('pts', '$space', population => 6, epochs => 6, \"interval\" => 1, quantile => 0.5, workers => 2, seed => $seed)");
	$mid = sql("SELECT count(*) FROM mop.decisions WHERE run_id = $r AND action = 'exploit' AND parent_subepochs % 4 <> 0");
	last if $mid > 0;
}
ok($mid > 0, "run $r: $mid exploits copied a parent checkpoint between two epochs");
is(sql("SELECT bool_and(parent_subepochs >= to_resource * 4 AND parent_subepochs < (to_resource + 1) * 4) FROM mop.decisions WHERE run_id = $r AND action = 'exploit'"),
	't', 'parent_subepochs: the parent\'s epochs and the partitions of its unfinished one');

# 2. replayed (with another number of workers): bit-identical
my $p = sql("SELECT DISTINCT run_id FROM mop_replay($r, workers => 3)");
is(same_replay($r, $p), $same, "replay $p of run $r is bit-identical");
my $schedule = 'SELECT string_agg(s.segment || \':\' || s.epochs || \':\' || md5(s.config::text), \',\' ORDER BY s.segment) FROM mop_pbt_schedule((SELECT model_id FROM mop.best WHERE run_id = %s)) s';
is(sql(sprintf($schedule, $p)), sql(sprintf($schedule, $r)),
	'the replay\'s winner has the run\'s winner\'s schedule (mop_pbt_schedule)');

# 3. a replay cancelled after an exploit and resumed makes the others
my $c = sql("SELECT DISTINCT run_id FROM mop_replay($r, workers => 1, wait => false)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) >= 1 FROM mop.decisions WHERE run_id = $c AND action = 'exploit'"),
	"replay $c made an exploit");
my $st = sql("SELECT mop_cancel($c)");
my $made = sql("SELECT count(*) FROM mop.decisions WHERE run_id = $c AND action = 'exploit'");
my $all = sql("SELECT count(*) FROM mop.decisions WHERE run_id = $r AND action = 'exploit'");
ok($st eq 'cancelled' && $made < $all, "replay $c $st after $made of $all exploits");
sql("SELECT count(*) FROM mop_resume($c)") if $st eq 'cancelled';
is(sql("SELECT status FROM mop.runs WHERE id = $c"), 'done', "replay $c finished after mop_resume");
is(same_replay($r, $c), $same, "the resumed replay $c is bit-identical too");
is(sql("SELECT count(*) FROM mop.decisions WHERE run_id = $c AND action = 'new'"), '6',
	'its starting configurations recorded once');

# 4. exploits recorded without the parent's point: refused, not replayed wrongly
sql("UPDATE mop.decisions SET parent_subepochs = NULL WHERE run_id = $r AND action = 'exploit'");
my ($rc, $out, $err) = $node->psql('postgres', "SELECT * FROM mop_replay($r)",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/0A000: run $r cannot be replayed bit for bit/, 'a run without parent_subepochs is refused');

$node->stop;
done_testing();
