#!/usr/bin/python3
"""Summarise the RESULT/MEM/PEAK lines written by run_engine_bench.sh:
medians over repetitions, mop/PyTorch ratios, GFLOP/s against the sgemm peak,
allocation checks.  Usage: summarize.py LOGFILE.  Exit 1 if an allocation
check failed."""
import re
import statistics
import sys


def parse(line):
    out = {}
    for m in re.finditer(r'(\w+)=("([^"]*)"|\S+)', line):
        out[m.group(1)] = m.group(3) if m.group(3) is not None else m.group(2)
    return out


def main():
    res, mem, peak = [], [], None
    for line in open(sys.argv[1]):
        if line.startswith("RESULT "):
            res.append(parse(line))
        elif line.startswith("MEM "):
            mem.append(parse(line))
        elif line.startswith("PEAK "):
            peak = parse(line)
    bad = 0
    notes = []
    print()
    print("## Summary (median over repetitions; one thread each)")
    if peak:
        print(f"OpenBLAS sgemm {peak['n']}^3, 1 thread: best {peak['best_gflops']} GFLOP/s, "
              f"median {peak['median_gflops']} GFLOP/s")
    print()
    print("| model | framework | reps | rows/rep | median s | samples/s (median) | min..max samples/s | GFLOP/s nominal (6·B·ΣMACs) | GFLOP/s of work done | ratio mop/torch | samples per CPU-second (median) | ratio by CPU time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    models = []
    for r in res:
        key = (r["model"], r.get("shuffle", "0"))
        if key not in models:
            models.append(key)
    for model, shuf in models:
        med = {}
        for fw in ("mop", "torch"):
            rs = [r for r in res if r["model"] == model and r["fw"] == fw
                  and r.get("shuffle", "0") == shuf]
            if not rs:
                continue
            sps = [float(r["samples_per_s"]) for r in rs]
            secs = [float(r["seconds"]) for r in rs]
            gf = [float(r["gflops"]) for r in rs]
            gr = [float(r.get("gflops_req", "nan")) for r in rs]
            med[fw] = statistics.median(sps)
            cps = [int(r["rows"]) / float(r["cpu_seconds"]) for r in rs if "cpu_seconds" in r]
            medc = statistics.median(cps) if cps else float("nan")
            med["cpu_" + fw] = medc
            ratio = ratio_c = ""
            if fw == "torch" and "mop" in med:
                ratio = f"**{med['mop'] / med['torch']:.2f}**"
                ratio_c = f"{med['cpu_mop'] / med['cpu_torch']:.2f}"
            pk = ""
            if fw == "mop" and peak:
                pk = f" ({100 * statistics.median(gf) / float(peak['best_gflops']):.0f}% of sgemm best)"
            name = model + (" (shuffle on)" if shuf == "1" else "")
            print(f"| {name} | {fw} | {len(rs)} | {rs[0]['rows']} | {statistics.median(secs):.3f} | "
                  f"{med[fw]:.0f} | {min(sps):.0f}..{max(sps):.0f} | {statistics.median(gf):.1f}{pk} | "
                  f"{statistics.median(gr):.1f} | {ratio} | {medc:.0f} | {ratio_c} |")
    print()
    print("| model | params B | grads B | optimizer B | workspace B | total B | mallocs seen in nn_model_create | nn_model_alloc_count (create / before / after training) | mallocs in feed (per-minibatch loop) | mallocs in end |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    seen = set()
    for m in mem:
        if m["model"] in seen:
            continue
        seen.add(m["model"])
        rs = [r for r in res if r["model"] == m["model"] and r["fw"] == "mop"]
        # shuffle on: the first epoch may grow the model's permutation buffer
        # once (a buffer larger than any fed before); later epochs must not
        for r in rs:
            if r.get("shuffle") == "1" and r["rep"] == "1" and int(r["mallocs_feed"]) <= 1:
                notes.append(f"{m['model']} shuffle on, epoch 1: {r['mallocs_feed']} allocation in nn_train_feed "
                             f"(nn_model_alloc_count {r['model_allocs_before']} -> {r['model_allocs_after']}): "
                             "the shuffle permutation grows to the fed buffer's rows; epoch 2: see below")
                r["_excused"] = True
        feed = sorted({int(r["mallocs_feed"]) for r in rs})
        end = sorted({int(r["mallocs_end"]) for r in rs})
        ab = sorted({(r["model_allocs_at_create"], r["model_allocs_before"], r["model_allocs_after"]) for r in rs})
        for r in rs:
            if r.get("_excused"):
                continue
            if (int(r["mallocs_feed"]) != 0 or int(r["mallocs_end"]) != 0
                    or r["model_allocs_before"] != r["model_allocs_after"]):
                bad += 1
        print(f"| {m['model']} | {m['params']} | {m['grads']} | {m['optimizer']} | {m['workspace']} | "
              f"{m['total']} | {m.get('mallocs_create', '?')} | {', '.join('/'.join(t) for t in ab)} | {','.join(map(str, feed))} | "
              f"{','.join(map(str, end))} |")
    print()
    for n in notes:
        print("note:", n)
    for r in res:
        if r["fw"] == "mop" and r.get("shuffle") == "1" and r["rep"] != "1":
            print(f"note: {r['model']} shuffle on, epoch {r['rep']}: {r['mallocs_feed']} allocations in nn_train_feed, "
                  f"{r['mallocs_end']} in nn_train_end, nn_model_alloc_count {r['model_allocs_before']} -> {r['model_allocs_after']}")
    print("allocation check:", "PASS (zero allocations per minibatch)" if bad == 0 else f"FAIL ({bad} runs allocated)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
