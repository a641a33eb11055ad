#!/usr/bin/python3
"""Applies torch.optim.AdamW / torch.optim.SGD (Debian's python3-torch) to a
case written by tests/optimizer/optimizer_reference_test.cpp, with
torch.nn.utils.clip_grad_norm_ before every step, and writes the parameters
after every step.

Case files (all float32 little-endian):
  CASE.json  {"optimizer", "options", "steps", "clip", "lrs": [per step],
              "params": [{"name", "shape", "lr_mult", "weight_decay"}], "hessian": null}
  CASE.bin   initial params (concatenated in order), then per step the grads
  OUT        per step, the params after the step (concatenated)

Usage: optim_torch.py CASE.json CASE.bin OUT
"""
import json
import sys

import numpy as np
import torch


def main():
    case = json.load(open(sys.argv[1]))
    raw = np.fromfile(sys.argv[2], dtype="<f4")
    sizes = [int(np.prod(p["shape"])) for p in case["params"]]
    total = sum(sizes)
    pos = 0

    def take(n):
        nonlocal pos
        out = raw[pos:pos + n]
        pos += n
        return out

    params = []
    for p, n in zip(case["params"], sizes):
        params.append(torch.nn.Parameter(torch.from_numpy(take(n).copy()).reshape(p["shape"])))
    o = case["options"]
    groups = [{"params": [t], "weight_decay": p["weight_decay"]} for t, p in zip(params, case["params"])]
    if case["optimizer"] == "adamw":
        opt = torch.optim.AdamW(groups, lr=1.0, betas=tuple(o.get("betas", (0.9, 0.999))),
                                eps=o.get("eps", 1e-8))
    elif case["optimizer"] == "sgd":
        opt = torch.optim.SGD(groups, lr=1.0, momentum=o.get("momentum", 0.0),
                              dampening=o.get("dampening", 0.0), nesterov=o.get("nesterov", False))
    else:
        raise SystemExit("optim_torch.py: optimizer %r is not in torch.optim" % case["optimizer"])

    out = []
    for step in range(case["steps"]):
        for t, p, n in zip(params, case["params"], sizes):
            t.grad = torch.from_numpy(take(n).copy()).reshape(p["shape"])
        if case["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(params, case["clip"])
        for g, p in zip(opt.param_groups, case["params"]):
            g["lr"] = case["lrs"][step] * p["lr_mult"]
        opt.step()
        out.append(np.concatenate([t.detach().numpy().reshape(-1) for t in params]))
    assert pos == raw.size, "optim_torch.py: %d values left unread" % (raw.size - pos)
    assert all(o.size == total for o in out)
    np.concatenate(out).astype("<f4").tofile(sys.argv[3])


if __name__ == "__main__":
    main()
