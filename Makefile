# Makefile -- build the mop extension with PGXS.
#
# The shared library mop.so holds two parts:
#   src/nn/  the training engine, plain C with no PostgreSQL headers;
#   src/pg/  the PostgreSQL glue (SQL-callable functions, aggregates, GUCs).
# The engine opens libopenblas.so.0 itself with dlopen, so we link only
# -ldl -lm and never -lopenblas.
#
# GPU code (gpu/, a later issue) must never be added to OBJS: PGXS emits LLVM
# bitcode for every object in OBJS when the server was built --with-llvm
# (Debian's is, with clang-14, which postgresql-server-dev-15 pulls in), and
# nvcc objects cannot go through that step.  The GPU part is its own shared
# object with its own rule (at the end).

EXTENSION = mop
MODULE_big = mop
DATA = sql/mop--0.1.sql
PGFILEDESC = "mop - in-database deep-learning model selection"

NN_SRCS = $(sort $(wildcard src/nn/*.c) $(wildcard src/search/*.c))
PG_SRCS = $(sort $(wildcard src/pg/*.c))
# gpu/loader.c is plain C (it resolves the GPU library's entry points)
OBJS = $(NN_SRCS:.c=.o) $(PG_SRCS:.c=.o) gpu/loader.o

# src/search headers are named mop_*.h so they never shadow system headers
PG_CPPFLAGS = -Isrc/nn -Isrc/pg -Isrc -Igpu
# -O3 for the engine's inner loops (PGXS puts PG_CFLAGS after its own -O2);
# no FMA contraction and no errno from libm, as in the engine's unit tests,
# so the extension computes exactly what the tests check.
PG_CFLAGS = -O3 -ffp-contract=off -fno-math-errno
SHLIB_LINK = -ldl -lm

# pg_regress: tests in sql/, expected output in expected/.
REGRESS = install prepare train aggregate predict errors search adaptive device hardening
REGRESS_OPTS = --inputdir=.

# the optional GPU object (see the end); pgxs reads EXTRA_CLEAN when included
EXTRA_CLEAN = gpu/mop_gpu.so


PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: rebuild every object when a header
# changes (a stale object with an old struct layout is a silent disaster).
$(OBJS): $(wildcard src/nn/*.h src/pg/*.h src/search/*.h gpu/*.h)

# Optional CUDA part (the GPU issue): gpu/*.cu -> gpu/mop_gpu.so, built by
# nvcc only when both nvcc and CUDA sources exist, installed next to mop.so
# and loaded at run time.  It is deliberately not in OBJS, so PGXS never
# tries to emit LLVM bitcode for it, and a machine without CUDA builds and
# tests everything else unchanged.
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
GPU_SRCS = $(sort $(wildcard gpu/*.cu))
ifneq ($(and $(NVCC),$(GPU_SRCS)),)
GPU_LIB = gpu/mop_gpu.so
CUDA_LIB_DIR = $(abspath $(dir $(NVCC))/../lib64)
# machine code for Ampere and Hopper, PTX for anything from Turing on;
# --fmad=false as the engine's -ffp-contract=off (kernels match the CPU
# reference term for term); the engine's generator (src/nn/rng.c) is
# compiled in, so dropout draws the very numbers the CPU draws.
NVCC_ARCH ?= -gencode arch=compute_75,code=compute_75 -gencode arch=compute_80,code=sm_80 \
	-gencode arch=compute_90,code=sm_90
all: $(GPU_LIB)
$(GPU_LIB): $(GPU_SRCS) gpu/budget.c src/nn/rng.c $(wildcard gpu/*.h) $(wildcard src/nn/*.h)
	$(NVCC) -O3 --fmad=false $(NVCC_ARCH) -Xcompiler -fPIC,-fvisibility=default -shared \
		-Isrc/nn -Igpu -o $@ $(GPU_SRCS) gpu/budget.c src/nn/rng.c \
		-lcublas -Xlinker -Bsymbolic -Xlinker -rpath,$(CUDA_LIB_DIR)
install: install-gpu
.PHONY: install-gpu
install-gpu: $(GPU_LIB)
	$(INSTALL_SHLIB) $(GPU_LIB) '$(DESTDIR)$(pkglibdir)/mop_gpu.so'
endif
