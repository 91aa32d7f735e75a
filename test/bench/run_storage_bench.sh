#!/bin/bash
# run_storage_bench.sh -- checkpoint storage, WAL and hop latency of a run,
# two builds of mop side by side (docs/benchmarks.md, "Checkpoint storage
# during a run").
#
#   bash test/bench/run_storage_bench.sh BASE NEW     # two commits
#
# Each commit is built from a `git archive` copy into $STB_DIR/<variant>
# and runs in its own private cluster (PostgreSQL's defaults, fsync and
# autovacuum on, max_worker_processes = 16), loaded from there through
# dynamic_library_path with the install script run by hand, so that other
# sessions' `make install` cannot change what is measured.  The variants
# alternate: base, new, base, new, ... (STB_REPS pairs of the short run,
# then one pair of the long run).  A run: the grid of test/tap/t/
# 005_checkpoint_storage.pl (4 Adam models of 3.8 MB, 4 partitions of 90 rows,
# 2 workers, blocking mop_grid_search) for STB_EPOCHS epochs, then for
# STB_LONG_EPOCHS; then STB_REPS pairs of a grid of 4 small models (3
# features, 16 hidden units, 2 partitions of 68 rows) for 100 epochs, whose
# sub-epochs take about a millisecond (variant names base-small, new-small).  While it runs, pg_total_relation_size('mop.models') is
# sampled every 0.2 s.  One line per run:
#   variant epochs hops live_MB max_MB end_MB after_vacuum_MB wal_MB_per_hop
#   states_per_hop hop_ms_mean run_s
# (sizes in MB of 2^20 bytes; hop_ms_mean: mean of finished_at - started_at in
# mop.hops, training only; run_s: first sub-epoch's start to the last one's end)
# Knobs: STB_DIR (/tmp/mop-storage-bench), STB_REPS (2), STB_EPOCHS (40),
# STB_LONG_EPOCHS (160).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BASE=$(git rev-parse "${1:?base commit}") || exit 1
NEW=$(git rev-parse "${2:?new commit}") || exit 1
STB_DIR=${STB_DIR:-/tmp/mop-storage-bench}
STB_REPS=${STB_REPS:-2}
STB_EPOCHS=${STB_EPOCHS:-40}
STB_LONG_EPOCHS=${STB_LONG_EPOCHS:-160}
PGBIN=$(pg_config --bindir)
AS_PG=""
[ "$(id -u)" -eq 0 ] && AS_PG="runuser -u postgres --"
export PGUSER=$([ "$(id -u)" -eq 0 ] && echo postgres || id -un)
export OPENBLAS_NUM_THREADS=1 PGOPTIONS="-c client_min_messages=warning"
PSQL="psql -X -q -v ON_ERROR_STOP=1 -At"

build() {	# variant commit
	local d=$STB_DIR/$1
	rm -rf "$d" && mkdir -p "$d/src" "$d/lib" || return 1
	git archive "$2" | tar -x -C "$d/src" || return 1
	make -s -C "$d/src" NVCC= -j2 >"$d/build.log" 2>&1 || { tail -20 "$d/build.log"; return 1; }
	cp "$d/src/mop.so" "$d/lib/mop.so"
	echo "$2" >"$d/commit"
	[ "$(id -u)" -eq 0 ] && chown -R postgres "$d"
	local port=$((30000 + RANDOM % 20000))
	$AS_PG "$PGBIN/initdb" -D "$d/data" -A trust -U "$PGUSER" >"$d/initdb.log" 2>&1 || { cat "$d/initdb.log"; return 1; }
	cat >>"$d/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$d'
max_worker_processes = 16
dynamic_library_path = '$d/lib:\$libdir'
CONF
	echo "$port" >"$d/port"
}

up() { $AS_PG "$PGBIN/pg_ctl" -D "$STB_DIR/$1/data" -l "$STB_DIR/$1/server.log" -w -t 60 start >/dev/null; }
down() { $AS_PG "$PGBIN/pg_ctl" -D "$STB_DIR/$1/data" -m fast -w -t 60 stop >/dev/null; }

run_one() {	# variant epochs [tiny]
	local v=$1 epochs=$2 d=$STB_DIR/$1 tiny=${3:-}
	export PGHOST=$d PGPORT=$(cat "$d/port") PGDATABASE=postgres
	up "$v" || return 1
	$PSQL -c "DROP DATABASE IF EXISTS bench" -c "CREATE DATABASE bench" >/dev/null || return 1
	export PGDATABASE=bench
	# the install script by hand (not CREATE EXTENSION: the shared $libdir and
	# share directory belong to whoever ran make install last)
	sed -e '/^\\echo/d' -e '/pg_extension_config_dump/d' -e 's/@extschema@/public/g' \
		-e "s/'MODULE_PATHNAME'/'mop'/g" "$d/src/sql/mop--0.2.sql" | $PSQL -f - >/dev/null 2>&1 || return 1
	local space
	if [ -z "$tiny" ]; then
		$PSQL >/dev/null <<'SQL' || return 1
CREATE TABLE t AS
SELECT (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 400) i;
SELECT dataset_name FROM mop_prepare('t', 'label', ARRAY['v'], partitions => 4, validation => 0.1);
SQL
		space='{"model": [{"type": "dense", "units": 1024, "activation": "relu"}, {"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}], "optimizer": "adam", "learning_rate": [0.001, 0.0001], "batch_size": [64, 128]}'
	else
		# small models whose sub-epochs take a millisecond: what a VACUUM per
		# sub-epoch would cost them
		$PSQL >/dev/null <<'SQL' || return 1
CREATE TABLE t AS SELECT (i % 3)::text AS label, ((i % 3) + sin(i))::real AS a, cos(i)::real AS b,
       sin(i * 3)::real AS c FROM generate_series(1, 150) i;
SELECT dataset_name FROM mop_prepare('t', 'label', partitions => 2);
SQL
		space='{"model": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}], "learning_rate": [0.01, 0.003], "batch_size": [8, 16]}'
	fi
	local lsn0 lsn1 max=0 s end vac
	lsn0=$($PSQL -c "SELECT pg_current_wal_lsn()")
	$PSQL -c "SELECT count(*) FROM mop_grid_search('t', '$space', epochs => $epochs, workers => 2)" >"$d/run.out" 2>&1 &
	local pid=$!
	while kill -0 $pid 2>/dev/null; do
		s=$($PSQL -c "SELECT pg_total_relation_size('mop.models')")
		[ "$s" -gt "$max" ] && max=$s
		sleep 0.2
	done
	wait $pid || { cat "$d/run.out"; return 1; }
	lsn1=$($PSQL -c "SELECT pg_current_wal_lsn()")
	end=$($PSQL -c "SELECT pg_total_relation_size('mop.models')")
	[ "$end" -gt "$max" ] && max=$end
	$PSQL -c "VACUUM mop.models" >/dev/null
	vac=$($PSQL -c "SELECT pg_total_relation_size('mop.models')")
	$PSQL -F' ' <<SQL | awk -v v="$v${tiny:+-small}" -v e="$epochs" -v max="$max" -v end="$end" -v vac="$vac" '{
		h = $1; live = $2; n = $3; wal = $4; st = live / n;
		printf "%s %d %d %.3f %.2f %.2f %.2f %.3f %.2f %.2f %.2f\n", v, e, h, live / 1048576, max / 1048576,
			end / 1048576, vac / 1048576, wal / h / 1048576, wal / h / st, $5, $6 }'
SELECT (SELECT count(*) FROM mop.hops), (SELECT sum(pg_column_size(state)) FROM mop.models),
       (SELECT count(*) FROM mop.models), pg_wal_lsn_diff('$lsn1', '$lsn0'),
       (SELECT avg(extract(epoch FROM finished_at - started_at)) * 1000 FROM mop.hops),
       (SELECT extract(epoch FROM max(finished_at) - min(started_at)) FROM mop.hops)
SQL
	export PGDATABASE=postgres
	$PSQL -c "DROP DATABASE bench" >/dev/null
	down "$v"
}

mkdir -p "$STB_DIR"
[ "$(id -u)" -eq 0 ] && chown postgres "$STB_DIR"
build base "$BASE" || exit 1
build new "$NEW" || exit 1
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(lscpu | sed -n 's/^Model name: *//p'), $(getconf _NPROCESSORS_ONLN) cpus; $(uname -sr)"
echo "PostgreSQL: $($PGBIN/postgres --version); base $BASE; new $NEW; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "variant epochs hops live_MB max_MB end_MB after_vacuum_MB wal_MB_per_hop states_per_hop hop_ms_mean run_s"
for i in $(seq 1 "$STB_REPS"); do
	run_one base "$STB_EPOCHS" || exit 1
	run_one new "$STB_EPOCHS" || exit 1
done
run_one base "$STB_LONG_EPOCHS" || exit 1
run_one new "$STB_LONG_EPOCHS" || exit 1
for i in $(seq 1 "$STB_REPS"); do
	run_one base 100 tiny || exit 1
	run_one new 100 tiny || exit 1
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
