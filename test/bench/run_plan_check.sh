#!/bin/bash
# run_plan_check.sh -- test/bench/plan_check.sql in a throwaway cluster
# (pg_virtualenv), with the machine's description first.  REPS (default 3)
# repetitions.  The installed mop is used: install it first.
set -e
cd "$(dirname "$0")/../.."
REPS=${REPS:-3}
pg_virtualenv -t -v 15 bash -c "
  date -u; uname -srm; grep -m1 'model name' /proc/cpuinfo; nproc; uptime
  psql -XAtc 'SELECT version()'
  psql -X -v reps=$REPS -f test/bench/plan_check.sql
  uptime"
