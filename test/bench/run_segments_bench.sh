#!/bin/bash
# run_segments_bench.sh -- segments: model hopper parallelism across
# PostgreSQL servers (postgres_fdw foreign servers), on Fashion-MNIST, with
# three throwaway servers on this machine (loopback TCP):
#   coord  the coordinator (runs, checkpoints, validation); both cores
#   seg1   a segment; pinned to core 0 in the speedup phase (taskset)
#   seg2   a segment; pinned to core 1 in the speedup phase
#
#   bash test/bench/run_segments_bench.sh [phase ...]
#
# phases (default: all, in this order):
#   install   make install mop from MOP_SRC (default: this checkout), under
#             flock /tmp/mop-install.lock (the installed $libdir/mop.so is
#             shared with other sessions: its commit, tree state and md5 are
#             recorded, and checked again after every phase)
#   setup     create the three clusters in SEGB_DIR, CREATE EXTENSION mop on
#             each, postgres_fdw + servers + user mappings on coord, load
#             Fashion-MNIST, prepare the datasets (local / on seg1 / on seg1 +
#             seg2 / a 4,000-row one on seg1), timing the placements and
#             counting their bytes on the wire
#   traffic   bytes a hop moves (model states, measured) against the data and
#             against data-parallel SGD's gradients, for the MLPs of the
#             Cerebro grid and a LeNet-like CNN; bytes on loopback around runs
#   overhead  a remote hop over loopback against a local one: the same
#             deterministic 4-config grid, 2 epochs, one worker, on the local
#             dataset and on the dataset placed on seg1 only, alternating
#   speedup   the 16-config Cerebro grid, 1 epoch, over 1 segment (seg1) and
#             over 2 (seg1 + seg2), segments pinned to one core each
#   summary   print the summary of the phases' results
# Knobs: SEGB_DIR (/tmp/mopsegbench), SEGB_PORT (55461: coord; +1 seg1, +2
# seg2), MOP_SRC (this checkout), OVH_REPS (3), SPD_REPS (3), MOPB_WAIT_MAX
# (120: seconds to wait for a quiet machine before each timed run).
# Output: stdout, test/bench/.cache/segments_bench/<phase>.log and <phase>.json.
# SEGB_KEEP=1 leaves the servers running at the end (default: stopped).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
SEGB_DIR=${SEGB_DIR:-/tmp/mopsegbench}
SEGB_PORT=${SEGB_PORT:-55461}
MOP_SRC=${MOP_SRC:-$ROOT}
PGBIN=$(pg_config --bindir)
OUTD=$ROOT/test/bench/.cache/segments_bench
mkdir -p "$OUTD"
export SEGB_DIR SEGB_PORT OUTD
export OVH_REPS=${OVH_REPS:-3} SPD_REPS=${SPD_REPS:-3} MOPB_WAIT_MAX=${MOPB_WAIT_MAX:-60}
export PGHOST=$SEGB_DIR PGPORT=$SEGB_PORT PGUSER=postgres PGDATABASE=postgres
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
PY=/usr/bin/python3
PSQL="psql -X -q -v ON_ERROR_STOP=1"
AS_PG="runuser -u postgres --"
NODES="coord seg1 seg2"
PHASES=${*:-install setup traffic overhead speedup summary}

port_of() { case $1 in coord) echo "$SEGB_PORT" ;; seg1) echo $((SEGB_PORT + 1)) ;; seg2) echo $((SEGB_PORT + 2)) ;; esac; }

# what is installed in $libdir now: md5 of mop.so
installed_md5() { md5sum "$(pg_config --pkglibdir)/mop.so" | cut -c1-32; }

check_install() {
	local now
	now=$(installed_md5)
	if [ -f "$SEGB_DIR/installed" ] && [ "$now" != "$(sed -n 's/^md5 //p' "$SEGB_DIR/installed")" ]; then
		echo "note: $(pg_config --pkglibdir)/mop.so was reinstalled by another session since the install phase (md5 $now); these servers load their pinned copy $SEGB_DIR/lib/mop.so (md5 $(md5sum "$SEGB_DIR/lib/mop.so" | cut -c1-32))"
	fi
}

# The installed $libdir/mop.so is shared: other sessions reinstall it with
# other builds at any time, and every new backend or background worker
# loads the file there is then.  So the build installed here is copied,
# under the same lock, to $SEGB_DIR/lib, and the servers load that copy:
# dynamic_library_path puts $SEGB_DIR/lib first, and after CREATE EXTENSION
# the functions' probin '$libdir/mop' becomes 'mop' (found through
# dynamic_library_path, as the background workers' library "mop" is).
phase_install() {
	mkdir -p "$SEGB_DIR/lib" && chown postgres "$SEGB_DIR"
	(cd "$MOP_SRC" && SEGB_LIB=$SEGB_DIR/lib flock /tmp/mop-install.lock bash -c \
		'make -s NVCC= install >/dev/null && cp "$(pg_config --pkglibdir)/mop.so" "$SEGB_LIB/mop.so"') || return 1
	chmod -R a+rX "$SEGB_DIR/lib"
	{
		echo "src $MOP_SRC"
		echo "head $(git -C "$MOP_SRC" rev-parse HEAD)"
		if [ -n "$(git -C "$MOP_SRC" status --porcelain --untracked-files=no)" ]; then
			echo "tree dirty: $(git -C "$MOP_SRC" status --porcelain --untracked-files=no | awk '{print $2}' | tr '\n' ' ')(git diff sha1 $(git -C "$MOP_SRC" diff HEAD | sha1sum | cut -c1-12))"
		else
			echo "tree clean"
		fi
		echo "md5 $(md5sum "$SEGB_DIR/lib/mop.so" | cut -c1-32)"
		echo "at $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	} >"$SEGB_DIR/installed"
	cat "$SEGB_DIR/installed"
}

# start node $1 (restart it if it runs) with its postmaster -- and so every
# backend it forks -- on cpus $2 (taskset -c; empty: all cpus)
node_start() {
	local n=$1 cpus=${2:-} d=$SEGB_DIR/$1
	if [ -f "$d/postmaster.pid" ]; then
		if [ "$(cat "$SEGB_DIR/$n.cpus" 2>/dev/null)" = "cpus=$cpus" ] &&
			$PSQL -p "$(port_of "$n")" -c 'select 1' >/dev/null 2>&1; then
			return 0
		fi
		$AS_PG "$PGBIN/pg_ctl" -D "$d" -m fast -w -t 60 stop >/dev/null
	fi
	echo "cpus=$cpus" >"$SEGB_DIR/$n.cpus"
	if [ -n "$cpus" ]; then
		$AS_PG taskset -c "$cpus" "$PGBIN/pg_ctl" -D "$d" -l "$SEGB_DIR/$n.log" -w -t 60 start >/dev/null
	else
		$AS_PG "$PGBIN/pg_ctl" -D "$d" -l "$SEGB_DIR/$n.log" -w -t 60 start >/dev/null
	fi || { tail -5 "$SEGB_DIR/$n.log"; return 1; }
	echo "  $n: port $(port_of "$n"), postmaster $(head -1 "$d/postmaster.pid") on cpus $(taskset -pc "$(head -1 "$d/postmaster.pid")" | sed 's/.*: //')"
}

nodes_down() {
	for n in $NODES; do
		[ -f "$SEGB_DIR/$n/postmaster.pid" ] && $AS_PG "$PGBIN/pg_ctl" -D "$SEGB_DIR/$n" -m fast -w -t 60 stop >/dev/null
	done
	return 0
}

phase_setup() {
	mkdir -p "$SEGB_DIR" && chown postgres "$SEGB_DIR"
	for n in $NODES; do
		if [ ! -d "$SEGB_DIR/$n" ]; then
			$AS_PG "$PGBIN/initdb" -D "$SEGB_DIR/$n" -A trust -U postgres >"$SEGB_DIR/initdb-$n.log" 2>&1 || {
				cat "$SEGB_DIR/initdb-$n.log"; return 1; }
			# segments: log_statement none (a segment would log every model
			# state sent to it); TCP on loopback only, the socket in SEGB_DIR
			cat >>"$SEGB_DIR/$n/postgresql.conf" <<CONF
port = $(port_of "$n")
listen_addresses = '127.0.0.1'
unix_socket_directories = '$SEGB_DIR'
max_worker_processes = 16
dynamic_library_path = '$SEGB_DIR/lib:\$libdir'
shared_buffers = 512MB
max_wal_size = 4GB
log_statement = none
client_min_messages = warning
CONF
		fi
		node_start "$n" "" || return 1
	done
	[ -f "$SEGB_DIR/lib/mop.so" ] || { echo "no $SEGB_DIR/lib/mop.so: run the install phase first"; return 1; }
	for n in $NODES; do
		$PSQL -p "$(port_of $n)" -c 'CREATE EXTENSION IF NOT EXISTS mop' \
			-c "UPDATE pg_proc SET probin = 'mop' WHERE probin = '\$libdir/mop'" || return 1
	done
	$PSQL <<SQL || return 1
CREATE EXTENSION IF NOT EXISTS mop;
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_foreign_server WHERE srvname = 'seg1') THEN
    CREATE SERVER seg1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '$(port_of seg1)', dbname 'postgres');
    CREATE USER MAPPING FOR postgres SERVER seg1 OPTIONS (user 'postgres');
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_foreign_server WHERE srvname = 'seg2') THEN
    CREATE SERVER seg2 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '$(port_of seg2)', dbname 'postgres');
    CREATE USER MAPPING FOR postgres SERVER seg2 OPTIONS (user 'postgres');
  END IF;
END \$\$;
SQL
	if [ "$($PSQL -tAc "select count(*) from pg_class where relname = 'fashion_small'")" != 1 ]; then
		$PSQL -c "CREATE TABLE IF NOT EXISTS fashion_train (label text NOT NULL, pixels real[] NOT NULL)" -c "TRUNCATE fashion_train" || return 1
		$PY scripts/load_fashion_mnist.py train | $PSQL -c "COPY fashion_train FROM STDIN" || return 1
		$PSQL -c "CREATE TABLE fashion_small AS SELECT * FROM fashion_train LIMIT 4000" \
			-c "VACUUM ANALYZE fashion_train" -c "VACUUM ANALYZE fashion_small" || return 1
	fi
	$PY test/bench/mop_segments_bench.py setup || return 1
	# no autovacuum of the freshly written buffers during the measurements
	for n in $NODES; do
		$PSQL -p "$(port_of $n)" -c 'VACUUM ANALYZE' -c 'CHECKPOINT' || return 1
	done
}

run_phase() {
	local p=$1
	echo "==== phase $p  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	case $p in
		install) phase_install ;;
		setup) phase_setup ;;
		traffic)
			for n in $NODES; do node_start "$n" "" || return 1; done
			$PY test/bench/mop_segments_bench.py traffic ;;
		overhead)
			# nothing pinned: the local and the remote hop may use either core
			for n in $NODES; do node_start "$n" "" || return 1; done
			$PY test/bench/mop_segments_bench.py overhead ;;
		speedup)
			node_start coord "" && node_start seg1 0 && node_start seg2 1 || return 1
			$PY test/bench/mop_segments_bench.py speedup ;;
		summary) $PY test/bench/mop_segments_bench.py summary ;;
		*) echo "unknown phase $p"; return 2 ;;
	esac
	local rc=$?
	[ "$p" = install ] || check_install
	return $rc
}

RC=0
for p in $PHASES; do
	run_phase "$p" 2>&1 | tee "$OUTD/$p.log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || { RC=1; echo "phase $p FAILED"; }
done
[ "${SEGB_KEEP:-0}" = 1 ] || nodes_down
exit $RC
