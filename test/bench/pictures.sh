#!/bin/bash
# pictures.sh -- the charts shown in README.md and docs/runs.md, from a real
# Fashion-MNIST grid search: run it in a throwaway cluster with mop
# installed, e.g.
#   FMNIST_DIR=/usr/share/datasets/fashion-mnist pg_virtualenv -t -v 15 bash test/bench/pictures.sh
# Writes docs/img/{gantt,curves,history,parallel}.svg, their PNGs
# (rsvg-convert, from Debian's librsvg2-bin), and the run's mop_report page
# in $REPORT (default /tmp/mop-report.html).
set -eu
cd "$(dirname "$0")/../.."
FM=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
ROWS=${ROWS:-12000}
P="psql -X -q -At -v ON_ERROR_STOP=1"
python3 - "$FM" "$ROWS" >/tmp/mop_fm.csv <<'PY'
import gzip, sys
fm, rows = sys.argv[1], int(sys.argv[2])
def idx(p):
    d = gzip.open(p).read()
    nd = d[3]
    dims = [int.from_bytes(d[4 + 4 * i:8 + 4 * i], 'big') for i in range(nd)]
    return d[4 + 4 * nd:], dims
x, dx = idx(f'{fm}/train-images-idx3-ubyte.gz')
y, _ = idx(f'{fm}/train-labels-idx1-ubyte.gz')
n = dx[1] * dx[2]
for r in range(rows):
    px = ','.join(str(v) for v in x[r * n:(r + 1) * n])
    print(f'{y[r]},"{{{px}}}"')
PY
$P <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS mop;
DROP TABLE IF EXISTS fashion;
CREATE TABLE fashion (label int, pixels real[]);
\copy fashion FROM '/tmp/mop_fm.csv' CSV
SELECT dataset_name FROM mop_prepare('fashion', 'label', ARRAY['pixels'], partitions => 4);
SQL
RUN=$($P -c "SET client_min_messages = warning; SELECT DISTINCT run_id FROM mop_grid_search('fashion',
  '{\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 128, \"activation\": \"relu\"}, {\"type\": \"dense\", \"units\": 10}]},
    \"learning_rate\": [0.003, 0.001, 0.0003], \"batch_size\": [32, 128], \"seed\": 1}', epochs => 5, workers => 4)")
$P -c "SELECT mop_plot_gantt($RUN)" >docs/img/gantt.svg
$P -c "SELECT mop_plot_curves($RUN)" >docs/img/curves.svg
$P -c "SELECT mop_plot_history($RUN)" >docs/img/history.svg
$P -c "SELECT mop_plot_parallel($RUN)" >docs/img/parallel.svg
$P -c "SELECT mop_report($RUN)" >"${REPORT:-/tmp/mop-report.html}"
for c in gantt curves history parallel; do
	rsvg-convert docs/img/$c.svg -o docs/img/$c.png
done
echo "run $RUN: docs/img/{gantt,curves,history,parallel}.{svg,png}, ${REPORT:-/tmp/mop-report.html}"
