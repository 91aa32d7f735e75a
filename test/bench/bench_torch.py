#!/usr/bin/python3
"""PyTorch side of the engine benchmark: the same models, data,
batch size and optimizer as bench_engine.c, on one thread.

A plain, tight training loop over pre-made tensors (contiguous slices of the
whole training set, no DataLoader, no shuffle), F.cross_entropy,
optimizer.zero_grad(set_to_none=True), Adam(lr=1e-3, foreach=True) (the
multi-tensor implementation: measured ~7% faster than the default
single-tensor loop for the MLP here; --no-foreach selects the default).

Usage: bench_torch.py --model mlp|lenet [--batch 128] [--rows N] [--warmup STEPS]
                      [--reps R] [--data DIR] [--info]
Prints, per repetition:
  RESULT fw=torch model=M rep=R rows=N steps=S seconds=T samples_per_s=X gflops=G ...
"""
import argparse
import os
import time

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def make_model(name):
    if name == "mlp":
        return tnn.Sequential(tnn.Linear(784, 256), tnn.ReLU(), tnn.Linear(256, 128), tnn.ReLU(),
                              tnn.Linear(128, 10)), 784 * 256 + 256 * 128 + 128 * 10, 784 * 256
    if name in ("lenet", "cnn"):
        m = tnn.Sequential(
            tnn.Conv2d(1, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
            tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
            tnn.Flatten(), tnn.Linear(7 * 7 * 64, 128), tnn.ReLU(), tnn.Linear(128, 10))
        macs = 28 * 28 * 9 * 1 * 32 + 14 * 14 * 9 * 32 * 64 + 3136 * 128 + 128 * 10
        return m, macs, 28 * 28 * 9 * 1 * 32
    raise SystemExit(f"unknown model {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rows", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--data", default=os.path.join(HERE, ".cache"))
    ap.add_argument("--info", action="store_true")
    ap.add_argument("--no-foreach", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(42)
    rows = args.rows if 0 < args.rows <= 60000 else 60000
    X = np.fromfile(os.path.join(args.data, "train_x.f32"), dtype=np.float32,
                    count=rows * 784).reshape(rows, 784)
    Y = np.fromfile(os.path.join(args.data, "train_y.f32"), dtype=np.float32, count=rows)
    x = torch.from_numpy(X)
    if args.model != "mlp":
        x = x.reshape(rows, 1, 28, 28)  # NHWC with C = 1 is NCHW
    y = torch.from_numpy(Y.astype(np.int64))
    model, macs, macs_first = make_model(args.model)
    flops_row = 6.0 * macs - 2.0 * macs_first  # as bench_engine.c
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=not args.no_foreach)
    B = args.batch
    # pre-made minibatches (views, contiguous)
    batches = [(x[r:r + B], y[r:r + B]) for r in range(0, rows, B)]

    if args.info:
        print(f"INFO fw=torch version={torch.__version__} threads={torch.get_num_threads()} "
              f"interop={torch.get_num_interop_threads()} mkldnn={torch.backends.mkldnn.is_available()} "
              f"adam_foreach={not args.no_foreach}")

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for xb, yb in batches[:args.warmup]:
        step(xb, yb)

    for rep in range(args.reps):
        loss_sum = 0.0
        c0 = time.process_time()
        t0 = time.perf_counter()
        for xb, yb in batches:
            loss = step(xb, yb)
            loss_sum += loss.item() * xb.shape[0]  # like the engine's loss_sum
        t1 = time.perf_counter()
        c1 = time.process_time()
        dt = t1 - t0
        print(f"RESULT fw=torch model={args.model} rep={rep + 1} rows={rows} steps={len(batches)} "
              f"seconds={dt:.4f} cpu_seconds={c1 - c0:.4f} samples_per_s={rows / dt:.1f} gflops={6.0 * macs * rows / dt * 1e-9:.2f} "
              f"gflops_req={flops_row * rows / dt * 1e-9:.2f} "
              f"loss={loss_sum / rows:.4f}", flush=True)


if __name__ == "__main__":
    main()
