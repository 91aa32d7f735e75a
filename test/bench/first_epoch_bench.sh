#!/bin/bash
# first_epoch_bench.sh -- the first epoch of a new backend with the server's
# buffer cache on and off (mop_first_epoch.py), then the overhead benchmark
# against the bare engine with it on, on run_mop_bench.sh's server with mop
# added to shared_preload_libraries.
#   bash test/bench/first_epoch_bench.sh        (FE_REPS, default 5; FE_RESTART_REPS, default 3;
#                                                OVH_REPS, default 5)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
source test/bench/mop_bench_lib.sh
bash test/bench/run_mop_bench.sh setup || exit 1
if ! grep -q "^shared_preload_libraries = 'mop'" "$MOPB_DIR/data/postgresql.conf"; then
	echo "shared_preload_libraries = 'mop'" >>"$MOPB_DIR/data/postgresql.conf"
	mopb_cluster_down && mopb_cluster_up || exit 1
fi
mopb_env_line
$PSQL -tAc "SHOW shared_preload_libraries"
MOPB_DIR=$MOPB_DIR $PY test/bench/mop_first_epoch.py --reps "${FE_REPS:-5}" --restart-reps "${FE_RESTART_REPS:-3}"
OVH_REPS=${OVH_REPS:-5} bash test/bench/run_mop_bench.sh overhead
$PSQL -c "SELECT * FROM mop.shared_buffer_cache()"
