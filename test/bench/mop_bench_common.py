"""Helpers shared by the mop benchmark scripts (run_mop_bench.sh)."""
import datetime
import json
import os
import subprocess
import time

import psycopg2

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUTD = os.path.join(ROOT, "test", "bench", ".cache", "mop_bench")
os.makedirs(OUTD, exist_ok=True)

MLP_A = {"layers": [{"type": "dense", "units": 256, "activation": "relu"},
                    {"type": "dense", "units": 128, "activation": "relu"},
                    {"type": "dense", "units": 10}]}
MLP_B = {"layers": [{"type": "dense", "units": 512, "activation": "relu"},
                    {"type": "dense", "units": 10}]}


def arch_name(model):
    layers = model["layers"] if isinstance(model, dict) else model
    return "784-" + "-".join(str(l["units"]) for l in layers if l["type"] == "dense")


def connect():
    c = psycopg2.connect(host=os.environ.get("PGHOST", "/tmp/mopbench"),
                         port=int(os.environ.get("PGPORT", "55432")),
                         user="postgres", dbname="postgres")
    c.autocommit = True
    cur = c.cursor()
    cur.execute("SET client_min_messages = warning")
    return c


def wait_quiet(limit=float(os.environ.get("MOPB_WAIT_MAX", "600"))):
    """Wait until no other heavy benchmark (another engineer's) is running,
    at most `limit` seconds (then go on, and say so: the figure is noisier)."""
    said = False
    t0 = time.time()
    while True:
        if time.time() - t0 > limit:
            print(f"  WARNING: machine still busy after {limit:.0f}s; measuring anyway", flush=True)
            return
        r = subprocess.run(["pgrep", "-f", "bench_engine|bench_torch|xcheck"],
                           capture_output=True, text=True)
        pids = [p for p in r.stdout.split() if int(p) != os.getpid()]
        busy = cpu_busy(2.0)
        if not pids and busy < 0.3:
            if said:
                print(f"  (quiet after {time.time() - t0:.0f}s)", flush=True)
            return
        if not said:
            print(f"  (waiting: other benchmarks {pids}, {busy:.2f} cores busy)", flush=True)
            said = True
        time.sleep(3)


def _stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]


def cpu_busy(secs):
    """Cores busy (0..ncpu) over the next secs seconds, all processes."""
    t1, i1 = _stat()
    time.sleep(secs)
    t2, i2 = _stat()
    return (1 - (i2 - i1) / max(1, t2 - t1)) * os.cpu_count()


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def utcnow():
    return datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S UTC")


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return float("nan")
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def save(name, obj):
    with open(os.path.join(OUTD, name), "w") as f:
        json.dump(obj, f, indent=1, default=str)
