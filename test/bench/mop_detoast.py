"""Side measurement for the extension overhead benchmark: time to detoast every buffer of dataset 1
(fashion) in a fresh backend.  Run after run_mop_bench.sh setup:
source test/bench/mop_bench_lib.sh; /usr/bin/python3 test/bench/mop_detoast.py"""
import sys, time
sys.path.insert(0, __import__('os').path.dirname(__import__('os').path.abspath(__file__)))
from mop_bench_common import connect, wait_quiet
wait_quiet(120)
for i in range(4):
    c = connect(); k = c.cursor()
    t0 = time.time()
    k.execute("SELECT sum(get_byte(x, 0) + get_byte(y, 0)), sum(octet_length(x)) FROM mop.buffers WHERE dataset_id = 1")
    r = k.fetchone(); t1 = time.time() - t0
    t0 = time.time()
    k.execute("SELECT count(*) FROM mop.buffers WHERE dataset_id = 1")
    k.fetchone(); t2 = time.time() - t0
    print(f"detoast all buffers of dataset 1 ({r[1]/1e6:.1f} MB): {t1:.3f}s; plain scan {t2:.3f}s", flush=True)
    c.close()
