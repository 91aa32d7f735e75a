#!/bin/bash
# run_plan_fashion.sh -- the planner against the run on Fashion-MNIST
# (test/bench/plan_fashion.sql: the 16-configuration grid and a mixed
# MLP/CNN grid with 1 and 2 workers, Hyperband on one worker, and the
# profiling seconds), in a private throwaway cluster (by default
# /tmp/mopplan, port 55439) with mop built from MOPB_COMMIT (default HEAD)
# and loaded from there (dynamic_library_path), so that another session's
# "make install" cannot change the library mid-run.
#
#   bash test/bench/run_plan_fashion.sh
#
# Knobs: PF_ROWS (20000: the first rows of the training set), PF_REPS (2),
# PF_EPOCHS (3), PF_HB_R (9: Hyperband's max_resource), PF_THREADS
# (mop.threads_per_worker for the runs and the profiles; default: unset,
# automatic), MOPB_DIR, MOPB_PORT, MOPB_COMMIT, PF_KEEP (1: leave the
# cluster running), PF_LONG_EPOCHS (set: instead, one long run of the
# 16-configuration grid with workers => 'auto' and that many epochs,
# test/bench/plan_long.sql: the planner's share of it).  Output: stdout
# (the machine, then the tables).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export MOPB_DIR=${MOPB_DIR:-/tmp/mopplan}
export MOPB_PORT=${MOPB_PORT:-55439}
source test/bench/mop_bench_lib.sh
ROWS=${PF_ROWS:-20000}

trap '[ "${PF_KEEP:-0}" = 1 ] || mopb_cluster_down 2>/dev/null || true' EXIT

sha=$(git rev-parse "${MOPB_COMMIT:-HEAD}")
if [ "$(cat "$MOPB_DIR/commit" 2>/dev/null)" != "$sha" ]; then
	[ -d "$MOPB_DIR/data" ] && { mopb_cluster_down 2>/dev/null || true; }
	rm -rf "$MOPB_DIR"
	mkdir -p "$MOPB_DIR/build" "$MOPB_DIR/lib" && chown postgres "$MOPB_DIR"
	git archive "$sha" | tar -x -C "$MOPB_DIR/build"
	make -s -C "$MOPB_DIR/build" NVCC= -j2 >"$MOPB_DIR/build.log" 2>&1 || { tail -20 "$MOPB_DIR/build.log"; exit 1; }
	cp "$MOPB_DIR/build/mop.so" "$MOPB_DIR/lib/mop.so"
	chmod -R a+rX "$MOPB_DIR/lib"
	echo "$sha" >"$MOPB_DIR/commit"
fi
mopb_cluster_up
if [ "$($PSQL -tAc "select count(*) from pg_namespace where nspname = 'mop'")" != 1 ]; then
	sed -e '/^\\echo/d' -e '/pg_extension_config_dump/d' -e 's/@extschema@/public/g' \
		-e "s/'MODULE_PATHNAME'/'mop'/g" "$MOPB_DIR/build/sql/mop--0.2.sql" | $PSQL -f - >/dev/null
fi
if [ "$($PSQL -tAc "select count(*) from mop.datasets where name = 'fashion'")" != 1 ]; then
	$PSQL -c "CREATE TABLE fashion_train (label text NOT NULL, pixels real[] NOT NULL)"
	$PY scripts/load_fashion_mnist.py train "$ROWS" | $PSQL -c "COPY fashion_train FROM STDIN"
	$PSQL -c "VACUUM ANALYZE fashion_train"
	$PSQL -c "SELECT count(*) FROM mop_prepare('fashion_train', 'label', ARRAY['pixels'], 'fashion',
	            partitions => 2, validation => 0.1, shape => ARRAY[28, 28, 1], seed => 1)" >/dev/null
fi
mopb_env_line
if [ -n "${PF_THREADS:-}" ]; then
	export PGOPTIONS="-c mop.threads_per_worker=$PF_THREADS"
fi
echo "mop.threads_per_worker: ${PF_THREADS:-0 (automatic)}"
if [ -n "${PF_LONG_EPOCHS:-}" ]; then
	echo "rows: $ROWS of the Fashion-MNIST training set; one grid of ${PF_LONG_EPOCHS} epochs, workers => 'auto'"
	$PSQL -v epochs="$PF_LONG_EPOCHS" -f test/bench/plan_long.sql
	echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%H:%M:%S UTC')"
	exit 0
fi
echo "rows: $ROWS of the Fashion-MNIST training set; reps ${PF_REPS:-2}; epochs ${PF_EPOCHS:-3}; Hyperband max_resource ${PF_HB_R:-9}, eta 3"
$PSQL -v reps="${PF_REPS:-2}" -v epochs="${PF_EPOCHS:-3}" -v hb_r="${PF_HB_R:-9}" -f test/bench/plan_fashion.sql
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%H:%M:%S UTC')"
