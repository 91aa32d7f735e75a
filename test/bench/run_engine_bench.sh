#!/bin/bash
# run_engine_bench.sh -- the engine benchmark, run from anywhere:
#   1. builds the engine (src/nn/*.c) with the bench harnesses,
#   2. cross-checks it against PyTorch (test/xcheck/xcheck_torch.py),
#   3. measures the one-core OpenBLAS sgemm peak,
#   4. measures training throughput of mop and PyTorch side by side on
#      Fashion-MNIST, one thread each, alternating repetitions,
#   5. summarises (medians, ratios, GFLOP/s, memory, allocation checks).
# Everything goes to stdout and to test/bench/.cache/engine_bench.log.
#
# Environment knobs: CC (gcc), CFLAGS (-O3 -std=gnu11 -fno-math-errno -ffp-contract=off), MLP_REPS (7),
# CNN_REPS (5), CNN_ROWS (12800 = 100 steps of 128), SKIP_XCHECK=1, PY (the Python with PyTorch: /usr/bin/python3),
# NN_SRC (src/nn: the engine sources to build; point it at a patched copy
# for an A/B comparison),
# TASKSET="taskset -c 1" to pin every run to one core.
# Exit status: non-zero if the cross-check or the allocation check failed.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
CACHE=test/bench/.cache
mkdir -p "$CACHE"
LOG=$CACHE/engine_bench.log
RES=$CACHE/engine_bench.results   # machine-readable lines, written synchronously
: >"$LOG"; : >"$RES"
exec > >(tee -a "$LOG") 2>&1

CC=${CC:-gcc}
NN_SRC=${NN_SRC:-src/nn}
CFLAGS=${CFLAGS:--O3 -std=gnu11 -fno-math-errno -ffp-contract=off}  # as the extension (Makefile PG_CFLAGS)
MLP_REPS=${MLP_REPS:-7}
CNN_REPS=${CNN_REPS:-5}
CNN_ROWS=${CNN_ROWS:-12800}
TASKSET=${TASKSET:-}
PY=${PY:-/usr/bin/python3}   # Debian's python3-torch lives in the system interpreter; PY=venv/bin/python for a PyPI PyTorch
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

echo "# mop engine benchmark  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p')), $(getconf _NPROCESSORS_ONLN) cpus, $(sed -n 's/^cpu MHz[^:]*: *//p' /proc/cpuinfo | head -1) MHz nominal; $(uname -sr)"
echo "cpu flags: $(grep -o -w -E 'avx2|fma|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "compiler: $($CC --version | head -1); CFLAGS: $CFLAGS; link: -ldl -lm"
echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo none) $(git status --porcelain src/nn 2>/dev/null | wc -l) uncommitted src/nn files; engine sources: $NN_SRC"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (a shared machine: other work competes)"
echo "threads: OPENBLAS_NUM_THREADS=1, nn_blas_init(1), torch.set_num_threads(1)${TASKSET:+, pinned: $TASKSET}"

# ---- build -------------------------------------------------------------
$PY test/bench/fmnist_convert.py "$CACHE" || exit 2
set -e
$CC $CFLAGS -I. -o $CACHE/nn_xcheck test/xcheck/nn_xcheck.c "$NN_SRC"/*.c -ldl -lm
$CC $CFLAGS -I. -o $CACHE/bench_engine test/bench/bench_engine.c "$NN_SRC"/*.c -ldl -lm
$CC -O2 -std=gnu11 -o $CACHE/sgemm_peak test/bench/sgemm_peak.c -ldl
set +e

echo
echo "torch: $($PY -c 'import torch; print(torch.__version__)')"
$PY -c 'import torch; print(torch.__config__.show())' | grep -E 'BLAS_INFO|MKL-DNN|CPU capability' | sed 's/, CXX_FLAGS=.*//; s/^/  /'
echo "  torch BLAS library: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"

# ---- cross-check -------------------------------------------------------
XRC=0
if [ "${SKIP_XCHECK:-0}" != 1 ]; then
	echo
	echo "## Cross-check against PyTorch"
	$TASKSET $PY test/xcheck/xcheck_torch.py --bin $CACHE/nn_xcheck --data $CACHE
	XRC=$?
fi

# ---- peak --------------------------------------------------------------
echo
echo "## Throughput"
$TASKSET $CACHE/sgemm_peak 2048 5 | tee -a "$RES"

run_pair() {   # model rows reps warmup
	local model=$1 rows=$2 reps=$3 warm=$4 r
	for r in $(seq 1 "$reps"); do
		# alternate which framework runs first to spread drift evenly
		if [ $((r % 2)) = 1 ]; then
			$TASKSET $CACHE/bench_engine --model "$model" --rows "$rows" --warmup "$warm" --reps 1 --data $CACHE | sed "s/rep=1/rep=$r/"
			$TASKSET $PY test/bench/bench_torch.py --model "$model" --rows "$rows" --warmup "$warm" --reps 1 --data $CACHE $([ "$r" = 1 ] && echo --info) | sed "s/rep=1/rep=$r/"
		else
			$TASKSET $PY test/bench/bench_torch.py --model "$model" --rows "$rows" --warmup "$warm" --reps 1 --data $CACHE | sed "s/rep=1/rep=$r/"
			$TASKSET $CACHE/bench_engine --model "$model" --rows "$rows" --warmup "$warm" --reps 1 --data $CACHE | grep -v -E '^(INFO|MEM)' | sed "s/rep=1/rep=$r/"
		fi
	done
}

run_pair mlp 60000 "$MLP_REPS" 10 | tee -a "$RES"
run_pair lenet "$CNN_ROWS" "$CNN_REPS" 3 | tee -a "$RES"
# for information: the engine with its seeded shuffle on (PyTorch not rerun);
# two epochs: the first feed of a 60000-row buffer grows the shuffle
# permutation once, the second must allocate nothing
$TASKSET $CACHE/bench_engine --model mlp --rows 60000 --warmup 10 --reps 2 --shuffle 1 --data $CACHE | grep '^RESULT' | tee -a "$RES"

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
$PY test/bench/summarize.py "$RES"
SRC=$?
echo
echo "cross-check: $([ $XRC = 0 ] && echo PASS || echo FAIL)"
[ $XRC = 0 ] && [ $SRC = 0 ]
