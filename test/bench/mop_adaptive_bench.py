#!/usr/bin/python3
"""Adaptive search benchmarks, run by run_adaptive_bench.sh.

  compare   Hyperband, ASHA, TPE vs grid and random search on one space with
            (nearly) the same total budget in epochs; best validation accuracy,
            time to it, time to fixed targets, total wall.
  converge  scheduler => 'convergence' vs 'fifo' (Hermes' baseline) and
            'random' (Cerebro's, mop's default) on a grid with few good
            configurations (2 of 10 learning rates; --hard: 2 of 16),
            interleaved repetitions; time to a target validation accuracy.
  optuna    mop_hyperband vs Optuna (TPESampler + HyperbandPruner) driving
            PyTorch on CPU in 2 processes (1 thread each), same space, same
            R/eta, same trial count; time to common accuracy targets.
            --baselines optuna,raytune adds Ray Tune in the same alternation.
  raytune   the same against Ray Tune (ASHAScheduler, random search, 2 trials
            at a time with 1 CPU and 1 thread each; the data put once in Ray's
            object store with tune.with_parameters).
The baselines' script reads the table with --loader (mop_bench_common.load_numpy:
psycopg2 under Debian's python3; psycopg 3 binary COPY under a venv).

Times of a mop run are measured from mop.runs.started_at to
mop.epochs.finished_at (the validation of that epoch included); the
client-side wall of the SQL call is reported too.  Epochs trained =
count(mop.hops) / partitions (sub-epochs / 2).
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import time

import subprocess
import threading

import numpy as np

from mop_bench_common import (LOADERS, MLP_A, MLP_B, PG_DRIVER, arch_name, connect, default_loader,
                              load_numpy, loadavg, median, save, torch_env, utcnow, wait_quiet)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".cache", "adaptive")
os.makedirs(OUT, exist_ok=True)

SPACE = {"model": [MLP_A, MLP_B], "optimizer": "adam",
         "learning_rate": {"loguniform": [1e-4, 1e-1]}, "batch_size": [32, 128, 512], "seed": 1}
GRID = dict(SPACE, learning_rate=[1e-4, 1e-3, 1e-2, 1e-1])          # 24 configurations
TARGETS = (0.85, 0.87, 0.88)
OPT_TARGETS = (0.85, 0.87, 0.88, 0.885, 0.89)      # optuna / raytune phases
LOADER = default_loader()
MAXR = 9            # optuna / raytune phases: epochs of a full trial (Hyperband's / ASHA's R); --max-resource


OTHERS = "run_mop_bench|run_engine_bench|bench_engine|bench_torch|xcheck"


def others():
    r = subprocess.run(["pgrep", "-f", OTHERS], capture_output=True, text=True)
    return [p for p in r.stdout.split() if int(p) != os.getpid()]


def quiet(limit=float(os.environ.get("MOPB_WAIT_MAX", "240"))):
    """wait_quiet() of mop_bench_common, but also wait (at most `limit` s)
    while another engineer's benchmark script runs at all."""
    t0 = time.time()
    if others():
        print(f"  (waiting for other benchmark scripts: {others()})", flush=True)
        while others() and time.time() - t0 < limit:
            time.sleep(3)
    wait_quiet(max(10, limit - (time.time() - t0)))


class Contention:
    """Samples, once a second during a measurement, whether another
    benchmark script (OTHERS) is running: the fraction of samples with one."""
    def __enter__(self):
        self.n = self.hit = 0
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.loop, daemon=True)
        self.th.start()
        return self

    def loop(self):
        while not self.stop.wait(1.0):
            self.n += 1
            self.hit += bool(others())

    def __exit__(self, *a):
        self.stop.set()
        self.th.join()
        self.frac = self.hit / max(1, self.n)


def sql1(k, q, a=()):
    k.execute(q, a)
    return k.fetchone()


def run_mop(k, call, args):
    """Run one blocking mop call; return its measurements from the catalog."""
    t0 = time.time()
    with Contention() as cn:
        k.execute(call, args)
        rows = k.fetchall()
    wall = time.time() - t0
    rid = rows[0][0]
    st = sql1(k, "SELECT status, extract(epoch FROM finished_at - started_at), options FROM mop.runs WHERE id = %s", (rid,))
    k.execute("""SELECT extract(epoch FROM e.finished_at - r.started_at), e.valid_metric, e.model_id, e.epoch
                   FROM mop.epochs e JOIN mop.models m ON m.id = e.model_id JOIN mop.runs r ON r.id = m.run_id
                  WHERE m.run_id = %s ORDER BY e.finished_at""", (rid,))
    curve = [(float(t), float(a) if a is not None else float("nan"), int(m), int(e)) for t, a, m, e in k.fetchall()]
    hops = sql1(k, "SELECT count(*) FROM mop.hops WHERE run_id = %s", (rid,))[0]
    parts = sql1(k, "SELECT d.partitions FROM mop.datasets d JOIN mop.runs r ON r.dataset_id = d.id WHERE r.id = %s", (rid,))[0]
    nmodels = sql1(k, "SELECT count(*) FROM mop.models WHERE run_id = %s", (rid,))[0]
    k.execute("SELECT action, count(*) FROM mop.decisions WHERE run_id = %s GROUP BY 1 ORDER BY 1", (rid,))
    dec = dict(k.fetchall())
    best_cfg = None
    if rows:
        best_cfg = rows[0][9]
    return dict(run_id=rid, status=st[0], run_s=float(st[1]), wall=wall, curve=curve, epochs=hops / parts, contended=cn.frac,
                models=nmodels, decisions=dec, best_config=best_cfg, options=st[2])


def summarize(curve, targets=TARGETS):
    """curve: [(t, acc, ...)] in time order -> best, time to best, time to targets."""
    good = [c for c in curve if c[1] == c[1]]
    best = max(c[1] for c in good)
    t_best = min(c[0] for c in good if c[1] == best)
    tt = {}
    for tg in targets:
        hit = [c[0] for c in good if c[1] >= tg]
        tt[tg] = min(hit) if hit else None
    return best, t_best, tt


def fmt_t(x):
    return "not reached" if x is None else f"{x:.1f}"


def cfg_str(c):
    if not c:
        return "?"
    return f"{arch_name(c['model'])} lr={c['learning_rate']:.3g} bs={c['batch_size']}"


# ---------------------------------------------------------------- compare
def phase_compare(args):
    sp, gr = json.dumps(SPACE), json.dumps(GRID)
    methods = [
        ("hyperband", "SELECT * FROM mop_hyperband('fashion', %s::jsonb, max_resource => 9, eta => 3, workers => 2, seed => %s)", sp,
         "R=9, eta=3 (3 brackets, 17 configurations)"),
        ("asha", "SELECT * FROM mop_asha('fashion', %s::jsonb, max_resource => 9, eta => 3, min_resource => 1, max_trials => 30, workers => 2, seed => %s)", sp,
         "R=9, eta=3, min 1, 30 trials"),
        ("tpe", "SELECT * FROM mop_tpe('fashion', %s::jsonb, trials => 23, epochs => 3, n_startup => 8, workers => 2, seed => %s)", sp,
         "23 trials x 3 epochs, 8 startup"),
        ("random", "SELECT * FROM mop_random_search('fashion', %s::jsonb, trials => 8, epochs => 9, workers => 2, seed => %s)", sp,
         "8 trials x 9 epochs"),
        ("grid", "SELECT * FROM mop_grid_search('fashion', %s::jsonb, epochs => 3, workers => 2, seed => %s)", gr,
         "24 configs (lr 1e-4,1e-3,1e-2,1e-1) x 3 epochs"),
    ]
    if args.methods:
        keep = args.methods.split(",")
        methods = [m for m in methods if m[0] in keep]
    c = connect()
    k = c.cursor()
    k.execute("LOAD 'mop'")
    if args.scheduler:
        k.execute("SET mop.scheduler = %s", (args.scheduler,))
    print(f"space: {sp}")
    print(f"grid space: learning_rate {GRID['learning_rate']}; mop.scheduler = {sql1(k, 'SHOW mop.scheduler')[0]}")
    R = {}
    for rep in range(args.start, args.start + args.reps):
        order = methods if rep % 2 else list(reversed(methods))
        for name, q, s, desc in order:
            quiet()
            la = loadavg()
            d = run_mop(k, q, (s, rep))
            d["load"] = la
            d["desc"] = desc
            R.setdefault(name, []).append(d)
            b, tb, tt = summarize(d["curve"])
            print(f"  rep {rep} {name} (run {d['run_id']}, {d['status']}): best {b:.4f} at {tb:.1f}s; "
                  + ", ".join(f"to {t}: {fmt_t(v)}s" for t, v in tt.items())
                  + f"; run {d['run_s']:.1f}s (call {d['wall']:.1f}s); {d['epochs']:.0f} epochs, {d['models']} models; "
                  f"decisions {d['decisions']}; best {cfg_str(d['best_config'])}; load before {la}; other benchmark running {100 * d['contended']:.0f}% of the time", flush=True)
    print()
    print("| method | settings | epochs trained | configurations | best valid acc | time to best (s) | "
          + " | ".join(f"time to {t} (s)" for t in TARGETS) + " | total wall (s) | best configuration |")
    print("|---|---|---|---|---|---|" + "---|" * len(TARGETS) + "---|---|")
    for name, q, s, desc in methods:
        for d in R[name]:
            b, tb, tt = summarize(d["curve"])
            print(f"| {name} | {desc} | {d['epochs']:.0f} | {d['models']} | {b:.4f} | {tb:.1f} | "
                  + " | ".join(fmt_t(tt[t]) for t in TARGETS) + f" | {d['run_s']:.1f} | {cfg_str(d['best_config'])} |")
    print(f"finished {utcnow()}; load {loadavg()}")
    save_json(f"compare{args.tag}.json", R)


# ---------------------------------------------------------------- converge
CONV_SPACE = {"model": MLP_A, "optimizer": "adam", "batch_size": 256, "seed": 1,
              "learning_rate": [1e-6, 2e-6, 4e-6, 8e-6, 1e-3, 2e-3, 0.5, 1.0, 2.0, 4.0]}
CONV_TARGETS = (0.87, 0.88, 0.885)
# --hard: 16 configurations, 2 good (lr 1e-3, 2e-3), a target that needs ~5+ epochs
CONV_SPACE_HARD = dict(CONV_SPACE, learning_rate=[1e-6, 1.5e-6, 2e-6, 3e-6, 4e-6, 6e-6, 8e-6, 1e-3, 2e-3,
                                                  0.3, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0])
CONV_TARGETS_HARD = (0.88, 0.885, 0.89)


def phase_converge(args):
    global CONV_TARGETS
    c = connect()
    k = c.cursor()
    sp = json.dumps(CONV_SPACE_HARD if args.hard else CONV_SPACE)
    if args.hard:
        CONV_TARGETS = CONV_TARGETS_HARD
    print(f"space: {sp}; epochs {args.epochs}; target {CONV_TARGETS}")
    scheds = args.schedulers.split(",")
    R = {sch: [] for sch in scheds}
    for rep in range(1, args.reps + 1):
        # rotate the order so no scheduler always runs first (or last)
        order = scheds[(rep - 1) % len(scheds):] + scheds[:(rep - 1) % len(scheds)]
        if rep % 2 == 0:
            order.reverse()
        for sch in order:
            quiet()
            la = loadavg()
            d = run_mop(k, "SELECT * FROM mop_grid_search('fashion', %s::jsonb, epochs => %s, workers => 2, seed => %s, scheduler => %s)",
                        (sp, args.epochs, rep, sch))
            d["load"] = la
            R[sch].append(d)
            b, tb, tt = summarize(d["curve"], CONV_TARGETS)
            # epochs trained by the two good configurations before the first target hit
            print(f"  rep {rep} {sch} (run {d['run_id']}, seed {rep}): " + ", ".join(f"to {t}: {fmt_t(v)}s" for t, v in tt.items())
                  + f"; best {b:.4f} at {tb:.1f}s; run {d['run_s']:.1f}s; {d['epochs']:.0f} epochs; load before {la}; other benchmark running {100 * d['contended']:.0f}% of the time", flush=True)
            order_s = []
            for t, a, m, e in d["curve"][:12]:
                order_s.append(f"m{m}e{e}:{a:.3f}@{t:.0f}s")
            print("     first 12 epochs finished: " + " ".join(order_s))
    print()
    print("| scheduler | rep (seed) | " + " | ".join(f"time to {t} (s)" for t in CONV_TARGETS) + " | best | total (s) |")
    print("|---|---|" + "---|" * len(CONV_TARGETS) + "---|---|")
    for sch in scheds:
        for i, d in enumerate(R[sch]):
            b, tb, tt = summarize(d["curve"], CONV_TARGETS)
            print(f"| {sch} | {i + 1} | " + " | ".join(fmt_t(tt[t]) for t in CONV_TARGETS) + f" | {b:.4f} | {d['run_s']:.1f} |")
    for t in CONV_TARGETS:
        med = {}
        for sch in R:
            v = [summarize(d["curve"], CONV_TARGETS)[2][t] for d in R[sch]]
            med[sch] = median([x if x is not None else float("inf") for x in v])
        line = f"RESULT time to {t}: medians " + ", ".join(f"{sch} {med[sch]:.1f}s" for sch in scheds)
        if "convergence" in med:
            line += "; " + ", ".join(f"{sch}/convergence {med[sch] / med['convergence']:.2f}x"
                                     for sch in scheds if sch != "convergence")
        print(line)
    print(f"finished {utcnow()}; load {loadavg()}")
    save_json("converge_hard.json" if args.hard else "converge.json", R)


# ---------------------------------------------------------------- optuna
def load_torch():
    """What the user's script does before training: read + preprocess."""
    import torch
    return tuple(torch.from_numpy(a) for a in load_numpy(LOADER))


DATA = None


def optuna_worker(storage, study_name, n_trials, t0, logpath, seed):
    import optuna
    import torch
    import torch.nn as tnn
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tx, ty, vx, vy = DATA
    study = optuna.load_study(study_name=study_name,
                              storage=optuna.storages.RDBStorage(storage, engine_kwargs={"connect_args": {"timeout": 60}}),
                              sampler=optuna.samplers.TPESampler(seed=seed),
                              pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=MAXR, reduction_factor=3))
    log = open(logpath, "a")

    def objective(trial):
        arch = trial.suggest_categorical("model", ["784-256-128-10", "784-512-10"])
        lr = trial.suggest_float("learning_rate", 1e-4, 1e-1, log=True)
        bs = trial.suggest_categorical("batch_size", [32, 128, 512])
        torch.manual_seed(1)
        units = [256, 128, 10] if arch == "784-256-128-10" else [512, 10]
        layers, d = [], 784
        for i, u in enumerate(units):
            layers.append(tnn.Linear(d, u))
            d = u
            if i < len(units) - 1:
                layers.append(tnn.ReLU())
        net = tnn.Sequential(*layers)
        opt = torch.optim.Adam(net.parameters(), lr=lr, foreach=True)
        lossf = tnn.CrossEntropyLoss()
        g = torch.Generator().manual_seed(trial.number)
        acc = 0.0
        for epoch in range(1, MAXR + 1):
            perm = torch.randperm(len(ty), generator=g)
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
            if acc != acc:
                acc = 0.0
            log.write(json.dumps([time.time() - t0, acc, trial.number, epoch, arch, lr, bs]) + "\n")
            log.flush()
            trial.report(acc, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return acc

    study.optimize(objective, n_trials=n_trials)


def run_optuna(n_trials, rep):
    global DATA
    import optuna
    db = f"/tmp/mopadapt_optuna_{os.getpid()}_{rep}.db"
    logpath = os.path.join(OUT, f"optuna_rep{rep}.jsonl")
    for p in (db, logpath):
        if os.path.exists(p):
            os.remove(p)
    storage = f"sqlite:///{db}"
    t0 = time.time()
    DATA = load_torch()
    t_load = time.time() - t0
    st = optuna.storages.RDBStorage(storage, engine_kwargs={"connect_args": {"timeout": 60}})
    optuna.create_study(study_name="fmnist", storage=st, direction="maximize")
    per = [n_trials - n_trials // 2, n_trials // 2]
    ps = [mp.get_context("fork").Process(target=optuna_worker, args=(storage, "fmnist", per[i], t0, logpath, 100 * rep + i))
          for i in range(2)]
    with Contention() as cn:
        for p in ps:
            p.start()
        for p in ps:
            p.join()
    wall = time.time() - t0
    DATA = None
    curve = []
    with open(logpath) as f:
        for line in f:
            t, a, tn, e, arch, lr, bs = json.loads(line)
            curve.append((t, a, tn, e, arch, lr, bs))
    curve.sort()
    study = optuna.load_study(study_name="fmnist", storage=storage)
    states = {}
    for tr in study.trials:
        states[tr.state.name] = states.get(tr.state.name, 0) + 1
    ntrials = sum(states.values())
    os.remove(db)
    return dict(wall=wall, load=t_load, curve=curve, epochs=len(curve), trials=ntrials, states=states, contended=cn.frac)


def ray_trainable(config, data=None, t0=0.0, logpath="", max_t=9):
    """One Ray Tune trial: the same model, optimizer and epoch loop as the
    Optuna objective; tune.report after each epoch (ASHA decides)."""
    import warnings
    import zlib

    import torch
    import torch.nn as tnn
    from ray import tune
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=".*not writable.*")  # the object store's read-only arrays
    tx, ty, vx, vy = (torch.from_numpy(a) for a in data)
    arch, lr, bs = config["model"], config["learning_rate"], config["batch_size"]
    torch.manual_seed(1)
    units = [256, 128, 10] if arch == "784-256-128-10" else [512, 10]
    layers, d = [], 784
    for i, u in enumerate(units):
        layers.append(tnn.Linear(d, u))
        d = u
        if i < len(units) - 1:
            layers.append(tnn.ReLU())
    net = tnn.Sequential(*layers)
    opt = torch.optim.Adam(net.parameters(), lr=lr, foreach=True)
    lossf = tnn.CrossEntropyLoss()
    tid = tune.get_context().get_trial_id()
    g = torch.Generator().manual_seed(zlib.crc32(tid.encode()))
    log = open(logpath, "a")
    for epoch in range(1, max_t + 1):
        perm = torch.randperm(len(ty), generator=g)
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
        if acc != acc:
            acc = 0.0
        log.write(json.dumps([time.time() - t0, acc, tid, epoch, arch, lr, bs]) + "\n")
        log.flush()
        tune.report({"acc": acc})


def run_raytune(n_trials, rep):
    """A Ray Tune script: ray.init on the 2 cores, read + preprocess, the data
    put once in the object store, 17 trials of random search under ASHA
    (R = 9, eta = 3, grace period 1), 2 at a time."""
    import logging

    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.basic_variant import BasicVariantGenerator
    logpath = os.path.join(OUT, f"raytune_rep{rep}.jsonl")
    if os.path.exists(logpath):
        os.remove(logpath)
    # Ray starts its worker processes at nice 15 by default; on a machine
    # shared with other work that would slow the trials down against the
    # other sides (nice 0), so they run at the same priority here
    os.environ.setdefault("RAY_worker_niceness", "0")
    t0 = time.time()
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir="/tmp/ray-mopb", log_to_driver=False,
             logging_level=logging.WARNING)
    t_init = time.time() - t0
    data = load_numpy(LOADER)
    t_load = time.time() - t0 - t_init
    trainable = tune.with_resources(tune.with_parameters(ray_trainable, data=data, t0=t0, logpath=logpath, max_t=MAXR), {"cpu": 1})
    del data
    t_setup = time.time() - t0
    space = {"model": tune.choice(["784-256-128-10", "784-512-10"]),
             "learning_rate": tune.loguniform(1e-4, 1e-1),
             "batch_size": tune.choice([32, 128, 512])}
    tuner = tune.Tuner(
        trainable, param_space=space,
        tune_config=tune.TuneConfig(metric="acc", mode="max", num_samples=n_trials,
                                    search_alg=BasicVariantGenerator(max_concurrent=2, random_state=100 * rep),
                                    scheduler=ASHAScheduler(time_attr="training_iteration", max_t=MAXR, grace_period=1,
                                                            reduction_factor=3)),
        run_config=tune.RunConfig(name=f"mopb_rep{rep}_{os.getpid()}", storage_path="/tmp/ray-mopb-results", verbose=0))
    with Contention() as cn:
        res = tuner.fit()
    wall = time.time() - t0
    states = {}
    for r in res:
        st = "ERROR" if r.error else "DONE"
        states[st] = states.get(st, 0) + 1
    errors = [str(r.error)[:300] for r in res if r.error]
    ray.shutdown()
    curve = []
    if os.path.exists(logpath):
        with open(logpath) as f:
            for line in f:
                curve.append(tuple(json.loads(line)))
    curve.sort()
    return dict(wall=wall, load=t_load, init=t_init, setup=t_setup, curve=curve, epochs=len(curve), trials=len(res),
                states=states, errors=errors, contended=cn.frac)


def phase_optuna(args):
    import torch
    bases = args.baselines.split(",")
    vers = {}
    if "optuna" in bases:
        import optuna
        vers["optuna"] = optuna.__version__
    if "raytune" in bases:
        import ray
        vers["ray"] = ray.__version__
    print(", ".join(f"{k} {v}" for k, v in vers.items()) + f"; {torch_env()[:400]}")
    print(f"baselines read the table with: {LOADER} ({PG_DRIVER})")
    c = connect()
    k = c.cursor()
    sp = json.dumps(SPACE)
    # mop_prepare of a scratch copy: what the mop side spends on data loading
    quiet()
    k.execute("SELECT mop_drop_dataset('e2e') FROM mop.datasets WHERE name = 'e2e'")
    t0 = time.time()
    k.execute("SELECT * FROM mop_prepare('fashion_train', 'label', ARRAY['pixels'], 'e2e', partitions => 2, "
              "validation => 0.1, shape => ARRAY[28, 28, 1], seed => 1)")
    t_prep = time.time() - t0
    k.execute("SELECT mop_drop_dataset('e2e')")
    print(f"  mop_prepare (60000 rows, 2 partitions, 10% validation, standardised): {t_prep:.1f}s")
    mops = ["mop_" + x for x in args.mop_schedulers.split(",")]
    R = {w: [] for w in mops + bases}
    for rep in range(args.start, args.start + args.reps):
        order = mops + bases if rep % 2 else bases[::-1] + mops[::-1]
        for who in order:
            quiet()
            la = loadavg()
            if who.startswith("mop"):
                if who == "mop_asha":
                    # ASHA (Ray Tune's scheduler), the same R / eta, 17 trials
                    d = run_mop(k, "SELECT * FROM mop_asha('fashion', %s::jsonb, max_resource => %s, eta => 3, min_resource => 1, "
                                "max_trials => %s, workers => 2, seed => %s)", (sp, MAXR, args.trials, 10 + rep))
                elif who == "mop_tpe":
                    # TPE with the median stopping rule: Optuna's setup (TPE + a pruner), 17 trials, 9 epochs
                    d = run_mop(k, "SELECT * FROM mop_tpe('fashion', %s::jsonb, trials => 17, epochs => 9, n_startup => 10, "
                                "early_stopping => 'median', workers => 2, seed => %s)", (sp, 10 + rep))
                else:
                    d = run_mop(k, "SELECT * FROM mop_hyperband('fashion', %s::jsonb, max_resource => %s, eta => 3, workers => 2, seed => %s, scheduler => %s)",
                                (sp, MAXR, 10 + rep, who[4:]))
                d["prepare"] = t_prep
            elif who == "optuna":
                d = run_optuna(args.trials, rep)
            else:
                d = run_raytune(args.trials, rep)
            d["load_before"] = la
            d["load_after"] = loadavg()
            R[who].append(d)
            if not d["curve"]:
                print(f"  rep {rep} {who}: NO EPOCH FINISHED: {d}", flush=True)
                continue
            b, tb, tt = summarize(d["curve"], OPT_TARGETS)
            if who.startswith("mop"):
                extra = f"run {d['run_s']:.1f}s, {d['epochs']:.0f} epochs, {d['models']} configs"
            else:
                extra = (f"wall {d['wall']:.1f}s incl. read+preprocess {d['load']:.1f}s"
                         + (f", ray.init {d['init']:.1f}s, ready to train at {d['setup']:.1f}s" if who == "raytune" else "")
                         + f", {d['epochs']} epochs, {d['trials']} trials {d['states']}")
                if d.get("errors"):
                    extra += f"; errors: {d['errors'][:2]}"
            print(f"  rep {rep} {who}: best {b:.4f} at {tb:.1f}s; " + ", ".join(f"to {t}: {fmt_t(v)}{'s' * (v is not None)}" for t, v in tt.items())
                  + f"; {extra}; load before {la}, after {d['load_after']}; other benchmark running {100 * d['contended']:.0f}% of the time", flush=True)
    print()
    allt = OPT_TARGETS

    def start(who, d):
        """seconds of a baseline's clock spent before training: read + preprocess (+ ray.init, object store)"""
        return d.get("setup", d["load"]) if not who.startswith("mop") else 0.0

    print("| side | rep | what the clock includes | epochs trained | best valid acc | time to best (s) | "
          + " | ".join(f"time to {t} (s)" for t in allt) + " | total (s) |")
    print("|---|---|---|---|---|---|" + "---|" * len(allt) + "---|")
    for who in R:
        for i, d in enumerate(R[who]):
            if not d["curve"]:
                continue
            b, tb, tt = summarize(d["curve"], allt)
            if who.startswith("mop"):
                inc = "mop_hyperband from mop.runs.started_at (data already prepared; mop_prepare %.1fs not included)" % d["prepare"]
            elif who == "optuna":
                inc = f"script start: {LOADER} read + numpy preprocess ({d['load']:.1f}s) + 2 forked processes"
            else:
                inc = (f"script start: ray.init ({d['init']:.1f}s) + {LOADER} read + numpy preprocess ({d['load']:.1f}s) "
                       f"+ object store; training from {d['setup']:.1f}s")
            tot = d["run_s"] if who.startswith("mop") else d["wall"]
            print(f"| {who} | {args.start + i} | {inc} | {d['epochs']:.0f} | {b:.4f} | {tb:.1f} | "
                  + " | ".join(fmt_t(tt[t]) for t in allt) + f" | {tot:.1f} |")
    # speedups: medians and per-pair ratios; mop with mop_prepare against the
    # baseline from its script start, and training only on both sides
    INF = float("inf")
    for who in mops:
        for base in bases:
            for t in allt:
                mm = [summarize(d["curve"], allt)[2][t] if d["curve"] else None for d in R[who]]
                oo = [summarize(d["curve"], allt)[2][t] if d["curve"] else None for d in R[base]]
                mmi = [x if x is not None else INF for x in mm]
                ooi = [x if x is not None else INF for x in oo]
                otr = [x - start(base, d) for x, d in zip(ooi, R[base])]
                pair = [o / (m + t_prep) for m, o in zip(mmi, ooi)]
                pair_tr = [o / m for m, o in zip(mmi, otr)]
                m, o, ol = median(mmi), median(ooi), median(otr)
                print(f"RESULT {who} vs {base} target {t}: mop {m:.1f}s (+ mop_prepare {t_prep:.1f}s = {m + t_prep:.1f}s), "
                      f"{base} {o:.1f}s (training only {ol:.1f}s): with loading {o / (m + t_prep):.2f}x, training only {ol / m:.2f}x; "
                      f"per pair with loading {', '.join(f'{x:.2f}' for x in pair)}; training only {', '.join(f'{x:.2f}' for x in pair_tr)}")
            # each baseline run's own best as the target, for the mop run of the same repetition
            line = []
            for dm, db in zip(R[who], R[base]):
                if not dm["curve"] or not db["curve"]:
                    continue
                bb, tbb, _ = summarize(db["curve"], ())
                tm = summarize(dm["curve"], (bb,))[2][bb]
                line.append(f"{base} best {bb:.4f} at {tbb:.1f}s (training only {tbb - start(base, db):.1f}s), mop "
                            + ("never" if tm is None else f"{tm:.1f}s + {t_prep:.1f}s = {tm + t_prep:.1f}s: {tbb / (tm + t_prep):.2f}x, "
                               f"training only {(tbb - start(base, db)) / tm:.2f}x"))
            print(f"RESULT {who} vs {base}, to the baseline's own best: " + "; ".join(line))
    print(f"finished {utcnow()}; load {loadavg()}")
    save_json(f"{'_'.join(bases)}{args.tag}.json", R)


def save_json(name, obj):
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(obj, f, indent=1, default=str)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=["compare", "converge", "optuna", "raytune"])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--hard", action="store_true")
    ap.add_argument("--schedulers", default="random,fifo,convergence", help="converge: schedulers compared")
    ap.add_argument("--methods", default="", help="compare: only these methods (comma-separated)")
    ap.add_argument("--scheduler", default="", help="compare: mop.scheduler for every method")
    ap.add_argument("--mop-schedulers", default="random,convergence",
                    help="optuna: mop sides: random / convergence (mop_hyperband with that scheduler), tpe (mop_tpe with median stopping), "
                         "asha (mop_asha, --trials trials)")
    ap.add_argument("--baselines", default="", help="optuna: baselines in the alternation: optuna, raytune (default: the phase's name)")
    ap.add_argument("--loader", choices=LOADERS, default=LOADER, help="optuna, raytune: how the baselines read the table")
    ap.add_argument("--trials", type=int, default=17, help="optuna, raytune: the baselines' trials (17 = mop_hyperband's with R = 9, eta = 3)")
    ap.add_argument("--max-resource", type=int, default=9, help="optuna, raytune: R (epochs of a full trial) on every side; small for a dry run")
    ap.add_argument("--start", type=int, default=1, help="compare, optuna: first repetition (seed)")
    ap.add_argument("--tag", default="", help="compare, optuna: suffix of the .json file")
    a = ap.parse_args()
    LOADER = a.loader
    MAXR = a.max_resource
    if a.phase in ("optuna", "raytune") and not a.baselines:
        a.baselines = a.phase
    print(f"{a.phase}: {utcnow()}; load {loadavg()}", flush=True)
    {"compare": phase_compare, "converge": phase_converge, "optuna": phase_optuna, "raytune": phase_optuna}[a.phase](a)
