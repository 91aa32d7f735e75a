#!/bin/bash
# demo.sh -- mop on Fashion-MNIST, from a fresh Debian 12 machine.
#
#   bash scripts/demo.sh [epochs]
#
# Installs the Debian packages (scripts/setup.sh), builds and installs the
# extension, starts a throwaway PostgreSQL cluster with pg_virtualenv, loads
# Fashion-MNIST (60,000 training and 10,000 test images) into tables, packs
# the training table with mop_prepare, trains a small MLP with mop_train and
# prints its validation and test accuracy.  A few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS=${1:-5}

if [ -z "${MOP_DEMO_INSIDE:-}" ]; then
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO="sudo"
	bash scripts/setup.sh
	echo "== build and install"
	make -s -j"$(nproc)"
	$SUDO make -s install
	PGMAJOR=$(pg_config --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
	echo "== throwaway cluster (pg_virtualenv)"
	exec pg_virtualenv -v "$PGMAJOR" env MOP_DEMO_INSIDE=1 bash "$0" "$EPOCHS"
fi

PSQL="psql -X -q -v ON_ERROR_STOP=1"
$PSQL <<'SQL'
CREATE EXTENSION mop;
CREATE TABLE fashion_train (label text NOT NULL, pixels real[] NOT NULL);
CREATE TABLE fashion_test (label text NOT NULL, pixels real[] NOT NULL);
SQL
echo "== loading Fashion-MNIST from /usr/share/datasets/fashion-mnist"
time (python3 scripts/load_fashion_mnist.py train | $PSQL -c "COPY fashion_train FROM STDIN")
python3 scripts/load_fashion_mnist.py test | $PSQL -c "COPY fashion_test FROM STDIN"
$PSQL -c "SELECT label, count(*) FROM fashion_train GROUP BY label ORDER BY label"

echo "== mop_prepare: shuffle, standardise, pack into 2 partitions"
$PSQL <<'SQL'
\timing on
SELECT * FROM mop_prepare('fashion_train', 'label', ARRAY['pixels'], 'fashion',
                          partitions => 2, validation => 0.1, shape => ARRAY[28, 28, 1], seed => 1);
SQL

echo "== mop_train: MLP 784-128-10, Adam, $EPOCHS epochs"
$PSQL -v epochs="$EPOCHS" <<'SQL'
\timing on
SELECT mop_train('fashion',
  '{"model": {"layers": [{"type": "dense", "units": 128, "activation": "relu"},
                         {"type": "dense", "units": 10}]},
    "optimizer": "adam", "learning_rate": 0.001, "batch_size": 128, "seed": 1}',
  epochs => :epochs) AS model_id \gset
\timing off
SELECT epoch, round(train_loss::numeric, 4) AS train_loss, round(train_metric::numeric, 4) AS train_acc,
       round(valid_loss::numeric, 4) AS valid_loss, round(valid_metric::numeric, 4) AS valid_accuracy,
       round(seconds::numeric, 1) AS seconds
  FROM mop.epochs WHERE model_id = :model_id ORDER BY epoch;
SELECT 'best validation accuracy: ' || round(best_valid_metric::numeric, 4) || ' (epoch ' || best_epoch || ')' AS result
  FROM mop.models WHERE id = :model_id;
SELECT 'test accuracy (10,000 images): ' || round(metric::numeric, 4) AS result
  FROM mop_evaluate(:model_id, 'fashion_test');
SELECT label AS truth, mop_predict(:model_id, pixels::float8[]) AS predicted
  FROM fashion_test LIMIT 5;
SQL
