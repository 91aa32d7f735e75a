#!/bin/bash
# predict_table_bench.sh -- mop_predict_table against per-row mop_predict,
# in one throwaway cluster (pg_virtualenv, mop installed):
#   table  SELECT mop_predict_table(model, 'big', 'out')
#   query  CREATE TABLE out AS SELECT id, mop_predict(model, v) FROM big
#          (one SQL call per row, inside one query)
#   client one query per row from a client (pgbench, one connection,
#          SELECT mop_predict(model, v) FROM big WHERE id = :id)
#   torch  what a user does today: psycopg2 reads the table in batches,
#          PyTorch (one thread) runs the same network (mop_export's), COPY
#          writes the predictions into a new table (predict_table_torch.py;
#          TORCH_PY, default /usr/bin/python3 with Debian's python3-torch)
# alternating, ROUNDS times; prints RESULT lines with rows/s.
#   pg_virtualenv -t -v 15 bash test/bench/predict_table_bench.sh
set -eu
ROWS=${ROWS:-100000}
ROUNDS=${ROUNDS:-3}
CLIENT_ROWS=${CLIENT_ROWS:-5000}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
P="psql -X -q -At -v ON_ERROR_STOP=1"
$P <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS mop;
DROP TABLE IF EXISTS big;
CREATE TABLE big AS
SELECT i AS id, (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::float8 FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, $ROWS) i;
CREATE UNIQUE INDEX ON big (id);
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], 'bigds', partitions => 1);
SQL
M=$($P -c "SET client_min_messages = warning; SELECT mop_train('bigds', '{\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 256, \"activation\": \"relu\"}, {\"type\": \"dense\", \"units\": 10}]}, \"seed\": 1}', 1)")
echo "MACHINE $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(psql -XAtc 'SELECT version()' | cut -d, -f1), $(date -u +%FT%TZ)"
echo "SETUP rows=$ROWS features=64 model=64-256-10 mlp model_id=$M"
printf '\\set id random(1, %d)\nSELECT mop_predict(%s, v) FROM big WHERE id = :id;\n' "$ROWS" "$M" >/tmp/mop_pt_client.sql
for r in $(seq "$ROUNDS"); do
	$P -c "DROP TABLE IF EXISTS out_t, out_q, out_p"
	t0=$(date +%s.%N)
	$P -c "SELECT mop_predict_table($M, 'big', 'out_t', id_column => 'id')" >/dev/null
	t1=$(date +%s.%N)
	echo "RESULT way=table round=$r rows=$ROWS seconds=$(echo "$t1 - $t0" | bc) rows_per_s=$(echo "$ROWS / ($t1 - $t0)" | bc)"
	t0=$(date +%s.%N)
	$P -c "CREATE TABLE out_q AS SELECT id, mop_predict($M, v) AS prediction FROM big" >/dev/null
	t1=$(date +%s.%N)
	echo "RESULT way=query round=$r rows=$ROWS seconds=$(echo "$t1 - $t0" | bc) rows_per_s=$(echo "$ROWS / ($t1 - $t0)" | bc)"
	tps=$(pgbench -n -c 1 -t "$CLIENT_ROWS" -f /tmp/mop_pt_client.sql 2>/dev/null | awk '/^tps/ {print int($3)}')
	echo "RESULT way=client round=$r rows=$CLIENT_ROWS rows_per_s=$tps"
	out=$("$TORCH_PY" "$HERE/predict_table_torch.py" "$M" big out_p)
	secs=${out##*seconds=}
	echo "RESULT way=torch round=$r rows=$ROWS seconds=$secs rows_per_s=$(echo "$ROWS / $secs" | bc) torch=$("$TORCH_PY" -c 'import torch; print(torch.__version__)')"
done
$P -c "SELECT count(*) FILTER (WHERE t.prediction = p.prediction) || ' of ' || count(*) FROM out_t t JOIN out_p p USING (id)" | sed 's/^/CHECK torch_same_label=/'
$P -c "SELECT count(*) = $ROWS AND count(*) FILTER (WHERE t.prediction = q.prediction) = $ROWS FROM out_t t JOIN out_q q USING (id)" | sed 's/^/CHECK same_predictions=/'
