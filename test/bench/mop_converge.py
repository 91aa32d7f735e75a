#!/usr/bin/env python3
"""MOP benchmark: convergence of MOP vs sequential SGD vs model averaging.

Dataset "fashion" (Fashion-MNIST, 54,000 training rows in 2 partitions, 6,000
validation rows).  A grid of configurations (2 MLPs x 2 learning rates x 2
batch sizes, Adam, l2 1e-5, seed 1) trained for EPOCHS epochs three ways:
  MOP:        mop_grid_search(workers => 2) -- models hop between the 2 workers
  sequential: mop_train with each MOP model's exact config (partitions 0, 1 in order)
  averaging:  per epoch, from the current state, one copy trained on each
              partition with mop.train_agg, the copies averaged with
              mop.average_states (weights and optimizer moments), then
              evaluated with mop.eval_agg on the validation split.
Validation accuracy per epoch per config, and a summary.
"""
import argparse
import json

from mop_bench_common import (MLP_A, MLP_B, arch_name, connect, loadavg, save,
                              utcnow, wait_quiet)

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=6)
ap.add_argument("--dataset", default="fashion")
args = ap.parse_args()
SPACE = {"model": [MLP_A, MLP_B], "optimizer": "adam", "learning_rate": [1e-3, 1e-4],
         "batch_size": [32, 256], "l2": 1e-5, "seed": 1}
conn = connect()
cur = conn.cursor()
cur.execute("SELECT id, partitions FROM mop.datasets WHERE name = %s", (args.dataset,))
dsid, nparts = cur.fetchone()
print(f"space: {json.dumps(SPACE)}; epochs {args.epochs}; partitions {nparts}; {utcnow()}; load {loadavg()}")

wait_quiet()
cur.execute("SELECT run_id, model_id FROM mop_grid_search(%s, %s::jsonb, epochs => %s, workers => 2, seed => 1) ORDER BY model_id",
            (args.dataset, json.dumps(SPACE), args.epochs))
res = cur.fetchall()
run_id = res[0][0]
mids = [r[1] for r in res]
cur.execute("SELECT extract(epoch from finished_at - started_at) FROM mop.runs WHERE id = %s", (run_id,))
print(f"MOP run {run_id}: {len(mids)} models, {cur.fetchone()[0]:.1f} s")
configs = {}
acc = {}   # (model index, method) -> [acc per epoch]
for i, mid in enumerate(mids):
    cur.execute("SELECT config FROM mop.models WHERE id = %s", (mid,))
    configs[i] = cur.fetchone()[0]
    cur.execute("SELECT valid_metric FROM mop.epochs WHERE model_id = %s ORDER BY epoch", (mid,))
    acc[i, "mop"] = [r[0] for r in cur.fetchall()]

for i in configs:
    wait_quiet()
    cur.execute("SELECT mop_train(%s, %s::jsonb, epochs => %s)", (args.dataset, json.dumps(configs[i]), args.epochs))
    mid = cur.fetchone()[0]
    cur.execute("SELECT valid_metric FROM mop.epochs WHERE model_id = %s ORDER BY epoch", (mid,))
    acc[i, "seq"] = [r[0] for r in cur.fetchall()]

TRAIN = ("SELECT (s.r).state FROM (SELECT mop.train_agg(%s, b.x, b.y ORDER BY b.buffer_no) AS r FROM mop.buffers b "
         "WHERE b.dataset_id = %s AND b.split = 'train' AND b.partition = %s) s")
EVAL = ("SELECT (s.r).metric_sum / (s.r).rows FROM (SELECT mop.eval_agg(%s, b.x, b.y ORDER BY b.partition, b.buffer_no) AS r "
        "FROM mop.buffers b WHERE b.dataset_id = %s AND b.split = 'valid') s")
for i in configs:
    wait_quiet()
    cur.execute("SELECT mop.init_model(%s, %s::jsonb)", (args.dataset, json.dumps(configs[i])))
    state = cur.fetchone()[0]
    a = []
    for e in range(args.epochs):
        copies = []
        for p in range(nparts):
            cur.execute(TRAIN, (state, dsid, p))
            copies.append(cur.fetchone()[0])
        cur.execute("SELECT mop.average_states(%s::bytea[])", (copies,))
        state = cur.fetchone()[0]
        cur.execute(EVAL, (state, dsid))
        a.append(cur.fetchone()[0])
    acc[i, "avg"] = a
    print(f"  config {i} done ({utcnow()})", flush=True)


def desc(c):
    return f"{arch_name(c['model'])} lr={c['learning_rate']:g} bs={c['batch_size']}"


print()
print("| config | epoch | MOP | sequential | averaging | MOP - seq (points) | avg - seq (points) |")
print("|---|---|---|---|---|---|---|")
summ = []
for i in configs:
    for e in range(args.epochs):
        m, s, v = acc[i, "mop"][e], acc[i, "seq"][e], acc[i, "avg"][e]
        print(f"| {desc(configs[i]) if e == 0 else ''} | {e + 1} | {m:.4f} | {s:.4f} | {v:.4f} | {100 * (m - s):+.2f} | {100 * (v - s):+.2f} |")
    summ.append(dict(config=desc(configs[i]), mop_final=acc[i, "mop"][-1], seq_final=acc[i, "seq"][-1],
                     avg_final=acc[i, "avg"][-1], mop_best=max(acc[i, "mop"]), seq_best=max(acc[i, "seq"]),
                     avg_best=max(acc[i, "avg"]),
                     max_abs_mop_seq=max(abs(a - b) for a, b in zip(acc[i, "mop"], acc[i, "seq"]))))
print()
print("| config | final MOP | final seq | final avg | best MOP | best seq | best avg | max over epochs of abs(MOP - seq) |")
print("|---|---|---|---|---|---|---|---|")
for s in summ:
    print(f"| {s['config']} | {s['mop_final']:.4f} | {s['seq_final']:.4f} | {s['avg_final']:.4f} | {s['mop_best']:.4f} | "
          f"{s['seq_best']:.4f} | {s['avg_best']:.4f} | {100 * s['max_abs_mop_seq']:.2f} pt |")
n = len(summ)
f = lambda k: sum(s[k] for s in summ) / n
print(f"RESULT mean final accuracy: MOP {f('mop_final'):.4f}  sequential {f('seq_final'):.4f}  averaging {f('avg_final'):.4f}")
print(f"RESULT MOP - sequential (final epoch): max abs {100 * max(abs(s['mop_final'] - s['seq_final']) for s in summ):.2f} points, "
      f"mean {100 * (f('mop_final') - f('seq_final')):+.2f}; (best epoch): max abs "
      f"{100 * max(abs(s['mop_best'] - s['seq_best']) for s in summ):.2f}; averaging - sequential (final): mean "
      f"{100 * (f('avg_final') - f('seq_final')):+.2f}, min {100 * min(s['avg_final'] - s['seq_final'] for s in summ):+.2f} points")
print(f"finished {utcnow()}; load {loadavg()}")
save("converge.json", dict(space=SPACE, run_id=run_id, configs=configs,
                           acc={f"{i}:{k}": v for (i, k), v in acc.items()}, summary=summ))
