"""The first epoch of a new backend against its second, with the server's
buffer cache (mop.shared_buffer_cache_mb) on and off, alternating.

Needs mop in shared_preload_libraries on the benchmark server
(first_epoch_bench.sh sets it).  Each measurement: a fresh connection runs
mop_train('fashion', MLP 784-256-128-10, Adam, batch 128, epochs => 2) and
reads the two epochs' mop.epochs.seconds; the ratio epoch 1 / epoch 2 is
what the first epoch costs over a warm one.  The mode is switched with
ALTER SYSTEM + pg_reload_conf() between measurements.  Turning the cache
off drops its entries, so before each "on" measurement one unrecorded
mop_train in another backend loads the dataset into it again: "on"
measures a new backend of a server that has read the data before, "off"
one that reads every buffer out of TOAST itself.  The cache's counters
show which path each measurement took.  It ends with the cache on and
loaded (for the overhead phase that follows in first_epoch_bench.sh).

With --restart-reps N it then measures the server's first read: before
each measurement the server restarts (its shared buffers and the cache
empty, the operating system's page cache warm); the first backend after
the restart trains the two epochs, with the cache on but not prewarmed,
off, and prewarmed (mop.prewarm_buffer_cache on, the dataset in the cache
at shutdown, measured once the recovery worker has loaded it back),
rotating.
Needs MOPB_DIR (the benchmark server's directory, from mop_bench_lib.sh)."""
import argparse, json, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mop_bench_common import connect, MLP_A, median, utcnow, loadavg, save, wait_quiet

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--restart-reps", type=int, default=0)
args = ap.parse_args()
cfg = json.dumps({"model": MLP_A, "optimizer": "adam", "learning_rate": 0.001,
                  "batch_size": 128, "l2": 1e-5, "seed": 1})


def set_mode(mb):
    c = connect(); k = c.cursor()
    k.execute(f"ALTER SYSTEM SET mop.shared_buffer_cache_mb = {mb}")
    k.execute("SELECT pg_reload_conf()")
    c.close()
    for _ in range(100):
        c = connect(); k = c.cursor()
        k.execute("SHOW mop.shared_buffer_cache_mb"); v = k.fetchone()[0]
        c.close()
        if v == (f"{mb}MB" if mb else "0"):
            return
        time.sleep(0.05)
    raise SystemExit(f"mop.shared_buffer_cache_mb did not become {mb}")


def counters():
    c = connect(); k = c.cursor()
    k.execute("SELECT hits, loads FROM mop.shared_buffer_cache()")
    r = k.fetchone(); c.close()
    return r


def one():
    c = connect(); k = c.cursor()
    k.execute("SELECT mop_train('fashion', %s::jsonb, epochs => 2)", (cfg,))
    mid = k.fetchone()[0]
    k.execute("SELECT seconds, train_loss FROM mop.epochs WHERE model_id = %s ORDER BY epoch", (mid,))
    e = k.fetchall(); c.close()
    return e[0][0], e[1][0], e[1][1]


def warm_up():
    h0, l0 = counters()
    one()
    h1, l1 = counters()
    return l1 - l0


print(f"first epoch against second, server cache on/off alternating; {utcnow()}; load {loadavg()}")
rows = []
for rep in range(1, args.reps + 1):
    wait_quiet()
    for mode in ((256, 0) if rep % 2 else (0, 256)):
        set_mode(mode)
        if mode:
            print(f"  (warm-up in another backend: {warm_up()} buffers loaded)")
        ha, la = counters()
        e1, e2, loss = one()
        hb, lb = counters()
        rows.append(dict(rep=rep, shared_mb=mode, e1=e1, e2=e2, ratio=e1 / e2, loss=loss,
                         hits=hb - ha, loads=lb - la))
        print(f"rep {rep} shared {mode:>3} MB: epoch 1 {e1:.3f} s, epoch 2 {e2:.3f} s, "
              f"ratio {e1 / e2:.3f}; cache hits {hb - ha}, loads {lb - la}; loss {loss:.6f}", flush=True)
set_mode(256)
print(f"cache on again: {warm_up()} buffers loaded")
for mode in (256, 0):
    r = [x for x in rows if x["shared_mb"] == mode]
    print(f"shared {mode:>3} MB: median epoch 1 {median([x['e1'] for x in r]):.3f} s, "
          f"epoch 2 {median([x['e2'] for x in r]):.3f} s, median ratio {median([x['ratio'] for x in r]):.3f} "
          "(" + ", ".join("%.3f" % x["ratio"] for x in r) + ")")
print("training losses identical in every run:", len({x["loss"] for x in rows}) == 1)

restart_rows = []
ARMS = {"on": (256, "off"), "off": (0, "off"), "prewarmed": (256, "on")}


def set_prewarm(v):
    c = connect(); k = c.cursor()
    k.execute(f"ALTER SYSTEM SET mop.prewarm_buffer_cache = {v}")
    c.close()


if args.restart_reps:
    import subprocess
    pgctl = os.path.join(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                                        check=True).stdout.strip(), "pg_ctl")
    data = os.path.join(os.environ["MOPB_DIR"], "data")
    print(f"first epoch of the first backend after a restart: the server's cache on (not prewarmed), "
          f"off, and prewarmed (mop.prewarm_buffer_cache, waited for), rotating; {utcnow()}")
    order = ["on", "off", "prewarmed"]
    for rep in range(1, args.restart_reps + 1):
        wait_quiet()
        for arm in order[rep % 3:] + order[:rep % 3]:
            mb, pw = ARMS[arm]
            set_mode(mb)
            set_prewarm(pw)
            if arm == "prewarmed":
                # what the cache holds at shutdown is what comes back
                warm_up()
            subprocess.run(["runuser", "-u", "postgres", "--", pgctl, "-D", data, "-m", "fast", "-w",
                            "-l", os.path.join(os.environ["MOPB_DIR"], "server.log"), "restart"],
                           check=True, stdout=subprocess.DEVNULL)
            t0 = time.time()
            waited = None
            if arm == "prewarmed":
                while True:
                    c = connect(); k = c.cursor()
                    k.execute("SELECT entries FROM mop.shared_buffer_cache()")
                    n = k.fetchone()[0]; c.close()
                    if n >= 62 or time.time() - t0 > 120:
                        break
                    time.sleep(0.05)
                waited = time.time() - t0
            ha, la = counters()
            e1, e2, loss = one()
            hb, lb = counters()
            restart_rows.append(dict(rep=rep, arm=arm, shared_mb=mb, e1=e1, e2=e2, ratio=e1 / e2, loss=loss,
                                     loads=(lb or 0) - (la or 0), prewarm_s=waited))
            print(f"restart rep {rep} {arm:>9}: epoch 1 {e1:.3f} s, epoch 2 {e2:.3f} s, ratio {e1 / e2:.3f}; "
                  f"cache loads {(lb or 0) - (la or 0)}"
                  + (f"; prewarmed {waited:.2f} s after the restart returned" if waited is not None else "")
                  + f"; loss {loss:.6f}", flush=True)
    set_mode(256)
    set_prewarm("on")
    for arm in order:
        r = [x for x in restart_rows if x["arm"] == arm]
        print(f"after a restart, {arm:>9}: median epoch 1 {median([x['e1'] for x in r]):.3f} s, "
              f"epoch 2 {median([x['e2'] for x in r]):.3f} s, median ratio {median([x['ratio'] for x in r]):.3f} "
              "(" + ", ".join("%.3f" % x["ratio"] for x in r) + ")"
              + (f"; prewarm took {median([x['prewarm_s'] for x in r]):.2f} s" if arm == "prewarmed" else ""))
    print(f"cache on again: {warm_up()} buffers loaded")
save("first_epoch.json", dict(config=cfg, rows=rows, restart_rows=restart_rows))
