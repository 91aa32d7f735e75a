#!/bin/bash
# threads_bench.sh -- mop_train with one BLAS thread against the automatic
# count (every core of the machine), alternating, in a throwaway cluster:
#
#   pg_virtualenv -t -v 15 bash test/bench/threads_bench.sh      # REPS=3 ROWS=30000 EPOCHS=2
#
# Needs mop installed (make install).  Synthetic data: ROWS rows of 784
# floats (Fashion-MNIST's shape), 10 classes; model 784-256-128-10 (ReLU),
# Adam, batch 128.  Prints each run's epoch times (mop.epochs.seconds) and
# the median ratio of the last epoch's time (the first epoch also reads
# the buffers out of TOAST).
set -eu
REPS=${REPS:-3}
ROWS=${ROWS:-30000}
EPOCHS=${EPOCHS:-2}
echo "# threads_bench $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')); load $(cut -d' ' -f1-3 /proc/loadavg)"
psql -X -q -v ON_ERROR_STOP=1 <<SQL >/dev/null
CREATE EXTENSION IF NOT EXISTS mop;
DROP TABLE IF EXISTS thb;
CREATE TABLE thb AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.05 + sin(i * 13 + j * 7))::real FROM generate_series(1, 784) j) AS v
  FROM generate_series(1, $ROWS) i;
SELECT mop_drop_dataset('thb') FROM mop.datasets WHERE name = 'thb';
SELECT 1 FROM mop_prepare('thb', 'label', ARRAY['v'], dataset => 'thb', partitions => 2, seed => 1);
SQL
cfg='{"model": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}], "optimizer": "adam", "learning_rate": 0.001, "batch_size": 128, "seed": 1}'
one=(); auto=()
run() {  # $1 = threads setting; prints the last epoch's seconds
	local id line
	id=$(psql -X -q -At -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning; SET mop.threads_per_worker = $1; SELECT mop_train('thb', '$cfg', $EPOCHS)")
	line=$(psql -X -At -c "SELECT string_agg(round(seconds::numeric, 3)::text, ' ' ORDER BY epoch) FROM mop.epochs WHERE model_id = $id")
	echo "$line" >&2
	echo "${line##* }"
}
for r in $(seq 1 "$REPS"); do
	if [ $((r % 2)) -eq 1 ]; then order="1 0"; else order="0 1"; fi
	for t in $order; do
		echo -n "rep $r threads_per_worker=$t epochs: " >&2
		s=$(run "$t")
		if [ "$t" = 1 ]; then one+=("$s"); else auto+=("$s"); fi
	done
done
python3 - "${one[*]}" "${auto[*]}" <<'PY'
import statistics, sys
one = [float(x) for x in sys.argv[1].split()]
auto = [float(x) for x in sys.argv[2].split()]
print(f"last epoch, 1 thread: median {statistics.median(one):.3f} s {one}")
print(f"last epoch, automatic: median {statistics.median(auto):.3f} s {auto}")
print(f"speedup (1 thread / automatic, medians): {statistics.median(one) / statistics.median(auto):.2f}x; paired: "
      + ", ".join(f"{a / b:.2f}" for a, b in zip(one, auto)))
PY
echo "# load at end $(cut -d' ' -f1-3 /proc/loadavg)"
