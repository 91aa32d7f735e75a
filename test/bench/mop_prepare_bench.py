#!/usr/bin/env python3
"""Extension benchmark: mop_prepare throughput on Fashion-MNIST.

Table fashion_train(label text, pixels real[]) -- 60,000 rows, one real[784]
column.  Alternates, REPS times: COPY (SELECT * FROM fashion_train) TO
'/dev/null' (text; server side), the same in FORMAT binary, and mop_prepare
(2 partitions, 10% validation, shape 28x28x1, seed 1) into a scratch dataset,
dropped afterwards (the drop is not timed).  Each statement is its own
transaction (autocommit), so mop_prepare's time includes its commit.
"""
import argparse
import time

from mop_bench_common import connect, loadavg, median, save, utcnow, wait_quiet

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=3)
args = ap.parse_args()
conn = connect()
cur = conn.cursor()
cur.execute("SELECT count(*), pg_table_size('fashion_train'), pg_relation_size('fashion_train') FROM fashion_train")
nrows, tsize, heap = cur.fetchone()
cur.execute("SELECT sum(pg_column_size(pixels)) FROM fashion_train")
colbytes = cur.fetchone()[0]
cur.execute("COPY (SELECT * FROM fashion_train) TO PROGRAM 'wc -c > /tmp/mopbench_copy_bytes'")
cur.execute("SELECT pg_read_file('/tmp/mopbench_copy_bytes')")
copy_bytes = int(cur.fetchone()[0].split()[0])
raw = nrows * 784 * 4
print(f"table fashion_train: {nrows} rows, pg_table_size {tsize / 1e6:.1f} MB (heap {heap / 1e6:.1f} MB), "
      f"pixels column {colbytes / 1e6:.1f} MB, COPY text output {copy_bytes / 1e6:.1f} MB, raw float32 features {raw / 1e6:.1f} MB")
print(f"{args.reps} repetitions, alternating; {utcnow()}; load {loadavg()}")
cur.execute("SELECT mop_drop_dataset('prep_bench') FROM mop.datasets WHERE name = 'prep_bench'")
T = {"copy_text": [], "copy_binary": [], "mop_prepare": []}
STMT = {"copy_text": "COPY (SELECT * FROM fashion_train) TO '/dev/null'",
        "copy_binary": "COPY (SELECT * FROM fashion_train) TO '/dev/null' (FORMAT binary)",
        "mop_prepare": "SELECT * FROM mop_prepare('fashion_train', 'label', ARRAY['pixels'], 'prep_bench', "
                       "partitions => 2, validation => 0.1, shape => ARRAY[28, 28, 1], seed => 1)"}
for rep in range(1, args.reps + 1):
    wait_quiet()
    order = list(T) if rep % 2 else list(reversed(list(T)))
    for k in order:
        t0 = time.time()
        cur.execute(STMT[k])
        T[k].append(time.time() - t0)
        if k == "mop_prepare":
            cur.execute("SELECT sum(pg_column_size(x) + pg_column_size(y)) FROM mop.buffers b JOIN mop.datasets d "
                        "ON d.id = b.dataset_id WHERE d.name = 'prep_bench'")
            packed = cur.fetchone()[0]
            cur.execute("SELECT mop_drop_dataset('prep_bench')")
    print(f"  rep {rep}: " + "  ".join(f"{k} {T[k][-1]:.3f}s" for k in T), flush=True)
res = {}
for k in T:
    m = median(T[k])
    res[k] = dict(seconds=m, rows_s=nrows / m, mb_s_table=tsize / 1e6 / m, mb_s_raw=raw / 1e6 / m)
    print(f"RESULT {k}: median {m:.3f} s  {nrows / m:,.0f} rows/s  {tsize / 1e6 / m:.1f} MB/s of table  "
          f"{raw / 1e6 / m:.1f} MB/s of float32 features  (runs: {', '.join(f'{x:.2f}' for x in T[k])})")
for base in ("copy_text", "copy_binary"):
    print(f"RESULT mop_prepare / {base} time ratio: {res['mop_prepare']['seconds'] / res[base]['seconds']:.2f}")
print(f"packed buffers written by mop_prepare: {packed / 1e6:.1f} MB; finished {utcnow()}; load {loadavg()}")
save("prepare.json", dict(nrows=nrows, table_bytes=tsize, copy_bytes=copy_bytes, raw=raw, times=T, summary=res))
