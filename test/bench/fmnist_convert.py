#!/usr/bin/python3
"""Convert Debian's dataset-fashion-mnist idx .gz files into raw float32.

Writes, into OUTDIR (default test/bench/.cache):
  {train,test}_x.f32   rows x 784 float32, pixel / 255 (so in [0, 1]),
                       row-major, each image 28 x 28 x 1 (NHWC == NCHW for C=1)
  {train,test}_y.f32   rows float32, class index 0..9
Idempotent: files that already exist with the right size are kept.
"""
import gzip
import os
import sys

import numpy as np

SRC = os.environ.get("FMNIST_DIR", "/usr/share/datasets/fashion-mnist")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    ndim = magic & 0xFF
    if (magic >> 8) != 0x08:
        raise SystemExit(f"{path}: not an unsigned-byte idx file")
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    return arr.reshape(dims)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".cache")
    os.makedirs(out, exist_ok=True)
    for split, stem in (("train", "train"), ("test", "t10k")):
        xp = os.path.join(out, f"{split}_x.f32")
        yp = os.path.join(out, f"{split}_y.f32")
        if (os.path.exists(xp) and os.path.exists(yp) and os.path.getsize(yp) > 0
                and os.path.getsize(xp) == os.path.getsize(yp) * 784):
            continue
        x = read_idx(os.path.join(SRC, f"{stem}-images-idx3-ubyte.gz"))
        y = read_idx(os.path.join(SRC, f"{stem}-labels-idx1-ubyte.gz"))
        n = x.shape[0]          # 60000 / 10000, fewer for a subset (GPU benchmark)
        assert x.shape == (n, 28, 28) and y.shape == (n,), (x.shape, y.shape)
        (x.reshape(n, 784).astype(np.float32) / np.float32(255.0)).tofile(xp)
        y.astype(np.float32).tofile(yp)
        print(f"fmnist_convert: wrote {xp} {yp} ({n} rows)")


if __name__ == "__main__":
    main()
