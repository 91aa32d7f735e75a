#!/usr/bin/env python3
"""Extension benchmark: mop_train epoch time vs the bare engine.

Exports the packed training/validation buffers of dataset "fashion" and the
initial state of the config (mop.init_model) to files, builds
test/bench/bare_engine.c against src/nn with the extension's own compiler
flags, then alternates, REPS times: bare engine (EPOCHS epochs) and mop_train
(EPOCHS epochs, in a fresh backend, so epoch 1 starts with an empty
mop.buffer_cache_mb cache).  Reports medians of epoch 1 and of epochs 2..E
(steady state) and the ratio mop / bare.  Both train bit-identically (same
shuffle, same minibatches), checked through the training loss.
"""
import argparse
import os
import re
import shlex
import subprocess
import time

from mop_bench_common import (MLP_A, OUTD, ROOT, connect, loadavg, median,
                              save, utcnow, wait_quiet)

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--dataset", default="fashion")
ap.add_argument("--work-mem", default="256MB",
                help="third arm: mop_train with this session work_mem (the ORDER BY of mop.train_agg "
                     "sorts a copy of the model state with every buffer row; 4MB spills it to disk)")
args = ap.parse_args()

CONFIG = {"model": MLP_A, "optimizer": "adam", "learning_rate": 0.001,
          "batch_size": 128, "l2": 1e-5, "seed": 1}
cfg = __import__("json").dumps(CONFIG)
exp = os.path.join(OUTD, "export")
os.makedirs(exp, exist_ok=True)

conn = connect()
cur = conn.cursor()
# ---- export the exact arrays mop trains on
cur.execute("SELECT id FROM mop.datasets WHERE name = %s", (args.dataset,))
dsid = cur.fetchone()[0]
cur.execute("SELECT mop.init_model(%s, %s::jsonb)", (args.dataset, cfg))
open(os.path.join(exp, "blob.bin"), "wb").write(bytes(cur.fetchone()[0]))
for split in ("train", "valid"):
    cur.execute("SELECT partition, rows, x, y FROM mop.buffers WHERE dataset_id = %s AND split = %s "
                "ORDER BY partition, buffer_no", (dsid, split))
    with open(os.path.join(exp, f"{split}_x.bin"), "wb") as fx, \
            open(os.path.join(exp, f"{split}_y.bin"), "wb") as fy, \
            open(os.path.join(exp, f"{split}.idx"), "w") as fi:
        for part, rows, x, y in cur:
            fx.write(bytes(x)); fy.write(bytes(y)); fi.write(f"{part} {rows}\n")

# ---- build with the extension's flags (pg_config --cflags + PG_CFLAGS)
pgcflags = subprocess.run(["pg_config", "--cflags"], capture_output=True, text=True).stdout.split()
pgcflags = [f for f in pgcflags if not f.startswith("-W") and "prefix-map" not in f]
SRC = os.environ.get("MOPB_SRC", ROOT)   # the pinned source tree (run_mop_bench.sh)
mk = open(os.path.join(SRC, "Makefile")).read()
extra = re.search(r"^PG_CFLAGS\s*=\s*(.*)$", mk, re.M).group(1).split()
binp = os.path.join(OUTD, "bare_engine")
srcs = sorted(os.path.join(SRC, "src/nn", f) for f in os.listdir(os.path.join(SRC, "src/nn")) if f.endswith(".c"))
print("engine sources:", os.path.join(SRC, "src/nn"))
cc = ["gcc"] + pgcflags + extra + ["-std=gnu11", "-I" + os.path.join(SRC, "src/nn"), "-o", binp,
                                   os.path.join(ROOT, "test/bench/bare_engine.c")] + srcs + ["-ldl", "-lm"]
print("build:", " ".join(shlex.quote(c) for c in cc[:len(pgcflags) + len(extra) + 2]), "... -ldl -lm")
subprocess.run(cc, check=True)

print(f"config: {cfg}")
print(f"{args.reps} repetitions x {args.epochs} epochs, alternating bare / mop; {utcnow()}; load {loadavg()}")
rows = []
for rep in range(1, args.reps + 1):
    wait_quiet()
    order = ("bare", "mop", "mop_wm") if rep % 2 else ("mop_wm", "mop", "bare")
    for who in order:
        if who == "bare":
            out = subprocess.run([binp, exp, str(args.epochs)], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                if line.startswith("INFO") and rep == 1:
                    print(" ", line)
                if line.startswith("RESULT"):
                    d = dict(kv.split("=") for kv in line.split()[1:])
                    rows.append(dict(rep=rep, who="bare", epoch=int(d["epoch"]), seconds=float(d["seconds"]),
                                     train_s=float(d["train_s"]), eval_s=float(d["eval_s"]),
                                     train_loss=float(d["train_loss"]), valid_acc=float(d["valid_acc"])))
        else:
            c2 = connect()   # a fresh backend: empty buffer cache
            k = c2.cursor()
            if who == "mop_wm":
                k.execute(f"SET work_mem = '{args.work_mem}'")
            k.execute("SHOW work_mem")
            wm = k.fetchone()[0]
            t0 = time.time()
            k.execute("SELECT mop_train(%s, %s::jsonb, epochs => %s)", (args.dataset, cfg, args.epochs))
            mid = k.fetchone()[0]
            wall = time.time() - t0
            k.execute("SELECT epoch, seconds, train_loss, valid_metric FROM mop.epochs WHERE model_id = %s ORDER BY epoch", (mid,))
            for e, s, tl, vm in k.fetchall():
                rows.append(dict(rep=rep, who=who, work_mem=wm, epoch=e, seconds=s, train_loss=tl, valid_acc=vm, wall=wall, model_id=mid))
            c2.close()
    last = [r for r in rows if r["rep"] == rep]
    print(f"  rep {rep}: " + "  ".join(f"{r['who']} e{r['epoch']} {r['seconds']:.3f}s" for r in last), flush=True)

def med(who, ep):
    return median([r["seconds"] for r in rows if r["who"] == who and (r["epoch"] == 1 if ep == 1 else r["epoch"] > 1)])

res = {}
for arm, label in (("mop", "mop (work_mem default 4MB)"), ("mop_wm", f"mop (work_mem {args.work_mem})")):
    for ep, name in ((1, "first epoch"), (2, f"steady (epochs 2..{args.epochs})")):
        b, m = med("bare", ep), med(arm, ep)
        res[arm + " " + name] = dict(bare=b, mop=m, ratio=m / b)
        print(f"RESULT {label} {name}: bare {b:.3f} s  mop {m:.3f} s  mop/bare {m / b:.4f}  overhead {100 * (m / b - 1):+.1f}%")
    # per-rep paired ratios
    for ep in (1, 2):
        pr = []
        for rep in range(1, args.reps + 1):
            sel = (lambda r: r["epoch"] == 1) if ep == 1 else (lambda r: r["epoch"] > 1)
            b = median([r["seconds"] for r in rows if r["rep"] == rep and r["who"] == "bare" and sel(r)])
            m = median([r["seconds"] for r in rows if r["rep"] == rep and r["who"] == arm and sel(r)])
            pr.append(m / b)
        res[arm + f" paired e{ep}"] = pr
        print(f"  paired ratios per rep ({label}, {'first' if ep == 1 else 'steady'}):", " ".join(f"{x:.4f}" for x in pr), f"median {median(pr):.4f}")
# equal work check: training losses of bare and mop per epoch
bl = {r["epoch"]: r["train_loss"] for r in rows if r["who"] == "bare" and r["rep"] == 1}
ml = {r["epoch"]: r["train_loss"] for r in rows if r["who"] == "mop" and r["rep"] == 1}
print("train loss per epoch bare / mop:", "; ".join(f"e{e}: {bl[e]:.9g} / {ml[e]:.9g}" for e in sorted(bl)))
bv = {r["epoch"]: r["valid_acc"] for r in rows if r["who"] == "bare" and r["rep"] == 1}
mv = {r["epoch"]: r["valid_acc"] for r in rows if r["who"] == "mop" and r["rep"] == 1}
print("valid acc per epoch bare / mop:", "; ".join(f"e{e}: {bv[e]:.4f} / {mv[e]:.4f}" for e in sorted(bv)))
walls = sorted(set(r["wall"] for r in rows if r["who"] == "mop"))
walls2 = sorted(set(r["wall"] for r in rows if r["who"] == "mop_wm"))
print(f"mop_train wall time ({args.work_mem}): median {median(walls2):.3f} s")
print(f"mop_train wall time for {args.epochs} epochs: median {median(walls):.3f} s; sum of bare epochs median "
      f"{median([sum(r['seconds'] for r in rows if r['who'] == 'bare' and r['rep'] == k) for k in range(1, args.reps + 1)]):.3f} s")
print(f"finished {utcnow()}; load {loadavg()}")
save("overhead.json", dict(config=CONFIG, rows=rows, summary=res))
