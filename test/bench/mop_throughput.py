#!/usr/bin/env python3
"""MOP benchmark: throughput of MOP on Cerebro's 16-configuration grid.

Grid: 2 MLPs (784-256-128-10, 784-512-10) x learning rate {1e-3, 1e-4} x
batch size {32, 256} x l2 {1e-4, 1e-6}, Adam, seed 1; 1 epoch on dataset
"fashion" (2 partitions of 27,000 rows; 6,000 validation rows).  Each
repetition runs, in alternating order: W=1 (scheduler random), W=2 (random),
W=2 (longest).  Per run:
  wall      client-side wall time of the blocking mop_grid_search call
  makespan  mop.runs.finished_at - started_at
  ideal     sum over hops of (finished_at - started_at) / W
  gap       per worker, started_at of a hop minus finished_at of the worker's
            previous hop.  A hop's [started_at, finished_at] covers the whole
            sub-epoch task up to its hop row: loading and deserializing the
            checkpoint, mop.train_agg over the partition (detoast, shuffle,
            train), serializing the state.  The gap after it holds: saving
            the checkpoint, validation (only after a model's last hop of an
            epoch), commit, and the coordinator's hand-off to the next task.
  overhead  mean gap after hops NOT followed by validation, divided by the
            mean hop duration (the per-hop overhead); also reported with all
            gaps, validation included.
"""
import argparse
import json
import time

from mop_bench_common import (MLP_A, MLP_B, connect, loadavg, median, save,
                              utcnow, wait_quiet)

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--dataset", default="fashion")
ap.add_argument("--threads", default="1",
                help="mop.threads_per_worker for the runs (default 1: W=1 against W=2 measures "
                     "model hopper parallelism, not BLAS threads; 'auto' for the server's default)")
ap.add_argument("--checkpoint-every", type=int, default=1,
                help="mop.checkpoint_every for the runs (default 1: every sub-epoch committed)")
args = ap.parse_args()
SPACE = {"model": [MLP_A, MLP_B], "optimizer": "adam", "learning_rate": [1e-3, 1e-4],
         "batch_size": [32, 256], "l2": [1e-4, 1e-6], "seed": 1}
conn = connect()
cur = conn.cursor()
if args.threads != "auto":
    cur.execute("SET mop.threads_per_worker = %s", (int(args.threads),))
if args.checkpoint_every != 1:   # (a build before the setting has none)
    cur.execute("SET mop.checkpoint_every = %s", (args.checkpoint_every,))
print(f"space: {json.dumps(SPACE)}; 1 epoch; {args.reps} repetitions; threads per worker {args.threads}; "
      f"checkpoint_every {args.checkpoint_every}; "
      f"{utcnow()}; load {loadavg()}")


def one(workers, sched):
    wait_quiet()
    t0 = time.time()
    cur.execute("SELECT run_id, status, best_valid_metric FROM mop_grid_search(%s, %s::jsonb, epochs => 1, workers => %s, "
                "seed => 1, scheduler => %s)", (args.dataset, json.dumps(SPACE), workers, sched))
    wall = time.time() - t0
    rr = cur.fetchall()
    run = rr[0][0]
    assert len(rr) == 16 and all(r[1] == "done" for r in rr), rr
    cur.execute("SELECT extract(epoch from finished_at - started_at) FROM mop.runs WHERE id = %s", (run,))
    makespan = float(cur.fetchone()[0])
    cur.execute("SELECT model_id, epoch, partition, worker, extract(epoch from started_at), extract(epoch from finished_at) "
                "FROM mop.hops WHERE run_id = %s ORDER BY worker, started_at", (run,))
    hops = [tuple(float(v) if j >= 4 else v for j, v in enumerate(h)) for h in cur.fetchall()]
    lastfin = {}
    for m, e, p, w, s, f in hops:
        lastfin[m, e] = max(lastfin.get((m, e), 0), f)
    durs = [f - s for m, e, p, w, s, f in hops]
    gaps_plain, gaps_valid = [], []
    for i in range(1, len(hops)):
        if hops[i][3] != hops[i - 1][3]:
            continue
        m, e, p, w, s, f = hops[i - 1]
        g = hops[i][4] - f
        (gaps_valid if lastfin[m, e] == f else gaps_plain).append(g)
    cur.execute("SELECT extract(epoch from min(h.started_at) - r.started_at), extract(epoch from r.finished_at - max(h.finished_at)) "
                "FROM mop.hops h JOIN mop.runs r ON r.id = h.run_id WHERE h.run_id = %s GROUP BY r.started_at, r.finished_at", (run,))
    head, tail = (float(x) for x in cur.fetchone())
    ideal = sum(durs) / workers
    mh = sum(durs) / len(durs)
    d = dict(run=run, workers=workers, sched=sched, wall=wall, makespan=makespan, ideal=ideal, hops=len(hops),
             mean_hop=mh, gap_plain=sum(gaps_plain) / max(1, len(gaps_plain)), n_plain=len(gaps_plain),
             gap_all=sum(gaps_plain + gaps_valid) / max(1, len(gaps_plain + gaps_valid)), head=head, tail=tail,
             acc={r[0]: r[2] for r in rr})
    d["overhead_plain"] = d["gap_plain"] / mh
    d["overhead_all"] = d["gap_all"] / mh
    print(f"  W={workers} {sched:7s} run {run}: wall {wall:.2f}s makespan {makespan:.2f}s ideal {ideal:.2f}s "
          f"(x{makespan / ideal:.3f}) mean hop {mh:.3f}s gap {d['gap_plain'] * 1000:.1f}ms ({100 * d['overhead_plain']:.2f}%) "
          f"gap incl. validation {d['gap_all'] * 1000:.1f}ms ({100 * d['overhead_all']:.2f}%) start {head * 1000:.0f}ms end {tail * 1000:.0f}ms",
          flush=True)
    return d


runs = []
for rep in range(1, args.reps + 1):
    order = [(1, "random"), (2, "random"), (2, "longest")]
    if rep % 2 == 0:
        order.reverse()
    for w, s in order:
        d = one(w, s)
        d["rep"] = rep
        runs.append(d)
    print(f" rep {rep} done; load {loadavg()}", flush=True)


def sel(w, s):
    return [r for r in runs if r["workers"] == w and r["sched"] == s]


w1 = sel(1, "random")
for s in ("random", "longest"):
    w2 = sel(2, s)
    sp = [a["wall"] / b["wall"] for a, b in zip(sorted(w1, key=lambda r: r["rep"]), sorted(w2, key=lambda r: r["rep"]))]
    spm = [a["makespan"] / b["makespan"] for a, b in zip(sorted(w1, key=lambda r: r["rep"]), sorted(w2, key=lambda r: r["rep"]))]
    print(f"RESULT W=2 {s}: speedup over W=1 (paired per rep, wall) median {median(sp):.3f} [{', '.join(f'{x:.3f}' for x in sp)}]; "
          f"by makespan {median(spm):.3f}")
    print(f"RESULT W=2 {s}: makespan / ideal median {median([r['makespan'] / r['ideal'] for r in w2]):.3f} "
          "[" + ", ".join("%.3f" % (r["makespan"] / r["ideal"]) for r in w2) + "]; per-hop overhead median "
          f"{100 * median([r['overhead_plain'] for r in w2]):.2f}% (incl. validation {100 * median([r['overhead_all'] for r in w2]):.2f}%)")
print(f"RESULT W=1: median wall {median([r['wall'] for r in w1]):.2f}s, makespan/ideal {median([r['makespan'] / r['ideal'] for r in w1]):.3f}, "
      f"per-hop overhead {100 * median([r['overhead_plain'] for r in w1]):.2f}% (incl. validation {100 * median([r['overhead_all'] for r in w1]):.2f}%)")
for s in ("random", "longest"):
    w2 = sel(2, s)
    print(f"RESULT W=2 {s}: median wall {median([r['wall'] for r in w2]):.2f}s, mean hop {median([r['mean_hop'] for r in w2]):.3f}s")
print(f"finished {utcnow()}; load {loadavg()}")
save("throughput.json", dict(space=SPACE, runs=runs))
