#!/bin/bash
# run_gpu_bench.sh -- the GPU benchmarks, on a machine with a GPU, CUDA,
# OpenBLAS and PyTorch (CUDA); no PostgreSQL needed.  Build mop first
# (make, for gpu/mop_gpu.so), then:
#
#   bash test/bench/run_gpu_bench.sh [OUTDIR]
#
# 1. per-epoch throughput of the Fashion-MNIST MLP and CNN (batch 128,
#    Adam) on mop's GPU engine and on PyTorch CUDA, alternating runs;
# 2. the 16-configuration grid: one model at a time, 16 at once, and as
#    four gangs (one per batch size) one after another and at once,
#    alternating, with nvidia-smi sampling GPU utilisation every 100 ms;
# 3. cuBLAS SGEMM on the models' GEMM shapes against the FP32 peak.
# Every line of interest starts with RESULT, UTIL or GEMM (OUTDIR/*.txt);
# docs/benchmarks.md reports their medians.
# Environment: ROWS (training rows per epoch, default 30000), REPS (3),
# ROUNDS (alternations, 2), FMNIST_DIR (the idx .gz files).
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/mop-gpu-bench}
ROWS=${ROWS:-30000}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-2}
DATA=test/bench/.cache
mkdir -p "$OUT"
python3 test/bench/fmnist_convert.py "$DATA" || exit 1
CFLAGS="-O2 -std=gnu11 -fno-math-errno -ffp-contract=off -Isrc/nn -Igpu"
cc $CFLAGS -o test/gpu/bench test/bench/gpu_bench.c gpu/loader.c src/nn/*.c -ldl -lm -lpthread || exit 1
nvcc -O3 -o test/bench/gpu_gemm test/bench/gpu_gemm.cu -lcublas || exit 1
{
	date -u +"MACHINE date=%FT%TZ"
	nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
	echo "MACHINE cpus=$(nproc) torch=$(python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())')"
	nvcc --version | tail -1
} | tee "$OUT/machine.txt"

for round in $(seq "$ROUNDS"); do
	for model in mlp cnn; do
		test/gpu/bench step --model $model --rows "$ROWS" --reps "$REPS"
		MOP_GPU_NO_GRAPHS=1 test/gpu/bench step --model $model --rows "$ROWS" --reps "$REPS"
		python3 test/bench/bench_torch_cuda.py step --model $model --rows "$ROWS" --reps "$REPS" --precision fp32
		[ $model = cnn ] && python3 test/bench/bench_torch_cuda.py step --model $model --rows "$ROWS" --reps "$REPS" --precision default
	done
done 2>&1 | tee "$OUT/step.txt"

# the grid four ways, alternating: one model at a time; 16 models at once
# (one stream each); the four gangs (one per batch size) one after another;
# the four gangs at once.  Every model visits the rows in its own order.
for round in $(seq "$ROUNDS"); do
	for way in "1 0" "16 0" "1 1" "4 1"; do
		set -- $way
		tag="t$1_g$2_r${round}"
		nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$OUT/util_$tag.txt" &
		smi=$!
		# two repetitions in one process: the second finds its streams and
		# cuBLAS handles made, as a worker does after its first sub-epoch
		test/gpu/bench grid --model mlp --rows "$ROWS" --reps 2 --threads "$1" --gangs "$2" --shuffle 1
		kill $smi
		echo "UTIL threads=$1 gangs=$2 round=$round mean_util=$(awk '{s+=$1; n++} END {if (n) printf "%.0f", s/n}' "$OUT/util_$tag.txt") samples=$(wc -l <"$OUT/util_$tag.txt")"
	done
	python3 test/bench/bench_torch_cuda.py grid --model mlp --rows "$ROWS" --reps 1 --precision fp32
done 2>&1 | tee "$OUT/grid.txt"

test/bench/gpu_gemm "$(nvidia-smi --query-gpu=clocks.max.sm --format=csv,noheader,nounits | head -1)" 2>&1 | tee "$OUT/gemm.txt"
