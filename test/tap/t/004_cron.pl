# 004_cron.pl -- the documented pg_cron recipe: a search scheduled with
# cron.schedule runs in the background and its run appears in mop.runs.
# Its own server with shared_preload_libraries = 'pg_cron'.  pg_cron 1.4
# schedules by the minute, so this test waits up to ~2 minutes.  Without
# pg_cron installed its checks are skipped (reported as skipped).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $sharedir = `pg_config --sharedir`;
chomp $sharedir;

SKIP:
{
	skip 'pg_cron is not installed (Debian: postgresql-15-cron)', 3
	  unless -f "$sharedir/extension/pg_cron.control";

	my $node = PostgreSQL::Test::Cluster->new('cron');
	$node->init;
	$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
client_min_messages = warning
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.use_background_workers = on
});
	$node->start;
	$node->safe_psql('postgres', q{
CREATE EXTENSION mop;
CREATE EXTENSION pg_cron;
CREATE TABLE points AS
SELECT (i % 3)::text AS label, sin(i) + (i % 3) AS x, cos(i * 1.3) - (i % 3) AS y
  FROM generate_series(1, 600) i;
SELECT dataset_name FROM mop_prepare('points', 'label', dataset => 'points', partitions => 2);
-- the recipe of docs: a nightly search becomes "every minute" for the test
SELECT cron.schedule('mop-nightly', '* * * * *',
  $$SELECT count(*) FROM mop_grid_search('points',
      '{"model": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}],
        "learning_rate": [0.01, 0.001]}', epochs => 2)$$);
});
	my $n = 0;
	for (1 .. 150)
	{
		$n = $node->safe_psql('postgres',
			"SELECT count(*) FROM mop.runs WHERE kind = 'grid' AND status = 'done'");
		last if $n >= 1;
		sleep 1;
	}
	$node->safe_psql('postgres', "SELECT cron.unschedule('mop-nightly')");
	cmp_ok($n, '>=', 1, 'cron: cron.schedule ran mop_grid_search; its run is done in mop.runs')
	  or diag('job log: '
		  . $node->safe_psql('postgres',
			"SELECT status || ' ' || coalesce(return_message, '') FROM cron.job_run_details"));
	my $models = $node->safe_psql('postgres',
		"SELECT count(*) FROM mop.models m JOIN mop.runs r ON r.id = m.run_id WHERE r.kind = 'grid' AND m.status = 'done'");
	cmp_ok($models, '>=', 2, "cron: the run trained its models ($models)");
	is($node->safe_psql('postgres', 'SELECT status FROM cron.job_run_details ORDER BY runid LIMIT 1'),
		'succeeded', "cron: pg_cron recorded the job as succeeded");
	$node->stop;
}

done_testing();
