#!/bin/bash
# drop_during_run.sh -- dropping what a run uses while it really trains in
# background workers: a clear error (55006) or a correct wait, never a
# deadlock (40P01), never a run left 'running' with nothing behind it.
# Repeated for ROUNDS rounds (default 3); in each:
#   1. a grid search trains (wait => false); mop_drop_dataset, DELETE FROM
#      mop.runs, DELETE FROM mop.datasets and DROP EXTENSION mop, all at
#      once from four sessions, each fail with 55006 naming the run, and
#      the run goes on training;
#   2. a finished run of the same dataset is deleted while the other run
#      trains: it goes, with its models, epochs and hops;
#   3. mop_cancel races with a session that retries mop_drop_dataset until
#      it succeeds: every attempt fails with 55006 or drops the dataset, and
#      the catalog is empty afterwards.
# At the end: no deadlock in the server log or in pg_stat_database, no run
# 'running', no mop process left, DROP EXTENSION mop works.
# Uses its own cluster (it reads the server log).  Prints ok / not ok lines.
set -u
cd "$(dirname "$0")"
. ./lib_cluster.sh
trap "[ -n \"${KEEP:-}\" ] || cluster_cleanup" EXIT
PSQL="psql -X -q -v ON_ERROR_STOP=1 -At"
export PGOPTIONS="-c client_min_messages=warning"
ROUNDS=${ROUNDS:-3}
fail() { echo "not ok $1"; cluster_log 30; exit 1; }

cluster_init "deadlock_timeout = 100ms" || { echo "not ok drop_during_run: cluster did not start"; exit 1; }
$PSQL >/dev/null <<'SQL' || fail "drop_during_run: setup"
CREATE EXTENSION mop;
CREATE TABLE pts AS
SELECT (i % 4)::text AS label,
       ARRAY(SELECT ((i % 4) * 0.2 + sin(i * 5 + j))::real FROM generate_series(1, 32) j) AS v
  FROM generate_series(1, 4000) i;
SQL
SPACE='{"model": {"layers": [{"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 4}]}, "learning_rate": [0.01, 0.001], "batch_size": 32, "seed": 1}'
prepare() { $PSQL -c "SELECT dataset_name FROM mop_prepare('pts', 'label', ARRAY['v'], partitions => 2, buffer_rows => 256)" >/dev/null; }
start_run() {	# epochs -> run id
	$PSQL -c "SELECT DISTINCT run_id FROM mop_grid_search('pts', '$SPACE', epochs => $1, workers => 2, wait => false)"
}
hops() { $PSQL -c "SELECT count(*) FROM mop.hops WHERE run_id = $1"; }
wait_hops() {	# run, minimum
	for _ in $(seq 1 600); do
		[ "$(hops $1)" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
# run SQL in a session of its own; its output (SQLSTATEs shown) in file $1
session() {	# file, sql
	PGOPTIONS="$PGOPTIONS -c statement_timeout=120s" \
		psql -X -q -At -v VERBOSITY=verbose -c "$2" >"$1" 2>&1
}
OUT=$(mktemp -d /tmp/mop-drop.XXXXXX)
trap "rm -rf $OUT; [ -n \"${KEEP:-}\" ] || cluster_cleanup" EXIT

for round in $(seq 1 "$ROUNDS"); do
	prepare || fail "drop_during_run: round $round: mop_prepare"
	R=$(start_run 100000) || fail "drop_during_run: round $round: starting the run"
	wait_hops "$R" 4 || fail "drop_during_run: round $round: run $R does not train"

	# 1. four drops at once while it trains
	session "$OUT/drop" "SELECT mop_drop_dataset('pts')" &
	p1=$!
	session "$OUT/delrun" "DELETE FROM mop.runs WHERE id = $R" &
	p2=$!
	session "$OUT/delds" "DELETE FROM mop.datasets WHERE name = 'pts'" &
	p3=$!
	session "$OUT/dropext" "DROP EXTENSION mop" &
	p4=$!
	wait $p1 $p2 $p3 $p4
	grep -l "40P01\|deadlock" "$OUT"/drop "$OUT"/delrun "$OUT"/delds "$OUT"/dropext && \
		fail "drop_during_run: round $round: a drop deadlocked: $(cat "$OUT"/drop "$OUT"/delrun "$OUT"/delds "$OUT"/dropext)"
	grep -q "55006: dataset \"pts\" is in use by run $R" "$OUT/drop" \
		&& grep -q "HINT:  Cancel the run with mop_cancel($R)" "$OUT/drop" \
		&& grep -q "55006: run $R is training and cannot be deleted" "$OUT/delrun" \
		&& grep -q "55006: run $R is training and cannot be deleted" "$OUT/delds" \
		&& grep -q "55006: extension \"mop\" is in use by run $R" "$OUT/dropext" \
		|| fail "drop_during_run: round $round: expected 55006 from every drop, got: $(cat "$OUT"/drop "$OUT"/delrun "$OUT"/delds "$OUT"/dropext)"
	h=$(hops "$R")
	wait_hops "$R" $((h + 2)) || fail "drop_during_run: round $round: run $R stopped training after the refused drops"
	[ "$($PSQL -c "SELECT status FROM mop.runs WHERE id = $R")" = "running" ] \
		|| fail "drop_during_run: round $round: run $R is no longer running"
	echo "ok drop_during_run: round $round: mop_drop_dataset, DELETE of the run and of the dataset, DROP EXTENSION at once while run $R trains: 55006 each, it trains on"

	# 2. a finished run of the same dataset goes while run R trains
	F=$(start_run 1) || fail "drop_during_run: round $round: starting a short run"
	[ "$($PSQL -c "SELECT mop_wait($F)")" = "done" ] || fail "drop_during_run: round $round: run $F did not finish"
	session "$OUT/delfinished" "DELETE FROM mop.runs WHERE id = $F"
	grep -q . "$OUT/delfinished" && fail "drop_during_run: round $round: deleting finished run $F: $(cat "$OUT/delfinished")"
	left=$($PSQL -c "SELECT (SELECT count(*) FROM mop.runs WHERE id = $F) + (SELECT count(*) FROM mop.models WHERE run_id = $F)
	                        + (SELECT count(*) FROM mop.hops WHERE run_id = $F)")
	[ "$left" = "0" ] || fail "drop_during_run: round $round: $left rows of deleted run $F left"
	h=$(hops "$R")
	wait_hops "$R" $((h + 2)) || fail "drop_during_run: round $round: run $R stopped training after run $F was deleted"
	echo "ok drop_during_run: round $round: finished run $F deleted (models, hops and all) while run $R trains on the same dataset"

	# 3. cancel races with a drop retried until it succeeds
	( sleep 0.$((RANDOM % 10)); $PSQL -c "SELECT mop_cancel($R)" >"$OUT/cancel" 2>&1 ) &
	pc=$!
	dropped=no
	for i in $(seq 1 300); do
		session "$OUT/try$i" "SELECT mop_drop_dataset('pts')"
		if grep -q "40P01\|deadlock" "$OUT/try$i"; then
			fail "drop_during_run: round $round: mop_drop_dataset deadlocked: $(cat "$OUT/try$i")"
		elif [ "$(cat "$OUT/try$i")" = "t" ]; then
			dropped=yes
			break
		elif ! grep -q "55006: dataset \"pts\" is in use by run $R" "$OUT/try$i"; then
			fail "drop_during_run: round $round: mop_drop_dataset: $(cat "$OUT/try$i")"
		fi
		sleep 0.05
	done
	wait $pc
	[ "$dropped" = yes ] || fail "drop_during_run: round $round: the dataset could not be dropped after mop_cancel($R)"
	grep -q "^cancelled$" "$OUT/cancel" || fail "drop_during_run: round $round: mop_cancel($R): $(cat "$OUT/cancel")"
	left=$($PSQL -c "SELECT (SELECT count(*) FROM mop.datasets) + (SELECT count(*) FROM mop.buffers) + (SELECT count(*) FROM mop.runs)
	                        + (SELECT count(*) FROM mop.models) + (SELECT count(*) FROM mop.epochs) + (SELECT count(*) FROM mop.hops)")
	[ "$left" = "0" ] || fail "drop_during_run: round $round: $left catalog rows left after the drop"
	echo "ok drop_during_run: round $round: mop_cancel($R) racing with mop_drop_dataset: refused while it trained ($((i - 1)) tries), then dropped, nothing left"
done

# nothing of mop may outlive its runs, and no deadlock may have happened anywhere
for _ in $(seq 1 100); do
	n=$($PSQL -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'mop %'")
	[ "$n" = "0" ] && break
	sleep 0.1
done
[ "$n" = "0" ] || fail "drop_during_run: $n mop processes left after the runs ended"
$PSQL -c "DROP EXTENSION mop" || fail "drop_during_run: DROP EXTENSION mop after the runs"
sleep 1
dl=$($PSQL -c "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
if grep -q "deadlock detected" "$CL_DIR/server.log" || [ "$dl" != "0" ]; then
	grep -B2 -A8 "deadlock detected" "$CL_DIR/server.log" | head -40
	fail "drop_during_run: deadlocks detected ($dl in pg_stat_database)"
fi
echo "ok drop_during_run: $ROUNDS rounds, no deadlock, no mop process left, DROP EXTENSION mop once no run trains"
