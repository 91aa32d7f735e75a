#!/bin/bash
# run_adaptive_bench.sh -- the adaptive search benchmarks on
# Fashion-MNIST, in a private throwaway cluster of its own (by default
# /tmp/mopadapt, port 55433, so it never touches run_mop_bench.sh's cluster).
# Reuses test/bench/mop_bench_lib.sh (cluster helpers, environment line) and
# mop_bench_common.py (wait_quiet, helpers).
#
#   bash test/bench/run_adaptive_bench.sh [phase ...]
#
# phases (default: all, in this order: setup optuna compare converge_hard converge):
#   setup    build mop (pinned commit, default HEAD) into $MOPB_DIR, start the
#            cluster, load fashion_train, mop_prepare 'fashion' (2 partitions,
#            10% validation, seed 1)
#   compare  hyperband / asha / tpe / grid / random, same space, ~same epochs
#            (CMP_REPS, default 1; CMP_METHODS, e.g. asha,random; CMP_SCHEDULER)
#   converge scheduler 'convergence' vs 'fifo' and 'random' on a space with few good
#            configurations, interleaved repetitions (CONV_REPS, default 2)
#   converge_hard  the same on a harder space: 16 learning rates, 2 good, 8 epochs,
#            targets 0.88/0.885/0.89 (CONV_REPS, default 2)
#   optuna   mop_hyperband vs Optuna (TPE + HyperbandPruner) driving
#            PyTorch CPU on 2 processes (OPT_REPS, default 1); mop with the
#            random and the convergence scheduler (OPT_MOP_SCHEDULERS);
#            OPT_BASELINES=optuna,raytune runs Ray Tune in the same alternation
#   raytune  (not in the default list) the same against Ray Tune (ASHAScheduler,
#            2 trials at a time); needs PY with ray[tune]
#   With PY=/opt/mop-bench-venv/bin/python (a venv with torch, optuna, ray[tune],
#   psycopg[binary] from PyPI) the baselines are those versions and read the table
#   with psycopg 3's binary COPY; OPT_LOADER overrides (psycopg2, psycopg3,
#   psycopg3-raw).  OPT_TRIALS (17) and OPT_MAXR (9) shrink a dry run.
# Output: stdout and test/bench/.cache/adaptive/<phase>.log (+ .json).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export MOPB_DIR=${MOPB_DIR:-/tmp/mopadapt}
export MOPB_PORT=${MOPB_PORT:-55433}
source test/bench/mop_bench_lib.sh
OUTD=test/bench/.cache/adaptive
mkdir -p "$OUTD"
PHASES=${*:-setup optuna compare converge_hard converge}

phase_setup() {
	mopb_pinned_up || return 1
	if [ "$($PSQL -tAc "select count(*) from pg_class where relname = 'fashion_train'")" != 1 ]; then
		$PSQL -c "CREATE TABLE fashion_train (label text NOT NULL, pixels real[] NOT NULL)"
		$PY scripts/load_fashion_mnist.py train | $PSQL -c "COPY fashion_train FROM STDIN"
		$PSQL -c "VACUUM ANALYZE fashion_train"
	fi
	if [ "$($PSQL -tAc "select count(*) from mop.datasets where name = 'fashion'")" != 1 ]; then
		$PSQL -c "SELECT * FROM mop_prepare('fashion_train', 'label', ARRAY['pixels'], 'fashion',
		            partitions => 2, validation => 0.1, shape => ARRAY[28, 28, 1], seed => 1)"
	fi
	$PSQL -c "SELECT name, partitions, train_rows, valid_rows FROM mop.datasets"
}

run_phase() {
	local p=$1
	echo "==== phase $p  $(date -u '+%H:%M:%S')"
	# (each measurement first waits, at most MOPB_WAIT_MAX s, for other benchmark
	# scripts to end and the machine to be quiet; see quiet() in mop_adaptive_bench.py)
	case $p in
		setup) phase_setup ;;
		compare) $PY test/bench/mop_adaptive_bench.py compare --reps "${CMP_REPS:-1}" ${CMP_METHODS:+--methods "$CMP_METHODS"} ${CMP_SCHEDULER:+--scheduler "$CMP_SCHEDULER"} ;;
		converge) $PY test/bench/mop_adaptive_bench.py converge --reps "${CONV_REPS:-2}" ;;
		converge_hard) $PY test/bench/mop_adaptive_bench.py converge --hard --epochs 8 --reps "${CONV_REPS:-2}" ;;
		optuna|raytune) $PY test/bench/mop_adaptive_bench.py "$p" --reps "${OPT_REPS:-1}" --mop-schedulers "${OPT_MOP_SCHEDULERS:-random,convergence}" \
			${OPT_BASELINES:+--baselines "$OPT_BASELINES"} ${OPT_LOADER:+--loader "$OPT_LOADER"} ${OPT_TRIALS:+--trials "$OPT_TRIALS"} \
			${OPT_MAXR:+--max-resource "$OPT_MAXR"} ${OPT_START:+--start "$OPT_START" --tag "_from$OPT_START"} ;;
		*) echo "unknown phase $p"; return 2 ;;
	esac
}

export MOPB_WAIT_MAX=${MOPB_WAIT_MAX:-90}
mopb_env_line
RC=0
for p in $PHASES; do
	run_phase "$p" 2>&1 | tee "$OUTD/$p.log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || RC=1
done
exit $RC
