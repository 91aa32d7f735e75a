#!/bin/bash
# checkpoint_storage.sh -- a run's checkpoints do not fill the disk.
#
# Every sub-epoch commits its model's whole state (weights + Adam moments,
# about 4 MB here) as mop.models.state; each commit leaves the old state
# dead.  A grid of 4 such models over 4 short partitions trains 640
# sub-epochs (2.5 GB of states) while this script samples the size of
# mop.models (heap, TOAST table and indexes) and the WAL position:
#   1. blocking mop_grid_search by an ordinary role: the largest size seen
#      stays <= 3 x the live states (it grew without bound before), and the
#      WAL per sub-epoch is about one state (<= 1.5 x);
#   2. the same with wait => false and another session blocked in mop_wait
#      for the whole run: the same bound;
#   3. mop_train over 30 epochs (one transaction) stores two states (the
#      first and the last), not 31.
# autovacuum is off in this cluster: the bound must come from mop itself.
# Prints ok / not ok lines with the measured numbers.
set -u
cd "$(dirname "$0")"
. ./lib_cluster.sh
trap "[ -n \"${KEEP:-}\" ] || cluster_cleanup" EXIT
PSQL="psql -X -q -v ON_ERROR_STOP=1 -At"
export PGOPTIONS="-c client_min_messages=warning"
fail() { echo "not ok $1"; cluster_log 30; exit 1; }
EPOCHS=${MOP_STORAGE_EPOCHS:-40}

cluster_init "autovacuum = off" || { echo "not ok checkpoint storage: cluster did not start"; exit 1; }
# one database per measurement, so that each starts from an empty mop.models
$PSQL -c "CREATE ROLE trainer LOGIN" -c "CREATE DATABASE st1" -c "CREATE DATABASE st2" -c "CREATE DATABASE st3" ||
	fail "checkpoint storage: setup"
for db in st1 st2 st3; do
PGDATABASE=$db $PSQL >/dev/null <<'SQL' || fail "checkpoint storage: setup"
CREATE EXTENSION mop;
CREATE TABLE t AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 400) i;
GRANT SELECT ON t TO trainer;
SET ROLE trainer;
SELECT dataset_name FROM mop_prepare('t', 'label', ARRAY['v'], partitions => 4, validation => 0.1);
SQL
done
# 64 -> 1024 -> 256 -> 10 with Adam: 331,274 parameters, a state of about 4 MB
SPACE='{"model": [{"type": "dense", "units": 1024, "activation": "relu"}, {"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}], "optimizer": "adam", "learning_rate": [0.001, 0.0001], "batch_size": [64, 128]}'

size() { $PSQL -c "SELECT pg_total_relation_size('mop.models')"; }
lsn() { $PSQL -c "SELECT pg_current_wal_lsn()"; }

# sample the size of mop.models every 0.2 s while the run trains; prints the largest
watch_run() {	# pid of the session that waits for the run
	local max=0 s
	while kill -0 "$1" 2>/dev/null; do
		s=$(size)
		[ "$s" -gt "$max" ] && max=$s
		sleep 0.2
	done
	s=$(size)
	[ "$s" -gt "$max" ] && max=$s
	echo "$max"
}

# check one run: label, run id, wal start, largest size seen, seconds
check() {
	local label=$1 run=$2 lsn0=$3 max=$4 secs=$5 r
	r=$($PSQL -F' ' <<SQL
SELECT (SELECT count(*) FROM mop.hops WHERE run_id = $run),
       (SELECT sum(pg_column_size(state)) FROM mop.models WHERE run_id = $run),
       (SELECT count(*) FROM mop.models WHERE run_id = $run),
       (SELECT bool_and(status = 'done') FROM mop.models WHERE run_id = $run),
       pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn0')::bigint
SQL
)
	set -- $r
	local hops=$1 live=$2 n=$3 done=$4 wal=$5
	[ "$done" = "t" ] && [ "$hops" -eq $((EPOCHS * 16)) ] ||
		fail "checkpoint storage: $label: run $run did not train every sub-epoch ($hops, all done: $done)"
	awk -v l="$label" -v h="$hops" -v live="$live" -v n="$n" -v max="$max" -v wal="$wal" -v secs="$secs" 'BEGIN {
		st = live / n; ratio = max / live; wph = wal / h / st;
		msg = sprintf("%s: %d sub-epochs (%.0f MB of states written) in %.1f s; live states %.1f MB, mop.models at most %.1f MB = %.2f x live; WAL %.2f MB per sub-epoch = %.2f states",
			l, h, h * st / 1048576, secs, live / 1048576, max / 1048576, ratio, wal / h / 1048576, wph);
		if (ratio <= 3 && wph <= 1.5) print "ok checkpoint storage: " msg;
		else { print "not ok checkpoint storage: " msg " (bound: 3 x live, 1.5 states per sub-epoch)"; exit 1 }
	}' || { cluster_log 20; exit 1; }
}

# 1. a blocking search, as the role that owns it
export PGDATABASE=st1
lsn0=$(lsn)
t0=$(date +%s.%N)
PGUSER=trainer $PSQL -c "SELECT count(*) FROM mop_grid_search('t', '$SPACE', epochs => $EPOCHS, workers => 2)" \
	>"$CL_DIR/run1.out" 2>&1 &
max=$(watch_run $!)
wait $! || { cat "$CL_DIR/run1.out"; fail "checkpoint storage: blocking search failed"; }
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
run=$($PSQL -c "SELECT max(id) FROM mop.runs")
check "blocking search" "$run" "$lsn0" "$max" "$secs"

# 2. wait => false, and another session blocked in mop_wait meanwhile
export PGDATABASE=st2
lsn0=$(lsn)
t0=$(date +%s.%N)
run=$(PGUSER=trainer $PSQL -c "SELECT DISTINCT run_id FROM mop_grid_search('t', '$SPACE', epochs => $EPOCHS, workers => 2, wait => false)") ||
	fail "checkpoint storage: background search did not start"
PGUSER=trainer $PSQL -c "SELECT mop_wait($run)" >"$CL_DIR/run2.out" 2>&1 &
max=$(watch_run $!)
wait $! || { cat "$CL_DIR/run2.out"; fail "checkpoint storage: mop_wait failed"; }
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
check "background search + mop_wait" "$run" "$lsn0" "$max" "$secs"

# 3. mop_train: one transaction, one stored state
export PGDATABASE=st3
before=$(size)
model=$(PGUSER=trainer $PSQL -c "SELECT mop_train('t', '{\"model\": [{\"type\": \"dense\", \"units\": 1024, \"activation\": \"relu\"}, {\"type\": \"dense\", \"units\": 256, \"activation\": \"relu\"}, {\"type\": \"dense\", \"units\": 10}], \"optimizer\": \"adam\"}', 30)") ||
	fail "checkpoint storage: mop_train failed"
r=$($PSQL -F' ' -c "SELECT pg_column_size(state), pg_total_relation_size('mop.models') - $before FROM mop.models WHERE id = $model")
set -- $r
awk -v st="$1" -v grew="$2" 'BEGIN {
	msg = sprintf("mop_train, 30 epochs: mop.models grew by %.1f MB = %.2f states of %.1f MB (the first and the last)", grew / 1048576, grew / st, st / 1048576);
	if (grew <= 2.5 * st) print "ok checkpoint storage: " msg;
	else { print "not ok checkpoint storage: " msg " (bound: 2.5 states)"; exit 1 }
}' || exit 1
