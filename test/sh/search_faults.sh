#!/bin/bash
# search_faults.sh -- model hopper runs survive faults:
#   1. pg_cancel_backend on a blocking mop_grid_search stops its workers
#      within a minibatch and marks the run cancelled; committed hops stay;
#   2. a worker killed mid-run (pg_terminate_backend) is replaced and the
#      run completes with every MOP invariant intact;
#   3. an immediate server stop mid-run loses no committed checkpoint, and
#      mop_resume completes the run with exactly the models of an
#      uninterrupted deterministic run;
#   4-7. Hyperband, ASHA, TPE and PBT runs stopped immediately resume by
#      replaying their recorded decisions and results into a fresh driver,
#      and finish without retraining anything committed;
#   8. deterministic TPE and PBT runs resumed after an immediate stop end
#      bit-identical to uninterrupted runs.
# Uses its own cluster (it restarts the server).  Prints ok / not ok lines.
set -u
cd "$(dirname "$0")"
. ./lib_cluster.sh
trap "[ -n \"${KEEP:-}\" ] || cluster_cleanup" EXIT
PSQL="psql -X -q -v ON_ERROR_STOP=1 -At"
export PGOPTIONS="-c client_min_messages=warning"
fail() { echo "not ok $1"; cluster_log 30; exit 1; }

cluster_init "" || { echo "not ok faults: cluster did not start"; exit 1; }
$PSQL >/dev/null <<'SQL' || fail "faults: setup"
CREATE EXTENSION mop;
CREATE TABLE big AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 12000) i;
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], partitions => 2, buffer_rows => 512);
SQL
SPACE='{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": [0.001, 0.0005], "batch_size": [16, 32], "seed": 3}'

hops() { $PSQL -c "SELECT count(*) FROM mop.hops WHERE run_id = $1"; }
wait_hops() {	# run, minimum
	for _ in $(seq 1 600); do
		[ "$(hops $1)" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
invariants() {	# run, epochs, models -> prints "ok" if MOP's invariants hold
	$PSQL <<SQL
SELECT CASE WHEN
  (SELECT count(*) FROM mop.hops WHERE run_id = $1) = $2 * $3 * 2
  AND (SELECT bool_and(n = 2 AND p = 2) FROM (SELECT count(*) n, count(DISTINCT partition) p
        FROM mop.hops WHERE run_id = $1 GROUP BY model_id, epoch) s)
  AND NOT EXISTS (SELECT 1 FROM mop.hops a JOIN mop.hops b ON a.id < b.id AND a.run_id = b.run_id
        AND (a.model_id = b.model_id OR a.worker = b.worker)
        AND tstzrange(a.started_at, a.finished_at) && tstzrange(b.started_at, b.finished_at)
        WHERE a.run_id = $1)
  AND (SELECT bool_and(status = 'done' AND epochs_done = $2) FROM mop.models WHERE run_id = $1)
THEN 'ok' ELSE 'broken' END;
SQL
}

crash() {	# label: stop the server immediately (no shutdown checkpoint) and start it again
	cluster_stop immediate || fail "faults: $1: immediate stop failed"
	cluster_start || fail "faults: $1: restart failed"
}
resume_unless_done() {	# label, run: mop_resume the run unless it finished before the stop; sets st
	st=$($PSQL -c "SELECT status FROM mop.runs WHERE id = $2")
	if [ "$st" != "done" ]; then
		$PSQL -c "SELECT count(*) FROM mop_resume($2)" >/dev/null || fail "faults: $1: mop_resume failed"
	fi
}
no_retraining() {	# run -> t when every model trained each committed sub-epoch exactly once
	$PSQL -c "SELECT sum(h.n) = sum(m.epochs_done) * 2 FROM mop.models m JOIN (SELECT model_id, count(*) AS n FROM mop.hops GROUP BY model_id) h ON h.model_id = m.id WHERE m.run_id = $1"
}

# 1. cancel a blocking search
$PSQL -c "SET application_name = 'mop_search_victim'" \
	-c "SELECT count(*) FROM mop_grid_search('big', '$SPACE', epochs => 50, workers => 2)" \
	>"$CL_DIR/victim.out" 2>&1 &
VICTIM=$!
for _ in $(seq 1 300); do
	r=$($PSQL -c "SELECT max(id) FROM mop.runs WHERE status = 'running'")
	[ -n "$r" ] && break
	sleep 0.1
done
[ -n "$r" ] && wait_hops "$r" 2 || fail "faults: the search never trained"
t0=$(date +%s.%N)
$PSQL -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'mop_search_victim'" >/dev/null
wait $VICTIM
t1=$(date +%s.%N)
grep -q "canceling statement due to user request" "$CL_DIR/victim.out" || fail "faults: cancel: unexpected output: $(cat "$CL_DIR/victim.out")"
status=$($PSQL -c "SELECT status FROM mop.runs WHERE id = $r")
workers=$($PSQL -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('mop worker', 'mop coordinator')")
[ "$status" = "cancelled" ] && [ "$workers" = "0" ] || fail "faults: cancel: status $status, $workers mop processes left"
echo "ok faults: pg_cancel_backend stopped the run and its workers in $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s; $(hops $r) committed sub-epochs kept"
$PSQL -c "UPDATE mop.runs SET status = 'failed' WHERE id = $r" >/dev/null

# 2. a worker dies mid-run: it is replaced and the run completes
r=$($PSQL -c "SELECT DISTINCT run_id FROM mop_grid_search('big', '$SPACE', epochs => 6, workers => 2, wait => false)")
# mop.progress shows what each worker trains right now
prog=""
for _ in $(seq 1 200); do
	prog=$($PSQL -c "SELECT bool_and(rows_done <= rows_total AND rows_total > 0 AND partition % 2 = worker AND pid > 0 AND epoch >= 1) FROM mop.progress WHERE run_id = $r AND model_id IS NOT NULL")
	[ "$prog" = "t" ] && break
	sleep 0.05
done
[ "$prog" = "t" ] || fail "faults: mop.progress never showed a consistent busy worker ('$prog')"
echo "ok faults: mop.progress shows each worker's model, partition and rows done of total"
wait_hops "$r" 2 || fail "faults: kill: the run never trained"
$PSQL -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'mop worker' LIMIT 1" >/dev/null
st=$($PSQL -c "SELECT mop_wait($r)")
inv=$(invariants "$r" 6 4)
[ "$st" = "done" ] && [ "$inv" = "ok" ] || fail "faults: kill: status $st, invariants $inv"
grep -q "restarted worker" "$CL_DIR/server.log" || fail "faults: kill: no worker restart logged"
echo "ok faults: a killed worker was replaced and the run completed with MOP's invariants"

# 3. immediate stop mid-run, restart, resume: nothing committed is lost
ref=$($PSQL -c "SELECT DISTINCT run_id FROM mop_grid_search('big', '$SPACE', epochs => 8, workers => 2, seed => 5, deterministic => true)")
r=$($PSQL -c "SELECT DISTINCT run_id FROM mop_grid_search('big', '$SPACE', epochs => 8, workers => 2, seed => 5, deterministic => true, wait => false)")
wait_hops "$r" 5 || fail "faults: crash: the run never trained"
$PSQL -c "SELECT model_id || ':' || epoch || ':' || partition FROM mop.hops WHERE run_id = $r ORDER BY 1" >"$CL_DIR/before"
crash "crash"
$PSQL -c "SELECT model_id || ':' || epoch || ':' || partition FROM mop.hops WHERE run_id = $r ORDER BY 1" >"$CL_DIR/after"
lost=$(comm -23 "$CL_DIR/before" "$CL_DIR/after" | wc -l)
[ "$lost" = "0" ] || fail "faults: crash: $lost committed sub-epochs lost"
resume_unless_done "crash" "$r"
inv=$(invariants "$r" 8 4)
same=$($PSQL -c "SELECT count(*) FILTER (WHERE a.state = b.state) || '/' || count(*) FROM mop.models a JOIN mop.models b ON a.config = b.config WHERE a.run_id = $ref AND b.run_id = $r")
[ "$inv" = "ok" ] && [ "$same" = "4/4" ] || fail "faults: crash: invariants $inv, identical models $same"
echo "ok faults: after an immediate stop ($(wc -l <"$CL_DIR/before") sub-epochs committed, run left '$st'), mop_resume completed the run; models bit-identical to an uninterrupted run ($same)"

# 4. an adaptive run survives an immediate stop too: Hyperband resumes by
#    replaying its recorded decisions and results, and follows its plan
r=$($PSQL -c "SELECT DISTINCT run_id FROM mop_hyperband('big', '{\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 256, \"activation\": \"relu\"}, {\"type\": \"dense\", \"units\": 10}]}, \"learning_rate\": {\"loguniform\": [0.0001, 0.01]}}', max_resource => 9, workers => 2, wait => false)")
wait_hops "$r" 12 || fail "faults: hyperband: the run never trained"
crash "hyperband"
before=$($PSQL -c "SELECT count(*) FILTER (WHERE action = 'report') || ' results, ' || count(*) FILTER (WHERE action = 'continue') || ' promotions' FROM mop.decisions WHERE run_id = $r")
resume_unless_done "hyperband" "$r"
plan=$($PSQL -c "SELECT string_agg(status || ':' || epochs_done || ':' || n, ' ' ORDER BY epochs_done, status) FROM (SELECT status, epochs_done, count(*) AS n FROM mop.models WHERE run_id = $r GROUP BY 1, 2) s")
noretrain=$(no_retraining "$r")
[ "$plan" = "stopped:1:6 stopped:3:6 done:9:5" ] && [ "$noretrain" = "t" ] || fail "faults: hyperband: after resume: $plan, no retraining: $noretrain"
echo "ok faults: Hyperband stopped immediately (run left '$st', $before recorded) resumed by replaying its decisions and finished its plan without retraining"

# 5. the same for ASHA
r=$($PSQL -c "SELECT DISTINCT run_id FROM mop_asha('big', '{\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 256, \"activation\": \"relu\"}, {\"type\": \"dense\", \"units\": 10}]}, \"learning_rate\": {\"loguniform\": [0.0001, 0.01]}}', max_resource => 9, max_trials => 12, workers => 2, wait => false)")
wait_hops "$r" 10 || fail "faults: asha: the run never trained"
crash "asha"
resume_unless_done "asha" "$r"
res=$($PSQL -c "SELECT count(*) || ' ' || bool_and(status IN ('done', 'stopped') AND epochs_done IN (1, 3, 9)) || ' ' || (count(*) FILTER (WHERE epochs_done >= 3) >= 4) FROM mop.models WHERE run_id = $r")
noretrain=$(no_retraining "$r")
[ "$res" = "12 true true" ] && [ "$noretrain" = "t" ] || fail "faults: asha: after resume: $res, no retraining: $noretrain"
echo "ok faults: ASHA stopped immediately (run left '$st') resumed by replay: 12 trials on their rungs, top third promoted, no retraining"

# 6. TPE: resumed by replaying its asks and tells into a fresh sampler (each
#    replayed proposal is checked against the stored configuration), then
#    proposes the remaining trials
TSPACE='{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": {"loguniform": [0.0001, 0.01]}, "batch_size": {"choice": [16, 32]}}'
r=$($PSQL -c "SELECT DISTINCT run_id FROM mop_tpe('big', '$TSPACE', trials => 8, epochs => 2, n_startup => 3, workers => 2, seed => 4, wait => false)")
wait_hops "$r" 9 || fail "faults: tpe: the run never trained"
crash "tpe"
before=$($PSQL -c "SELECT count(*) FROM mop.decisions WHERE run_id = $r AND action = 'report'")
resume_unless_done "tpe" "$r"
res=$($PSQL -c "SELECT count(*) || ' ' || bool_and(status = 'done' AND epochs_done = 2) || ' ' || count(DISTINCT config) FROM mop.models WHERE run_id = $r")
reports=$($PSQL -c "SELECT count(*) FROM mop.decisions WHERE run_id = $r AND action = 'report'")
noretrain=$(no_retraining "$r")
[ "$res" = "8 true 8" ] && [ "$reports" = "8" ] && [ "$noretrain" = "t" ] || fail "faults: tpe: after resume: $res, $reports results, no retraining: $noretrain"
echo "ok faults: TPE stopped immediately ($before results recorded, run left '$st') resumed by replaying its sampler: 8 distinct trials done, no retraining"

# 7. PBT: resumed by replaying the recorded interval results into a fresh
#    population (each replayed exploit checked against its record)
PSPACE='{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": {"loguniform": [0.0001, 0.05]}}'
r=$($PSQL -c "SELECT DISTINCT run_id FROM mop_pbt('big', '$PSPACE', population => 4, epochs => 6, quantile => 0.5, workers => 2, seed => 2, wait => false)")
wait_hops "$r" 14 || fail "faults: pbt: the run never trained"
crash "pbt"
before=$($PSQL -c "SELECT count(*) FILTER (WHERE action = 'report') || ' results, ' || count(*) FILTER (WHERE action = 'exploit') || ' exploits' FROM mop.decisions WHERE run_id = $r")
resume_unless_done "pbt" "$r"
res=$($PSQL -c "SELECT count(*) || ' ' || bool_and(status = 'done' AND epochs_done = 6) FROM mop.models WHERE run_id = $r")
dec=$($PSQL -c "SELECT (count(*) FILTER (WHERE action = 'report') BETWEEN 18 AND 20) || ' ' || (count(*) FILTER (WHERE action = 'exploit') >= 1) FROM mop.decisions WHERE run_id = $r")
noretrain=$(no_retraining "$r")
sched=$($PSQL -c "SELECT count(*) > 0 FROM mop_pbt_schedule((SELECT model_id FROM mop.best WHERE run_id = $r))")
[ "$res" = "4 true" ] && [ "$dec" = "true true" ] && [ "$noretrain" = "t" ] && [ "$sched" = "t" ] || fail "faults: pbt: after resume: $res, decisions $dec, no retraining: $noretrain, schedule $sched"
echo "ok faults: PBT stopped immediately ($before recorded, run left '$st') resumed by replaying its population: 4 members done, lineage readable, no retraining"

# 8. deterministic TPE and PBT stopped immediately and resumed end exactly
#    like uninterrupted runs with the same seed (bit-identical models)
same() {	# run a, run b -> "n/n" identical
	$PSQL -c "SELECT count(*) FILTER (WHERE x.state = y.state AND x.config = y.config) || '/' || count(*) FROM (SELECT row_number() OVER (ORDER BY id) rn, * FROM mop.models WHERE run_id = $1) x JOIN (SELECT row_number() OVER (ORDER BY id) rn, * FROM mop.models WHERE run_id = $2) y USING (rn)"
}
for algo in tpe pbt; do
	if [ $algo = tpe ]; then
		call="mop_tpe('big', '$TSPACE', trials => 6, epochs => 2, n_startup => 2, workers => 2, seed => 6, deterministic => true"
		n=6
	else
		call="mop_pbt('big', '$PSPACE', population => 4, epochs => 4, quantile => 0.5, workers => 2, seed => 6, deterministic => true"
		n=4
	fi
	ref=$($PSQL -c "SELECT DISTINCT run_id FROM $call)")
	r=$($PSQL -c "SELECT DISTINCT run_id FROM $call, wait => false)")
	wait_hops "$r" 9 || fail "faults: deterministic $algo: the run never trained"
	crash "deterministic $algo"
	resume_unless_done "deterministic $algo" "$r"
	s=$(same "$ref" "$r")
	[ "$s" = "$n/$n" ] || fail "faults: deterministic $algo: resumed run differs from the uninterrupted one ($s identical)"
	echo "ok faults: deterministic $algo stopped immediately (run left '$st') and resumed: models bit-identical to an uninterrupted run ($s)"
done
