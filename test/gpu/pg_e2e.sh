#!/bin/bash
# pg_e2e.sh -- mop end to end on a GPU, inside a real PostgreSQL server, on
# a machine that has a GPU but no PostgreSQL (the archive comes from
# test/gpu/pg_bundle.sh).  Run as root; the server runs as a throwaway
# role "mopgpu".
#
#   bash test/gpu/pg_e2e.sh BUNDLE.tar.xz FASHION_MNIST_DIR [ROWS]
#
# Loads ROWS Fashion-MNIST training rows (default 30000) and the 10000 test
# rows, prepares them in 4 partitions, then checks and times:
#   1. mop_train of an MLP on the CPU and on the GPU (same seed): validation
#      and test accuracy, seconds;
#   2. the narrow waist hopping devices: a sub-epoch on the CPU, the next
#      on the GPU, evaluated on both;
#   3. mop_grid_search (8 configurations, 4 workers, 2 epochs) on the CPU
#      and on the GPU (4 workers sharing one GPU);
#   4. mop.gpu_memory too small: the 53200 error;
#   5. a model with class weights, batchnorm, a learning-rate schedule and
#      f1 as its metric trained on the CPU and on the GPU (same seed).
# Prints "ok ..." / "not ok ..." lines and the timings as RESULT lines.
set -u
bundle=${1:?bundle}
fm=${2:?fashion-mnist dir}
rows=${3:-30000}
here=$(cd "$(dirname "$0")/../.." && pwd)
tar -C / --no-overwrite-dir -xJf "$bundle" || exit 1
cuda=$(dirname "$(find / -name 'libcublas.so.13' -not -path '/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=/mop-libs:$cuda
id mopgpu >/dev/null 2>&1 || useradd -m mopgpu || exit 1
data=/tmp/mop-e2e
rm -rf "$data" && mkdir -p "$data" && chown mopgpu "$data"
as() { runuser -u mopgpu -- env LD_LIBRARY_PATH="$LD_LIBRARY_PATH" PATH=/usr/lib/postgresql/15/bin:$PATH "$@"; }
as initdb -D "$data/pg" -U mopgpu >/dev/null || exit 1
cat >>"$data/pg/postgresql.conf" <<CONF
max_worker_processes = 32
unix_socket_directories = '$data'
listen_addresses = ''
shared_buffers = 1GB
CONF
as pg_ctl -D "$data/pg" -l "$data/log" -w start >/dev/null || { cat "$data/log"; exit 1; }
trap 'as pg_ctl -D "$data/pg" -m immediate stop >/dev/null' EXIT
psql() { as psql -h "$data" -d postgres -X -v ON_ERROR_STOP=1 -Atq "$@"; }
python3 - "$fm" "$rows" "$data" <<'PY' || exit 1
import gzip, sys, numpy as np
fm, rows, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def idx(p):
    d = gzip.open(p).read(); nd = d[3]
    dims = [int.from_bytes(d[4+4*i:8+4*i], 'big') for i in range(nd)]
    return np.frombuffer(d, np.uint8, offset=4+4*nd).reshape(dims)
for split, stem, n in (('train', 'train', rows), ('test', 't10k', 10000)):
    x = idx(f'{fm}/{stem}-images-idx3-ubyte.gz')[:n].reshape(-1, 784)
    y = idx(f'{fm}/{stem}-labels-idx1-ubyte.gz')[:n]
    with open(f'{out}/{split}.csv', 'w') as f:
        for xi, yi in zip(x, y):
            f.write(f'{yi},"{{{",".join(map(str, xi.tolist()))}}}"\n')
PY
chmod a+r "$data"/*.csv
psql <<SQL || exit 1
CREATE TABLE fm_train (label int, pixels real[]);
CREATE TABLE fm_test (label int, pixels real[]);
\copy fm_train FROM '$data/train.csv' CSV
\copy fm_test FROM '$data/test.csv' CSV
CREATE EXTENSION mop;
SELECT 'prepared ' || train_rows FROM mop_prepare('fm_train', 'label', ARRAY['pixels'],
  partitions => 4, validation => 0.1, seed => 1, shape => ARRAY[28, 28, 1]);
SQL
echo "ok pg_e2e: server up, mop installed, $rows rows prepared"
psql -c "SELECT 'devices: ' || string_agg(name || ' ' || memory_total_mb || ' MB', ', ') FROM mop_gpu_devices()"

mlp='{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}]}, "optimizer": "adam", "learning_rate": 0.001, "batch_size": 128, "seed": 7}'
for dev in cpu gpu; do
	out=$(psql <<SQL
SET mop.device = '$dev';
SELECT extract(epoch FROM clock_timestamp())::float8;
SELECT mop_train('fm_train', '$mlp', epochs => 3);
SELECT extract(epoch FROM clock_timestamp())::float8;
SQL
	)
	set -- $out
	t=$(python3 -c "print(f'{$3 - $1:.2f}')")
	id=$2
	acc=$(psql -c "SELECT round(valid_metric::numeric, 4) FROM mop.epochs WHERE model_id = $id AND epoch = 3")
	test=$(psql -c "SELECT round(metric::numeric, 4) FROM mop_evaluate($id, 'fm_test')")
	echo "RESULT e2e=mop_train device=$dev model=$id epochs=3 seconds=$t valid_accuracy=$acc test_accuracy=$test"
	eval "acc_$dev=$acc"
done
python3 -c "import sys; a, b = $acc_cpu, $acc_gpu; sys.exit(0 if b > 0.8 and abs(a - b) < 0.01 else 1)" &&
	echo "ok pg_e2e: mop_train on the GPU learns as on the CPU (valid accuracy $acc_gpu vs $acc_cpu)" ||
	echo "not ok pg_e2e: mop_train on the GPU: valid accuracy $acc_gpu vs $acc_cpu on the CPU"

# the narrow waist across devices: partition 0 on the CPU, partition 1 on the GPU
out=$(psql <<'SQL'
CREATE TEMP TABLE s AS SELECT mop.init_model('fm_train', '{"model": {"layers": [{"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 10}]}, "batch_size": 64, "seed": 3}') AS state;
SET mop.device = 'cpu';
UPDATE s SET state = (SELECT (mop.train_agg(s.state, b.x, b.y)).state FROM (SELECT x, y FROM mop.buffers b, mop.datasets d WHERE b.dataset_id = d.id AND d.name = 'fm_train' AND split = 'train' AND partition = 0 ORDER BY buffer_no) b);
SET mop.device = 'gpu';
UPDATE s SET state = (SELECT (mop.train_agg(s.state, b.x, b.y)).state FROM (SELECT x, y FROM mop.buffers b, mop.datasets d WHERE b.dataset_id = d.id AND d.name = 'fm_train' AND split = 'train' AND partition = 1 ORDER BY buffer_no) b);
SELECT round(((mop.eval_agg(s.state, b.x, b.y)).metric_sum / 3000.0)::numeric, 5) FROM s, (SELECT x, y FROM mop.buffers b, mop.datasets d WHERE b.dataset_id = d.id AND d.name = 'fm_train' AND split = 'valid' ORDER BY partition, buffer_no) b GROUP BY s.state;
SET mop.device = 'cpu';
SELECT round(((mop.eval_agg(s.state, b.x, b.y)).metric_sum / 3000.0)::numeric, 5) FROM s, (SELECT x, y FROM mop.buffers b, mop.datasets d WHERE b.dataset_id = d.id AND d.name = 'fm_train' AND split = 'valid' ORDER BY partition, buffer_no) b GROUP BY s.state;
SQL
)
set -- $out
[ $# -eq 2 ] && python3 -c "import sys; sys.exit(0 if $1 > 0.5 and abs($1 - $2) <= 1 / 3000 else 1)" &&
	echo "ok pg_e2e: a state trained on the CPU then the GPU evaluates the same on both (accuracy $1 on the GPU, $2 on the CPU)" ||
	echo "not ok pg_e2e: cross-device hop: $out"

space='{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}]}, "learning_rate": [0.001, 0.0003, 0.003, 0.0001], "batch_size": [64, 256]}'
for round in 1 2; do
	for dev in cpu gpu; do
		out=$(psql <<SQL
SET mop.device = '$dev';
SELECT extract(epoch FROM clock_timestamp())::float8;
SELECT round(max(best_valid_metric)::numeric, 4) FROM mop_grid_search('fm_train', '$space', epochs => 2, workers => 4, seed => 1);
SELECT extract(epoch FROM clock_timestamp())::float8;
SELECT options->>'device' FROM mop.runs ORDER BY id DESC LIMIT 1;
SQL
		)
		set -- $out
		t=$(python3 -c "print(f'{$3 - $1:.2f}')")
		echo "RESULT e2e=grid device=$dev round=$round configs=8 workers=4 epochs=2 seconds=$t best_valid_accuracy=$2 run_device=$4"
		[ "$4" = "$dev" ] || echo "not ok pg_e2e: the run recorded device $4, not $dev"
	done
done
st=$(psql -c "SELECT count(*) FILTER (WHERE m.status <> 'done') FROM mop.models m JOIN mop.runs r ON r.id = m.run_id WHERE r.options->>'device' = 'gpu'")
[ "$st" = "0" ] && echo "ok pg_e2e: every model of the GPU grid runs finished" || echo "not ok pg_e2e: $st GPU models not done"

err=$(psql -v ON_ERROR_STOP=0 2>&1 <<SQL
SET mop.device = 'gpu';
SET mop.gpu_memory = '1MB';
\set VERBOSITY verbose
SELECT mop_train('fm_train', '$mlp', epochs => 1);
SQL
)
echo "$err" | grep -q "53200" && echo "ok pg_e2e: over mop.gpu_memory: $(echo "$err" | tr '\n' ' ' | cut -c1-400)" ||
	echo "not ok pg_e2e: over mop.gpu_memory: $err"

# not yet verified on a GPU: refused unless mop.gpu_unverified is on
err=$(psql -v ON_ERROR_STOP=0 2>&1 <<'SQL'
SET mop.device = 'gpu';
\set VERBOSITY verbose
SELECT mop_train('fm_train', '{"model": {"layers": [{"type": "dense", "units": 16}, {"type": "batchnorm"}, {"type": "dense", "units": 10}]}, "seed": 1}', epochs => 1);
SQL
)
echo "$err" | grep -q "0A000: batchnorm layers are not yet verified on the GPU" && echo "ok pg_e2e: batchnorm refused without mop.gpu_unverified" ||
	echo "not ok pg_e2e: batchnorm without mop.gpu_unverified: $err"

# what the GPU once refused trains there as on the CPU: class weights, a
# batchnorm layer, a learning-rate schedule with warmup and a whole-set
# metric (f1), with the same seed on both devices
feat='{"model": {"layers": [{"type": "dense", "units": 64}, {"type": "batchnorm"}, {"type": "activation", "activation": "relu"}, {"type": "dense", "units": 10}]}, "class_weight": "balanced", "lr_schedule": {"type": "cosine", "min_lr": 0.0001, "warmup": 1}, "metric": "f1", "optimizer": "adam", "learning_rate": 0.002, "batch_size": 128, "seed": 5}'
for dev in cpu gpu; do
	out=$(psql 2>&1 <<SQL
SET mop.device = '$dev';
SET mop.gpu_unverified = on;
SELECT mop_train('fm_train', '$feat', epochs => 3);
SQL
	)
	id=$out
	f1=$(psql -c "SELECT round(valid_metric::numeric, 4) || ' ' || round(train_loss::numeric, 4) FROM mop.epochs WHERE model_id = $id AND epoch = 3" 2>&1)
	echo "RESULT e2e=features device=$dev model=$id epochs=3 valid_f1_train_loss=$f1"
	eval "f1_$dev=\"$f1\""
done
set -- $f1_cpu $f1_gpu
[ $# -eq 4 ] && python3 -c "import sys; sys.exit(0 if $3 > 0.7 and abs($1 - $3) < 0.01 and abs($2 - $4) < 0.02 * $2 else 1)" &&
	echo "ok pg_e2e: class weights, batchnorm, a cosine schedule with warmup and f1 train on the GPU as on the CPU (valid f1 $3 vs $1, train loss $4 vs $2)" ||
	echo "not ok pg_e2e: class weights, batchnorm, schedule and f1 on the GPU: gpu '$f1_gpu' cpu '$f1_cpu'"
