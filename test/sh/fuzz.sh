#!/bin/bash
# fuzz.sh -- the SQL-level fuzzer: mutated model states and mutated packed
# buffers, as any role that may write mop.models or mop.buffers could store
# them, through every SQL function that reads one.  Runs inside a
# pg_virtualenv cluster (PG* variables set) with mop installed; prints
# "ok ..." / "not ok ..." lines.
#
# Four small models (an MLP, a CNN with pooling and dropout, a regression
# network, a binary classifier) are trained with mop_train; their states
# and buffers are the seeds.  test/fuzz/fuzz_gen.c (the engine fuzzer's
# mutation engine, test/fuzz/fuzz_mut.h) writes the cases: bit flips,
# boundary bytes and field values, NaN/Inf floats, truncations,
# extensions, swapped fields and layers, header fields; most states
# resealed (checksum recomputed) and many repaired to a mutated
# architecture the decoder accepts; buffers with special floats, bad
# labels and sizes off by bytes, part rows and whole rows.
#
# Each state goes through mop.train_agg and mop.eval_agg (over its
# dataset's buffers), mop.average_states (alone and with a valid state)
# and, stored in mop.models, mop_predict, mop_predict (typed),
# mop_predict_proba, mop_evaluate and mop_predict_table; a few go through
# mop_resume, i.e. a background worker.  Each buffer pair goes through
# mop.train_agg and mop.eval_agg as arguments and, stored in mop.buffers
# (out of line, through the buffer cache), through both aggregates over
# the table.  Every call
# runs in its own subtransaction, rolled back afterwards, and must end in
# success or an ERROR with an expected SQLSTATE (22xxx, XX001, 54000);
# never an internal error, an out-of-memory error, a timeout or a lost
# connection.  The server must be up afterwards and the seeds intact.
#
# Environment:
#   MOP_FUZZ_SEED        seed (default 1; "random": a fresh one); printed
#   MOP_FUZZ_SQL_STATES  mutated states (default 5000)
#   MOP_FUZZ_SQL_BUFFERS mutated buffer pairs (default 3000)
#   MOP_FUZZ_SQL_RESUME  states through mop_resume's workers (default 4)
#   MOP_FUZZ_KEEP=1      keep the database (mop_fuzz_test: fz_case, fz_result)
# The long run, e.g. from a pg_virtualenv shell with mop installed:
#   MOP_FUZZ_SEED=random MOP_FUZZ_SQL_STATES=30000 MOP_FUZZ_SQL_BUFFERS=20000 \
#     pg_virtualenv -v 15 bash test/sh/fuzz.sh
set -u
cd "$(dirname "$0")/../.."
export PGOPTIONS="-c client_min_messages=warning"
PSQL="psql -X -q -v ON_ERROR_STOP=1"
DB=mop_fuzz_test
SEED=${MOP_FUZZ_SEED:-1}
[ "$SEED" = random ] && SEED=$(( (RANDOM << 30) | (RANDOM << 15) | RANDOM ))
NSTATES=${MOP_FUZZ_SQL_STATES:-5000}
NBUFFERS=${MOP_FUZZ_SQL_BUFFERS:-3000}
NRESUME=${MOP_FUZZ_SQL_RESUME:-4}
BATCH=250
WORK=$(mktemp -d /tmp/mop-fuzz.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
echo "# fuzz: seed $SEED, $NSTATES states, $NBUFFERS buffer pairs (replay: MOP_FUZZ_SEED=$SEED)"

if ! ${CC:-cc} -O2 -std=gnu11 -fno-math-errno -ffp-contract=off -Isrc/nn -o "$WORK/fuzz_gen" \
	test/fuzz/fuzz_gen.c src/nn/*.c -lm -ldl 2>"$WORK/cc.log"; then
	echo "not ok fuzz: could not build test/fuzz/fuzz_gen.c"
	cat "$WORK/cc.log"
	exit 1
fi

$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
$PSQL -d $DB >"$WORK/setup.log" 2>&1 <<'SQL'
CREATE EXTENSION mop;
SET mop.max_model_memory = '256MB';
CREATE TABLE cls AS
SELECT (i % 3)::text AS label, (i % 3) + sin(i) AS a, cos(i * 3) AS b, (i % 7) * 0.1 AS c, sin(i * 5) AS d
  FROM generate_series(1, 120) i;
CREATE TABLE img AS
SELECT (i % 3)::text AS label,
       ARRAY(SELECT ((i % 3) * 0.3 + sin(i * 7 + j))::real FROM generate_series(1, 16) j) AS v
  FROM generate_series(1, 150) i;
CREATE TABLE reg AS
SELECT sin(i) + 0.5 * cos(i * 2) AS y, sin(i) AS a, cos(i * 2) AS b, (i % 5) * 0.2 AS c
  FROM generate_series(1, 100) i;
CREATE TABLE bin AS
SELECT CASE WHEN sin(i) > 0 THEN 'yes' ELSE 'no' END AS flag, sin(i) + 0.1 * cos(i * 9) AS a, cos(i) AS b
  FROM generate_series(1, 100) i;
SELECT count(*) FROM mop_prepare('cls', 'label', partitions => 2, buffer_rows => 16, validation => 0.2, seed => 1);
SELECT count(*) FROM mop_prepare('img', 'label', ARRAY['v'], shape => ARRAY[4, 4, 1], partitions => 1,
                                 buffer_rows => 40, validation => 0.2, seed => 2);
SELECT count(*) FROM mop_prepare('reg', 'y', target_kind => 'regression', partitions => 2, buffer_rows => 16,
                                 validation => 0.2, seed => 3);
SELECT count(*) FROM mop_prepare('bin', 'flag', partitions => 1, buffer_rows => 16, validation => 0.2, seed => 4);
CREATE TABLE fz_seed (ref int PRIMARY KEY, dataset text, model_id bigint, features float8[], holdout text);
INSERT INTO fz_seed VALUES
 (1, 'cls', mop_train('cls', '{"model": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}],
                               "optimizer": "adam", "batch_size": 8, "seed": 1}', 1), '{0.5, 0.1, 0.2, 0.3}', 'cls'),
 (2, 'img', mop_train('img', '{"model": [{"type": "conv2d", "filters": 2, "kernel_size": 3, "padding": "same", "activation": "relu"},
                                         {"type": "maxpool2d", "pool_size": 2}, {"type": "flatten"},
                                         {"type": "dropout", "rate": 0.2}, {"type": "dense", "units": 3}],
                               "optimizer": "sgd", "momentum": 0.9, "batch_size": 8, "seed": 2}', 1),
  ARRAY(SELECT 0.1 * j FROM generate_series(1, 16) j), 'img'),
 (3, 'reg', mop_train('reg', '{"model": [{"type": "dense", "units": 4, "activation": "tanh"}, {"type": "dense", "units": 1}],
                               "optimizer": "rmsprop", "batch_size": 8, "seed": 3}', 1), '{0.1, 0.2, 0.3}', 'reg'),
 (4, 'bin', mop_train('bin', '{"model": [{"type": "dense", "units": 4, "activation": "gelu"}, {"type": "dense", "units": 1}],
                               "loss": "binary_crossentropy", "optimizer": "adamw", "weight_decay": 0.01, "batch_size": 8, "seed": 4}', 1), '{0.3, -0.2}', 'bin');
ALTER TABLE fz_seed ADD dataset_id bigint, ADD state bytea;
UPDATE fz_seed s SET dataset_id = m.dataset_id, state = m.state FROM mop.models m WHERE m.id = s.model_id;
CREATE TABLE fz_case (id int PRIMARY KEY, kind text, ref int, buffer_no int, state bytea, x bytea, y bytea, descr text);
CREATE TABLE fz_result (case_id int, fn text, sqlstate text, msg text, ms float8);

-- one call in its own subtransaction, always rolled back; the outcome is recorded
CREATE FUNCTION fz_call(cid int, fn text, setup text, q text, s bytea, x bytea, y bytea,
                        did bigint, mid bigint, feats float8[], good bytea, bno int)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  st text;
  m text;
  t0 timestamptz := clock_timestamp();
BEGIN
  BEGIN
    IF setup IS NOT NULL THEN
      EXECUTE setup USING s, x, y, did, mid, feats, good, bno;
    END IF;
    EXECUTE q USING s, x, y, did, mid, feats, good, bno;
    RAISE EXCEPTION USING ERRCODE = 'MOPOK';
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT;
  END;
  IF st = 'MOPOK' THEN
    st := '00000';
    m := '';
  END IF;
  INSERT INTO fz_result VALUES (cid, fn, st, m,
    1000 * extract(epoch FROM clock_timestamp() - t0));
END $$;

-- mop_resume of a run: "SQLSTATE: message" (00000 when it worked)
CREATE FUNCTION fz_resume(run bigint) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM * FROM mop_resume(run, workers => 1);
  RETURN '00000: ';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- every function that reads a state or a buffer, for cases lo..hi
CREATE FUNCTION fz_run(lo int, hi int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  c record;
  train_q constant text := 'SELECT (mop.train_agg(%s, b.x, b.y)).status FROM (SELECT x, y FROM mop.buffers '
    'WHERE dataset_id = $4 AND split = ''train'' ORDER BY partition, buffer_no) b';
  eval_q constant text := 'SELECT (mop.eval_agg(%s, b.x, b.y)).rows FROM (SELECT x, y FROM mop.buffers '
    'WHERE dataset_id = $4 AND split = %L ORDER BY partition, buffer_no) b';
  put_state constant text := 'UPDATE mop.models SET state = $1 WHERE id = $5';
  put_buffer constant text := 'UPDATE mop.buffers SET x = $2, y = $3 WHERE dataset_id = $4 '
    'AND split = ''train'' AND partition = 0 AND buffer_no = $8';
BEGIN
  FOR c IN SELECT f.*, s.dataset_id, s.model_id, s.features, s.holdout, s.state AS good
             FROM fz_case f JOIN fz_seed s USING (ref) WHERE f.id BETWEEN lo AND hi ORDER BY f.id
  LOOP
    IF c.kind = 'state' THEN
      PERFORM fz_call(c.id, 'train_agg', NULL, format(train_q, '$1'), c.state, NULL, NULL,
                      c.dataset_id, c.model_id, c.features, c.good, NULL);
      PERFORM fz_call(c.id, 'eval_agg', NULL, format(eval_q, '$1', 'valid'), c.state, NULL, NULL,
                      c.dataset_id, c.model_id, c.features, c.good, NULL);
      PERFORM fz_call(c.id, 'average_states', NULL, 'SELECT length(mop.average_states(ARRAY[$1]))',
                      c.state, NULL, NULL, c.dataset_id, c.model_id, c.features, c.good, NULL);
      PERFORM fz_call(c.id, 'average_states2', NULL, 'SELECT length(mop.average_states(ARRAY[$7, $1]))',
                      c.state, NULL, NULL, c.dataset_id, c.model_id, c.features, c.good, NULL);
      PERFORM fz_call(c.id, 'mop_predict', put_state, 'SELECT mop_predict($5, $6)',
                      c.state, NULL, NULL, c.dataset_id, c.model_id, c.features, c.good, NULL);
      PERFORM fz_call(c.id, 'mop_predict_typed', put_state, 'SELECT mop_predict($5, $6, NULL::text)',
                      c.state, NULL, NULL, c.dataset_id, c.model_id, c.features, c.good, NULL);
      PERFORM fz_call(c.id, 'mop_predict_proba', put_state, 'SELECT mop_predict_proba($5, $6)',
                      c.state, NULL, NULL, c.dataset_id, c.model_id, c.features, c.good, NULL);
      PERFORM fz_call(c.id, 'mop_evaluate', put_state, format('SELECT * FROM mop_evaluate($5, %L)', c.holdout),
                      c.state, NULL, NULL, c.dataset_id, c.model_id, c.features, c.good, NULL);
      PERFORM fz_call(c.id, 'mop_predict_table', put_state,
                      format('SELECT mop_predict_table($5, %L, ''fz_predictions'')', c.holdout),
                      c.state, NULL, NULL, c.dataset_id, c.model_id, c.features, c.good, NULL);
    ELSE
      PERFORM fz_call(c.id, 'train_agg', NULL, 'SELECT (mop.train_agg($7, $2, $3)).status',
                      NULL, c.x, c.y, c.dataset_id, c.model_id, c.features, c.good, c.buffer_no);
      PERFORM fz_call(c.id, 'eval_agg', NULL, 'SELECT (mop.eval_agg($7, $2, $3)).rows',
                      NULL, c.x, c.y, c.dataset_id, c.model_id, c.features, c.good, c.buffer_no);
      PERFORM fz_call(c.id, 'train_agg_table', put_buffer, format(train_q, '$7'),
                      NULL, c.x, c.y, c.dataset_id, c.model_id, c.features, c.good, c.buffer_no);
      PERFORM fz_call(c.id, 'eval_agg_table', put_buffer, format(eval_q, '$7', 'train'),
                      NULL, c.x, c.y, c.dataset_id, c.model_id, c.features, c.good, c.buffer_no);
    END IF;
  END LOOP;
  RETURN (SELECT count(*) FROM fz_result);
END $$;
SQL
if [ $? -ne 0 ]; then
	echo "not ok fuzz: setup failed"
	tail -n 30 "$WORK/setup.log"
	exit 1
fi

# the seeds: every model state, and every training buffer of partition 0
$PSQL -d $DB -At -F $'\t' >"$WORK/seeds.tsv" <<'SQL' || { echo "not ok fuzz: could not export the seeds"; exit 1; }
SELECT 'S', ref, encode(state, 'hex') FROM fz_seed ORDER BY ref;
SELECT 'B', s.ref, b.buffer_no, d.n_features, encode(b.x, 'hex'), encode(b.y, 'hex')
  FROM fz_seed s JOIN mop.buffers b ON b.dataset_id = s.dataset_id JOIN mop.datasets d ON d.id = s.dataset_id
 WHERE b.split = 'train' AND b.partition = 0 ORDER BY s.ref, b.buffer_no;
SQL
if ! "$WORK/fuzz_gen" "$SEED" "$NSTATES" "$NBUFFERS" <"$WORK/seeds.tsv" >"$WORK/cases.tsv"; then
	echo "not ok fuzz: fuzz_gen failed"
	exit 1
fi
$PSQL -d $DB -c "\\copy fz_case FROM '$WORK/cases.tsv'" || { echo "not ok fuzz: could not load the cases"; exit 1; }

# the cases, in batches (a batch has 5 minutes); when a batch fails (a lost
# connection is a crash, a timeout a hang), its cases are run one by one to
# name the culprit
T0=$(date +%s.%N)
TOTAL=$((NSTATES + NBUFFERS))
failed_case=""
run_cases() {
	$PSQL -d $DB -At -c "SET mop.max_model_memory = '256MB'" -c "SET statement_timeout = '$3'" \
		-c "SELECT fz_run($1, $2)" >"$WORK/batch.log" 2>&1
}
for ((lo = 0; lo < TOTAL; lo += BATCH)); do
	hi=$((lo + BATCH - 1))
	run_cases $lo $hi 300s && continue
	cat "$WORK/batch.log"
	for ((i = lo; i <= hi; i++)); do
		for _ in $(seq 1 60); do $PSQL -d $DB -c "SELECT 1" >/dev/null 2>&1 && break; sleep 1; done
		if ! run_cases $i $i 60s; then
			failed_case="$($PSQL -d $DB -At -c "SELECT format('case %s (%s of seed %s): %s', id, kind, ref, descr) FROM fz_case WHERE id = $i" 2>&1): $(tail -n 3 "$WORK/batch.log" | tr '\n' ' ')"
			break
		fi
	done
	[ -n "$failed_case" ] || failed_case="batch $lo..$hi failed, no case alone did"
	break
done
T1=$(date +%s.%N)
SECS=$(awk "BEGIN { printf \"%.1f\", $T1 - $T0 }")
if [ -n "$failed_case" ]; then
	echo "not ok fuzz: a crash, hang or lost connection on $failed_case (MOP_FUZZ_SEED=$SEED)"
	exit 1
fi

# outcomes: success or an expected SQLSTATE; nothing slower than 10 s
OK_STATES="'00000', 'XX001', '54000'"
$PSQL -d $DB -At -F ' ' >"$WORK/summary.txt" <<SQL
SELECT f.kind, count(DISTINCT r.case_id), count(*), count(DISTINCT r.fn),
       count(*) FILTER (WHERE r.sqlstate = '00000'),
       string_agg(DISTINCT r.sqlstate, ',' ORDER BY r.sqlstate)
  FROM fz_result r JOIN fz_case f ON f.id = r.case_id GROUP BY f.kind ORDER BY f.kind;
SQL
BAD=$($PSQL -d $DB -At <<SQL
SELECT count(*) FROM fz_result
 WHERE NOT (sqlstate IN ($OK_STATES) OR sqlstate LIKE '22%') OR ms > 10000;
SQL
)
cat "$WORK/summary.txt" | while read -r kind cases calls fns ok states; do
	echo "# fuzz: $cases $kind cases, $calls calls through $fns functions: $ok succeeded, SQLSTATEs $states"
done
if [ "$BAD" != "0" ]; then
	echo "not ok fuzz: $BAD calls ended in an unexpected SQLSTATE or took over 10 s (MOP_FUZZ_SEED=$SEED):"
	$PSQL -d $DB -At -F ' | ' -c "SELECT r.case_id, r.fn, r.sqlstate, round(r.ms), left(r.msg, 160), f.descr
	  FROM fz_result r JOIN fz_case f ON f.id = r.case_id
	 WHERE NOT (r.sqlstate IN ($OK_STATES) OR r.sqlstate LIKE '22%') OR r.ms > 10000
	 ORDER BY r.case_id LIMIT 30"
	exit 1
fi
DONE=$($PSQL -d $DB -At -c "SELECT count(DISTINCT case_id) FROM fz_result")
if [ "$DONE" != "$TOTAL" ]; then
	echo "not ok fuzz: only $DONE of $TOTAL cases have results"
	exit 1
fi
read -r _ ns calls_s fns_s _ _ < <(grep '^state ' "$WORK/summary.txt")
read -r _ nb calls_b fns_b _ _ < <(grep '^buffer ' "$WORK/summary.txt")
echo "ok fuzz: $ns mutated model states through $fns_s functions ($calls_s calls), each a success or a clean error"
echo "ok fuzz: $nb mutated buffer pairs through $fns_b functions ($calls_b calls), each a success or a clean error ($SECS s in all)"

# a few states through a background worker: mop_resume continues a run
# whose model's checkpoint is the mutated state; the model may fail (the
# run then fails with its error, 38000) or diverge, the server may not
if [ "$NRESUME" -gt 0 ]; then
	declare -A RUN_OF
	resumed=0
	bad_resume=""
	for cid in $($PSQL -d $DB -At -c "SELECT id FROM fz_case WHERE kind = 'state' ORDER BY id LIMIT $NRESUME"); do
		ref=$($PSQL -d $DB -At -c "SELECT ref FROM fz_case WHERE id = $cid")
		if [ -z "${RUN_OF[$ref]:-}" ]; then
			RUN_OF[$ref]=$($PSQL -d $DB -At -c "SELECT DISTINCT r.run_id FROM fz_seed s,
				LATERAL mop_grid_search(s.dataset, (SELECT config FROM mop.models WHERE id = s.model_id),
				                        epochs => 2, workers => 1) r WHERE s.ref = $ref" 2>&1)
		fi
		run=${RUN_OF[$ref]}
		out=$($PSQL -d $DB -At 2>&1 <<SQL
UPDATE mop.runs SET status = 'failed', error = NULL WHERE id = $run;
DELETE FROM mop.hops WHERE run_id = $run AND epoch = 2;
DELETE FROM mop.epochs WHERE model_id IN (SELECT id FROM mop.models WHERE run_id = $run) AND epoch = 2;
UPDATE mop.models SET state = (SELECT state FROM fz_case WHERE id = $cid), status = 'training',
       epochs_done = 1, error = NULL WHERE run_id = $run;
SET mop.max_model_memory = '256MB';
SELECT fz_resume($run);
SELECT status, coalesce(error, '') FROM mop.models WHERE run_id = $run;
SQL
)
		resumed=$((resumed + 1))
		first=${out%%$'\n'*}
		rest=${out#*$'\n'}
		case "$first/$rest" in
			"00000: "*/done\|*|"00000: "*/diverged\|*|"38000: "*/failed\|*|"38000: "*/diverged\|*) ;;
			*) bad_resume="case $cid (run $run): $out"; break ;;
		esac
	done
	if [ -z "$bad_resume" ] && [ "$($PSQL -d $DB -At -c 'SELECT 1' 2>&1)" = "1" ]; then
		echo "ok fuzz: $resumed mutated states resumed by background workers: each model done, diverged or failed with its error, server up"
	else
		echo "not ok fuzz: mop_resume of a mutated state: $bad_resume"
		exit 1
	fi
fi

# the server is up and the seeds are intact (every case was rolled back)
intact=$($PSQL -d $DB -At <<'SQL'
SELECT bool_and(m.state = s.state) AND count(*) = 4 FROM fz_seed s JOIN mop.models m ON m.id = s.model_id;
SELECT mop_predict(model_id, features) IS NOT NULL FROM fz_seed WHERE ref = 1;
SQL
)
if [ "$intact" = $'t\nt' ]; then
	echo "ok fuzz: server up after the pass, seed models intact and predicting"
else
	echo "not ok fuzz: after the pass: $intact"
	exit 1
fi
[ -n "${MOP_FUZZ_KEEP:-}" ] || $PSQL -d postgres -c "DROP DATABASE $DB"
