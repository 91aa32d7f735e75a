#!/usr/bin/env python3
"""Summarise one or more JSON results of mop_adaptive_bench.py's optuna /
raytune phases (test/bench/.cache/adaptive/*.json): per repetition, then per
target the medians, the ratio of the medians and the per-pair ratios of mop
against each baseline, with data loading on both sides (mop_prepare + the
run; the baseline's script from its start) and training only.

    python3 test/bench/adaptive_summary.py test/bench/.cache/adaptive/optuna_raytune_from31.json [...]
"""
import json
import sys

TARGETS = (0.85, 0.88, 0.89)
INF = float("inf")


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def first(curve, acc):
    hit = [c[0] for c in curve if c[1] == c[1] and c[1] >= acc]
    return min(hit) if hit else INF


def best(curve):
    b = max(c[1] for c in curve if c[1] == c[1])
    return b, first(curve, b)


def f(x, unit=""):
    return "not reached" if x == INF else f"{x:.1f}{unit}"


R = {}
for p in sys.argv[1:]:
    for k, v in json.load(open(p)).items():
        R.setdefault(k, []).extend(v)
mops = [k for k in R if k.startswith("mop")]
bases = [k for k in R if not k.startswith("mop")]


def setup(who, d):
    """a baseline's seconds before training: read + preprocess (+ ray.init, object store)"""
    return d.get("setup", d["load"])


print("| side | rep | epochs | best valid acc | time to best (s) | "
      + " | ".join(f"to {t} (s)" for t in TARGETS) + " | total (s) | before training (s) | load average before |")
print("|---|---|---|---|---|" + "---|" * len(TARGETS) + "---|---|---|")
for who in mops + bases:
    for i, d in enumerate(R[who]):
        b, tb = best(d["curve"])
        tot = d["run_s"] if who in mops else d["wall"]
        pre = f"mop_prepare {d['prepare']:.1f} (not in the times)" if who in mops else (
            f"{setup(who, d):.1f}" + (f" (ray.init {d['init']:.1f}, read {d['load']:.1f})" if "init" in d else f" (read {d['load']:.1f})"))
        print(f"| {who} | {i + 1} | {d['epochs']:.0f} | {b:.4f} | {tb:.1f} | " + " | ".join(f(first(d['curve'], t)) for t in TARGETS)
              + f" | {tot:.1f} | {pre} | {d['load_before'].split()[0]} |")
print()
for who in mops:
    prep = [d["prepare"] for d in R[who]]
    for base in bases:
        n = min(len(R[who]), len(R[base]))
        print(f"{who} against {base}, {n} pairs (mop: mop_prepare + the run; {base}: its script from the start, "
              "and training only = after reading the data" + (", ray.init and the object store" if base == "raytune" else "") + ")")
        print("| target | mop run + mop_prepare (median) | " + base + " (median) | **ratio of medians** | per pair | pairs >= 4x | "
              "training only: mop run / " + base + " | ratio | per pair |")
        print("|---|---|---|---|---|---|---|---|---|")
        rows = [(t, f"{t}") for t in TARGETS] + [(None, f"{base}'s own best")]
        for t, name in rows:
            mw, bw, mt, bt = [], [], [], []
            for dm, db in list(zip(R[who], R[base]))[:n]:
                tt = best(db["curve"])[0] if t is None else t
                m = first(dm["curve"], tt)
                b = best(db["curve"])[1] if t is None else first(db["curve"], tt)
                mw.append(m + dm["prepare"])
                bw.append(b)
                mt.append(m)
                bt.append(b - setup(base, db))
            pr = [b / m for m, b in zip(mw, bw)]
            pt = [b / m for m, b in zip(mt, bt)]
            ratio = median(bw) / median(mw)

            def rl(xs):   # a side that never reached the target counts as infinitely late
                return ", ".join("mop never" if x == 0 else "inf" if x == INF else f"{x:.2f}" for x in xs)
            print(f"| {name} | {f(median(mw), ' s')} | {f(median(bw), ' s')} | **{ratio:.2f}x** | " + rl(pr)
                  + f" | {sum(x >= 4 for x in pr)} / {n} | {f(median(mt))} / {f(median(bt), ' s')} | {median(bt) / median(mt):.2f}x | "
                  + rl(pt) + " |")
        print()
