#!/bin/bash
# hop_bytes_ab.sh -- hop_bytes.sh on two builds side by side, alternating:
# OLD (a commit, default HEAD~1) and NEW (default HEAD), each built and
# served by mop_bench_lib.sh (its own directory and port, fsync on), so the
# cost of committing every sub-epoch is compared between commits on the
# same machine at the same time.  Knobs: OLD, NEW, AB_REPS (3), and
# hop_bytes.sh's (ROWS, EPOCHS, THREADS, MODELS; REPS is 1 per turn).
#
#   bash test/bench/hop_bytes_ab.sh      # from the repository root, as root
set -u
cd "$(dirname "$0")/../.."
OLD=$(git rev-parse "${OLD:-HEAD~1}"); NEW=$(git rev-parse "${NEW:-HEAD}")
AB_REPS=${AB_REPS:-3}
up() {	# name port commit
	MOPB_DIR=/tmp/mopb-hb-$1 MOPB_PORT=$2 MOPB_COMMIT=$3 bash -c 'source test/bench/mop_bench_lib.sh; mopb_pinned_up' >/dev/null
}
up old 55443 "$OLD" || { echo "old build failed"; exit 1; }
up new 55444 "$NEW" || { echo "new build failed"; exit 1; }
echo "# hop_bytes_ab: old ${OLD:0:10}, new ${NEW:0:10}; $AB_REPS turns each"
for i in $(seq 1 "$AB_REPS"); do
	if [ $((i % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
	for c in $order; do
		port=55443; [ "$c" = new ] && port=55444
		PGHOST=/tmp/mopb-hb-$c PGPORT=$port PGUSER=postgres PGDATABASE=postgres REPS=1 bash test/bench/hop_bytes.sh 2>&1 |
			grep -E '^RESULT|^# hop' | sed "s/^/[$c $i] /"
	done
done
for c in old new; do
	MOPB_DIR=/tmp/mopb-hb-$c bash -c 'source test/bench/mop_bench_lib.sh; mopb_cluster_down'
done
