#!/bin/bash
# run.sh -- GPU tests, runnable without PostgreSQL (here or on a lent GPU
# machine: bash test/gpu/run.sh).  Prints "ok ..." / "not ok ..." lines, or
# one "skip ..." line when the CUDA part was not built (no nvcc) or no GPU is
# usable; exits 0 unless something failed.
#
# What exists so far is device discovery through the lazily loaded
# gpu/mop_gpu.so; the CUDA training engine and its CPU-parity tests are
# not written yet (see docs/gpu.md).
set -u
cd "$(dirname "$0")/../.."
if [ ! -f gpu/mop_gpu.so ]; then
	echo "skip gpu: gpu/mop_gpu.so was not built (no nvcc on this machine)"
	exit 0
fi
cc -O2 -Wall -o test/gpu/probe test/gpu/probe.c -ldl || { echo "not ok gpu: probe did not build"; exit 1; }
test/gpu/probe gpu/mop_gpu.so
rc=$?
[ $rc -eq 77 ] && exit 0
exit $rc
