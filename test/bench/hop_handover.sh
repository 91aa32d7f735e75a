#!/bin/bash
# hop_handover.sh -- hop_handover.sql in a throwaway cluster (fsync on) for
# each mop.checkpoint_every in CES ("1 4"), alternating, REPS (3) turns;
# EPOCHS (40).  Uses the installed mop.  As root:
#   bash test/bench/hop_handover.sh
set -u
cd "$(dirname "$0")"
CES=${CES:-1 4}; REPS=${REPS:-3}; EPOCHS=${EPOCHS:-40}
echo "# hop_handover: $(date -u '+%Y-%m-%d %H:%M UTC'); $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cpus; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$REPS"); do
	set -- $CES
	[ $((i % 2)) -eq 0 ] && set -- $(printf '%s\n' $CES | tac)
	for ce in "$@"; do
		pg_virtualenv -t -v 15 -o fsync=on -- psql -X -q -v ce="$ce" -v epochs="$EPOCHS" \
			-f "$PWD/hop_handover.sql" -tA 2>&1 | grep '^RESULT' | sed "s/^/[turn $i] /"
	done
done
