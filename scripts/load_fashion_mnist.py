#!/usr/bin/env python3
"""Write Fashion-MNIST as COPY text: label<TAB>{p1,...,p784} per image.

usage: load_fashion_mnist.py train|test [limit] | psql -c "COPY t FROM STDIN"

Reads the IDX files of Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist) with the standard library only.
Pixels are 0..255 (row-major 28 x 28), labels are the class names.
"""
import gzip
import struct
import sys

DIR = "/usr/share/datasets/fashion-mnist"
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def main():
    split = sys.argv[1] if len(sys.argv) > 1 else "train"
    prefix = {"train": "train", "test": "t10k"}[split]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else None
    with gzip.open(f"{DIR}/{prefix}-images-idx3-ubyte.gz", "rb") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 2051, "not an IDX image file"
        images = f.read()
    with gzip.open(f"{DIR}/{prefix}-labels-idx1-ubyte.gz", "rb") as f:
        magic, m = struct.unpack(">II", f.read(8))
        assert magic == 2049 and m == n, "not a matching IDX label file"
        labels = f.read()
    size = rows * cols
    if limit is not None:
        n = min(n, limit)
    out = sys.stdout
    for i in range(n):
        px = images[i * size:(i + 1) * size]
        out.write(CLASSES[labels[i]])
        out.write("\t{")
        out.write(",".join(map(str, px)))
        out.write("}\n")


if __name__ == "__main__":
    main()
