#!/bin/bash
# run_all.sh -- the one command that runs every test of mop.
#
#   bash test/run_all.sh
#
# 1. builds the extension (engine + glue);
# 2. runs the engine's unit tests (make -C test/unit check), the engine
#    fuzzer again under AddressSanitizer and UBSan (make -C test/unit
#    fuzz-san) and the GPU tests (test/gpu/run.sh: they say "skip" where
#    no GPU is usable);
# 3. installs the extension (needs root, or sudo) and runs the pg_regress
#    suite (test/sql/*.sql against test/expected/*.out) and then the
#    isolation tests (isolationtester, test/specs/*.spec against
#    test/expected/*.out; each prints "test ... ok" like pg_regress, even if
#    pg_regress failed)
#    inside a throwaway cluster made by Debian's pg_virtualenv
#    (regression.diffs and output_iso/regression.diffs are printed on
#    failure);
# 4. runs the shell tests in test/sh/ (e.g. pg_cancel_backend) in another
#    throwaway cluster; they print "ok ..." / "not ok ..." lines, and
#    "skip ..." for what this machine cannot run (counted as skipped);
# 5. runs the TAP tests in test/tap/ (PostgreSQL::Test::Cluster; they make
#    their own servers to crash, restart and preload);
# and prints, last, one line "N passed, N failed, N skipped" summing all
# suites (unit, regression and shell tests counted one by one; a build or
# install failure counts as one failure; the GPU tests' "skip ..." lines
# count as skipped, never as passed).  Exits non-zero if anything failed.
set -u
cd "$(dirname "$0")/.."

PASSED=0
FAILED=0
SKIPPED=0
LOG=$(mktemp -d /tmp/mop-test.XXXXXX)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
PG_CONFIG=${PG_CONFIG:-pg_config}
PGMAJOR=$($PG_CONFIG --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
JOBS=$(nproc 2>/dev/null || echo 2)

# Print the summary line and exit.
finish() {
	echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
	[ "$FAILED" -eq 0 ]
	exit $?
}

echo "== build"
if ! make -s -j"$JOBS" PG_CONFIG="$PG_CONFIG" >"$LOG/build.log" 2>&1; then
	cat "$LOG/build.log"
	echo "build failed"
	FAILED=$((FAILED + 1))
	finish
fi
grep -E "warning:" "$LOG/build.log" || true

echo "== engine unit tests (make -C test/unit check)"
if [ -f test/unit/Makefile ]; then
	make -C test/unit check >"$LOG/unit.log" 2>&1
	rc=$?
	tail -n 20 "$LOG/unit.log"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$LOG/unit.log" | tail -n 1)
	if [ -n "$line" ]; then
		p=${line%% passed*}
		f=${line#*, }
		f=${f%% failed*}
		PASSED=$((PASSED + p))
		FAILED=$((FAILED + f))
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
			FAILED=$((FAILED + 1))
		fi
	elif [ "$rc" -eq 0 ]; then
		PASSED=$((PASSED + 1))
	else
		cat "$LOG/unit.log"
		FAILED=$((FAILED + 1))
	fi
else
	echo "(no test/unit)"
fi

echo "== engine fuzzer under AddressSanitizer and UBSan (make -C test/unit fuzz-san)"
if [ -f test/unit/test_fuzz.c ]; then
	make -C test/unit fuzz-san >"$LOG/fuzz-san.log" 2>&1
	rc=$?
	grep -E '^(ok|FAIL) |^  fuzz_' "$LOG/fuzz-san.log"
	ok=$(grep -cE '^ok ' "$LOG/fuzz-san.log")
	bad=$(grep -cE '^FAIL ' "$LOG/fuzz-san.log")
	PASSED=$((PASSED + ok))
	FAILED=$((FAILED + bad))
	if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
		tail -n 40 "$LOG/fuzz-san.log"
		FAILED=$((FAILED + 1))
	fi
fi

echo "== GPU tests (test/gpu/run.sh; skipped where no GPU is usable)"
bash test/gpu/run.sh >"$LOG/gpu.log" 2>&1
rc=$?
cat "$LOG/gpu.log"
ok=$(grep -cE '^ok ' "$LOG/gpu.log")
bad=$(grep -cE '^not ok ' "$LOG/gpu.log")
skip=$(grep -cE '^skip ' "$LOG/gpu.log")
PASSED=$((PASSED + ok))
FAILED=$((FAILED + bad))
SKIPPED=$((SKIPPED + skip))
[ "$rc" -ne 0 ] && [ "$bad" -eq 0 ] && FAILED=$((FAILED + 1))

echo "== install"
if ! $SUDO make -s install PG_CONFIG="$PG_CONFIG" >"$LOG/install.log" 2>&1; then
	cat "$LOG/install.log"
	echo "install failed"
	FAILED=$((FAILED + 1))
	finish
fi

echo "== regression and isolation tests (pg_regress, pg_isolation_regress in a pg_virtualenv cluster, PostgreSQL $PGMAJOR)"
rm -rf regression.diffs regression.out output_iso
# two make runs, so that a failing pg_regress does not skip the isolation tests
pg_virtualenv -t -v "$PGMAJOR" bash -c 'make installcheck ISOLATION= PG_CONFIG="$1"; r1=$?;
	make installcheck REGRESS= PG_CONFIG="$1"; r2=$?; [ $r1 -eq 0 ] && [ $r2 -eq 0 ]' \
	run_all "$PG_CONFIG" >"$LOG/regress.log" 2>&1
rc=$?
grep -E '^(test|ok|not ok) |tests (passed|failed)|of [0-9]+ tests' "$LOG/regress.log"
ok=$(grep -cE '^test .*\.\.\. ok' "$LOG/regress.log")
bad=$(grep -cE '^test .*\.\.\. FAILED' "$LOG/regress.log")
PASSED=$((PASSED + ok))
FAILED=$((FAILED + bad))
if [ "$rc" -ne 0 ]; then
	if [ -f regression.diffs ] || [ -f output_iso/regression.diffs ]; then
		for d in regression.diffs output_iso/regression.diffs; do
			[ -f "$d" ] && { echo "== $d"; cat "$d"; }
		done
	else
		tail -n 40 "$LOG/regress.log"
	fi
	[ "$bad" -eq 0 ] && FAILED=$((FAILED + 1))
fi

echo "== shell tests (test/sh/*.sh in a pg_virtualenv cluster)"
if ls test/sh/*.sh >/dev/null 2>&1; then
	pg_virtualenv -t -v "$PGMAJOR" bash -c 'rc=0; for t in test/sh/*.sh; do bash "$t" || rc=1; done; exit $rc' \
		>"$LOG/sh.log" 2>&1
	rc=$?
	grep -E '^(ok|not ok|skip) ' "$LOG/sh.log"
	ok=$(grep -cE '^ok ' "$LOG/sh.log")
	bad=$(grep -cE '^not ok ' "$LOG/sh.log")
	skip=$(grep -cE '^skip ' "$LOG/sh.log")
	PASSED=$((PASSED + ok))
	FAILED=$((FAILED + bad))
	SKIPPED=$((SKIPPED + skip))
	if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
		tail -n 40 "$LOG/sh.log"
		FAILED=$((FAILED + 1))
	fi
fi

echo "== TAP tests (test/tap: PostgreSQL::Test::Cluster, own servers: crashes, restarts, preloading)"
if ls test/tap/t/*.pl >/dev/null 2>&1; then
	bash test/tap/run.sh >"$LOG/tap.log" 2>&1
	rc=$?
	grep -E '^(ok|not ok) [0-9]+' "$LOG/tap.log"
	ok=$(grep -E '^ok [0-9]+' "$LOG/tap.log" | grep -vc '# skip')
	skip=$(grep -E '^ok [0-9]+' "$LOG/tap.log" | grep -c '# skip')
	bad=$(grep -cE '^not ok [0-9]+' "$LOG/tap.log")
	PASSED=$((PASSED + ok))
	SKIPPED=$((SKIPPED + skip))
	FAILED=$((FAILED + bad))
	if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
		tail -n 60 "$LOG/tap.log"
		FAILED=$((FAILED + 1))
	fi
fi

finish
