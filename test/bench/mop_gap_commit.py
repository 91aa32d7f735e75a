"""Side measurement for the MOP throughput benchmark: per-hop gap of the 16-config grid
(W=2) with synchronous_commit on vs off (ALTER SYSTEM; reset at the end).
Run after run_mop_bench.sh setup: source test/bench/mop_bench_lib.sh; /usr/bin/python3 test/bench/mop_gap_commit.py"""
import sys, json, time
sys.path.insert(0, __import__('os').path.dirname(__import__('os').path.abspath(__file__)))
from mop_bench_common import connect, wait_quiet, MLP_A, MLP_B
SPACE = {"model": [MLP_A, MLP_B], "optimizer": "adam", "learning_rate": [1e-3, 1e-4], "batch_size": [32, 256], "l2": [1e-4, 1e-6], "seed": 1}
c = connect(); k = c.cursor()
for sc in ["on", "off", "off", "on"]:
    k.execute(f"ALTER SYSTEM SET synchronous_commit = {sc}"); k.execute("SELECT pg_reload_conf()"); time.sleep(1)
    wait_quiet()
    t0 = time.time()
    k.execute("SELECT run_id FROM mop_grid_search('fashion', %s::jsonb, epochs => 1, workers => 2, seed => 1)", (json.dumps(SPACE),))
    run = k.fetchone()[0]; wall = time.time() - t0
    k.execute("""WITH h AS (SELECT worker, started_at, finished_at, lag(finished_at) OVER (PARTITION BY worker ORDER BY started_at) AS pf,
       finished_at = max(finished_at) OVER (PARTITION BY model_id, epoch) AS lastm FROM mop.hops WHERE run_id = %s),
       g AS (SELECT extract(epoch from started_at - pf) AS gap, lag(lastm) OVER (PARTITION BY worker ORDER BY started_at) AS after_valid FROM h)
       SELECT avg(gap) FILTER (WHERE NOT after_valid) * 1000, avg(gap) FILTER (WHERE after_valid) * 1000,
              (SELECT avg(extract(epoch from finished_at - started_at)) FROM mop.hops WHERE run_id = %s) FROM g""", (run, run))
    gp, gv, mh = k.fetchone()
    print(f"synchronous_commit={sc}: run {run} wall {wall:.2f}s mean hop {mh:.3f}s gap {gp:.1f}ms ({gp/10/mh:.2f}%) gap after validation hop {gv:.1f}ms", flush=True)
k.execute("ALTER SYSTEM RESET synchronous_commit"); k.execute("SELECT pg_reload_conf()")
