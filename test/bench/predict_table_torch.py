"""predict_table_torch.py -- what a user does today instead of
mop_predict_table: read the table over psycopg2, predict with PyTorch, write
the predictions back into a new table.

The model is mop's own (its mop_export, loaded with the PyTorch recipe of
docs/sql.md), so both sides compute the same network; the client reads
`id` and the feature array in batches through a server-side cursor, runs
the network on one thread and COPYs id, label, probability and the
probabilities of every row into a new table, as mop_predict_table writes.

  python3 predict_table_torch.py MODEL_ID SOURCE OUTPUT [BATCH]
Prints the rows written and the seconds taken (connect to the write's
commit), as "rows=N seconds=S".
"""
import io
import os
import sys
import time

import numpy as np
import psycopg2
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "xcheck"))
from export_check import torch_model  # noqa: E402


def main():
    model_id, source, output = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 1024
    torch.set_num_threads(1)
    t0 = time.time()
    conn = psycopg2.connect("")
    cur = conn.cursor()
    cur.execute("SELECT mop_export(%s)", (model_id,))
    e = cur.fetchone()[0]
    predict = torch_model(e)
    labels = e["labels"]
    cur.execute(f"CREATE TABLE {output} (id bigint, prediction text, probability float8, "
                "probabilities float8[])")
    read = conn.cursor(name="rows")
    read.itersize = batch
    read.execute(f"SELECT id, v FROM {source}")
    rows = 0
    while True:
        chunk = read.fetchmany(batch)
        if not chunk:
            break
        x = np.asarray([r[1] for r in chunk], dtype="float32").reshape([len(chunk)] + e["input_shape"])
        p = predict(x).reshape(len(chunk), -1)
        best = p.argmax(axis=1)
        buf = io.StringIO()
        for (rid, _), k, pr in zip(chunk, best, p):
            buf.write(f"{rid}\t{labels[k]}\t{float(pr[k])!r}\t{{{','.join(repr(float(v)) for v in pr)}}}\n")
        buf.seek(0)
        cur.copy_expert(f"COPY {output} FROM STDIN", buf)
        rows += len(chunk)
    read.close()
    conn.commit()
    conn.close()
    print(f"rows={rows} seconds={time.time() - t0:.3f}")


if __name__ == "__main__":
    main()
