#!/bin/bash
# charts_browser.sh -- the charts and the report as a browser shows them:
# each of mop_plot_gantt, _curves, _history, _parallel and mop_report is
# rendered by headless Chromium (Debian's chromium) to a PNG; the page must
# load without console errors and the picture must not be blank.  Runs
# inside run_all.sh's pg_virtualenv cluster with mop installed; without
# chromium it prints "skip" lines (counted as skipped, never as passed).
set -u
names="gantt curves history parallel report"
if ! command -v chromium >/dev/null 2>&1; then
	for n in $names; do echo "skip charts: $n in a browser (chromium is not installed)"; done
	exit 0
fi
dir=$(mktemp -d /tmp/mop-charts.XXXXXX)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
P="psql -X -q -At -v ON_ERROR_STOP=1"
export PGOPTIONS="-c client_min_messages=warning"
$P >/dev/null <<'SQL' || { echo "not ok charts: setup"; exit 1; }
CREATE EXTENSION IF NOT EXISTS mop;
DROP TABLE IF EXISTS charts_data;
CREATE TABLE charts_data AS
SELECT (i % 3)::text AS label, (i % 3) + sin(i)::float8 AS a, cos(i * 0.7)::float8 AS b
  FROM generate_series(1, 600) i;
SELECT dataset_name FROM mop_prepare('charts_data', 'label', ARRAY['a', 'b'], 'charts <&> "data"', partitions => 2);
SQL
run=$($P -c "SELECT DISTINCT run_id FROM mop_grid_search('charts <&> \"data\"', '{\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 8, \"activation\": \"relu\"}, {\"type\": \"dense\", \"units\": 3}]}, \"learning_rate\": [0.01, 0.003, 0.001], \"batch_size\": [16, 64]}', epochs => 3, workers => 2)") ||
	{ echo "not ok charts: grid search"; exit 1; }
for n in $names; do
	case $n in
		report) f=$dir/report.html; q="SELECT mop_report($run)" ;;
		*) f=$dir/$n.svg; q="SELECT mop_plot_$n($run)" ;;
	esac
	$P -c "$q" >"$f" || { echo "not ok charts: $n: $q failed"; continue; }
	chmod 644 "$f"
	log=$(timeout 60 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--enable-logging=stderr --v=0 --window-size=1000,2400 --screenshot="$dir/$n.png" "file://$f" 2>&1)
	if echo "$log" | grep -qiE 'CONSOLE|Uncaught|SyntaxError|XML parsing error|error on line'; then
		echo "not ok charts: $n: the browser reported an error: $(echo "$log" | grep -iE 'CONSOLE|Uncaught|error on line' | head -1)"
		continue
	fi
	# non-blank: the decoded picture has many distinct byte values
	distinct=$(python3 - "$dir/$n.png" <<'PY'
import sys, zlib
d = open(sys.argv[1], 'rb').read()
pos, idat = 8, b''
while pos < len(d):
    n = int.from_bytes(d[pos:pos + 4], 'big')
    if d[pos + 4:pos + 8] == b'IDAT':
        idat += d[pos + 8:pos + 8 + n]
    pos += 12 + n
print(len(set(zlib.decompress(idat))) if idat else 0)
PY
)
	if [ "${distinct:-0}" -ge 16 ]; then
		echo "ok charts: $n renders in a browser without errors ($distinct distinct byte values in its picture)"
	else
		echo "not ok charts: $n rendered blank (${distinct:-0} distinct byte values)"
	fi
done
