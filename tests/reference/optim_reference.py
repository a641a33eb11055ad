#!/usr/bin/python3
"""Float64 NumPy references of LAMB, Adafactor, Sophia-G and Zerosum-SGD,
written from the papers' equations (not from the C++ code), for
tests/optimizer/optimizer_reference_test.cpp. Case file format: see
optim_torch.py. Gradient clipping follows torch.nn.utils.clip_grad_norm_.

  LAMB       You et al. 2019, Algorithm 2: u = m̂/(√v̂+ε) + λw,
             w -= lr·φ(‖w‖)/‖u‖·u, φ(z) = min(max(z, 0), γ_u), ratio 1 if a norm is 0.
  Adafactor  Shazeer & Stern 2018, Algorithms 4/5: row/column SUMS R, C of
             g²+ε1 with decay β̂2_t = 1 - t^c, V̂ = R Cᵀ / (1ᵀR); update clipping
             by RMS(U)/d; relative step ρ_t = min(1e-2 or 1e-6·t, 1/√t);
             α = ρ·max(ε2, RMS(w)) with scale_parameter; decoupled decay α·λ·w;
             optional momentum over Û.
  Sophia-G   Liu et al. 2023, Algorithm 3 with the GNB estimator (Algorithm 2):
             at t mod k = 1: h = β2 h + (1-β2)·B·ĝ⊙ĝ;  m = β1 m + (1-β1) g;
             w -= lr·λ·w;  w -= lr·clip(m / max(γh, ε), 1).
  Zerosum    SGD-momentum (torch.optim.SGD form) on d = g + λw whose router
             rows are centred: d[e, :] -= mean_e d[e, :].

Usage: optim_reference.py CASE.json CASE.bin OUT
"""
import json
import math
import sys

import numpy as np


def rms(x):
    return math.sqrt(float(np.mean(np.square(x))))


def clip_(grads, max_norm):
    norm = math.sqrt(sum(float(np.sum(np.square(g))) for g in grads))
    coef = max_norm / (norm + 1e-6)
    if coef < 1.0:
        for g in grads:
            g *= coef


class Lamb:
    def __init__(self, o, shapes):
        self.b1, self.b2 = o.get("betas", (0.9, 0.999))
        self.eps = o.get("eps", 1e-6)
        self.gu = o.get("max_weight_norm", 10.0)
        self.bc = o.get("bias_correction", True)
        self.m = [np.zeros(s) for s in shapes]
        self.v = [np.zeros(s) for s in shapes]
        self.t = 0

    def step(self, ws, gs, lrs, wds, hess):
        self.t += 1
        for i, (w, g) in enumerate(zip(ws, gs)):
            self.m[i] = self.b1 * self.m[i] + (1 - self.b1) * g
            self.v[i] = self.b2 * self.v[i] + (1 - self.b2) * g * g
            mh = self.m[i] / (1 - self.b1 ** self.t) if self.bc else self.m[i]
            vh = self.v[i] / (1 - self.b2 ** self.t) if self.bc else self.v[i]
            u = mh / (np.sqrt(vh) + self.eps) + wds[i] * w
            wn, un = np.linalg.norm(w), np.linalg.norm(u)
            trust = min(max(wn, 0.0), self.gu) / un if wn > 0 and un > 0 else 1.0
            w -= lrs[i] * trust * u


class Adafactor:
    def __init__(self, o, shapes):
        self.eps1, self.eps2 = o.get("eps", (1e-30, 1e-3))
        self.c = o.get("decay_rate", -0.8)
        self.d = o.get("clip_threshold", 1.0)
        self.beta1 = o.get("beta1", None)
        self.relative = o.get("relative_step", False)
        self.scale = o.get("scale_parameter", False)
        self.warmup_init = o.get("warmup_init", False)
        self.base_lr = o.get("lr", 1e-3)
        self.state = []
        for s in shapes:
            st = {}
            if len(s) >= 2:
                st["R"] = np.zeros(s[:-1])
                st["C"] = np.zeros(s[:-2] + [s[-1]])
            else:
                st["V"] = np.zeros(s)
            if self.beta1 is not None:
                st["M"] = np.zeros(s)
            self.state.append(st)
        self.t = 0

    def step(self, ws, gs, lrs, wds, hess):
        self.t += 1
        t = self.t
        b2 = 1.0 - t ** self.c
        for i, (w, g) in enumerate(zip(ws, gs)):
            st = self.state[i]
            if self.relative:
                cap = 1e-6 * t if self.warmup_init else 1e-2
                rho = min(cap, 1.0 / math.sqrt(t)) * lrs[i] / self.base_lr
            else:
                rho = lrs[i]
            alpha = rho * max(self.eps2, rms(w)) if self.scale else rho
            g2 = g * g + self.eps1
            if w.ndim >= 2:
                st["R"] = b2 * st["R"] + (1 - b2) * g2.sum(axis=-1)        # row sums, 1_m
                st["C"] = b2 * st["C"] + (1 - b2) * g2.sum(axis=-2)        # column sums, 1_nᵀ
                v = st["R"][..., :, None] * st["C"][..., None, :] / st["R"].sum(axis=-1)[..., None, None]
            else:
                st["V"] = b2 * st["V"] + (1 - b2) * g2
                v = st["V"]
            u = g / np.sqrt(v)
            u = u / max(1.0, rms(u) / self.d)
            w -= alpha * wds[i] * w
            if self.beta1 is not None:
                st["M"] = self.beta1 * st["M"] + (1 - self.beta1) * u
                w -= alpha * st["M"]
            else:
                w -= alpha * u


class Sophia:
    def __init__(self, o, shapes):
        self.b1, self.b2 = o.get("betas", (0.965, 0.99))
        self.gamma = o.get("rho", 0.04)
        self.eps = o.get("eps", 1e-12)
        self.m = [np.zeros(s) for s in shapes]
        self.h = [np.zeros(s) for s in shapes]

    def update_hessian(self, ghat, tokens):
        for i, gh in enumerate(ghat):
            self.h[i] = self.b2 * self.h[i] + (1 - self.b2) * tokens * gh * gh

    def step(self, ws, gs, lrs, wds, hess):
        for i, (w, g) in enumerate(zip(ws, gs)):
            self.m[i] = self.b1 * self.m[i] + (1 - self.b1) * g
            w -= lrs[i] * wds[i] * w
            w -= lrs[i] * np.clip(self.m[i] / np.maximum(self.gamma * self.h[i], self.eps), -1.0, 1.0)


class ZerosumSgd:
    def __init__(self, o, shapes, routers):
        self.mu = o.get("momentum", 0.9)
        self.damp = o.get("dampening", 0.0)
        self.nesterov = o.get("nesterov", False)
        self.routers = routers
        self.buf = [None for _ in shapes]

    def step(self, ws, gs, lrs, wds, hess):
        for i, (w, g) in enumerate(zip(ws, gs)):
            d = g + wds[i] * w
            if self.routers[i]:
                d = d - d.mean(axis=0, keepdims=True)
            if self.mu > 0:
                self.buf[i] = d.copy() if self.buf[i] is None else self.mu * self.buf[i] + (1 - self.damp) * d
                d = d + self.mu * self.buf[i] if self.nesterov else self.buf[i]
            w -= lrs[i] * d


def main():
    case = json.load(open(sys.argv[1]))
    raw = np.fromfile(sys.argv[2], dtype="<f4").astype(np.float64)
    shapes = [list(p["shape"]) for p in case["params"]]
    sizes = [int(np.prod(s)) for s in shapes]
    pos = 0

    def take_all():
        nonlocal pos
        out = []
        for s, n in zip(shapes, sizes):
            out.append(raw[pos:pos + n].reshape(s).copy())
            pos += n
        return out

    ws = take_all()
    o = case["options"]
    name = case["optimizer"]
    if name == "lamb":
        opt = Lamb(o, shapes)
    elif name == "adafactor":
        opt = Adafactor(o, shapes)
    elif name == "sophia":
        opt = Sophia(o, shapes)
    elif name == "zerosum_sgd":
        opt = ZerosumSgd(o, shapes, [p.get("router", False) for p in case["params"]])
    else:
        raise SystemExit("optim_reference.py: no reference for %r" % name)
    hess = case.get("hessian")
    out = []
    for step in range(case["steps"]):
        if hess and step % hess["interval"] == 0:  # updates 1, 1+k, ... (t mod k = 1)
            opt.update_hessian(take_all(), hess["tokens"])
        gs = take_all()
        if case["clip"] > 0:
            clip_(gs, case["clip"])
        lrs = [case["lrs"][step] * p["lr_mult"] for p in case["params"]]
        opt.step(ws, gs, lrs, [p["weight_decay"] for p in case["params"]], hess)
        out.append(np.concatenate([w.reshape(-1) for w in ws]))
    assert pos == raw.size, "optim_reference.py: %d values left unread" % (raw.size - pos)
    np.concatenate(out).astype("<f4").tofile(sys.argv[3])


if __name__ == "__main__":
    main()
