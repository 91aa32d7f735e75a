#!/usr/bin/env python3
"""Segments benchmark (run by run_segments_bench.sh, which starts the servers).

  mop_segments_bench.py setup|traffic|overhead|speedup|summary

Servers (SEGB_DIR, SEGB_PORT): coord (port P), seg1 (P+1), seg2 (P+2);
coord reaches the segments over loopback TCP (foreign servers seg1, seg2).

Datasets on coord, all from fashion_train (60,000 rows, 784 pixels) with
partitions 2, validation 0.1, shape [28, 28, 1], seed 1, so that they hold
the same rows in the same buffers:
  f_local   kept here
  f_seg1    training partitions on seg1 only (segments => ARRAY['seg1'])
  f_seg12   partition 0 on seg1, 1 on seg2 (ARRAY['seg1', 'seg2'], replicas 1)
  s_seg1    the first 4,000 rows, on seg1 (the traffic phase's runs: what a
            hop moves does not depend on the rows)
Bytes on the wire: the lo interface's counters (/proc/net/dev) around a run,
less the rate measured on lo just before it (other sessions' servers on
this machine use loopback too).
"""
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mop_bench_common import MLP_A, MLP_B, arch_name, cpu_busy, loadavg, median, utcnow  # noqa: E402

import psycopg2  # noqa: E402

DIR = os.environ.get("SEGB_DIR", "/tmp/mopsegbench")
PORT = int(os.environ.get("SEGB_PORT", "55461"))
OUTD = os.environ.get("OUTD", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".cache", "segments_bench"))
WAIT_MAX = float(os.environ.get("MOPB_WAIT_MAX", "60"))
OVH_REPS = int(os.environ.get("OVH_REPS", "3"))
SPD_REPS = int(os.environ.get("SPD_REPS", "3"))
NODES = {"coord": PORT, "seg1": PORT + 1, "seg2": PORT + 2}
os.makedirs(OUTD, exist_ok=True)

# the LeNet-like CNN of the engine benchmark (test/bench/bench_torch.py)
CNN = {"layers": [{"type": "conv2d", "filters": 32, "kernel_size": 3, "padding": "same", "activation": "relu"},
                  {"type": "maxpool2d", "pool_size": 2},
                  {"type": "conv2d", "filters": 64, "kernel_size": 3, "padding": "same", "activation": "relu"},
                  {"type": "maxpool2d", "pool_size": 2},
                  {"type": "flatten"},
                  {"type": "dense", "units": 128, "activation": "relu"},
                  {"type": "dense", "units": 10}]}
# Cerebro's grid (as run_mop_bench.sh's throughput phase)
GRID16 = {"model": [MLP_A, MLP_B], "optimizer": "adam", "learning_rate": [1e-3, 1e-4],
          "batch_size": [32, 256], "l2": [1e-4, 1e-6], "seed": 1}
# the overhead phase's grid: the first architecture of it, l2 1e-4
GRID4 = {"model": MLP_A, "optimizer": "adam", "learning_rate": [1e-3, 1e-4],
         "batch_size": [32, 256], "l2": 1e-4, "seed": 1}
PREP = ("SELECT count(*) FROM mop_prepare(%s, 'label', ARRAY['pixels'], %s, partitions => 2, validation => 0.1, "
        "shape => ARRAY[28, 28, 1], seed => 1{})")


def connect(node="coord"):
    c = psycopg2.connect(host=DIR, port=NODES[node], user="postgres", dbname="postgres")
    c.autocommit = True
    c.cursor().execute("SET client_min_messages = warning")
    return c


def q(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchall()


def q1(cur, sql, args=None):
    return q(cur, sql, args)[0][0]


def lo():
    """(bytes, packets) through lo so far; on lo every byte is counted once
    received and once sent: this is the received side = the traffic."""
    with open("/proc/net/dev") as f:
        for line in f:
            if line.strip().startswith("lo:"):
                v = line.split(":", 1)[1].split()
                return int(v[0]), int(v[1])
    return 0, 0


CLK = os.sysconf("SC_CLK_TCK")


def _cpu_of(pid, children_too):
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    # fields after the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
    t = int(v[11]) + int(v[12])
    if children_too:
        t += int(v[13]) + int(v[14])
    return t


def cluster_cpu():
    """CPU seconds used so far by each server: its postmaster's own, its
    exited children's (the postmaster reaps them: cutime + cstime) and its
    live children's."""
    out = {}
    for node in NODES:
        try:
            pm = int(open(os.path.join(DIR, node, "postmaster.pid")).readline())
            t = _cpu_of(pm, True)
            for d in os.listdir("/proc"):
                if d.isdigit():
                    try:
                        with open(f"/proc/{d}/stat") as f:
                            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                        if ppid == pm:
                            t += _cpu_of(int(d), False)
                    except (OSError, ValueError, IndexError):
                        pass
            out[node] = t / CLK
        except OSError:
            out[node] = 0.0
    return out


class ProcSampler:
    """Every second, the CPU seconds of every process of each server, by
    process title ("mop worker", "mop coordinator", a client backend,
    checkpointer, ...): where a run's CPU went (what a process used after
    its last sample, under a second, is missed)."""

    def __init__(self):
        import threading
        self.last = {}
        self.stop = threading.Event()
        self.pms = {}
        for node in NODES:
            try:
                self.pms[int(open(os.path.join(DIR, node, "postmaster.pid")).readline())] = node
            except OSError:
                pass
        self.base = self.sample()
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def sample(self):
        out = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    v = f.read().rsplit(")", 1)[1].split()
                ppid = int(v[1])
                if ppid not in self.pms:
                    continue
                with open(f"/proc/{d}/cmdline") as f:
                    title = f.read().replace("\0", " ").strip()
                out[int(d)] = (self.pms[ppid], title, (int(v[11]) + int(v[12])) / CLK)
            except (OSError, ValueError, IndexError):
                pass
        return out

    def loop(self):
        while not self.stop.wait(1.0):
            self.last.update(self.sample())

    def done(self):
        self.stop.set()
        self.t.join()
        self.last.update(self.sample())
        by = {}
        for pid, (node, title, t) in self.last.items():
            t0 = self.base.get(pid, (node, title, 0.0))[2]
            if t - t0 < 0.005:
                continue
            kind = title.split(":", 1)[-1].strip()
            for k in ("mop worker", "mop coordinator", "autovacuum", "checkpointer", "walwriter", "background writer"):
                if k in kind:
                    kind = k
                    break
            else:
                kind = "backend (" + ("client" if node == "coord" else "segment connection") + ")"
            by[f"{node}: {kind}"] = by.get(f"{node}: {kind}", 0.0) + t - t0
        return dict(sorted(by.items()))


def lo_rate(secs=1.0):
    b0, _ = lo()
    time.sleep(secs)
    b1, _ = lo()
    return (b1 - b0) / secs


def wait_quiet():
    """At most WAIT_MAX s until other processes use < 0.3 of a core."""
    t0 = time.time()
    said = False
    while True:
        busy = cpu_busy(2.0)
        if busy < 0.3:
            if said:
                print(f"  (quiet after {time.time() - t0:.0f}s)", flush=True)
            return busy
        if time.time() - t0 > WAIT_MAX:
            print(f"  WARNING: {busy:.2f} cores still busy after {WAIT_MAX:.0f}s; measuring anyway", flush=True)
            return busy
        if not said:
            print(f"  (waiting for a quiet machine: {busy:.2f} cores busy)", flush=True)
            said = True


def save(name, obj):
    with open(os.path.join(OUTD, name), "w") as f:
        json.dump(obj, f, indent=1, default=str)


def load(name):
    p = os.path.join(OUTD, name)
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)


def params_of(model, shape=(28, 28, 1), classes=10):
    """Trainable parameters of a model of the configurations used here."""
    h, w, c = shape
    flat = None
    n = 0
    for l in model["layers"]:
        t = l["type"]
        if t == "conv2d":
            k = l["kernel_size"]
            n += k * k * c * l["filters"] + l["filters"]
            c = l["filters"]
        elif t == "maxpool2d":
            h, w = h // l.get("pool_size", 2), w // l.get("pool_size", 2)
        elif t == "flatten":
            flat = h * w * c
        elif t == "dense":
            inp = flat if flat is not None else h * w * c
            n += inp * l["units"] + l["units"]
            flat = l["units"]
    return n


def env_line():
    import subprocess
    cpu = subprocess.run("lscpu | sed -n 's/^Model name: *//p'", shell=True, capture_output=True, text=True).stdout.strip()
    with connect() as c:
        k = c.cursor()
        ver = q1(k, "SELECT version()").split(",")[0]
        q1(k, "SELECT mop.buffer_cache_reset()")  # loads mop
        pid = q1(k, "SELECT pg_backend_pid()")
        libs = sorted({l.split()[-1] for l in open(f"/proc/{pid}/maps") if l.rstrip().endswith("mop.so")})
    inst = open(os.path.join(DIR, "installed")).read().strip().replace("\n", "; ") if os.path.exists(os.path.join(DIR, "installed")) else "?"
    return dict(date=utcnow(), cpu=cpu, ncpu=os.cpu_count(), pg=ver, mop=inst, mop_loaded=libs, load=loadavg(),
                threads="mop.blas_threads = 1 (default) in every backend; OPENBLAS_NUM_THREADS=1")


def run_grid(cur, dataset, space, epochs, **kw):
    """Blocking mop_grid_search; returns a dict of the run's figures."""
    args = ", ".join(f"{k} => %({k})s" for k in kw)
    wait_quiet()
    rate = lo_rate(1.0)
    c0 = cluster_cpu()
    sampler = ProcSampler()
    b0, p0 = lo()
    t0 = time.time()
    cur.execute(f"SELECT run_id, status FROM mop_grid_search(%(ds)s, %(space)s::jsonb, epochs => %(epochs)s"
                f"{', ' + args if args else ''})", dict(ds=dataset, space=json.dumps(space), epochs=epochs, **kw))
    rr = cur.fetchall()
    wall = time.time() - t0
    b1, p1 = lo()
    procs = sampler.done()
    time.sleep(0.3)  # let the run's processes exit and be reaped
    c1 = cluster_cpu()
    cpu = {k: c1[k] - c0[k] for k in c0}
    run = rr[0][0]
    assert all(r[1] == "done" for r in rr), rr
    hops = q(cur, "SELECT h.model_id, h.epoch, h.partition, h.worker, extract(epoch FROM h.started_at)::float8, "
                  "extract(epoch FROM h.finished_at)::float8, octet_length(m.state) "
                  "FROM mop.hops h JOIN mop.models m ON m.id = h.model_id WHERE h.run_id = %s ORDER BY h.worker, h.started_at", (run,))
    makespan = q1(cur, "SELECT extract(epoch FROM finished_at - started_at)::float8 FROM mop.runs WHERE id = %s", (run,))
    head = q1(cur, "SELECT extract(epoch FROM min(h.started_at) - r.started_at)::float8 FROM mop.hops h "
                   "JOIN mop.runs r ON r.id = h.run_id WHERE r.id = %s GROUP BY r.started_at", (run,))
    durs = [f - s for m, e, p, w, s, f, b in hops]
    last = {}
    for m, e, p, w, s, f, b in hops:
        last[m, e] = max(last.get((m, e), 0), f)
    gaps = []
    for i in range(1, len(hops)):
        if hops[i][3] == hops[i - 1][3] and last[hops[i - 1][0], hops[i - 1][1]] != hops[i - 1][5]:
            gaps.append(hops[i][4] - hops[i - 1][5])
    state_bytes = sum(2 * b for m, e, p, w, s, f, b in hops)  # in and out, each hop
    ep2 = [f - s for m, e, p, w, s, f, b in hops if e >= 2]
    events = q1(cur, "SELECT count(*) FROM mop.segment_events WHERE run_id = %s", (run,))
    md5 = q1(cur, "SELECT md5(string_agg(md5(state), ',' ORDER BY config::text)) FROM mop.models WHERE run_id = %s", (run,))
    d = dict(run=run, dataset=dataset, models=len(rr), wall=wall, makespan=makespan, hops=len(hops),
             workers=len({h[3] for h in hops}), mean_hop=sum(durs) / len(durs),
             mean_hop_e2=(sum(ep2) / len(ep2)) if ep2 else None, ideal=sum(durs) / max(1, len({h[3] for h in hops})),
             gap=(sum(gaps) / len(gaps)) if gaps else None, head=head,
             lo_bytes=b1 - b0, lo_packets=p1 - p0, lo_background=rate * wall, state_bytes=state_bytes,
             events=events, md5=md5, load=loadavg(), cpu=cpu, procs=procs)
    print(f"  {dataset:8s} run {run}: wall {wall:.2f}s makespan {makespan:.2f}s, {len(hops)} hops on {d['workers']} "
          f"worker(s), mean sub-epoch {d['mean_hop']:.3f}s" + (f" (epoch 2: {d['mean_hop_e2']:.3f}s)" if ep2 else "")
          + (f", mean gap {1000 * d['gap']:.1f}ms" if gaps else "")
          + f", start {1000 * head:.0f}ms; lo {d['lo_bytes'] / 1e6:.2f} MB in {d['lo_packets']} packets "
          f"(states in + out {state_bytes / 1e6:.2f} MB; lo background ~{rate * wall / 1e6:.2f} MB)"
          + (f"; {events} segment events!" if events else "")
          + "; CPU s " + " ".join(f"{k} {v:.2f}" for k, v in cpu.items()) + f"; load {d['load']}", flush=True)
    print("    CPU s by process (sampled): " + "; ".join(f"{k} {v:.2f}" for k, v in procs.items()), flush=True)
    return d


# ---------------------------------------------------------------------------
def phase_setup():
    env = env_line()
    c = connect()
    cur = c.cursor()
    out = dict(env=env, datasets={})
    todo = [("f_local", "fashion_train", ""), ("f_seg1", "fashion_train", ", segments => ARRAY['seg1']"),
            ("f_seg12", "fashion_train", ", segments => ARRAY['seg1', 'seg2'], replicas => 1"),
            ("s_seg1", "fashion_small", ", segments => ARRAY['seg1']")]
    for name, src, extra in todo:
        if q1(cur, "SELECT count(*) FROM mop.datasets WHERE name = %s", (name,)):
            print(f"  {name}: already prepared")
            continue
        rate = lo_rate(1.0)
        b0, p0 = lo()
        t0 = time.time()
        cur.execute(PREP.format(extra), (src, name))
        secs = time.time() - t0
        b1, p1 = lo()
        out["datasets"][name] = dict(seconds=secs, lo_bytes=b1 - b0, lo_packets=p1 - p0, lo_background=rate * secs)
        print(f"  mop_prepare {name}: {secs:.2f}s, lo {(b1 - b0) / 1e6:.1f} MB (background ~{rate * secs / 1e6:.2f} MB)", flush=True)
    seg = q(cur, "SELECT dataset, segment, partitions::text, buffers, bytes FROM mop.segments ORDER BY 1, 2")
    for r in seg:
        print(f"  mop.segments: {r[0]} on {r[1]}: partitions {r[2]}, {r[3]} buffers, {r[4] / 1e6:.1f} MB")
    out["segments"] = seg
    out["train_bytes"] = q1(cur, "SELECT sum(octet_length(x) + octet_length(y))::int8 FROM mop.buffers b JOIN mop.datasets d "
                                 "ON d.id = b.dataset_id WHERE d.name = 'f_local' AND split = 'train'")
    out["rows"] = q(cur, "SELECT name, train_rows, valid_rows FROM mop.datasets ORDER BY name")
    print(f"  f_local: training buffers {out['train_bytes'] / 1e6:.1f} MB; rows {out['rows']}")
    old = load("setup.json")
    if old and not out["datasets"]:
        out["datasets"] = old.get("datasets", {})
    save("setup.json", out)


# ---------------------------------------------------------------------------
def phase_traffic():
    env = env_line()
    c = connect()
    cur = c.cursor()
    rows = {r[0]: (r[1], r[2]) for r in q(cur, "SELECT name, train_rows, valid_rows FROM mop.datasets")}
    train_rows, P = rows["f_local"][0], 2
    data_bytes = q1(cur, "SELECT sum(octet_length(x) + octet_length(y))::int8 FROM mop.buffers b JOIN mop.datasets d "
                         "ON d.id = b.dataset_id WHERE d.name = 'f_local' AND split = 'train'")
    seg_bytes = q1(cur, "SELECT sum(bytes)::int8 FROM mop.segments WHERE dataset = 'f_seg1'")
    # one run over seg1 of every architecture at both batch sizes (on the
    # 4,000-row copy: a hop moves the same state whatever the rows)
    space = {"model": [MLP_A, MLP_B, CNN], "optimizer": "adam", "learning_rate": 1e-3,
             "batch_size": [32, 256], "l2": 1e-4, "seed": 1}
    print(f"traffic: {utcnow()}; load {loadavg()}; space {json.dumps(space)}; 1 epoch on s_seg1 (seg1), deterministic")
    d = run_grid(cur, "s_seg1", space, 1, deterministic=True, seed=1)
    run = d["run"]
    states = q(cur, "SELECT config->'model', config->'batch_size', octet_length(state), "
                    "octet_length(mop.init_model('f_local', config)) FROM mop.models WHERE run_id = %s ORDER BY id", (run,))
    models = []
    for model, bs, sb, sb0 in states:
        name = "CNN" if any(l["type"] == "conv2d" for l in model["layers"]) else arch_name(model)
        n = params_of(model)
        mb = math.ceil(train_rows / bs)
        r = dict(model=name, batch=bs, params=n, state_bytes=sb, init_state_bytes=sb0,
                 mop_epoch=2 * sb * P, dp_epoch=n * 4 * 2 * mb, minibatches=mb, data_bytes=data_bytes)
        models.append(r)
    print(f"training split: {train_rows} rows in {P} partitions; training buffers {data_bytes / 1e6:.1f} MB "
          f"(mop.segments says {seg_bytes / 1e6:.1f} MB on seg1)")
    print(f"{'model':16s} {'batch':>5s} {'params':>8s} {'state B':>9s} {'state/4p':>8s} {'mop/epoch':>10s} "
          f"{'data':>8s} {'data/mop':>8s} {'DP/epoch':>10s} {'DP/mop':>7s}")
    for r in models:
        print(f"{r['model']:16s} {r['batch']:5d} {r['params']:8d} {r['state_bytes']:9d} {r['state_bytes'] / (4 * r['params']):8.2f} "
              f"{r['mop_epoch'] / 1e6:8.1f}MB {data_bytes / 1e6:6.0f}MB {data_bytes / r['mop_epoch']:8.1f} "
              f"{r['dp_epoch'] / 1e6:8.0f}MB {r['dp_epoch'] / r['mop_epoch']:7.1f}")
    if any(r["state_bytes"] != r["init_state_bytes"] for r in models):
        print("NOTE: a trained state's size differs from a new one's: " + ", ".join(
            f"{r['model']} {r['init_state_bytes']} -> {r['state_bytes']}" for r in models))
    # the 16-config grid: 8 configurations of each MLP
    sb = {r["model"]: r["state_bytes"] for r in models}
    grid_epoch = 8 * 2 * P * (sb[arch_name(MLP_A)] + sb[arch_name(MLP_B)])
    grid_dp = sum(8 // 2 * r["dp_epoch"] for r in models if r["model"] != "CNN")
    print(f"RESULT traffic 16-config grid, per epoch: mop {grid_epoch / 1e6:.0f} MB (states) against training data "
          f"{data_bytes / 1e6:.0f} MB and data-parallel SGD {grid_dp / 1e6:.0f} MB ({grid_dp / grid_epoch:.0f}x mop)")
    wire = d["lo_bytes"] - d["lo_background"]
    print(f"RESULT traffic: run {run} ({d['hops']} hops): lo {d['lo_bytes']} B ({d['lo_packets']} packets; background "
          f"~{d['lo_background']:.0f} B) against states in + out {d['state_bytes']} B: ratio {wire / d['state_bytes']:.4f}")
    save("traffic.json", dict(env=env, space=space, run=d, models=models, train_rows=train_rows, partitions=P,
                              data_bytes=data_bytes, grid16_epoch=grid_epoch, grid16_dp_epoch=grid_dp))


# ---------------------------------------------------------------------------
def binary_roundtrip(node, payload, reps=7):
    """Seconds to send payload to node as a binary bytea parameter and get
    it back in binary (SELECT $1::bytea through libpq's PQexecParams, as a
    hop sends and receives a state), over loopback TCP; each repetition."""
    import ctypes
    pq = ctypes.CDLL("libpq.so.5")
    pq.PQconnectdb.restype = ctypes.c_void_p
    pq.PQconnectdb.argtypes = [ctypes.c_char_p]
    pq.PQstatus.argtypes = [ctypes.c_void_p]
    pq.PQexecParams.restype = ctypes.c_void_p
    pq.PQexecParams.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int),
                                ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    pq.PQresultStatus.argtypes = [ctypes.c_void_p]
    pq.PQgetlength.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    pq.PQclear.argtypes = [ctypes.c_void_p]
    pq.PQfinish.argtypes = [ctypes.c_void_p]
    conn = pq.PQconnectdb(f"host=127.0.0.1 port={NODES[node]} user=postgres dbname=postgres".encode())
    if pq.PQstatus(conn) != 0:
        raise RuntimeError("libpq connection failed")
    vals = (ctypes.c_char_p * 1)(payload)
    lens = (ctypes.c_int * 1)(len(payload))
    fmts = (ctypes.c_int * 1)(1)
    out = []
    for i in range(reps):
        t0 = time.time()
        res = pq.PQexecParams(conn, b"SELECT $1::bytea", 1, None, vals, lens, fmts, 1)
        ok = pq.PQresultStatus(res) == 2 and pq.PQgetlength(res, 0, 0) == len(payload)
        pq.PQclear(res)
        out.append(time.time() - t0)
        if not ok:
            raise RuntimeError("binary round trip failed")
    pq.PQfinish(conn)
    return out


def direct_subepoch(run):
    """Where a remote sub-epoch's time goes: the narrow waist's query timed
    from a client on coord over f_local and on seg1 over its copy (the state
    put there once, beforehand, into a temporary table), interleaved
    (coord, seg1, seg1, coord, ...), after one cold pass each; and the
    state's round trip alone."""
    c = connect()
    cur = c.cursor()
    mid, state = q(cur, "SELECT id, state FROM mop.models WHERE run_id = %s ORDER BY id LIMIT 1", (run,))[0]
    state = bytes(state)
    sql = ("SELECT (s.r).rows FROM (SELECT mop.train_agg((SELECT st FROM bench_state), b.x, b.y) AS r FROM "
           "(SELECT x, y FROM mop.buffers WHERE dataset_id = %s AND split = 'train' AND partition = 0 ORDER BY buffer_no) b) s")
    cn, dsid = {}, {}
    for node, ds in (("coord", "f_local"), ("seg1", "f_seg1")):
        cn[node] = connect(node)
        k = cn[node].cursor()
        k.execute("CREATE TEMP TABLE bench_state (st bytea)")
        k.execute("INSERT INTO bench_state VALUES (%s)", (psycopg2.Binary(state),))
        if node == "coord":
            dsid[node] = q1(k, "SELECT id FROM mop.datasets WHERE name = %s", (ds,))
        else:
            dsid[node] = q1(cur, "SELECT remote_dataset_id FROM mop.dataset_segments s JOIN mop.datasets d ON d.id = s.dataset_id "
                                 "WHERE d.name = %s AND segment = 'seg1' AND partition = 0", (ds,))
    out = {"coord": [], "seg1": [], "cold": {}}

    def once(node):
        k = cn[node].cursor()
        t0 = time.time()
        k.execute(sql, (dsid[node],))
        k.fetchall()
        return time.time() - t0
    for node in ("coord", "seg1"):
        out["cold"][node] = once(node)
    for node in ["coord", "seg1", "seg1", "coord", "coord", "seg1", "seg1", "coord"]:
        out[node].append(once(node))
    for x in cn.values():
        x.close()
    # the state there and back through libpq over loopback (text protocol here,
    # hex: twice the bytes, so an upper bound of the binary round trip)
    c1 = connect("seg1")
    k = c1.cursor()
    t = []
    for i in range(5):
        t0 = time.time()
        k.execute("SELECT %s::bytea", (psycopg2.Binary(state),))
        k.fetchall()
        t.append(time.time() - t0)
    out["roundtrip"] = t
    out["state_bytes"] = len(state)
    c1.close()
    out["roundtrip_binary"] = binary_roundtrip("seg1", state)
    out["coord_median"], out["seg1_median"] = median(out["coord"]), median(out["seg1"])
    print(f"  direct train_agg over partition 0 (27,000 rows), model {mid}: cold coord {out['cold']['coord']:.3f}s, "
          f"seg1 {out['cold']['seg1']:.3f}s; warm, interleaved: coord " + ", ".join(f"{x:.3f}" for x in out["coord"])
          + "s; seg1 " + ", ".join(f"{x:.3f}" for x in out["seg1"])
          + f"s; medians coord {out['coord_median']:.3f}s seg1 {out['seg1_median']:.3f}s "
          f"({100 * (out['seg1_median'] / out['coord_median'] - 1):+.1f}%); "
          f"state ({len(state) / 1e6:.2f} MB) to seg1 and back in binary over TCP (as a hop sends it): median "
          f"{1000 * median(out['roundtrip_binary']):.1f}ms (as hex text: {1000 * median(t):.1f}ms)", flush=True)
    return out


def phase_overhead():
    env = env_line()
    c = connect()
    cur = c.cursor()
    print(f"overhead: {utcnow()}; load {loadavg()}; space {json.dumps(GRID4)}; 2 epochs, deterministic, seed 1, 1 worker; "
          f"{OVH_REPS} repetitions alternating local / remote (f_seg1: seg1 only)")
    print("  warm-up (not counted): 1 epoch each")
    for ds in ("f_local", "f_seg1"):
        run_grid(cur, ds, GRID4, 1, workers=1, deterministic=True, seed=1)
    runs = []
    for rep in range(1, OVH_REPS + 1):
        order = ["f_local", "f_seg1"] if rep % 2 else ["f_seg1", "f_local"]
        for ds in order:
            d = run_grid(cur, ds, GRID4, 2, workers=1, deterministic=True, seed=1)
            d["rep"] = rep
            runs.append(d)
    diag = direct_subepoch(runs[-1]["run"])
    loc = sorted([r for r in runs if r["dataset"] == "f_local"], key=lambda r: r["rep"])
    rem = sorted([r for r in runs if r["dataset"] == "f_seg1"], key=lambda r: r["rep"])
    same = all(a["md5"] == rem[0]["md5"] for a in loc + rem)
    res = {}
    for key in ("mean_hop", "mean_hop_e2", "wall", "gap"):
        ratios = [b[key] / a[key] - 1 for a, b in zip(loc, rem)]
        res[key] = dict(local=[a[key] for a in loc], remote=[b[key] for b in rem], paired=ratios, median=median(ratios))
        print(f"RESULT overhead {key}: local " + ", ".join(f"{a[key]:.4f}" for a in loc) + "; remote "
              + ", ".join(f"{b[key]:.4f}" for b in rem) + "; remote/local - 1 paired: "
              + ", ".join(f"{100 * x:+.2f}%" for x in ratios) + f"; median {100 * median(ratios):+.2f}%")
    print(f"RESULT overhead: models bit-identical local vs remote: {same}")
    for ds, rr in (("local", loc), ("remote", rem)):
        print(f"RESULT overhead CPU seconds per run, {ds}: " + "; ".join(
            " ".join(f"{k} {v:.2f}" for k, v in r["cpu"].items()) for r in rr))
    save("overhead.json", dict(env=env, space=GRID4, runs=runs, result=res, identical=same, direct=diag))


# ---------------------------------------------------------------------------
def phase_speedup():
    env = env_line()
    c = connect()
    cur = c.cursor()
    print(f"speedup: {utcnow()}; load {loadavg()}; space {json.dumps(GRID16)}; 1 epoch, seed 1 (random scheduler); "
          f"{SPD_REPS} repetitions alternating 1 segment (f_seg1) / 2 segments (f_seg12); seg1 on cpu 0, seg2 on cpu 1")
    print("  warm-up (not counted): the overhead phase's 4-config grid, 1 epoch, on each")
    for ds in ("f_seg1", "f_seg12"):
        run_grid(cur, ds, GRID4, 1, seed=1)
    runs = []
    for rep in range(1, SPD_REPS + 1):
        order = ["f_seg1", "f_seg12"] if rep % 2 else ["f_seg12", "f_seg1"]
        for ds in order:
            d = run_grid(cur, ds, GRID16, 1, seed=1)
            d["rep"] = rep
            runs.append(d)
    one = sorted([r for r in runs if r["dataset"] == "f_seg1"], key=lambda r: r["rep"])
    two = sorted([r for r in runs if r["dataset"] == "f_seg12"], key=lambda r: r["rep"])
    sp = [a["wall"] / b["wall"] for a, b in zip(one, two)]
    spm = [a["makespan"] / b["makespan"] for a, b in zip(one, two)]
    res = dict(paired_wall=sp, median_wall=median(sp), paired_makespan=spm, median_makespan=median(spm),
               ratio_of_medians=median([r["wall"] for r in one]) / median([r["wall"] for r in two]),
               mean_hop_1=[r["mean_hop"] for r in one], mean_hop_2=[r["mean_hop"] for r in two],
               eff_2=[r["makespan"] / r["ideal"] for r in two], eff_1=[r["makespan"] / r["ideal"] for r in one])
    print("RESULT speedup 2 segments / 1 (wall, paired): " + ", ".join(f"{x:.3f}" for x in sp)
          + f"; median {median(sp):.3f}; by makespan {median(spm):.3f}; ratio of median walls {res['ratio_of_medians']:.3f}")
    print("RESULT speedup: mean sub-epoch 1 segment " + ", ".join(f"{x:.3f}" for x in res["mean_hop_1"]) + "s; 2 segments "
          + ", ".join(f"{x:.3f}" for x in res["mean_hop_2"]) + "s; makespan/ideal 1 seg "
          + ", ".join(f"{x:.3f}" for x in res["eff_1"]) + "; 2 seg " + ", ".join(f"{x:.3f}" for x in res["eff_2"]))
    for name, rr in (("1 segment", one), ("2 segments", two)):
        print(f"RESULT speedup CPU seconds per run, {name}: " + "; ".join(
            " ".join(f"{k} {v:.2f}" for k, v in r["cpu"].items()) for r in rr))
    save("speedup.json", dict(env=env, space=GRID16, runs=runs, result=res))


# ---------------------------------------------------------------------------
def phase_summary():
    st, tr, ov, sp = load("setup.json"), load("traffic.json"), load("overhead.json"), load("speedup.json")
    e = (sp or ov or tr or st or {}).get("env", {})
    print(f"segments benchmark summary ({e.get('date')}; {e.get('cpu')}, {e.get('ncpu')} cpus; {e.get('pg')}; mop: {e.get('mop')})")
    if st:
        for k, v in st.get("datasets", {}).items():
            print(f"  placement {k}: mop_prepare {v['seconds']:.2f}s, {v['lo_bytes'] / 1e6:.1f} MB on loopback")
    if tr:
        print(f"  traffic per model and epoch ({tr['train_rows']} training rows, {tr['partitions']} partitions, "
              f"training buffers {tr['data_bytes'] / 1e6:.1f} MB):")
        for r in tr["models"]:
            print(f"    {r['model']:16s} batch {r['batch']:3d}: {r['params']} params, state {r['state_bytes'] / 1e6:.2f} MB; mop "
                  f"{r['mop_epoch'] / 1e6:.1f} MB/epoch = 1/{r['data_bytes'] / r['mop_epoch']:.0f} of the data, "
                  f"1/{r['dp_epoch'] / r['mop_epoch']:.0f} of data-parallel SGD's {r['dp_epoch'] / 1e6:.0f} MB")
        print(f"    16-config grid per epoch: mop {tr['grid16_epoch'] / 1e6:.0f} MB, data {tr['data_bytes'] / 1e6:.0f} MB, "
              f"data-parallel SGD {tr['grid16_dp_epoch'] / 1e6:.0f} MB")
        d = tr["run"]
        print(f"    on the wire (lo): {d['lo_bytes'] / 1e6:.2f} MB for {d['state_bytes'] / 1e6:.2f} MB of states in + out "
              f"(x{(d['lo_bytes'] - d['lo_background']) / d['state_bytes']:.3f})")
    if ov:
        r = ov["result"]
        print(f"  remote hop over loopback vs local (target <= 5% of a sub-epoch): mean sub-epoch "
              f"{100 * r['mean_hop']['median']:+.2f}% (paired {', '.join('%+.2f%%' % (100 * x) for x in r['mean_hop']['paired'])}); "
              f"epoch 2 only {100 * r['mean_hop_e2']['median']:+.2f}%; run wall {100 * r['wall']['median']:+.2f}%; "
              f"bit-identical models: {ov['identical']}")
        dd = ov["direct"]
        if "coord_median" in dd and "roundtrip_binary" in dd:
            print(f"    the same sub-epoch's query timed directly: coord {dd['coord_median']:.3f}s, seg1 {dd['seg1_median']:.3f}s; "
                  f"a state ({dd['state_bytes'] / 1e6:.2f} MB) there and back in binary: "
                  f"{1000 * median(dd['roundtrip_binary']):.1f}ms")
    if sp:
        r = sp["result"]
        print(f"  2 segments vs 1 (target >= 1.8x): {r['median_wall']:.2f}x (paired {', '.join('%.2f' % x for x in r['paired_wall'])}; "
              f"by makespan {r['median_makespan']:.2f}x; ratio of medians {r['ratio_of_medians']:.2f}x)")


if __name__ == "__main__":
    {"setup": phase_setup, "traffic": phase_traffic, "overhead": phase_overhead,
     "speedup": phase_speedup, "summary": phase_summary}[sys.argv[1]]()
