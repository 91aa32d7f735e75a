#!/usr/bin/python3
"""PyTorch CUDA side of the GPU benchmark: the same models, data, batch size
and optimizer as gpu_bench.c, on the same GPU.

The fastest plain PyTorch loop: the whole training set resident on the GPU
as one tensor, contiguous slices (no DataLoader, no shuffle), F.cross_entropy,
zero_grad(set_to_none=True), Adam(lr=1e-3) (foreach, PyTorch's default on
CUDA), one torch.cuda.synchronize() per epoch.  --precision fp32 turns TF32
off for matmuls and cuDNN convolutions (what mop computes by default);
--precision default keeps PyTorch's defaults (TF32 for cuDNN convolutions).

Usage: bench_torch_cuda.py step --model mlp|cnn [--batch 128] [--rows N] [--reps R]
       bench_torch_cuda.py grid --model mlp [--rows N] [--reps R]
Prints RESULT lines like gpu_bench.
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
                              tnn.Linear(128, 10))
    return tnn.Sequential(
        tnn.Conv2d(1, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Flatten(), tnn.Linear(7 * 7 * 64, 128), tnn.ReLU(), tnn.Linear(128, 10))


def epoch(model, opt, x, y, batch):
    n = x.shape[0]
    total = torch.zeros((), device=x.device)
    for i in range(0, n, batch):
        xb, yb = x[i:i + batch], y[i:i + batch]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        total += loss.detach() * xb.shape[0]
    torch.cuda.synchronize()
    return float(total) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["step", "grid"])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rows", type=int, default=30000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--precision", choices=["fp32", "default"], default="fp32")
    ap.add_argument("--data", default=os.path.join(HERE, ".cache"))
    args = ap.parse_args()

    if args.precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(42)
    dev = torch.device("cuda")
    X = np.fromfile(os.path.join(args.data, "train_x.f32"), dtype=np.float32,
                    count=args.rows * 784).reshape(args.rows, 784)
    Y = np.fromfile(os.path.join(args.data, "train_y.f32"), dtype=np.float32, count=args.rows)
    x = torch.from_numpy(X).to(dev)
    if args.model == "cnn":
        x = x.reshape(-1, 1, 28, 28)
    y = torch.from_numpy(Y).long().to(dev)
    tag = f"fw=torch-{args.precision} torch={torch.__version__}"

    if args.mode == "step":
        model = make_model(args.model).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        epoch(model, opt, x, y, args.batch)          # warm-up (cuDNN autotune, allocator)
        for r in range(args.reps):
            t0 = time.perf_counter()
            loss = epoch(model, opt, x, y, args.batch)
            t = time.perf_counter() - t0
            print(f"RESULT {tag} model={args.model} batch={args.batch} rep={r} rows={args.rows} "
                  f"seconds={t:.4f} samples_per_s={args.rows / t:.0f} loss={loss:.4f}", flush=True)
    else:
        lrs = [1e-3, 3e-4, 1e-4, 3e-3]
        batches = [32, 64, 128, 256]
        warm = make_model(args.model).to(dev)
        epoch(warm, torch.optim.Adam(warm.parameters(), lr=1e-3), x, y, 128)
        for r in range(args.reps):
            t0 = time.perf_counter()
            for k in range(16):
                torch.manual_seed(42)
                model = make_model(args.model).to(dev)
                opt = torch.optim.Adam(model.parameters(), lr=lrs[k % 4])
                epoch(model, opt, x, y, batches[k // 4])
            t = time.perf_counter() - t0
            print(f"RESULT {tag} model={args.model} grid=sequential threads=1 rep={r} "
                  f"rows={args.rows} configs=16 seconds={t:.3f}", flush=True)


if __name__ == "__main__":
    main()
