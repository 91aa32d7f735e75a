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
# (Debian's is, using clang-14), and nvcc objects cannot go through that step.
# The GPU part is to be built as its own shared object by its own rule (see the
# gpu targets at the end) and loaded at run time.

EXTENSION = mop
MODULE_big = mop
DATA = sql/mop--0.1.sql
PGFILEDESC = "mop - in-database deep-learning model selection"

NN_SRCS = $(sort $(wildcard src/nn/*.c) $(wildcard src/search/*.c))
PG_SRCS = $(sort $(wildcard src/pg/*.c))
OBJS = $(NN_SRCS:.c=.o) $(PG_SRCS:.c=.o)

PG_CPPFLAGS = -Isrc/nn -Isrc/search -Isrc/pg
# -O3 for the engine's inner loops (PGXS puts PG_CFLAGS after its own -O2);
# no FMA contraction and no errno from libm, as in the engine's unit tests,
# so the extension computes exactly what the tests check.
PG_CFLAGS = -O3 -ffp-contract=off -fno-math-errno
SHLIB_LINK = -ldl -lm

# pg_regress: tests in sql/, expected output in expected/.
REGRESS = install prepare train aggregate predict errors
REGRESS_OPTS = --inputdir=.


PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The engine must not see PostgreSQL headers' macros by accident: it only
# includes its own header, but it is compiled with the same flags.

.PHONY: gpu
# gpu: placeholder for the CUDA shared object of a later issue; built with
# nvcc into gpu/mop_gpu.so, outside OBJS and the bitcode step.
gpu:
	@if [ -d gpu ] && [ -f gpu/Makefile ]; then $(MAKE) -C gpu; else echo "no gpu/ sources yet"; fi
