#!/bin/bash
# xcheck_class_weight.sh -- the engine's class-weighted losses against
# PyTorch: the class-weighted cases of test/xcheck/xcheck_torch.py
# (cross-entropy with weight=... under Adam, and under Nesterov SGD with
# gradient clipping; binary cross-entropy of one output weighted per label),
# 50 minibatches of Fashion-MNIST each; per-step losses and final weights
# must agree within 1e-4 (the script's measures).  The engine is built
# here from src/nn with the extension's floating-point flags.
# Needs /usr/bin/python3 with torch (Debian's python3-torch; PYTHON_TORCH
# names another) and Debian's dataset-fashion-mnist (FMNIST_DIR); says
# "skip" without them.  Needs no server.
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON_TORCH:-/usr/bin/python3}
export FMNIST_DIR=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
CACHE=test/bench/.cache   # ignored by git; the converted rows are kept there
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
	echo "skip xcheck_class_weight: $PY has no torch (Debian: python3-torch)"
	exit 0
fi
if [ ! -f "$FMNIST_DIR/train-images-idx3-ubyte.gz" ]; then
	echo "skip xcheck_class_weight: no Fashion-MNIST in $FMNIST_DIR (Debian: dataset-fashion-mnist)"
	exit 0
fi
W=$(mktemp -d /tmp/mop-xcheck.XXXXXX)
trap 'rm -rf "$W"' EXIT
if ! $PY test/bench/fmnist_convert.py "$CACHE" >"$W/convert.log" 2>&1; then
	echo "not ok xcheck_class_weight: converting Fashion-MNIST failed:"
	sed 's/^/#   /' "$W/convert.log"
	exit 1
fi
if ! ${CC:-gcc} -O2 -std=gnu11 -fno-math-errno -ffp-contract=off -I. -o "$W/nn_xcheck" \
	test/xcheck/nn_xcheck.c src/nn/*.c -ldl -lm 2>"$W/build.log"; then
	echo "not ok xcheck_class_weight: building test/xcheck/nn_xcheck.c failed:"
	sed 's/^/#   /' "$W/build.log"
	exit 1
fi
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $PY test/xcheck/xcheck_torch.py \
	--bin "$W/nn_xcheck" --data "$CACHE" --only class_weight >"$W/out" 2>&1
rc=$?
pass=$(grep -c ' PASS$' "$W/out")
if [ "$rc" -eq 0 ] && [ "$pass" -ge 3 ]; then
	echo "ok xcheck_class_weight: $pass class-weighted cases match PyTorch $($PY -c 'import torch; print(torch.__version__)') within 1e-4"
else
	echo "not ok xcheck_class_weight: the class-weighted cases differ from PyTorch (rc $rc, $pass passed):"
	sed 's/^/#   /' "$W/out"
	exit 1
fi
