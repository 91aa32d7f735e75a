# 009_progress.pl -- what a person waiting for a run sees: mop.run_progress
# (one row per running run, with an estimate of the time left that is
# checked against the time the run really took) and mop.progress (every
# worker's state; a busy worker's task, never "0 of 0" rows).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('progress');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
fsync = off
client_min_messages = warning
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION mop;
CREATE TABLE big AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 12000) i;
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], partitions => 2, buffer_rows => 256);
});
my $space = '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": [0.001, 0.0005], "batch_size": 16}';
my $run = $node->safe_psql('postgres',
	"SELECT DISTINCT run_id FROM mop_grid_search('big', '$space', epochs => 40, workers => 2, wait => false)");

# sample both views while the run trains
my ($eta, $at, $planned, $bad_rows, $samples, $states) = (undef, undef, 0, 0, 0, '');
while (1)
{
	my $row = $node->safe_psql('postgres',
		"SELECT sub_epochs_done || ',' || sub_epochs_planned || ',' || coalesce(extract(epoch FROM eta)::text, '') || ',' || models || ',' || workers_busy FROM mop.run_progress WHERE run_id = $run");
	last if $row eq '';
	my ($done, $total, $e, $models, $busy) = split /,/, $row;
	$planned = $total;
	if (!defined $eta && $e ne '' && $done >= 0.25 * $total)
	{
		$eta = $e;
		$at = time;
	}
	$bad_rows += $node->safe_psql('postgres',
		"SELECT count(*) FROM mop.progress WHERE run_id = $run AND (rows_total = 0 OR (state IN ('loading', 'training', 'validating', 'committing', 'reporting') AND (model_id IS NULL OR progress_at IS NULL)) OR (state IN ('idle', 'starting') AND model_id IS NOT NULL))");
	$states .= $node->safe_psql('postgres', "SELECT string_agg(DISTINCT state, ',') FROM mop.progress WHERE run_id = $run") . ',';
	$samples++;
	usleep(100_000);
}
my $took = time - $at;
is($node->safe_psql('postgres', "SELECT status FROM mop.runs WHERE id = $run"), 'done', "run $run finished");
is($planned, 2 * 40 * 2, 'mop.run_progress planned every sub-epoch of the grid');
ok(defined $eta, 'mop.run_progress gave an estimate once a quarter was done');
my $ratio = $eta / ($took > 0.01 ? $took : 0.01);
ok($ratio > 0.33 && $ratio < 3.0,
	sprintf('the estimate (%.2f s left) was within a factor of 3 of the time the run really took (%.2f s)', $eta, $took));
is($bad_rows, 0, "mop.progress over $samples samples: no 0-of-0 rows, a busy worker always shows its task, an idle one none");
like($states, qr/training/, "workers were seen training ($states)");
is($node->safe_psql('postgres', "SELECT count(*) FROM mop.run_progress"), '0', 'a finished run leaves mop.run_progress');
$node->stop;
done_testing();
