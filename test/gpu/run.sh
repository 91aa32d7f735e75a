#!/bin/bash
# run.sh -- GPU tests, runnable without PostgreSQL (here or on a lent GPU
# machine: make && bash test/gpu/run.sh).  Prints "ok ..." / "not ok ..."
# lines, or "skip ..." lines when the CUDA part was not built (no nvcc) or
# no GPU is usable; exits 0 unless something failed.
#
#   probe   opens gpu/mop_gpu.so as mop.so does (ABI and engine layout
#           checked) and lists the devices;
#   parity  the GPU engine against the CPU engine (test/gpu/parity.c).
set -u
cd "$(dirname "$0")/../.."
if [ ! -f gpu/mop_gpu.so ]; then
	echo "skip gpu: gpu/mop_gpu.so was not built (no nvcc on this machine)"
	exit 0
fi
CFLAGS="-O2 -g -std=gnu11 -Wall -Wno-unused-parameter -fno-math-errno -ffp-contract=off -Isrc/nn -Igpu"
cc $CFLAGS -o test/gpu/probe test/gpu/probe.c gpu/loader.c -ldl ||
	{ echo "not ok gpu: probe did not build"; exit 1; }
cc $CFLAGS -o test/gpu/parity test/gpu/parity.c gpu/loader.c src/nn/*.c -ldl -lm -lpthread ||
	{ echo "not ok gpu: parity did not build"; exit 1; }
test/gpu/probe gpu/mop_gpu.so
rc=$?
if [ $rc -eq 77 ]; then
	echo "skip gpu parity: no usable GPU, the parity tests did not run"
	exit 0
fi
[ $rc -ne 0 ] && exit $rc
test/gpu/parity gpu/mop_gpu.so
