#!/bin/bash
# lib_cluster.sh -- a private throwaway PostgreSQL cluster for shell tests
# that must restart the server or preload libraries.  Source it, then:
#   cluster_init "extra postgresql.conf lines"   -> sets PGHOST PGPORT PGUSER
#   cluster_start / cluster_stop [mode] / cluster_cleanup
# Runs the server as "postgres" when invoked as root (initdb refuses root).
set -u
PGBIN=$(pg_config --bindir)
CL_DIR=$(mktemp -d /tmp/mop-cluster.XXXXXX)
CL_PORT=$((20000 + RANDOM % 20000))
if [ "$(id -u)" -eq 0 ]; then
	chown postgres "$CL_DIR"
	AS_PG="runuser -u postgres --"
	export PGUSER=postgres
else
	AS_PG=""
	export PGUSER=$(id -un)
fi
export PGHOST=$CL_DIR PGPORT=$CL_PORT PGDATABASE=postgres
unset PGPASSWORD PGSERVICE 2>/dev/null || true

cluster_init() {
	$AS_PG "$PGBIN/initdb" -D "$CL_DIR/data" -A trust -U "$PGUSER" >"$CL_DIR/initdb.log" 2>&1 || {
		cat "$CL_DIR/initdb.log"; return 1; }
	cat >>"$CL_DIR/data/postgresql.conf" <<CONF
port = $CL_PORT
listen_addresses = ''
unix_socket_directories = '$CL_DIR'
max_worker_processes = 16
fsync = off
$1
CONF
	cluster_start
}

cluster_start() {
	$AS_PG "$PGBIN/pg_ctl" -D "$CL_DIR/data" -l "$CL_DIR/server.log" -w -t 60 start >/dev/null
}

cluster_stop() {
	$AS_PG "$PGBIN/pg_ctl" -D "$CL_DIR/data" -m "${1:-fast}" -w -t 60 stop >/dev/null
}

cluster_cleanup() {
	cluster_stop immediate 2>/dev/null
	rm -rf "$CL_DIR"
}

cluster_log() {
	tail -n "${1:-40}" "$CL_DIR/server.log"
}
