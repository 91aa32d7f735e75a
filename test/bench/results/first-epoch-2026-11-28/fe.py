import sys, os, time, json, statistics
sys.path.insert(0, "/work/main/test/bench")
from mop_bench_common import connect
from mop_bench_common import MLP_A
cfg = json.dumps({"model": MLP_A, "optimizer": "adam", "learning_rate": 0.001, "batch_size": 128, "l2": 1e-5, "seed": 1})
modes = sys.argv[2].split(",")
res = {m: [] for m in modes}
for rep in range(int(sys.argv[1])):
    order = modes if rep % 2 == 0 else modes[::-1]
    for m in order:
        os.environ["PGOPTIONS"] = f"-c mop_exp.huge={m}" if m != "0" else ""
        c = connect(); k = c.cursor()
        k.execute("SELECT mop_train('fashion', %s::jsonb, epochs => 2)", (cfg,))
        mid = k.fetchone()[0]
        k.execute("SELECT seconds FROM mop.epochs WHERE model_id = %s ORDER BY epoch", (mid,))
        e = [r[0] for r in k.fetchall()]
        c.close()
        res[m].append(e[0] / e[1])
        print(rep, m, " ".join(f"{x:.3f}" for x in e), f"{e[0]/e[1]:.3f}", flush=True)
for m in modes:
    print(m, "median e1/e2", f"{statistics.median(res[m]):.3f}", " ".join(f"{x:.3f}" for x in res[m]))
