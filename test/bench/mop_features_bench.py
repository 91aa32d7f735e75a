"""Training-features benchmark (run_features_bench.sh, phase bench).

Per repetition, three runs on dataset 'fashion', FEAT epochs each, 2 workers,
seed = repetition, order reversed every other repetition:
  grid    mop_grid_search over Cerebro's 16-configuration grid (2 fixed
          architectures x lr x batch size x l2)
  widths  mop_random_search, 16 trials, over the same lr / batch size / l2
          lists plus layer widths, activations, depth and lr_schedule
          (same budget: 16 configurations x FEAT epochs)
  patience the 16-configuration grid with
          "early_stopping": {"patience": 2, "min_delta": 0.001}
  cosine  (only when asked, --only ...,cosine) the 16-configuration grid with
          one fixed "lr_schedule": {"type": "cosine", "min_lr": 1e-5}: the
          schedule alone, without the search over widths
--summary reads the bench_rep*.json files and prints the tables of
docs/benchmarks.md ("Training features"), times to 0.87 / 0.88 / 0.89 included.
Prints one RESULT line per run and a summary; writes bench.json.
Also replays the patience rule offline on the grid run's own curves
(mop.epochs), which gives epochs saved and accuracy lost without the
run-to-run noise of a second training.
"""
import argparse
import copy
import json
import os
import subprocess
import time

from mop_bench_common import MLP_A, MLP_B, connect, loadavg, median, utcnow, wait_quiet

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=2)
ap.add_argument("--start", type=int, default=1)
ap.add_argument("--epochs", type=int, default=10)
ap.add_argument("--dataset", default="fashion")
ap.add_argument("--only", default="grid,widths,patience")
ap.add_argument("--summary", action="store_true")
args = ap.parse_args()
OUTD = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".cache", "features")
os.makedirs(OUTD, exist_ok=True)


def time_to(r, x):
    ts = [f for m in r["models"] for v, f in zip(m["curve"], m["fins"]) if v is not None and v >= x]
    return "%.1f" % min(ts) if ts else "not reached"


if args.summary:
    import glob
    rs = []
    for fn in sorted(glob.glob(os.path.join(OUTD, "bench_rep*.json"))):
        rs += json.load(open(fn))["results"]
    print("| run | rep | wall (s) | epochs trained | models stopped | best valid acc | time to best (s) "
          "| to 0.87 (s) | to 0.88 (s) | to 0.89 (s) | mean of the 16 models' best | best configuration | load before -> after |")
    for r in sorted(rs, key=lambda r: (r["kind"], r["rep"])):
        print(f"| {r['kind']} | {r['rep']} | {r['wall']:.1f} | {r['epochs_trained']} | {r['stopped']} | {r['best']:.4f} "
              f"| {r['time_to_best']:.1f} | {time_to(r, 0.87)} | {time_to(r, 0.88)} | {time_to(r, 0.89)} "
              f"| {r['mean_best']:.4f} | {r['best_config']} | {r['load_before'].split()[0]} -> {r['load_after'].split()[0]} |")
    for k in ["grid", "widths", "patience", "cosine"]:
        kr = [r for r in rs if r["kind"] == k]
        if kr:
            print(f"MEDIAN {k}: n={len(kr)} wall {median([r['wall'] for r in kr]):.1f} epochs "
                  f"{median([r['epochs_trained'] for r in kr])} best {median([r['best'] for r in kr]):.4f} "
                  f"time to best {median([r['time_to_best'] for r in kr]):.1f} mean best {median([r['mean_best'] for r in kr]):.4f}")
        for r in kr:
            if "replay" in r:
                print(f"REPLAY rep {r['rep']}: {r['replay']}")
    raise SystemExit(0)

GRID = {"model": [MLP_A, MLP_B], "optimizer": "adam", "learning_rate": [1e-3, 1e-4],
        "batch_size": [32, 256], "l2": [1e-4, 1e-6]}
PATIENCE = {"patience": 2, "min_delta": 0.001}
GRID_ES = dict(GRID, early_stopping=PATIENCE)
# a one-element list: a plain object under "lr_schedule" is read as a distribution
GRID_COS = dict(GRID, lr_schedule=[{"type": "cosine", "min_lr": 1e-5}])
WIDTHS = {"model": [
    {"layers": [{"type": "dense", "units": [64, 128, 256, 512], "activation": ["relu", "gelu"]},
                {"type": "dense", "units": 10}]},
    {"layers": [{"type": "dense", "units": [128, 256, 512], "activation": ["relu", "gelu"]},
                {"type": "dense", "units": [64, 128, 256], "activation": "relu"},
                {"type": "dense", "units": 10}]}],
    "optimizer": "adam", "learning_rate": [1e-3, 1e-4], "batch_size": [32, 256], "l2": [1e-4, 1e-6],
    "lr_schedule": [{"type": "none"},
                    {"type": "cosine", "min_lr": 1e-5},
                    {"type": "cosine", "min_lr": 1e-5, "warmup": 1},
                    {"type": "step", "step_size": 4, "gamma": 0.3}]}

conn = connect()
cur = conn.cursor()
print(f"{utcnow()}; load {loadavg()}; {args.epochs} epochs, 2 workers, reps {args.start}..{args.start + args.reps - 1}")
print("grid space: " + json.dumps(GRID))
print("patience: " + json.dumps(PATIENCE))
print("widths space: " + json.dumps(WIDTHS))
cur.execute("SELECT train_rows, valid_rows FROM mop.datasets WHERE name = %s", (args.dataset,))
print("dataset %s: train %s rows, validation %s rows" % ((args.dataset,) + cur.fetchone()))


def arch(cfg):
    m = cfg["model"]
    layers = m["layers"] if isinstance(m, dict) else m
    return "784-" + "-".join(str(l["units"]) + ("g" if l.get("activation") == "gelu" else "")
                             for l in layers if l.get("type") == "dense")


def describe(cfg):
    s = "%s lr=%g bs=%d l2=%g" % (arch(cfg), cfg["learning_rate"], cfg["batch_size"], cfg["l2"])
    if cfg.get("lr_schedule"):
        s += " sched=" + json.dumps(cfg["lr_schedule"], separators=(",", ":"))
    return s


def busy_others():
    r = subprocess.run(["ps", "-eo", "pcpu,user,args", "--sort=-pcpu", "--no-headers"],
                       capture_output=True, text=True)
    out = []
    for line in r.stdout.splitlines()[:6]:
        f = line.split(None, 2)
        if len(f) == 3 and float(f[0]) >= 5:
            out.append(f"{f[0]}% {f[2][:50]}")
    return "; ".join(out)


def one(kind, rep):
    wait_quiet()
    before = loadavg()
    others = busy_others()
    t0 = time.time()
    if kind == "widths":
        cur.execute("SELECT run_id, model_id, status, best_valid_metric FROM mop_random_search(%s, %s::jsonb, "
                    "trials => 16, epochs => %s, workers => 2, seed => %s)",
                    (args.dataset, json.dumps(WIDTHS), args.epochs, rep))
    else:
        cur.execute("SELECT run_id, model_id, status, best_valid_metric FROM mop_grid_search(%s, %s::jsonb, "
                    "epochs => %s, workers => 2, seed => %s)",
                    (args.dataset, json.dumps({"patience": GRID_ES, "cosine": GRID_COS}.get(kind, GRID)), args.epochs, rep))
    wall = time.time() - t0
    rows = cur.fetchall()
    run = rows[0][0]
    assert len(rows) == 16, rows
    cur.execute("SELECT extract(epoch from finished_at - started_at), extract(epoch from started_at) "
                "FROM mop.runs WHERE id = %s", (run,))
    makespan, start = map(float, cur.fetchone())
    cur.execute("SELECT m.id, m.config, m.status, m.best_valid_metric, m.best_epoch, m.epochs_done, "
                "array_agg(e.valid_metric ORDER BY e.epoch), "
                "array_agg(extract(epoch from e.finished_at)::float8 ORDER BY e.epoch) "
                "FROM mop.models m JOIN mop.epochs e ON e.model_id = m.id WHERE m.run_id = %s "
                "GROUP BY m.id ORDER BY m.id", (run,))
    models = []
    for mid, cfg, st, best, be, done, curve, fins in cur.fetchall():
        models.append(dict(id=mid, config=cfg, status=st, best=best, best_epoch=be, epochs=done,
                           curve=curve, fins=[f - start for f in fins]))
    cur.execute("SELECT count(*) FROM mop.hops WHERE run_id = %s", (run,))
    hops = cur.fetchone()[0]
    bestm = max(models, key=lambda m: m["best"])
    t_best = min(f for m in models for v, f in zip(m["curve"], m["fins"]) if v is not None and v >= bestm["best"])
    res = dict(kind=kind, rep=rep, run=run, wall=wall, makespan=makespan,
               epochs_trained=sum(m["epochs"] for m in models), hops=hops,
               stopped=sum(m["status"] == "stopped" for m in models),
               statuses=sorted(set(m["status"] for m in models)),
               best=bestm["best"], best_config=describe(bestm["config"]), time_to_best=t_best,
               mean_best=sum(m["best"] for m in models) / len(models),
               load_before=before, load_after=loadavg(), others=others, models=models)
    print(f"RESULT {kind:8s} rep {rep} run {run}: wall {wall:.1f} s (makespan {makespan:.1f}), "
          f"epochs {res['epochs_trained']} (hops {hops}), stopped {res['stopped']}, "
          f"best {bestm['best']:.4f} at {t_best:.1f} s [{res['best_config']}], "
          f"mean of models' best {res['mean_best']:.4f}; statuses {res['statuses']}; "
          f"load {before} -> {res['load_after']}; busy before: {others}", flush=True)
    return res


def replay_patience(curve, patience=2, min_delta=0.001):
    """mop's (Keras') patience rule on a recorded curve: (epochs it would
    train, best validation accuracy among them).  The rule's best moves only
    with an improvement of more than min_delta."""
    best, wait = None, 0
    for i, v in enumerate(curve):
        if v is None:
            continue
        if best is None or v - min_delta > best:
            best, wait = v, 0
            continue
        wait += 1
        if wait >= patience:
            return i + 1, max(x for x in curve[:i + 1] if x is not None)
    return len(curve), max(x for x in curve if x is not None)


def key(cfg):
    c = copy.deepcopy(cfg)
    c.pop("early_stopping", None)
    return json.dumps(c, sort_keys=True)


kinds = args.only.split(",")
results = []
for rep in range(args.start, args.start + args.reps):
    order = kinds if rep % 2 == 1 else kinds[::-1]
    print(f"==== repetition {rep}: {' '.join(order)}  {utcnow()}", flush=True)
    for k in order:
        results.append(one(k, rep))
    byk = {r["kind"]: r for r in results if r["rep"] == rep}
    if "grid" in byk:
        g = byk["grid"]
        sim = [replay_patience(m["curve"]) for m in g["models"]]
        sim_ep = sum(e for e, b in sim)
        sim_best = max(b for e, b in sim)
        lost = [m["best"] - b for m, (e, b) in zip(g["models"], sim)]
        g["replay"] = dict(epochs=sim_ep, best=sim_best, max_lost=max(lost), mean_lost=sum(lost) / len(lost))
        print(f"REPLAY   rep {rep}: the patience rule on the grid run's curves: epochs {sim_ep} of "
              f"{g['epochs_trained']}, best {sim_best:.4f} (grid {g['best']:.4f}), per model lost mean "
              f"{g['replay']['mean_lost']:.4f} max {g['replay']['max_lost']:.4f}", flush=True)
    if "grid" in byk and "patience" in byk:
        g, p = byk["grid"], byk["patience"]
        pm = {key(m["config"]): m for m in p["models"]}
        diffs = [m["best"] - pm[key(m["config"])]["best"] for m in g["models"]]
        print(f"PAIR     rep {rep}: patience/grid epochs {p['epochs_trained']}/{g['epochs_trained']} "
              f"({1 - p['epochs_trained'] / g['epochs_trained']:.1%} saved), wall {p['wall']:.1f}/{g['wall']:.1f} s "
              f"({1 - p['wall'] / g['wall']:.1%} saved), best {p['best']:.4f}/{g['best']:.4f} "
              f"(lost {g['best'] - p['best']:+.4f}); per configuration grid - patience: mean {sum(diffs) / 16:+.4f}, "
              f"min {min(diffs):+.4f}, max {max(diffs):+.4f}", flush=True)
        for m in g["models"]:
            q = pm[key(m["config"])]
            print(f"  {describe(m['config']):40s} grid best {m['best']:.4f} (epoch {m['best_epoch']}), "
                  f"patience best {q['best']:.4f} (epoch {q['best_epoch']}, trained {q['epochs']}, {q['status']})")
    for k in ("widths", "cosine"):
        if k not in byk:
            continue
        for m in sorted(byk[k]["models"], key=lambda m: -m["best"]):
            print(f"  {k}: {describe(m['config']):70s} best {m['best']:.4f} (epoch {m['best_epoch']})")
    with open(os.path.join(OUTD, f"bench_rep{args.start}.json"), "w") as f:
        json.dump(dict(epochs=args.epochs, grid=GRID, widths=WIDTHS, patience=PATIENCE, results=results),
                  f, indent=1, default=str)

print("==== medians over repetitions")
for k in kinds:
    rs = [r for r in results if r["kind"] == k]
    if rs:
        print(f"MEDIAN {k:8s} n={len(rs)}: wall {median([r['wall'] for r in rs]):.1f} s, "
              f"epochs {median([r['epochs_trained'] for r in rs]):.0f}, best {median([r['best'] for r in rs]):.4f}, "
              f"time to best {median([r['time_to_best'] for r in rs]):.1f} s, "
              f"mean of models' best {median([r['mean_best'] for r in rs]):.4f}")
print(utcnow())
