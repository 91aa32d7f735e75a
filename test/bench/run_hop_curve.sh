#!/bin/bash
# run_hop_curve.sh -- the cost of a sub-epoch (a hop) over a long run: sub-
# epochs committed per second, and the catalog's size, sampled every few
# seconds while a random search of tiny models runs (docs/benchmarks.md,
# "Per-hop cost over a long run").
#
#   bash test/bench/run_hop_curve.sh LABEL=COMMIT [LABEL=COMMIT ...]
#
# Each commit is built from a `git archive` copy into $HC_DIR/<label> and
# runs in its own private cluster (PostgreSQL's defaults but
# max_worker_processes = 16 and, unless HC_SYNC=1, synchronous_commit = off;
# autovacuum on), loaded from there through
# dynamic_library_path with the install script run by hand, so that other
# sessions' `make install` cannot change what is measured.  The labels run
# one after the other, HC_REPS times in turn (a, b, a, b, ...).
#
# The run: mop_random_search of HC_TRIALS configurations of one dense layer
# of 4 units on 3 features, over a table of HC_ROWS rows prepared into
# HC_PARTITIONS partitions of 16-row buffers, so that a sub-epoch trains a
# few dozen rows and takes about a millisecond: what is measured is the
# catalog work around it.  It runs for HC_SECONDS (or HC_HOPS sub-epochs,
# whichever comes first) and is then cancelled.  Every HC_INTERVAL seconds
# one line goes to $HC_OUT/<label>-<rep>.tsv:
#   t_s hops rate_per_s cpu_us_per_hop catalog_kB models_kB hops_kB epochs_kB decisions_kB
#   dead_tuples autovacuums wal_MB load1
# (hops: max(id) of mop.hops, an index probe, not a count; rate: over the
# interval; cpu_us_per_hop: CPU time the whole cluster -- coordinator,
# workers, autovacuum, checkpointer, WAL writer, the sampling session --
# used in the interval per sub-epoch committed in it, which what else runs
# on the machine changes much less than the rate; catalog_kB: pg_total_relation_size -- heap, TOAST and indexes --
# of mop.models, mop.hops, mop.epochs and mop.decisions; dead_tuples: the
# sum of n_dead_tup of the four in pg_stat_user_tables; autovacuums: the
# sum of their autovacuum_count and vacuum_count; wal_MB: the WAL position;
# load1: the machine's 1-minute load average, for what else ran.)
# Then, from mop.hops itself, per HC_BUCKET sub-epochs (by id):
# $HC_OUT/<label>-<rep>-buckets.tsv: first_hop n span_s rate_per_s
#   in_hop_ms (mean finished_at - started_at: loading, training and the
#   writes before the hop's row) gap_ms (mean time from a worker's hop row
#   to its next hop's start: the rest of the commit, the coordinator's
#   round trip)
# HC_WAIT=1 runs the blocking form (a session waits in mop_random_search)
# instead of wait => false.
# HC_PGSS=1 also loads pg_stat_statements and writes the 25 statements with
# the most total time to $HC_OUT/<label>-<rep>-statements.txt.
# Knobs: HC_DIR (/tmp/mop-hop-curve), HC_OUT (test/bench/results/
# hop-curve-<date>), HC_SECONDS (300), HC_HOPS (1000000), HC_INTERVAL (5),
# HC_TRIALS (20), HC_PARTITIONS (50), HC_ROWS (2000), HC_WORKERS (2),
# HC_REPS (1), HC_PGSS (0), HC_WAIT (0), HC_BUCKET (10000), HC_SYNC (0:
# synchronous_commit = off in the cluster, so that the WAL flush of each
# sub-epoch's commit -- the disk's latency, shared with whatever else runs
# -- does not hide the catalog's cost; 1: PostgreSQL's default, on).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
HC_DIR=${HC_DIR:-/tmp/mop-hop-curve}
HC_OUT=${HC_OUT:-$ROOT/test/bench/results/hop-curve-$(date -u +%Y-%m-%d)}
HC_SECONDS=${HC_SECONDS:-300}
HC_HOPS=${HC_HOPS:-1000000}
HC_INTERVAL=${HC_INTERVAL:-5}
HC_TRIALS=${HC_TRIALS:-20}
HC_PARTITIONS=${HC_PARTITIONS:-50}
HC_ROWS=${HC_ROWS:-2000}
HC_WORKERS=${HC_WORKERS:-2}
HC_REPS=${HC_REPS:-1}
HC_PGSS=${HC_PGSS:-0}
HC_WAIT=${HC_WAIT:-0}
HC_SYNC=${HC_SYNC:-0}
HC_BUCKET=${HC_BUCKET:-10000}
PGBIN=$(pg_config --bindir)
AS_PG=""
[ "$(id -u)" -eq 0 ] && AS_PG="runuser -u postgres --"
export PGUSER=$([ "$(id -u)" -eq 0 ] && echo postgres || id -un)
export OPENBLAS_NUM_THREADS=1 PGOPTIONS="-c client_min_messages=warning"
PSQL="psql -X -q -v ON_ERROR_STOP=1 -At"
[ $# -ge 1 ] || { echo "usage: $0 LABEL=COMMIT [LABEL=COMMIT ...]" >&2; exit 2; }

build() {	# label commit
	local d=$HC_DIR/$1
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
	# the machine's disk is shared: a commit's WAL flush would measure the
	# other tenants' I/O, not the catalog (HC_SYNC=1 keeps it)
	[ "$HC_SYNC" = 1 ] || echo "synchronous_commit = off" >>"$d/data/postgresql.conf"
	if [ "$HC_PGSS" = 1 ]; then
		cat >>"$d/data/postgresql.conf" <<CONF
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
CONF
	fi
	echo "$port" >"$d/port"
}

up() { $AS_PG "$PGBIN/pg_ctl" -D "$HC_DIR/$1/data" -l "$HC_DIR/$1/server.log" -w -t 60 start >/dev/null; }
down() { $AS_PG "$PGBIN/pg_ctl" -D "$HC_DIR/$1/data" -m fast -w -t 60 stop >/dev/null; }

# CPU seconds the cluster has used: the postmaster's own and its reaped
# children's (cutime, cstime), plus its live children's
cluster_cpu() {	# label
	local pm
	pm=$(head -1 "$HC_DIR/$1/data/postmaster.pid") || return 1
	{ cat /proc/"$pm"/stat; for c in $(pgrep -P "$pm"); do cat /proc/"$c"/stat 2>/dev/null; done; } |
		sed 's/^.*) //' | awk -v pm="$pm" -v hz="$(getconf CLK_TCK)" '
			NR == 1 { t += $12 + $13 + $14 + $15; next } { t += $12 + $13 } END { printf "%.2f\n", t / hz }'
}

SAMPLE_SQL="SELECT extract(epoch FROM clock_timestamp()),
  (SELECT coalesce(max(id), 0) FROM mop.hops),
  (SELECT sum(pg_total_relation_size(c)) / 1024 FROM unnest('{mop.models,mop.hops,mop.epochs,mop.decisions}'::regclass[]) c),
  pg_total_relation_size('mop.models') / 1024, pg_total_relation_size('mop.hops') / 1024,
  pg_total_relation_size('mop.epochs') / 1024, pg_total_relation_size('mop.decisions') / 1024,
  (SELECT sum(n_dead_tup) FROM pg_stat_user_tables WHERE schemaname = 'mop'
     AND relname IN ('models', 'hops', 'epochs', 'decisions')),
  (SELECT sum(autovacuum_count + vacuum_count) FROM pg_stat_user_tables WHERE schemaname = 'mop'
     AND relname IN ('models', 'hops', 'epochs', 'decisions')),
  pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') / 1048576"

run_one() {	# label rep
	local v=$1 rep=$2 d=$HC_DIR/$1
	local out=$HC_OUT/$v-$rep.tsv
	export PGHOST=$d PGPORT=$(cat "$d/port") PGDATABASE=postgres
	up "$v" || return 1
	$PSQL -c "DROP DATABASE IF EXISTS bench" -c "CREATE DATABASE bench" >/dev/null || return 1
	export PGDATABASE=bench
	sed -e '/^\\echo/d' -e '/pg_extension_config_dump/d' -e 's/@extschema@/public/g' \
		-e "s/'MODULE_PATHNAME'/'mop'/g" "$d/src/sql/mop--0.2.sql" | $PSQL -f - >/dev/null 2>&1 || return 1
	[ "$HC_PGSS" = 1 ] && $PSQL -c "CREATE EXTENSION pg_stat_statements" >/dev/null
	$PSQL >/dev/null <<SQL || return 1
CREATE TABLE t AS SELECT (i % 3)::text AS label, ((i % 3) + sin(i))::real AS a, cos(i)::real AS b,
       sin(i * 3)::real AS c FROM generate_series(1, $HC_ROWS) i;
SELECT dataset_name FROM mop_prepare('t', 'label', partitions => $HC_PARTITIONS, buffer_rows => 16);
SQL
	local space='{"model": [{"type": "dense", "units": 4, "activation": "relu"}, {"type": "dense", "units": 3}], "learning_rate": {"loguniform": [0.001, 0.1]}, "batch_size": [8, 16]}'
	[ "$HC_PGSS" = 1 ] && $PSQL -c "SELECT pg_stat_statements_reset()" >/dev/null
	local run waiter=""
	if [ "$HC_WAIT" = 1 ]; then
		# the blocking form, as a user would call it, in a session of its own
		$PSQL -c "SELECT count(*) FROM mop_random_search('t', '$space', trials => $HC_TRIALS,
			epochs => 100000, workers => $HC_WORKERS)" >"$d/wait.out" 2>&1 &
		waiter=$!
		for _ in $(seq 1 100); do
			run=$($PSQL -c "SELECT max(id) FROM mop.runs WHERE status = 'running'")
			[ -n "$run" ] && break
			sleep 0.1
		done
	else
		run=$($PSQL -c "SELECT DISTINCT run_id FROM mop_random_search('t', '$space', trials => $HC_TRIALS,
			epochs => 100000, workers => $HC_WORKERS, wait => false)") || return 1
	fi
	echo "# $v rep $rep: commit $(cat "$d/commit"), run $run, $HC_TRIALS trials, $HC_PARTITIONS partitions of $HC_ROWS rows, $HC_WORKERS workers; load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out"
	echo "t_s hops rate_per_s cpu_us_per_hop catalog_kB models_kB hops_kB epochs_kB decisions_kB dead_tuples autovacuums wal_MB load1" >>"$out"
	local t0="" h0=0 tp hp line t h cpu cpup
	while :; do
		line=$($PSQL -F' ' -c "$SAMPLE_SQL") || break
		cpu=$(cluster_cpu "$v")
		read -r t h rest <<<"$line"
		if [ -z "$t0" ]; then
			t0=$t; tp=$t; hp=$h; cpup=$cpu
		fi
		awk -v t="$t" -v t0="$t0" -v tp="$tp" -v h="$h" -v hp="$hp" -v rest="$rest" -v load="$(cut -d' ' -f1 /proc/loadavg)" -v cpu="$cpu" -v cpup="$cpup" 'BEGIN {
			split(rest, r, " ");
			printf "%.1f %d %.0f %.0f %d %d %d %d %d %d %d %.0f %s\n", t - t0, h, (t > tp ? (h - hp) / (t - tp) : 0),
				(h > hp ? (cpu - cpup) * 1e6 / (h - hp) : 0), r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], load }' >>"$out"
		tp=$t; hp=$h; cpup=$cpu
		if [ "$(awk -v t="$t" -v t0="$t0" -v s="$HC_SECONDS" 'BEGIN { print (t - t0 >= s) }')" = 1 ] ||
			[ "$h" -ge "$HC_HOPS" ]; then
			break
		fi
		[ "$($PSQL -c "SELECT status FROM mop.runs WHERE id = $run")" = running ] || break
		sleep "$HC_INTERVAL"
	done
	if [ "$HC_PGSS" = 1 ]; then
		$PSQL -F' | ' -c "SELECT calls, round(total_exec_time::numeric, 0) AS total_ms,
			round(mean_exec_time::numeric, 3) AS mean_ms, round(max_exec_time::numeric, 2) AS max_ms,
			left(regexp_replace(query, '\s+', ' ', 'g'), 200)
			FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 25" >"$HC_OUT/$v-$rep-statements.txt"
	fi
	$PSQL -c "SELECT mop_cancel($run)" >/dev/null 2>&1
	[ -n "$waiter" ] && wait "$waiter"
	sleep 2
	$PSQL -F' ' >"$HC_OUT/$v-$rep-buckets.tsv" <<SQL
SELECT 'first_hop n span_s rate_per_s in_hop_ms gap_ms';
WITH h AS (SELECT id, worker, started_at, finished_at,
                  lead(started_at) OVER (PARTITION BY worker ORDER BY id) AS next_start
             FROM mop.hops WHERE run_id = $run)
SELECT min(id), count(*), round(extract(epoch FROM max(finished_at) - min(finished_at))::numeric, 2),
       round((count(*) / nullif(extract(epoch FROM max(finished_at) - min(finished_at)), 0))::numeric, 0),
       round(avg(extract(epoch FROM finished_at - started_at) * 1000)::numeric, 3),
       round(avg(extract(epoch FROM next_start - finished_at) * 1000)::numeric, 3)
  FROM h GROUP BY (id - 1) / $HC_BUCKET ORDER BY 1
SQL
	echo "# pg_multixact: $(du -sk "$d/data/pg_multixact" | cut -f1) kB; pg_xact: $(du -sk "$d/data/pg_xact" | cut -f1) kB" >>"$out"
	grep -v '^#' "$out" | tail -n +2 | awk -v v="$v" '
		{ n++; t[n] = $1; h[n] = $2; r[n] = $3; c[n] = $4; kb[n] = $5 }
		END { if (n < 3) exit;
			printf "%s: %d hops in %.0f s; first-interval rate %d/s, last %d/s; CPU per hop first %d us, last %d us; catalog %d kB -> %d kB\n",
				v, h[n], t[n], r[2], r[n], c[2], c[n], kb[1], kb[n] }'
	export PGDATABASE=postgres
	$PSQL -c "DROP DATABASE bench" >/dev/null 2>&1
	down "$v"
}

mkdir -p "$HC_DIR" "$HC_OUT"
[ "$(id -u)" -eq 0 ] && chown postgres "$HC_DIR"
labels=()
for arg in "$@"; do
	label=${arg%%=*}
	sha=$(git rev-parse "${arg#*=}") || exit 1
	build "$label" "$sha" || exit 1
	labels+=("$label")
done
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(lscpu | sed -n 's/^Model name: *//p'), $(getconf _NPROCESSORS_ONLN) cpus; $(uname -sr)"
	echo "PostgreSQL: $($PGBIN/postgres --version); $*; load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "other processes: $(pgrep -fa 'bench|pg_regress|prove' | grep -v run_hop_curve | cut -c1-120 | tr '\n' ';')"
} | tee -a "$HC_OUT/env.txt"
for rep in $(seq 1 "$HC_REPS"); do
	for v in "${labels[@]}"; do
		run_one "$v" "$rep" || { echo "run $v $rep failed; see $HC_DIR/$v/server.log" >&2; exit 1; }
	done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$HC_OUT/env.txt"
