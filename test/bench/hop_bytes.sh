#!/bin/bash
# hop_bytes.sh -- what a hop writes and costs for models of three sizes: the
# Fashion-MNIST MLP (784-256-128-10), a LeNet-like CNN and a ~5M-parameter
# MLP (784-2048-1536-256-10), all Adam (state = weights + two moments).
# For each: the checkpoint's bytes; the WAL of a grid search of that one
# model on 1 worker (every sub-epoch a committed checkpoint, the best one
# kept beside it once the latest replaces it) and of mop_train of the same
# model (one checkpoint at the
# end), from pg_current_wal_lsn around each; and both calls' wall times,
# whose difference is what committing every sub-epoch (and starting a run)
# costs.  Alternating, REPS times.  In a throwaway cluster, after make install:
#
#   pg_virtualenv -t -v 15 bash test/bench/hop_bytes.sh   # ROWS=40000 REPS=2 EPOCHS=2 THREADS=1 MODELS="mlp cnn big"
#
# or against a pinned server of run_mop_bench.sh (PGHOST=$MOPB_DIR PGPORT=...),
# e.g. two commits side by side (test/bench/hop_bytes_ab.sh).
# (pg_virtualenv runs the server with fsync=off; add -o fsync=on to flush as a
# production server does)
set -eu
ROWS=${ROWS:-40000}
REPS=${REPS:-2}
THREADS=${THREADS:-1}
P="psql -X -q -At -v ON_ERROR_STOP=1"
echo "# hop_bytes $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')); load $(cut -d' ' -f1-3 /proc/loadavg); $($P -c 'SHOW server_version'); ROWS=$ROWS REPS=$REPS EPOCHS=${EPOCHS:-2} THREADS=$THREADS; fsync=$($P -c "SHOW fsync")"
$P <<SQL >/dev/null
SET client_min_messages = warning;
-- (a server of run_mop_bench.sh has mop's catalog without the extension)
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'mop') AS has_mop \gset
\if :has_mop
\else
CREATE EXTENSION mop;
\endif
SELECT mop_drop_dataset('hb') FROM mop.datasets WHERE name = 'hb';
DROP TABLE IF EXISTS hb;
CREATE TABLE hb AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.05 + sin(i * 13 + j * 7))::real FROM generate_series(1, 784) j) AS v
  FROM generate_series(1, $ROWS) i;
SELECT 1 FROM mop_prepare('hb', 'label', ARRAY['v'], dataset => 'hb', partitions => 2, validation => 0.1,
                          shape => ARRAY[28, 28, 1], seed => 1);
SQL
declare -A CFG
CFG[mlp]='{"model": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}], "optimizer": "adam", "learning_rate": 0.001, "batch_size": 128, "seed": 1}'
CFG[cnn]='{"model": [{"type": "conv2d", "filters": 32, "kernel_size": 3, "activation": "relu"}, {"type": "maxpool2d", "pool_size": 2}, {"type": "conv2d", "filters": 64, "kernel_size": 3, "activation": "relu"}, {"type": "maxpool2d", "pool_size": 2}, {"type": "flatten"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}], "optimizer": "adam", "learning_rate": 0.001, "batch_size": 128, "seed": 1}'
CFG[big]='{"model": [{"type": "dense", "units": 2048, "activation": "relu"}, {"type": "dense", "units": 1536, "activation": "relu"}, {"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}], "optimizer": "adam", "learning_rate": 0.0005, "batch_size": 128, "seed": 1}'
lsn() { $P -c "SELECT pg_current_wal_lsn()"; }
walbytes() { $P -c "SELECT pg_wal_lsn_diff('$2', '$1')::bigint"; }
EPOCHS=${EPOCHS:-2}
for m in ${MODELS:-mlp cnn big}; do
	cfg=${CFG[$m]}
	space=$(echo "$cfg" | python3 -c 'import json,sys; c=json.load(sys.stdin); c["model"]={"layers": c["model"]}; print(json.dumps(c))')
	for r in $(seq 1 "$REPS"); do
		if [ $((r % 2)) -eq 1 ]; then order="train grid"; else order="grid train"; fi
		for how in $order; do
			$P -c "CHECKPOINT" >/dev/null
			a=$(lsn)
			t0=$(date +%s.%N)
			if [ "$how" = train ]; then
				id=$($P -c "SET client_min_messages = warning; SET mop.threads_per_worker = $THREADS; SELECT mop_train('hb', '$cfg', $EPOCHS)")
			else
				run=$($P -c "SET client_min_messages = warning; SET mop.threads_per_worker = $THREADS; SELECT DISTINCT run_id FROM mop_grid_search('hb', '$space', epochs => $EPOCHS, workers => 1)")
				id=$($P -c "SELECT id FROM mop.models WHERE run_id = $run")
			fi
			t1=$(date +%s.%N)
			b=$(lsn)
			state=$($P -c "SELECT octet_length(state) FROM mop.models WHERE id = $id")
			hops=$($P -c "SELECT count(*) || ' ' || round(avg(extract(epoch FROM finished_at - started_at))::numeric, 3) FROM mop.hops WHERE model_id = $id")
			# the gap after each hop not followed by a validation (the
			# checkpoint written and committed, the next task handed out),
			# as a share of the mean hop: the per-hop overhead
			gap=$($P -c "SELECT coalesce(round((100 * avg(g) / (SELECT avg(extract(epoch FROM finished_at - started_at)) FROM mop.hops WHERE model_id = $id))::numeric, 2)::text, '-')
			               FROM (SELECT extract(epoch FROM lead(started_at) OVER (ORDER BY started_at) - finished_at) AS g, partition,
			                            max(partition) OVER () AS last FROM mop.hops WHERE model_id = $id) h
			              WHERE g IS NOT NULL AND partition < last")
			echo "RESULT model=$m rep=$r how=$how wall_s=$(python3 -c "print(round($t1 - $t0, 3))") wal_bytes=$(walbytes "$a" "$b") state_bytes=$state hops_and_mean_s=${hops// /,} gap_pct=$gap"
		done
	done
done
echo "# load at end $(cut -d' ' -f1-3 /proc/loadavg)"
