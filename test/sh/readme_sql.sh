#!/bin/bash
# readme_sql.sh -- the "taste of the SQL" in README.md runs exactly as
# written: the sql block is taken from README.md and run by psql from the
# repository's root in a fresh database; then its results are checked (the
# prediction, the holdout accuracy, the grid's four models).
# Runs inside a pg_virtualenv cluster with mop installed.
set -u
cd "$(dirname "$0")/../.."
export PGOPTIONS="-c client_min_messages=warning"
PSQL="psql -X -q -At -v ON_ERROR_STOP=1"
DB=mop_readme
SQL=$(mktemp)
OUT=$(mktemp)
awk '/^## A taste of the SQL/ { in_section = 1 }
     in_section && /^```sql$/ { in_block = 1; next }
     in_block && /^```$/ { exit }
     in_block { print }' README.md >"$SQL"
if [ "$(grep -c . "$SQL")" -lt 10 ]; then
	echo "not ok readme: no sql block found under '## A taste of the SQL' in README.md"
	exit 1
fi
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
if ! $PSQL -d $DB -f "$SQL" >"$OUT" 2>&1; then
	echo "not ok readme: the taste of the SQL in README.md fails as written:"
	sed 's/^/#   /' "$OUT"
	exit 1
fi
echo "ok readme: the taste of the SQL in README.md runs as written ($(grep -c . "$SQL") lines)"
rc=0
pred=$($PSQL -d $DB -c "SELECT mop_predict(1, ARRAY[5.1, 3.5, 1.4, 0.2])")
if [ "$pred" = "setosa" ]; then
	echo "ok readme: mop_predict says setosa, as the comment says"
else
	echo "not ok readme: mop_predict says '$pred', the README says setosa"
	rc=1
fi
acc=$($PSQL -d $DB -c "SELECT metric >= 0.85 AND rows = 30 FROM mop_evaluate(1, 'iris_holdout')")
if [ "$acc" = "t" ]; then
	echo "ok readme: the model classifies the 30 holdout flowers with accuracy >= 0.85"
else
	echo "not ok readme: holdout evaluation: $($PSQL -d $DB -c "SELECT * FROM mop_evaluate(1, 'iris_holdout')")"
	rc=1
fi
grid=$($PSQL -d $DB -c "SELECT count(*) FILTER (WHERE status = 'done') || '/' || count(*) FROM mop.models WHERE run_id = 2")
best=$($PSQL -d $DB -c "SELECT count(*) FROM mop.best WHERE run_id = 2")
gantt=$($PSQL -d $DB -c "SELECT left(mop_plot_gantt(2), 4)")
if [ "$grid" = "4/4" ] && [ "$best" = "1" ] && [ "$gantt" = "<svg" ]; then
	echo "ok readme: the grid search is run 2 with four models done, a best model and a gantt chart"
else
	echo "not ok readme: grid run 2: models done $grid, best rows $best, gantt '$gantt'"
	rc=1
fi
$PSQL -d postgres -c "DROP DATABASE $DB"
rm -f "$SQL" "$OUT"
exit $rc
