#!/bin/bash
# mop_bench_lib.sh -- shared settings for run_mop_bench.sh (the extension and MOP
# benchmarks): a private throwaway cluster on its own port and socket dir.
# Source it.  Knobs: MOPB_DIR (/tmp/mopbench), MOPB_PORT (55432).
MOPB_DIR=${MOPB_DIR:-/tmp/mopbench}
MOPB_PORT=${MOPB_PORT:-55432}
PGBIN=$(pg_config --bindir)
export PGHOST=$MOPB_DIR PGPORT=$MOPB_PORT PGUSER=postgres PGDATABASE=postgres
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
PY=${PY:-/usr/bin/python3}   # PY=/opt/mop-bench-venv/bin/python: a venv with PyPI packages
PSQL="psql -X -q -v ON_ERROR_STOP=1"
AS_PG="runuser -u postgres --"

mopb_cluster_up() {
	if [ -f "$MOPB_DIR/data/postmaster.pid" ] && $PSQL -c 'select 1' >/dev/null 2>&1; then
		return 0
	fi
	if [ ! -d "$MOPB_DIR/data" ]; then
		mkdir -p "$MOPB_DIR" && chown postgres "$MOPB_DIR"
		$AS_PG "$PGBIN/initdb" -D "$MOPB_DIR/data" -A trust -U postgres >"$MOPB_DIR/initdb.log" 2>&1 || {
			cat "$MOPB_DIR/initdb.log"; return 1; }
		cat >>"$MOPB_DIR/data/postgresql.conf" <<CONF
port = $MOPB_PORT
listen_addresses = ''
unix_socket_directories = '$MOPB_DIR'
max_worker_processes = 16
shared_buffers = 1GB
max_wal_size = 4GB
dynamic_library_path = '$MOPB_DIR/lib:\$libdir'
# one BLAS thread per worker unless a benchmark sets it (the server's
# default would give a 1-worker run every core)
mop.threads_per_worker = 1
CONF
	fi
	$AS_PG "$PGBIN/pg_ctl" -D "$MOPB_DIR/data" -l "$MOPB_DIR/server.log" -w -t 60 start >/dev/null
}

mopb_cluster_down() {
	$AS_PG "$PGBIN/pg_ctl" -D "$MOPB_DIR/data" -m fast -w -t 60 stop >/dev/null
}

# wait until no other heavy benchmark runs (another engineer's engine bench)
mopb_wait_quiet() {
	local n=0
	while pgrep -f 'bench_engine|bench_torch|xcheck' >/dev/null; do
		[ $n -eq 0 ] && echo "  (waiting for other benchmarks: $(pgrep -fa 'bench_engine|bench_torch|xcheck' | head -2 | tr '\n' ';'))" >&2
		n=$((n + 1)); sleep 5
	done
}

mopb_env_line() {
	echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host: $(lscpu | sed -n 's/^Model name: *//p'), $(getconf _NPROCESSORS_ONLN) cpus; $(uname -sr)"
	echo "PostgreSQL: $($PSQL -tAc 'select version()' 2>/dev/null | cut -d, -f1); mop commit $(cut -c1-10 "$MOPB_DIR/commit" 2>/dev/null) (pinned build in $MOPB_DIR)"
	echo "BLAS: $(readlink -f /usr/lib/x86_64-linux-gnu/libopenblas.so.0 2>/dev/null) ($(dpkg-query -W -f='${Package} ${Version}' 'libopenblas0-pthread' 2>/dev/null || dpkg -l | awk '/libopenblas0/{print $2, $3; exit}')); mop.threads_per_worker=$($PSQL -tAc 'SHOW mop.threads_per_worker' 2>/dev/null)"
	echo "extension CFLAGS: $(pg_config --cflags | sed 's/ -f[a-z-]*prefix-map=[^ ]*//g') + PG_CFLAGS $(sed -n 's/^PG_CFLAGS *= *//p' "$(dirname "${BASH_SOURCE[0]}")/../../Makefile")"
	echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# Build mop at MOPB_COMMIT (default HEAD) into $MOPB_DIR/build -- once per
# commit -- start the cluster, and install mop's SQL into it directly (not
# CREATE EXTENSION: other sessions' "make install" into the shared $libdir
# must not change the mop.so a benchmark server runs).
mopb_pinned_up() {
	local sha
	sha=$(git rev-parse "${MOPB_COMMIT:-HEAD}") || return 1
	if [ "$(cat "$MOPB_DIR/commit" 2>/dev/null)" != "$sha" ]; then
		[ -d "$MOPB_DIR/data" ] && mopb_cluster_down 2>/dev/null
		rm -rf "$MOPB_DIR"
		mkdir -p "$MOPB_DIR/build" "$MOPB_DIR/lib" && chown postgres "$MOPB_DIR"
		git archive "$sha" | tar -x -C "$MOPB_DIR/build" || return 1
		make -s -C "$MOPB_DIR/build" -j2 >"$MOPB_DIR/build.log" 2>&1 || { tail -20 "$MOPB_DIR/build.log"; return 1; }
		cp "$MOPB_DIR/build/mop.so" "$MOPB_DIR/lib/mop.so"
		chmod -R a+rX "$MOPB_DIR/lib"
		echo "$sha" >"$MOPB_DIR/commit"
	fi
	mopb_cluster_up || return 1
	if [ "$($PSQL -tAc "select count(*) from pg_namespace where nspname = 'mop'")" != 1 ]; then
		# the catalog of the default version (what CREATE EXTENSION mop makes)
		local v
		v=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$MOPB_DIR/build/mop.control")
		sed -e '/^\\echo/d' -e '/pg_extension_config_dump/d' -e 's/@extschema@/public/g' \
			-e "s/'MODULE_PATHNAME'/'mop'/g" "$MOPB_DIR/build/sql/mop--$v.sql" | $PSQL -v ON_ERROR_STOP=1 -f - >/dev/null || return 1
	fi
	echo "mop: commit $sha, built in $MOPB_DIR/build, loaded from $($PSQL -tAc "show dynamic_library_path")"
}
