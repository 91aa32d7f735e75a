#!/bin/bash
# metrics_sklearn.sh -- every metric mop computes equals scikit-learn's on
# the same predictions: models trained on scikit-learn's own fixtures
# (breast cancer: binary; wine: 3 classes; diabetes: regression) are
# evaluated by mop_evaluate on a holdout table, and scikit-learn computes
# the same metric from mop_predict_proba's probabilities of those rows
# (precision_score, recall_score, f1_score with average='binary' or
# 'macro', roc_auc_score (one-vs-rest, macro), log_loss, r2_score).
# Tolerance: 1e-9, and 1e-6 for log-loss and R² (mop computes them from
# float32 probabilities and targets).
# Runs inside a pg_virtualenv cluster with mop installed; needs Debian's
# python3-sklearn.
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
export PGOPTIONS="-c client_min_messages=warning"
PSQL="psql -X -q -At -v ON_ERROR_STOP=1"
DB=mop_metrics_sk
W=$(mktemp -d /tmp/mop-metrics.XXXXXX)
if ! $PY -c 'import sklearn' 2>/dev/null; then
	echo "not ok metrics: $PY has no scikit-learn (Debian: python3-sklearn)"
	exit 1
fi
# the fixtures as CSV: id, target, features
$PY - "$W" <<'PY' || exit 1
import sys, csv
from sklearn import datasets
w = sys.argv[1]
for name, load in (("cancer", datasets.load_breast_cancer), ("wine", datasets.load_wine),
                   ("diabetes", datasets.load_diabetes)):
    d = load()
    with open(f"{w}/{name}.csv", "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        for i, (x, y) in enumerate(zip(d.data, d.target)):
            t = "true" if (name == "cancer" and y == 1) else "false" if name == "cancer" else (
                repr(float(y) / 100.0) if name == "diabetes" else str(int(y)))
            out.writerow([i + 1, t] + [repr(float(v)) for v in x])
PY
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" || exit 1
$PSQL -d $DB >/dev/null <<SQL || exit 1
CREATE EXTENSION mop;
CREATE TABLE cancer (id int, y boolean, f float8[]);
CREATE TABLE wine (id int, y int, f float8[]);
CREATE TABLE diabetes (id int, y float8, f float8[]);
SQL
for t in cancer wine diabetes; do
	# the features as one array column
	awk -F, '{ printf "%s\t%s\t{", $1, $2; for (i = 3; i <= NF; i++) printf "%s%s", (i > 3 ? "," : ""), $i; print "}" }' \
		"$W/$t.csv" | $PSQL -d $DB -c "COPY $t FROM STDIN" || exit 1
done
$PSQL -d $DB >/dev/null <<'SQL' || exit 1
CREATE TABLE cancer_h AS SELECT * FROM cancer WHERE id % 3 = 0;
CREATE TABLE wine_h AS SELECT * FROM wine WHERE id % 3 = 0;
CREATE TABLE diabetes_h AS SELECT * FROM diabetes WHERE id % 3 = 0;
CREATE VIEW cancer_t AS SELECT * FROM cancer WHERE id % 3 <> 0;
CREATE VIEW wine_t AS SELECT * FROM wine WHERE id % 3 <> 0;
CREATE VIEW diabetes_t AS SELECT * FROM diabetes WHERE id % 3 <> 0;
SELECT count(*) FROM mop_prepare('cancer_t', 'y', ARRAY['f'], 'cancer', partitions => 2, seed => 1);
SELECT count(*) FROM mop_prepare('wine_t', 'y', ARRAY['f'], 'wine', partitions => 2, seed => 1);
SELECT count(*) FROM mop_prepare('diabetes_t', 'y', ARRAY['f'], 'diabetes', partitions => 2, seed => 1);
CREATE TABLE trained AS
SELECT ds, metric, mop_train(ds, jsonb_build_object(
         'model', jsonb_build_object('layers', jsonb_build_array(
             '{"type": "dense", "units": 16, "activation": "relu"}'::jsonb,
             jsonb_build_object('type', 'dense', 'units', CASE ds WHEN 'wine' THEN 3 ELSE 1 END))),
         'metric', metric, 'learning_rate', 0.01, 'seed', 1), 4) AS m
  FROM (VALUES ('cancer', 'precision'), ('cancer', 'recall'), ('cancer', 'f1'), ('cancer', 'auc'), ('cancer', 'log_loss'),
               ('wine', 'precision'), ('wine', 'recall'), ('wine', 'f1'), ('wine', 'auc'), ('wine', 'log_loss'),
               ('diabetes', 'r2')) v(ds, metric);
SQL
rc=0
while IFS='|' read -r ds metric m; do
	got=$($PSQL -d $DB -c "SELECT metric, rows FROM mop_evaluate($m, '${ds}_h')")
	$PSQL -d $DB -c "COPY (SELECT y::text, mop_predict_proba($m, f) FROM ${ds}_h ORDER BY id) TO STDOUT" >"$W/$m.tsv"
	line=$($PY - "$ds" "$metric" "$W/$m.tsv" "$got" <<'PY'
import sys
import numpy as np
from sklearn import metrics as M
ds, metric, path, got = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
mop, rows = float(got.split("|")[0]), int(got.split("|")[1])
ys, ps = [], []
for line in open(path):
    y, p = line.rstrip("\n").split("\t")
    ys.append(y)
    ps.append([float(v) for v in p.strip("{}").split(",")])
P = np.array(ps)
if ds == "cancer":
    y = np.array([v == "true" for v in ys], dtype=int)
    pred = (P[:, 1] > 0.5).astype(int)
    score = P[:, 1]
    avg = "binary"
elif ds == "wine":
    y = np.array([int(v) for v in ys])
    pred = P.argmax(axis=1)
    score = P
    avg = "macro"
else:
    y = np.array([float(v) for v in ys])
if metric == "precision":
    want = M.precision_score(y, pred, average=avg, zero_division=0)
elif metric == "recall":
    want = M.recall_score(y, pred, average=avg, zero_division=0)
elif metric == "f1":
    want = M.f1_score(y, pred, average=avg, zero_division=0)
elif metric == "auc":
    want = M.roc_auc_score(y, score, multi_class="ovr", average="macro") if ds == "wine" else M.roc_auc_score(y, score)
elif metric == "log_loss":
    want = M.log_loss(y, P, labels=list(range(P.shape[1])))
else:
    want = M.r2_score(y, P[:, 0])
tol = 1e-6 if metric in ("log_loss", "r2") else 1e-9
diff = abs(mop - want)
ok = diff <= tol * max(1.0, abs(want)) and rows == len(ys)
print(f"{'ok' if ok else 'not ok'} metrics: {metric} on {ds} ({rows} rows): mop {mop:.12g}, scikit-learn {want:.12g}, difference {diff:.2g} (tolerance {tol:g})")
PY
)
	echo "$line"
	case "$line" in ok*) ;; *) rc=1 ;; esac
done < <($PSQL -d $DB -c "SELECT ds, metric, m FROM trained ORDER BY ds, metric")
$PSQL -d postgres -c "DROP DATABASE $DB" >/dev/null
rm -rf "$W"
exit $rc
