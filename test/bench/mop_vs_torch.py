#!/usr/bin/env python3
"""MOP benchmark: mop against what a user does today.

The same 16-configuration grid as mop_throughput.py, 1 epoch, three ways,
alternating per repetition:
  mop         end to end: mop_prepare of fashion_train (2 partitions, 10%
              validation, standardised, shuffled) + mop_grid_search(workers 2,
              1 epoch, validation included); the scratch dataset is dropped
              afterwards (not timed)
  torch_seq   a Python script: reads fashion_train with the --loader
              (psycopg2: SELECT label, pixels; psycopg3: binary COPY with
              typed reads; psycopg3-raw: the binary COPY stream decoded with
              numpy -- see mop_bench_common.load_numpy), to numpy float32, shuffle (seed 1), 10% validation
              split, standardise with the training mean/std, then train the 16
              configurations one after the other with PyTorch on CPU
              (torch.set_num_threads(1)), each 1 epoch + validation accuracy
  torch_2p    the same, with the 16 trainings spread over 2 processes
              (multiprocessing, fork after loading, each process 1 thread)
PyTorch setup matching mop: nn.Linear + ReLU, cross-entropy, Adam(lr), l2
added to the kernel gradients only (Adam weight_decay on the weight tensors;
biases without), per-epoch shuffle, the last partial batch trained.
Runs under Debian's python3 (psycopg2, PyTorch 1.13) and under a venv with
PyPI packages (psycopg 3, PyTorch 2.x): run_mop_bench.sh's PY.
"""
import argparse
import json
import multiprocessing as mp
import os
import time

import numpy as np
import torch
import torch.nn as tnn

from mop_bench_common import (COPY_Q, LOADERS, MLP_A, MLP_B, PG_DRIVER, arch_name, connect, default_loader,
                              load_numpy, loadavg, median, save, torch_env, utcnow, wait_quiet)

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=1)
ap.add_argument("--loader", choices=LOADERS, default=default_loader(),
                help="how the PyTorch script reads the table (default: psycopg3-raw where psycopg 3 is installed, else psycopg2)")
ap.add_argument("--sides", default="mop,torch_seq,torch_2p", help="which of mop, torch_seq, torch_2p to run")
ap.add_argument("--compare-loaders", action="store_true",
                help="only time the loaders this Python can run (read + preprocess), --reps times each, alternating")
args = ap.parse_args()
torch.set_num_threads(1)
SPACE = {"model": [MLP_A, MLP_B], "optimizer": "adam", "learning_rate": [1e-3, 1e-4],
         "batch_size": [32, 256], "l2": [1e-4, 1e-6], "seed": 1}
CONFIGS = [dict(model=m, learning_rate=lr, batch_size=bs, l2=l2)
           for m in SPACE["model"] for lr in SPACE["learning_rate"]
           for bs in SPACE["batch_size"] for l2 in SPACE["l2"]]


def key(c):
    return f"{arch_name(c['model'])} lr={c['learning_rate']:g} bs={c['batch_size']} l2={c['l2']:g}"


def load():
    """What the user's script does before training: read + preprocess."""
    return tuple(torch.from_numpy(a) for a in load_numpy(args.loader))


DATA = None


def train_one(c):
    torch.set_num_threads(1)
    tx, ty, vx, vy = DATA
    torch.manual_seed(1)
    layers, d = [], 784
    for l in c["model"]["layers"]:
        layers.append(tnn.Linear(d, l["units"]))
        d = l["units"]
        if l.get("activation") == "relu":
            layers.append(tnn.ReLU())
    net = tnn.Sequential(*layers)
    w = [p for n, p in net.named_parameters() if n.endswith("weight")]
    b = [p for n, p in net.named_parameters() if n.endswith("bias")]
    opt = torch.optim.Adam([{"params": w, "weight_decay": c["l2"]}, {"params": b, "weight_decay": 0.0}],
                           lr=c["learning_rate"], foreach=True)
    lossf = tnn.CrossEntropyLoss()
    t0 = time.time()
    g = torch.Generator().manual_seed(1)
    perm = torch.randperm(len(ty), generator=g)
    bs = c["batch_size"]
    net.train()
    for off in range(0, len(ty), bs):
        i = perm[off:off + bs]
        opt.zero_grad(set_to_none=True)
        loss = lossf(net(tx[i]), ty[i])
        loss.backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        acc = (net(vx).argmax(1) == vy).float().mean().item()
    return key(c), acc, time.time() - t0


def init_worker():
    torch.set_num_threads(1)


def run_torch(procs):
    global DATA
    t0 = time.time()
    DATA = load()
    tl = time.time() - t0
    if procs == 1:
        res = [train_one(c) for c in CONFIGS]
    else:
        with mp.get_context("fork").Pool(procs, initializer=init_worker) as pool:
            res = list(pool.imap_unordered(train_one, CONFIGS))
    DATA = None
    return dict(wall=time.time() - t0, load=tl, acc={k: a for k, a, s in res}, train_s=sum(s for k, a, s in res))


def run_mop():
    c = connect()
    k = c.cursor()
    k.execute("SELECT mop_drop_dataset('e2e') FROM mop.datasets WHERE name = 'e2e'")
    t0 = time.time()
    k.execute("SELECT * FROM mop_prepare('fashion_train', 'label', ARRAY['pixels'], 'e2e', partitions => 2, "
              "validation => 0.1, shape => ARRAY[28, 28, 1], seed => 1)")
    tp = time.time() - t0
    k.execute("SELECT model_id, best_valid_metric FROM mop_grid_search('e2e', %s::jsonb, epochs => 1, workers => 2, seed => 1)",
              (json.dumps(SPACE),))
    rr = k.fetchall()
    wall = time.time() - t0
    acc = {}
    for mid, m in rr:
        k.execute("SELECT config FROM mop.models WHERE id = %s", (mid,))
        acc[key(k.fetchone()[0])] = m
    k.execute("SELECT mop_drop_dataset('e2e')")
    c.close()
    return dict(wall=wall, load=tp, acc=acc)


def compare_loaders():
    avail = [l for l in LOADERS if (l == "psycopg2") == PG_DRIVER.startswith("psycopg2")]
    print(f"loaders: {', '.join(avail)} ({PG_DRIVER}); {args.reps} repetitions; {utcnow()}; load {loadavg()}")
    if not PG_DRIVER.startswith("psycopg2"):
        avail.append("copy_only")       # the binary COPY alone, its blocks discarded: the server's and the wire's share
    T = {l: [] for l in avail}
    for rep in range(1, args.reps + 1):
        for l in (avail if rep % 2 else avail[::-1]):
            wait_quiet()
            la = loadavg()
            t0 = time.time()
            if l == "copy_only":
                c = connect()
                with c.cursor() as k:
                    with k.copy(COPY_Q) as cp:
                        for _ in cp:
                            pass
                c.close()
            else:
                load_numpy(l)
            T[l].append(time.time() - t0)
            print(f"  rep {rep} {l}: read + preprocess {T[l][-1]:.2f}s; load before {la}", flush=True)
    for l in avail:
        print(f"RESULT loader {l}: median {median(T[l]):.2f}s ({', '.join(f'{x:.2f}' for x in T[l])})")


if __name__ == "__main__":
    print(torch_env()[:400])
    if args.compare_loaders:
        compare_loaders()
        raise SystemExit(0)
    print(f"loader: {args.loader} ({PG_DRIVER}); {args.reps} repetitions; {utcnow()}; load {loadavg()}")
    sides = args.sides.split(",")
    R = {k: [] for k in sides}
    for rep in range(1, args.reps + 1):
        order = list(R) if rep % 2 else list(reversed(list(R)))
        for who in order:
            wait_quiet()
            la = loadavg()
            d = run_mop() if who == "mop" else run_torch(1 if who == "torch_seq" else 2)
            d["load_before"] = la
            R[who].append(d)
            print(f"  rep {rep} {who}: wall {d['wall']:.2f}s (read+preprocess / mop_prepare {d['load']:.2f}s); load before {la}", flush=True)
    m = {k: median([d["wall"] for d in v]) for k, v in R.items()}
    for k in ("torch_seq", "torch_2p"):
        if k in R and "mop" in R:
            pr = [t["wall"] / o["wall"] for t, o in zip(R[k], R["mop"])]
            tr = [(t["wall"] - t["load"]) / (o["wall"] - o["load"]) for t, o in zip(R[k], R["mop"])]
            print(f"RESULT {k} / mop end-to-end time: {m[k]:.2f}s / {m['mop']:.2f}s = {m[k] / m['mop']:.2f}x; "
                  f"per pair {', '.join(f'{x:.2f}' for x in pr)}")
            print(f"RESULT {k} / mop without reading + preparing the data: "
                  f"{median([d['wall'] - d['load'] for d in R[k]]):.2f}s / {median([d['wall'] - d['load'] for d in R['mop']]):.2f}s; "
                  f"per pair {', '.join(f'{x:.2f}' for x in tr)}")
    print("RESULT medians: " + "; ".join(f"{k} {m[k]:.2f}s ({'mop_prepare' if k == 'mop' else 'read+preprocess'} "
                                         f"{median([d['load'] for d in R[k]]):.2f}s)" for k in R))
    print()
    if "mop" in R and len(R) > 1:
        others = [k for k in R if k != "mop"]
        print("| config | mop valid acc | " + " | ".join(f"PyTorch valid acc ({k})" for k in others) + " | mop - PyTorch (points) |")
        print("|---|---|" + "---|" * len(others) + "---|")
        diffs = []
        for c in CONFIGS:
            kk = key(c)
            a = R["mop"][0]["acc"][kk]
            bs = [R[k][0]["acc"][kk] for k in others]
            diffs.append(a - bs[0])
            print(f"| {kk} | {a:.4f} | " + " | ".join(f"{b:.4f}" for b in bs) + f" | {100 * (a - bs[0]):+.2f} |")
        print(f"RESULT accuracy mop - PyTorch: mean {100 * sum(diffs) / len(diffs):+.2f} points, min {100 * min(diffs):+.2f}, max {100 * max(diffs):+.2f}")
    print(f"finished {utcnow()}; load {loadavg()}")
    save("torch.json" if args.loader == "psycopg2" else f"torch_{args.loader}.json", R)
