#!/bin/bash
# run_features_bench.sh -- benchmarks of the training features on
# Fashion-MNIST, in a private throwaway cluster of its own (by default
# /tmp/mopfeat, port 55437):
#   1. a search over layer widths and learning-rate schedules against the
#      fixed-architecture 16-configuration grid, same budget
#      (configurations x epochs): best validation accuracy and time;
#   2. patience early stopping on the 16-configuration grid: epochs trained
#      and time with "early_stopping": {"patience": 2, "min_delta": 0.001}
#      against without, and the best validation accuracy lost.
#
#   bash test/bench/run_features_bench.sh [phase ...]
#
# phases (default: setup bench):
#   setup  build mop at MOPB_COMMIT (default HEAD) from a git archive into
#          $MOPB_DIR/build, load it from $MOPB_DIR/lib (dynamic_library_path,
#          the 0.2 install script run by hand), so that another session's
#          "make install" into the shared $libdir cannot change the mop.so
#          this server and its background workers load during the run; start
#          the cluster; load FEAT_ROWS rows of fashion_train (default 30000)
#          and mop_prepare them as dataset 'fashion' (2 partitions, 10 %
#          validation, seed 1)
#   bench  test/bench/mop_features_bench.py: FEAT_REPS (2) repetitions of
#          grid / width search / grid with patience, FEAT_EPOCHS (10) epochs,
#          2 workers, the order reversed every other repetition
# Output: stdout and test/bench/.cache/features/<phase>.log, bench.json.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export MOPB_DIR=${MOPB_DIR:-/tmp/mopfeat}
export MOPB_PORT=${MOPB_PORT:-55437}
source test/bench/mop_bench_lib.sh
OUTD=test/bench/.cache/features
mkdir -p "$OUTD"
PHASES=${*:-setup bench}
ROWS=${FEAT_ROWS:-30000}

# as mopb_pinned_up, but with the 0.2 install script (the features are 0.2's)
feat_pinned_up() {
	local sha
	sha=$(git rev-parse "${MOPB_COMMIT:-HEAD}") || return 1
	if [ "$(cat "$MOPB_DIR/commit" 2>/dev/null)" != "$sha" ]; then
		[ -d "$MOPB_DIR/data" ] && mopb_cluster_down 2>/dev/null
		rm -rf "$MOPB_DIR"
		mkdir -p "$MOPB_DIR/build" "$MOPB_DIR/lib" && chown postgres "$MOPB_DIR"
		git archive "$sha" | tar -x -C "$MOPB_DIR/build" || return 1
		make -s -C "$MOPB_DIR/build" NVCC= -j2 >"$MOPB_DIR/build.log" 2>&1 || { tail -20 "$MOPB_DIR/build.log"; return 1; }
		cp "$MOPB_DIR/build/mop.so" "$MOPB_DIR/lib/mop.so"
		chmod -R a+rX "$MOPB_DIR/lib"
		echo "$sha" >"$MOPB_DIR/commit"
	fi
	mopb_cluster_up || return 1
	if [ "$($PSQL -tAc "select count(*) from pg_namespace where nspname = 'mop'")" != 1 ]; then
		sed -e '/^\\echo/d' -e '/pg_extension_config_dump/d' -e 's/@extschema@/public/g' \
			-e "s/'MODULE_PATHNAME'/'mop'/g" "$MOPB_DIR/build/sql/mop--0.2.sql" | $PSQL -f - >/dev/null || return 1
	fi
	echo "mop: commit $sha, built in $MOPB_DIR/build, loaded from $($PSQL -tAc "show dynamic_library_path")"
}

phase_setup() {
	feat_pinned_up || return 1
	if [ "$($PSQL -tAc "select count(*) from pg_class where relname = 'fashion_train'")" != 1 ]; then
		$PSQL -c "CREATE TABLE fashion_train (label text NOT NULL, pixels real[] NOT NULL)"
		$PY scripts/load_fashion_mnist.py train "$ROWS" | $PSQL -c "COPY fashion_train FROM STDIN"
		$PSQL -c "VACUUM ANALYZE fashion_train"
	fi
	if [ "$($PSQL -tAc "select count(*) from mop.datasets where name = 'fashion'")" != 1 ]; then
		$PSQL -c "SELECT * FROM mop_prepare('fashion_train', 'label', ARRAY['pixels'], 'fashion',
		            partitions => 2, validation => 0.1, shape => ARRAY[28, 28, 1], seed => 1)"
	fi
	$PSQL -c "SELECT name, partitions, train_rows, valid_rows FROM mop.datasets"
}

run_phase() {
	echo "==== phase $1  $(date -u '+%H:%M:%S')"
	case $1 in
		setup) phase_setup ;;
		bench) $PY test/bench/mop_features_bench.py --reps "${FEAT_REPS:-2}" --epochs "${FEAT_EPOCHS:-10}" ${FEAT_START:+--start "$FEAT_START"} ;;
		*) echo "unknown phase $1"; return 2 ;;
	esac
}

export MOPB_WAIT_MAX=${MOPB_WAIT_MAX:-60}
RC=0
for p in $PHASES; do
	run_phase "$p" 2>&1 | tee "$OUTD/$p.log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || RC=1
done
{ mopb_env_line; echo "torch: $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null) (not used by this benchmark)"; } | tee -a "$OUTD/env.log"
exit $RC
