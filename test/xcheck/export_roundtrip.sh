#!/bin/bash
# export_roundtrip.sh -- models exported with mop_export predict in Keras 3
# and in PyTorch what mop predicts in PostgreSQL (max abs difference <= 1e-5
# on 1,000 rows each): a multi-class MLP (leaky ReLU, GELU, dropout, L2), a
# binary MLP (tanh), a regression MLP, and a CNN on 9x9 images (same and
# valid padding, strides, max pooling, a separate LeakyReLU layer, a dense
# layer straight on an image).  Each is also read back by mop as a
# configuration (the export is a fixed point).
#
# Not run by CI: it needs Keras 3 and PyTorch.  Run inside a throwaway
# cluster with mop installed:
#   KERAS_PY=/path/to/venv/bin/python TORCH_PY=/usr/bin/python3 \
#     pg_virtualenv -t -v 15 bash test/xcheck/export_roundtrip.sh
set -u
cd "$(dirname "$0")/../.."
KERAS_PY=${KERAS_PY:-python3}
TORCH_PY=${TORCH_PY:-python3}
export KERAS_BACKEND=${KERAS_BACKEND:-numpy}
export PGOPTIONS="-c client_min_messages=warning"
W=$(mktemp -d /tmp/mop-export.XXXXXX)
PSQL="psql -X -q -At -v ON_ERROR_STOP=1"
$PSQL >/dev/null <<'SQL' || exit 1
CREATE EXTENSION IF NOT EXISTS mop;
CREATE TABLE blobs AS
SELECT i AS id, (i % 3)::text AS label,
       ARRAY(SELECT ((i % 3) * 1.5 + sin(i * 7 + j) * 2 + j)::real FROM generate_series(1, 6) j) AS v
  FROM generate_series(1, 1000) i;
CREATE TABLE coins AS
SELECT i AS id, (sin(i * 3) > 0) AS heads, sin(i * 3) * 4 + cos(i) AS a, cos(i * 5) * 10 + 50 AS b
  FROM generate_series(1, 1000) i;
CREATE TABLE prices AS
SELECT i AS id, sin(i) * 3 + cos(i * 2) * 100 + 7 AS y, sin(i) AS a, cos(i * 2) * 100 AS b, (i % 17)::float8 AS c
  FROM generate_series(1, 1000) i;
CREATE TABLE pics AS
SELECT i AS id, (i % 3)::text AS label,
       ARRAY(SELECT (CASE WHEN (p / 9 + p % 9 + i) % 3 = i % 3 THEN 1.0 ELSE 0.0 END + sin(i * p) * 0.3)::real
               FROM generate_series(0, 80) p) AS px
  FROM generate_series(1, 1000) i;
SELECT count(*) FROM mop_prepare('blobs', 'label', ARRAY['v'], partitions => 2, seed => 1);
SELECT count(*) FROM mop_prepare('coins', 'heads', ARRAY['a', 'b'], partitions => 2, seed => 1);
SELECT count(*) FROM mop_prepare('prices', 'y', ARRAY['a', 'b', 'c'], partitions => 2, seed => 1);
SELECT count(*) FROM mop_prepare('pics', 'label', ARRAY['px'], shape => ARRAY[9, 9, 1], partitions => 2, seed => 1);
SELECT mop_train('blobs', '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "leaky_relu"},
  {"type": "dropout", "rate": 0.2}, {"type": "dense", "units": 8, "activation": "gelu"}, {"type": "dense", "units": 3}]},
  "optimizer": "adam", "learning_rate": 0.01, "l2": 0.001, "seed": 1}', epochs => 3);
SELECT mop_train('coins', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 1}]},
  "optimizer": "sgd", "learning_rate": 0.05, "momentum": 0.9, "seed": 2}', epochs => 3);
SELECT mop_train('prices', '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 1}]},
  "optimizer": "adam", "learning_rate": 0.01, "seed": 3}', epochs => 3);
SELECT mop_train('pics', '{"model": {"layers": [
  {"type": "conv2d", "filters": 4, "kernel_size": 3, "padding": "same", "activation": "relu"},
  {"type": "maxpool2d", "pool_size": 2, "padding": "same"},
  {"type": "conv2d", "filters": 6, "kernel_size": 2, "strides": 2, "activation": "leaky_relu"},
  {"type": "activation", "activation": "leaky_relu"},
  {"type": "dense", "units": 12, "activation": "sigmoid"}, {"type": "dense", "units": 3}]},
  "optimizer": "adam", "learning_rate": 0.01, "seed": 4}', epochs => 3);
SQL
rc=0
for m in "1:blobs:v::float8[]" "2:coins:ARRAY[a, b]::float8[]" "3:prices:ARRAY[a, b, c]::float8[]" "4:pics:px::float8[]"; do
	id=${m%%:*}
	rest=${m#*:}
	table=${rest%%:*}
	x=${rest#*:}
	$PSQL -c "SELECT mop_export($id)" >"$W/m$id.json"
	$PSQL -F, -c "SELECT array_to_string($x, ','), array_to_string(mop_predict_proba($id, $x), ' ') FROM $table ORDER BY id" >"$W/rows$id.csv"
	"$KERAS_PY" test/xcheck/export_check.py "$W/m$id.json" "$W/rows$id.csv" --keras 2>"$W/err" || { rc=1; grep -v Warning "$W/err" | tail -5; }
	"$TORCH_PY" test/xcheck/export_check.py "$W/m$id.json" "$W/rows$id.csv" --torch 2>/dev/null || rc=1
	# the export's model, read back by mop as a configuration, exports the same model
	a=$($PSQL -c "SELECT mop_train('$table', jsonb_build_object('model', mop_export($id, preprocessing => false)->'model', 'seed', 1), epochs => 1)")
	b=$($PSQL -c "SELECT mop_train('$table', jsonb_build_object('model', mop_export($a, preprocessing => false)->'model', 'seed', 1), epochs => 1)")
	same=$($PSQL -c "SELECT mop_export($a, preprocessing => false)->'model' = mop_export($b, preprocessing => false)->'model'")
	if [ "$same" = "t" ]; then
		echo "ok mop: the exported model of $table, read back as a configuration, exports unchanged"
	else
		echo "not ok mop: the exported model of $table does not survive a round trip through mop ($same)"
		rc=1
	fi
done
rm -rf "$W"
exit $rc
