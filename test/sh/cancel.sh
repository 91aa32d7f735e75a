#!/bin/bash
# cancel.sh -- pg_cancel_backend stops a long mop_train promptly and leaves
# nothing behind.  Runs inside a pg_virtualenv cluster (PG* variables set)
# with mop installed.  Prints "ok ..." or "not ok ..." lines.
set -u
export PGOPTIONS="-c client_min_messages=warning"
PSQL="psql -X -q -v ON_ERROR_STOP=1"
DB=mop_cancel_test
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
$PSQL -d $DB >/dev/null <<'SQL'
CREATE EXTENSION mop;
CREATE TABLE big AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 5000) i;
SELECT dataset_name FROM mop_prepare('big', 'label', ARRAY['v'], partitions => 2);
SQL
[ $? -eq 0 ] || { echo "not ok cancel: setup failed"; exit 1; }

# a training run far longer than the test
OUT=$(mktemp)
$PSQL -d $DB -c "SET application_name = 'mop_cancel_victim'" \
	-c "SELECT mop_train('big', '{\"model\": [{\"type\": \"dense\", \"units\": 256, \"activation\": \"relu\"}, {\"type\": \"dense\", \"units\": 10}], \"batch_size\": 16}', 100000)" \
	>"$OUT" 2>&1 &
VICTIM=$!

# wait until it is training, then cancel it
for _ in $(seq 1 100); do
	n=$($PSQL -d $DB -At -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mop_cancel_victim' AND query LIKE '%mop_train%' AND state = 'active'")
	[ "$n" = "1" ] && break
	sleep 0.1
done
sleep 1
t0=$(date +%s.%N)
$PSQL -d $DB -At -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'mop_cancel_victim'" >/dev/null
# generous bound: a cancel must land within one minibatch, far below this
for _ in $(seq 1 300); do
	kill -0 $VICTIM 2>/dev/null || break
	sleep 0.1
done
if kill -0 $VICTIM 2>/dev/null; then
	echo "not ok cancel: mop_train still running 30 s after pg_cancel_backend"
	kill $VICTIM
	exit 1
fi
t1=$(date +%s.%N)
wait $VICTIM
if grep -q "canceling statement due to user request" "$OUT"; then
	echo "ok cancel: mop_train cancelled ($(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s after pg_cancel_backend)"
else
	echo "not ok cancel: unexpected output:"
	cat "$OUT"
	exit 1
fi
left=$($PSQL -d $DB -At -c "SELECT (SELECT count(*) FROM mop.models) + (SELECT count(*) FROM mop.runs) + (SELECT count(*) FROM mop.epochs) + (SELECT count(*) FROM mop.hops)")
if [ "$left" = "0" ]; then
	echo "ok cancel: nothing half-written"
else
	echo "not ok cancel: $left catalog rows left behind"
	exit 1
fi
$PSQL -d postgres -c "DROP DATABASE $DB"
rm -f "$OUT"
