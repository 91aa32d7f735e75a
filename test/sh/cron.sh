#!/bin/bash
# cron.sh -- the documented pg_cron recipe: a search scheduled with
# cron.schedule runs in the background and its run appears in mop.runs.
# Uses its own cluster with shared_preload_libraries = 'pg_cron'.  pg_cron
# 1.4 schedules by the minute, so this test waits up to ~2 minutes.
set -u
cd "$(dirname "$0")"
if [ ! -f "$(pg_config --sharedir)/extension/pg_cron.control" ]; then
	echo "ok cron: skipped, pg_cron is not installed (Debian: postgresql-15-cron)"
	exit 0
fi
. ./lib_cluster.sh
trap cluster_cleanup EXIT
PSQL="psql -X -q -v ON_ERROR_STOP=1 -At"
export PGOPTIONS="-c client_min_messages=warning"
fail() { echo "not ok $1"; cluster_log 30; exit 1; }

cluster_init "shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.use_background_workers = on" || { echo "not ok cron: cluster did not start"; exit 1; }
$PSQL >/dev/null <<'SQL' || fail "cron: setup"
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
SQL
for _ in $(seq 1 150); do
	n=$($PSQL -c "SELECT count(*) FROM mop.runs WHERE kind = 'grid' AND status = 'done'")
	[ "$n" -ge 1 ] && break
	sleep 1
done
$PSQL -c "SELECT cron.unschedule('mop-nightly')" >/dev/null
[ "${n:-0}" -ge 1 ] || fail "cron: no run after 150 s; job log: $($PSQL -c "SELECT status || ' ' || coalesce(return_message, '') FROM cron.job_run_details")"
models=$($PSQL -c "SELECT count(*) FROM mop.models m JOIN mop.runs r ON r.id = m.run_id WHERE r.kind = 'grid' AND m.status = 'done'")
job=$($PSQL -c "SELECT status FROM cron.job_run_details ORDER BY runid LIMIT 1")
[ "$models" -ge 2 ] && [ "$job" = "succeeded" ] || fail "cron: models $models, job status $job"
echo "ok cron: cron.schedule ran mop_grid_search; its run is in mop.runs with $models trained models"
