"""export_check.py -- a model exported by mop_export predicts in Keras 3 and
in PyTorch exactly what mop_predict_proba predicts in PostgreSQL.

Reads an export (the jsonb of mop_export(model_id)) and a CSV of rows: the
raw features, then mop's probabilities (or value) for the row, space
separated in the last column.  Loads the export into Keras (--keras) or
PyTorch (--torch) with the recipes of docs/sql.md, predicts every row and
prints the largest absolute difference; exits 1 above --tol.

Not run by CI (it needs Keras or PyTorch); test/xcheck/export_roundtrip.sh
makes the files and runs it with both.
"""
import argparse
import csv
import json
import sys

import numpy as np


def keras_model(e):
    """The Keras recipe of docs/sql.md."""
    import keras
    model = keras.models.model_from_json(json.dumps(e["model"]))
    model.set_weights([np.asarray(w["values"], dtype="float32").reshape(w["shape"])
                       for w in e["weights"]])
    return lambda x: np.asarray(model.predict(x, verbose=0))


def torch_model(e):
    """The PyTorch recipe of docs/sql.md: one torch module per Keras layer."""
    import torch
    from torch import nn

    acts = {"relu": nn.ReLU(), "tanh": nn.Tanh(), "sigmoid": nn.Sigmoid(),
            "gelu": nn.GELU(), "softmax": nn.Softmax(dim=-1), "linear": nn.Identity()}
    weights = {}
    for w in e["weights"]:
        weights.setdefault(w["layer"], {})[w["name"]] = \
            torch.tensor(np.asarray(w["values"], dtype="float32").reshape(w["shape"]))

    class ToNCHW(nn.Module):        # Keras images are (h, w, c); torch wants (c, h, w)
        def forward(self, x):
            return x.permute(0, 3, 1, 2)

    class ToNHWC(nn.Module):
        def forward(self, x):
            return x.permute(0, 2, 3, 1)

    class Standardise(nn.Module):
        def __init__(self, mean, var, shape):
            super().__init__()
            self.mean = torch.tensor(mean, dtype=torch.float32).reshape(shape)
            self.std = torch.sqrt(torch.tensor(var, dtype=torch.float32)).reshape(shape)

        def forward(self, x):
            return (x - self.mean) / self.std

    mods = []
    nchw = False                    # is the running tensor in torch's layout?
    for layer in e["model"]["config"]["layers"]:
        cls, cfg = layer["class_name"], layer["config"]
        w = weights.get(cfg.get("name"), {})
        if cls == "InputLayer":
            shape = cfg["batch_shape"][1:]
        elif cls == "Normalization":
            mods.append(Standardise(cfg["mean"], cfg["variance"], shape))
        elif cls in ("Conv2D", "MaxPooling2D"):
            if not nchw:
                mods.append(ToNCHW())
                nchw = True
            kh, kw = (cfg["kernel_size"] if cls == "Conv2D" else cfg["pool_size"])
            sh, sw = cfg["strides"]
            if cfg["padding"] == "same":
                # TensorFlow's "same": the extra pixel of an odd total goes after
                mods.append(SamePad(kh, kw, sh, sw, shape, torch, pool=cls == "MaxPooling2D"))
            if cls == "Conv2D":
                conv = nn.Conv2d(w["kernel"].shape[2], cfg["filters"], (kh, kw), (sh, sw),
                                 bias=cfg["use_bias"])
                conv.weight.data = w["kernel"].permute(3, 2, 0, 1).contiguous()
                if cfg["use_bias"]:
                    conv.bias.data = w["bias"]
                mods += [conv, acts[cfg["activation"]]]
            else:
                mods.append(nn.MaxPool2d((kh, kw), (sh, sw)))
            shape = out_shape(shape, kh, kw, sh, sw, cfg["padding"],
                              cfg["filters"] if cls == "Conv2D" else shape[2])
        elif cls == "Flatten":
            if nchw:
                mods.append(ToNHWC())   # flatten in Keras' (h, w, c) order
                nchw = False
            mods.append(nn.Flatten())
            shape = [int(np.prod(shape))]
        elif cls == "Dense":
            lin = nn.Linear(w["kernel"].shape[0], cfg["units"], bias=cfg["use_bias"])
            lin.weight.data = w["kernel"].T.contiguous()
            if cfg["use_bias"]:
                lin.bias.data = w["bias"]
            mods += [lin, acts[cfg["activation"]]]
            shape = [cfg["units"]]
        elif cls == "Activation":
            mods.append(acts[cfg["activation"]])
        elif cls == "LeakyReLU":
            mods.append(nn.LeakyReLU(cfg["negative_slope"]))
        elif cls == "BatchNormalization":
            # over the last axis: channels (NCHW: dim 1) or the features of a vector
            bn = (nn.BatchNorm2d if nchw else nn.BatchNorm1d)(w["gamma"].shape[0], eps=cfg["epsilon"],
                                                             momentum=1 - cfg["momentum"])
            bn.weight.data, bn.bias.data = w["gamma"], w["beta"]
            bn.running_mean.data, bn.running_var.data = w["moving_mean"], w["moving_variance"]
            mods.append(bn)
        elif cls == "Dropout":
            pass                    # inference
        else:
            raise SystemExit(f"no PyTorch recipe for {cls}")
    if nchw:
        mods.append(ToNHWC())
    net = nn.Sequential(*mods).eval()

    def predict(x):
        with torch.no_grad():
            return net(torch.tensor(x)).numpy()
    return predict


def out_shape(shape, kh, kw, sh, sw, padding, c):
    h, w = shape[0], shape[1]
    if padding == "same":
        return [-(-h // sh), -(-w // sw), c]
    return [(h - kh) // sh + 1, (w - kw) // sw + 1, c]


def SamePad(kh, kw, sh, sw, shape, torch, pool):
    h, w = shape[0], shape[1]
    ph = max((-(-h // sh) - 1) * sh + kh - h, 0)
    pw = max((-(-w // sw) - 1) * sw + kw - w, 0)
    pad = (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2)
    value = float("-inf") if pool else 0.0
    return torch.nn.ConstantPad2d(pad, value)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("rows")
    ap.add_argument("--keras", action="store_true")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    with open(args.export) as f:
        e = json.load(f)
    xs, ys = [], []
    with open(args.rows) as f:
        for row in csv.reader(f):
            xs.append([float(v) for v in row[:-1]])
            ys.append([float(v) for v in row[-1].split()])
    x = np.asarray(xs, dtype="float32").reshape([len(xs)] + e["input_shape"])
    want = np.asarray(ys, dtype="float32")
    ok = True
    for name, make in (("keras", keras_model), ("torch", torch_model)):
        if not getattr(args, name):
            continue
        got = make(e)(x).reshape(len(xs), -1)
        if got.shape[1] == 1 and want.shape[1] == 2:
            want_cmp = want[:, 1:]      # binary: mop gives (1 - p, p), Keras p
        else:
            want_cmp = want
        diff = float(np.max(np.abs(got - want_cmp)))
        got = np.concatenate([1 - got, got], 1) if got.shape[1] < want.shape[1] else got
        agree = float(np.mean(np.argmax(got, 1) == np.argmax(want, 1))) if want.shape[1] > 1 else None
        good = diff <= args.tol
        ok &= good
        print(f"{'ok' if good else 'not ok'} {name}: {len(xs)} rows of model {e['model_id']}, "
              f"max abs difference {diff:.3g} (tolerance {args.tol:g})"
              + (f", same class for {agree:.1%}" if agree is not None else ""))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
