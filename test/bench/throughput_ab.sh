#!/bin/bash
# throughput_ab.sh -- the MOP throughput grid (mop_throughput.py: 16
# configurations, 1 epoch on fashion's 2 partitions, W=1 random, W=2 random,
# W=2 longest) on two builds side by side, and on the new one also with
# mop.checkpoint_every = CE: OLD (a commit, default HEAD~1) and NEW (HEAD),
# each built, served and loaded by run_mop_bench.sh's setup phase (its own
# directory and port, fsync on, one BLAS thread per worker), one repetition
# per turn, the three arms in rotating order.  Knobs: OLD, NEW, CE (2),
# AB_REPS (3).
#
#   bash test/bench/throughput_ab.sh      # from the repository root, as root
set -u
cd "$(dirname "$0")/../.."
OLD=$(git rev-parse "${OLD:-HEAD~1}"); NEW=$(git rev-parse "${NEW:-HEAD}")
CE=${CE:-2}
AB_REPS=${AB_REPS:-3}
PY=${PY:-/usr/bin/python3}
setup() {	# name port commit
	MOPB_DIR=/tmp/mopb-tp-$1 MOPB_PORT=$2 MOPB_COMMIT=$3 bash test/bench/run_mop_bench.sh setup >/dev/null 2>&1
}
setup old 55445 "$OLD" || { echo "old build or setup failed"; exit 1; }
setup new 55446 "$NEW" || { echo "new build or setup failed"; exit 1; }
source test/bench/mop_bench_lib.sh
MOPB_DIR=/tmp/mopb-tp-new MOPB_PORT=55446 mopb_env_line
echo "# throughput_ab: old ${OLD:0:10}, new ${NEW:0:10}, new with mop.checkpoint_every = $CE; $AB_REPS turns each"
arms=("old 1" "new 1" "new $CE")
for i in $(seq 1 "$AB_REPS"); do
	for k in 0 1 2; do
		arm=${arms[$(( (k + i - 1) % 3 ))]}
		set -- $arm
		port=55445; [ "$1" = new ] && port=55446
		PGHOST=/tmp/mopb-tp-$1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres \
			$PY test/bench/mop_throughput.py --reps 1 --checkpoint-every "$2" 2>&1 |
			grep -E '^  W=|^RESULT' | sed "s/^/[$1 ce=$2 turn $i] /"
	done
done
for c in old new; do
	MOPB_DIR=/tmp/mopb-tp-$c bash -c 'source test/bench/mop_bench_lib.sh; mopb_cluster_down'
done
