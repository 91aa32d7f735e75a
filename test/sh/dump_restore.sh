#!/bin/bash
# dump_restore.sh -- the mop catalog is user data: pg_dump / pg_restore keep
# datasets, buffers and models, and identities continue after the restore.
# Runs inside a pg_virtualenv cluster with mop installed.
set -u
export PGOPTIONS="-c client_min_messages=warning"
PSQL="psql -X -q -At -v ON_ERROR_STOP=1"
SRC=mop_dump_src
DST=mop_dump_dst
DUMP=$(mktemp)
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $SRC" -c "DROP DATABASE IF EXISTS $DST" \
	-c "CREATE DATABASE $SRC" -c "CREATE DATABASE $DST"
$PSQL -d $SRC >/dev/null <<'SQL'
CREATE EXTENSION mop;
CREATE TABLE t AS SELECT (i % 7)::float8 AS f, (i % 7 > 3) AS label FROM generate_series(1, 200) i;
SELECT dataset_id FROM mop_prepare('t', 'label', partitions => 2);
SELECT mop_train('t', '{"model": [{"type": "dense", "units": 4, "activation": "relu"}, {"type": "dense", "units": 1}], "learning_rate": 0.05, "seed": 1}', 3);
SQL
[ $? -eq 0 ] || { echo "not ok dump: setup failed"; exit 1; }
before=$($PSQL -d $SRC -c "SELECT md5(string_agg(md5(x), '' ORDER BY split, partition, buffer_no)) FROM mop.buffers")
model_before=$($PSQL -d $SRC -c "SELECT md5(state) FROM mop.models WHERE id = 1")
pred_before=$($PSQL -d $SRC -c "SELECT mop_predict(1, ARRAY[6.0]) || mop_predict(1, ARRAY[0.0])")
pg_dump -Fc -f "$DUMP" $SRC && pg_restore -d $DST "$DUMP"
after=$($PSQL -d $DST -c "SELECT md5(string_agg(md5(x), '' ORDER BY split, partition, buffer_no)) FROM mop.buffers")
model_after=$($PSQL -d $DST -c "SELECT md5(state) FROM mop.models WHERE id = 1")
pred_after=$($PSQL -d $DST -c "SELECT mop_predict(1, ARRAY[6.0]) || mop_predict(1, ARRAY[0.0])")
if [ -n "$before" ] && [ "$before" = "$after" ] && [ "$model_before" = "$model_after" ] && [ "$pred_before" = "$pred_after" ]; then
	echo "ok dump: buffers, model state and predictions survive pg_dump/pg_restore"
else
	echo "not ok dump: buffers $before/$after, model $model_before/$model_after, predictions $pred_before/$pred_after"
	exit 1
fi
next=$($PSQL -d $DST -c "SELECT mop_train('t', '{\"model\": [{\"type\": \"dense\", \"units\": 1}], \"seed\": 1}', 1)")
if [ "$next" = "2" ]; then
	echo "ok dump: identities continue after the restore"
else
	echo "not ok dump: new model id after restore is '$next', expected 2"
	exit 1
fi
$PSQL -d postgres -c "DROP DATABASE $SRC" -c "DROP DATABASE $DST"
rm -f "$DUMP"
