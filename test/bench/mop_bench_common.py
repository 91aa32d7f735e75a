"""Helpers shared by the mop benchmark scripts (run_mop_bench.sh)."""
import datetime
import json
import os
import subprocess
import time

try:                       # Debian's python3-psycopg2 (the system interpreter)
    import psycopg2 as _pg
    PG_DRIVER = "psycopg2 " + _pg.__version__.split()[0]
except ImportError:        # a venv with psycopg 3 from PyPI
    import psycopg as _pg
    PG_DRIVER = "psycopg " + _pg.__version__

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
    c = _pg.connect(host=os.environ.get("PGHOST", "/tmp/mopbench"),
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


# ------------------------------------------------------------------ loaders
# What a user's script does before training: read fashion_train out of
# PostgreSQL into numpy, then shuffle (seed 1), split 10 % for validation and
# standardise with the training mean/std (as mop_prepare does).
#   psycopg2       SELECT label, pixels; the real[] arrive as Python lists
#   psycopg3       psycopg 3, COPY (SELECT label, pixels ...) TO STDOUT (FORMAT
#                  BINARY) with typed reads (set_types text, real[]): rows as
#                  Python lists, no text parsing
#   psycopg3-raw   psycopg 3, the same binary COPY stream read in blocks and
#                  decoded with numpy (no Python float per pixel)
LOADERS = ("psycopg2", "psycopg3", "psycopg3-raw")
COPY_Q = "COPY (SELECT label, pixels FROM fashion_train) TO STDOUT (FORMAT BINARY)"


def _rows_psycopg2():
    c = connect()
    k = c.cursor()
    k.execute("SELECT label, pixels FROM fashion_train")
    rows = k.fetchall()
    c.close()
    labels = [r[0] for r in rows]
    import numpy as np
    return labels, np.asarray([r[1] for r in rows], dtype=np.float32)


def _rows_psycopg3():
    import numpy as np
    c = connect()
    labels, px = [], []
    with c.cursor() as k:
        with k.copy(COPY_Q) as cp:
            cp.set_types(["text", "real[]"])
            for lab, pix in cp.rows():
                labels.append(lab)
                px.append(pix)
    c.close()
    return labels, np.asarray(px, dtype=np.float32)


def _rows_psycopg3_raw():
    import struct

    import numpy as np
    c = connect()
    with c.cursor() as k:
        with k.copy(COPY_Q) as cp:
            buf = b"".join(bytes(b) for b in cp)
    c.close()
    assert buf[:11] == b"PGCOPY\n\xff\r\n\x00"
    ext, = struct.unpack_from(">i", buf, 15)
    off = 19 + ext
    labels, offs = [], []
    n = None
    u16, u32 = struct.Struct(">h"), struct.Struct(">i")
    while True:
        nf, = u16.unpack_from(buf, off)
        if nf == -1:
            break
        ll, = u32.unpack_from(buf, off + 2)
        labels.append(buf[off + 6:off + 6 + ll].decode())
        off += 6 + ll
        al, = u32.unpack_from(buf, off)
        ndim, = u32.unpack_from(buf, off + 4)
        assert ndim == 1
        dim, = u32.unpack_from(buf, off + 16)
        if n is None:
            n = dim
        assert dim == n
        offs.append(off + 4 + 20 + 4)       # first float (after its int32 length)
        off += 4 + al
    x = np.empty((len(offs), n), dtype=np.float32)
    for i, o in enumerate(offs):
        x[i] = np.ndarray((n,), dtype=">f4", buffer=buf, offset=o, strides=(8,))
    return labels, x


def load_numpy(loader):
    """(train x, train y, valid x, valid y) as numpy arrays, after the
    preprocessing mop_prepare does."""
    import numpy as np
    labels, x = {"psycopg2": _rows_psycopg2, "psycopg3": _rows_psycopg3,
                 "psycopg3-raw": _rows_psycopg3_raw}[loader]()
    classes = sorted(set(labels))
    idx = {l: i for i, l in enumerate(classes)}
    y = np.asarray([idx[l] for l in labels], dtype=np.int64)
    perm = np.random.default_rng(1).permutation(len(y))
    nv = int(round(0.1 * len(y)))
    vx, vy, tx, ty = x[perm[:nv]], y[perm[:nv]], x[perm[nv:]], y[perm[nv:]]
    mean = tx.mean(0)
    std = tx.std(0)
    std[std == 0] = 1
    tx = (tx - mean) / std
    vx = (vx - mean) / std
    return tx, ty, vx, vy


def default_loader():
    """psycopg 3's fastest loader where psycopg 3 is installed, else psycopg2."""
    return "psycopg2" if PG_DRIVER.startswith("psycopg2") else "psycopg3-raw"


def torch_env():
    """One line: torch version, BLAS, oneDNN, OpenMP, CPU capability, threads."""
    import re

    import torch
    cfg = torch.__config__.show()
    keep = []
    for what, pat in (("BLAS", r"BLAS_INFO=(\w+)"), ("MKL", r"Math Kernel Library Version (\S+)"),
                      ("oneDNN", r"MKL-DNN (v[\d.]+)"), ("OpenMP", r"OpenMP (\d+)"),
                      ("CPU capability", r"CPU capability usage: (\w+)")):
        m = re.search(pat, cfg)
        if m:
            keep.append(f"{what} {m.group(1)}")
    return f"torch {torch.__version__} ({'; '.join(keep)}); torch threads {torch.get_num_threads()}"
