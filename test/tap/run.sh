#!/bin/bash
# run.sh -- the TAP tests (test/tap/t/*.pl) on PostgreSQL's own test
# framework, PostgreSQL::Test::Cluster, as shipped with PGXS.  They make
# their own servers (crashes, restarts, preloading), so they run outside
# pg_virtualenv; initdb refuses root, so as root they run as "postgres".
# mop must be installed (make install).  Prints the TAP output (prove -v):
# "ok N - ..." / "not ok N - ..." lines; exits non-zero on failure.
set -u
cd "$(dirname "$0")/../.."
PG_CONFIG=${PG_CONFIG:-pg_config}
bindir=$($PG_CONFIG --bindir)
pgxs_src=$(dirname "$(dirname "$($PG_CONFIG --pgxs)")")
perl_lib=$pgxs_src/test/perl
pg_regress=$pgxs_src/test/regress/pg_regress
if [ ! -f "$perl_lib/PostgreSQL/Test/Cluster.pm" ]; then
	echo "not ok tap: PostgreSQL::Test::Cluster not found under $perl_lib"
	exit 1
fi
work=$(mktemp -d /tmp/mop-tap.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r test/tap/t "$work/"
as=""
if [ "$(id -u)" -eq 0 ]; then
	chown -R postgres "$work"
	as="runuser -u postgres --"
fi
cd "$work" && $as env PATH="$bindir:$PATH" PG_REGRESS="$pg_regress" \
	prove -v -I "$perl_lib" t/*.pl 2>&1
rc=$?
if [ $rc -ne 0 ] && [ -d "$work/tmp_check/log" ]; then
	tail -n 60 "$work"/tmp_check/log/*.log
fi
exit $rc
