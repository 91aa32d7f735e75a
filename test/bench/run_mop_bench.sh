#!/bin/bash
# run_mop_bench.sh -- the benchmarks of the extension and of MOP,
# on Fashion-MNIST, in a private throwaway cluster (test/bench/mop_bench_lib.sh).
#
#   bash test/bench/run_mop_bench.sh [phase ...]
#
# phases (default: all, in this order):
#   setup      build mop (pinned commit, private), start the cluster, load fashion_train/test
#              (label text, pixels real[]), mop_prepare 'fashion' (2 partitions)
#   overhead   mop_train epoch time vs the bare engine (bare_engine.c)
#   prepare    mop_prepare throughput vs COPY (SELECT * ...) TO '/dev/null'
#   converge   MOP vs sequential vs model averaging, 8 configs x 6 epochs
#   converge4  (optional, not in the default list) the same with 4 partitions, W=2
#   throughput 16-config grid, 1 epoch, W=1 vs W=2, random / longest
#   torch      mop end to end vs psycopg2 + PyTorch, sequential and 2 procs; with
#              PY=/opt/mop-bench-venv/bin/python (a venv with torch, numpy, psycopg[binary]
#              from PyPI) vs psycopg 3 (binary COPY) + that PyTorch
#   sim        scheduler simulation (sim_sched.c; sim_segments.c: segments, copies, outages)
# Knobs: OVH_REPS (5), PREP_REPS (3), TP_REPS (3), TORCH_REPS (3), TORCH_LOADER (psycopg2,
# psycopg3, psycopg3-raw; default: psycopg3-raw under a PY with psycopg 3), TORCH_SIDES
# (mop,torch_seq,torch_2p), PY (/usr/bin/python3), MOPB_DIR, MOPB_PORT,
# MOPB_COMMIT (HEAD), MOPB_WAIT_MAX (240: seconds to wait for a quiet machine
# before each measurement; other processes using > 0.3 cores count as busy).
# Output: stdout and test/bench/.cache/mop_bench/<phase>.log (+ .json results).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
source test/bench/mop_bench_lib.sh
OUTD=test/bench/.cache/mop_bench
mkdir -p "$OUTD"
PHASES=${*:-setup overhead prepare converge throughput torch sim}
OVH_REPS=${OVH_REPS:-5}
PREP_REPS=${PREP_REPS:-3}
TP_REPS=${TP_REPS:-3}
TORCH_REPS=${TORCH_REPS:-3}

# mop is built from a pinned commit (MOPB_COMMIT, default HEAD) into
# $MOPB_DIR/build and loaded from $MOPB_DIR/lib (dynamic_library_path), and
# its install script is run by hand (placeholders substituted, the
# pg_extension_config_dump calls dropped) instead of CREATE EXTENSION: other
# sessions on this machine keep running "make install" with other versions,
# and a server loading a shared $libdir/mop.so that no longer matches its SQL
# definitions fails in odd ways.  Nothing outside $MOPB_DIR is written.
phase_setup() {
	mopb_pinned_up || return 1
	if [ "$($PSQL -tAc "select count(*) from pg_class where relname = 'fashion_test'")" != 1 ]; then
		$PSQL <<'SQL'
CREATE TABLE fashion_train (label text NOT NULL, pixels real[] NOT NULL);
CREATE TABLE fashion_test (label text NOT NULL, pixels real[] NOT NULL);
SQL
		$PY scripts/load_fashion_mnist.py train | $PSQL -c "COPY fashion_train FROM STDIN"
		$PY scripts/load_fashion_mnist.py test | $PSQL -c "COPY fashion_test FROM STDIN"
		$PSQL -c "VACUUM ANALYZE fashion_train" -c "VACUUM ANALYZE fashion_test"
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
	[ "$p" = setup ] || mopb_env_line
	case $p in
		setup) phase_setup ;;
		overhead) mopb_wait_quiet; (cd test/bench && $PY mop_overhead.py --reps "$OVH_REPS") ;;
		prepare) mopb_wait_quiet; $PY test/bench/mop_prepare_bench.py --reps "$PREP_REPS" ;;
		converge) mopb_wait_quiet; $PY test/bench/mop_converge.py ;;
		converge4)
			if [ "$($PSQL -tAc "select count(*) from mop.datasets where name = 'fashion4'")" != 1 ]; then
				$PSQL -c "SELECT * FROM mop_prepare('fashion_train', 'label', ARRAY['pixels'], 'fashion4',
				            partitions => 4, validation => 0.1, shape => ARRAY[28, 28, 1], seed => 1)" || return 1
			fi
			$PY test/bench/mop_converge.py --dataset fashion4 ;;
		throughput) mopb_wait_quiet; $PY test/bench/mop_throughput.py --reps "$TP_REPS" ;;
		torch) mopb_wait_quiet; $PY test/bench/mop_vs_torch.py --reps "$TORCH_REPS" ${TORCH_LOADER:+--loader "$TORCH_LOADER"} ${TORCH_SIDES:+--sides "$TORCH_SIDES"} ;;
		sim) (cd "$MOPB_SRC" && gcc -O2 -Isrc/search "$ROOT/test/bench/sim_sched.c" src/search/sched.c src/search/sim.c -o "$ROOT/$OUTD/sim_sched" -lm \
		        && gcc -O2 -Isrc/search "$ROOT/test/bench/sim_segments.c" src/search/sched.c src/search/sim.c -o "$ROOT/$OUTD/sim_segments" -lm) \
		     && "$OUTD/sim_sched" && "$OUTD/sim_segments" ;;
		*) echo "unknown phase $p"; return 2 ;;
	esac
}

export MOPB_SRC=$MOPB_DIR/build   # the pinned sources (bare engine, simulator)
export MOPB_WAIT_MAX=${MOPB_WAIT_MAX:-240}
RC=0
for p in $PHASES; do
	run_phase "$p" 2>&1 | tee "$OUTD/$p.log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || RC=1
done
exit $RC
