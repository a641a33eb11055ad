#!/usr/bin/python3
"""Train glm52_torch.GLM52 on the batches and initial weights a ZCode run starts from.

Reads the folder written by quickstart_dump (weights.safetensors,
batches.safetensors, model.json, config.json) and repeats the Engine's
training step (core/include/zcode/core/train_step.h) in PyTorch:
  loss = model(batch) with normalizer = the batch's target tokens (one micro-batch)
  backward; n = clip_grad_norm_(params, training.clip_grad_norm) (torch's, the
  same formula as ZCode's clip: coef = max/(n + 1e-6), applied when < 1)
  lr = schedule(step) (the schedulers plugin's step convention, below)
  torch.optim.AdamW step (decoupled weight decay, Loshchilov & Hutter 2019,
  Algorithm 2; the optimizers plugin's adamw uses the same update and
  parameter groups: see GLM52.param_groups)
and writes one JSON file: per-step loss terms, lr, grad_norm and step time,
and the steady-state tokens/s (batch target tokens / median step time over
the steps after --warmup).

  train_torch.py --dump DIR --steps N --out R.json [--dtype float32|float64]
                 [--threads 2] [--warmup 5] [--label NAME]

Exit status: 0 success, 1 runtime failure, 2 bad input or an option the
bench does not implement (one line on stderr).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import glm52_torch  # noqa: E402
import safetensors_io  # noqa: E402


class InputError(ValueError):
    """Bad dump folder or an unsupported config option: one actionable line."""


def canon(name):
    return str(name).lower().replace("-", "_")


def lr_schedule(sched, base_lr, max_steps):
    """lr(step) for step = 0.. (updates already done), as plugins/optimizer/schedulers.

    warmup W: lr = base·(step+1)/W for step < W; then p = clamp((step−W)/(T−W), 0, 1),
    T = training.max_steps, and lr = base·(r + (1−r)·f(p)) with r = min_lr_ratio and
    f = 1 (constant), 1 − p (linear_with_warmup) or (1 + cos πp)/2
    (cosine_with_warmup; SGDR, Loshchilov & Hutter 2017, eq. 5, one cycle).
    Raises InputError for the other schedulers (not implemented in the bench).
    """
    kind = canon(sched.get("type", "constant"))
    W = int(sched.get("warmup_steps", 0))
    r = float(sched.get("min_lr_ratio", 0.0))
    shapes = {
        "constant": lambda p: 1.0,
        "linear_with_warmup": lambda p: 1.0 - p,
        "cosine_with_warmup": lambda p: 0.5 * (1.0 + math.cos(math.pi * p)),
    }
    if kind not in shapes:
        raise InputError(f"scheduler.type: '{kind}' is not implemented in the bench (expected one of {sorted(shapes)})")
    f = shapes[kind]

    def lr(step):
        if step < W:
            return base_lr * (step + 1) / W
        if kind == "constant":
            return base_lr
        span = max_steps - W
        p = 1.0 if span == 0 else min(1.0, max(0.0, (step - W) / span))
        return base_lr * (r + (1.0 - r) * f(p))
    return lr


def load_dump(folder):
    def read_json(name):
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8") as fh:
                return json.load(fh)
        except FileNotFoundError:
            raise InputError(f"--dump: file '{path}' not found (run quickstart_dump first)") from None
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{e.lineno}:{e.colno}: {e.msg}") from None

    def read_st(name):
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            raise InputError(f"--dump: file '{path}' not found (run quickstart_dump first)")
        try:
            return safetensors_io.load(path)[0]
        except safetensors_io.SafetensorsError as e:
            raise InputError(str(e)) from None

    return read_json("config.json"), read_json("model.json"), read_st("weights.safetensors"), read_st("batches.safetensors")


def check_flags(model_info, weight_decay, decay_embeddings, model):
    """The decay groups of GLM52.param_groups must be those the plugin's flags give."""
    no_decay_names = set()
    for p in model_info.get("params", []):
        flags = int(p["flags"])
        if flags & 1 or (flags & 2 and not decay_embeddings):
            no_decay_names.add(p["name"])
    groups = model.param_groups(weight_decay, decay_embeddings)
    mine = set()
    ids = {id(p) for p in groups[1]["params"]}
    for name, param, _ in model._views():
        if id(param) in ids:
            mine.add(name)
    if model_info.get("params") and mine != no_decay_names:
        diff = sorted(mine ^ no_decay_names)
        raise InputError(f"model.json: weight-decay groups differ from the plugin's parameter flags at '{diff[0]}'")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", required=True, help="folder written by quickstart_dump")
    ap.add_argument("--steps", type=int, required=True, help="optimizer steps (<= dumped batches)")
    ap.add_argument("--out", required=True, help="result JSON")
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of the timing")
    ap.add_argument("--label", default="pytorch")
    a = ap.parse_args(argv)
    try:
        torch.set_num_threads(a.threads)
        dtype = getattr(torch, a.dtype)
        cfg, info, weights, batches = load_dump(a.dump)
        try:
            spec = glm52_torch.Spec(info)
        except glm52_torch.NotSupported as e:
            raise InputError(str(e)) from None
        opt = cfg.get("optimizer", {})
        tr = cfg.get("training", {})
        if canon(opt.get("name", "adamw")) != "adamw":
            raise InputError(f"optimizer.name: '{opt.get('name')}' is not implemented in the bench (expected adamw)")
        if opt.get("param_groups"):
            raise InputError("optimizer.param_groups: not implemented in the bench (remove it)")
        if int(tr.get("gradient_accumulation", 1)) != 1:
            raise InputError(f"training.gradient_accumulation: {tr['gradient_accumulation']} is not implemented "
                             "in the bench (expected 1)")
        if float(tr.get("loss_scale", 1.0)) != 1.0:
            raise InputError(f"training.loss_scale: {tr['loss_scale']} is not implemented in the bench (expected 1)")
        ids_all = batches["input_ids"]
        if a.steps < 1 or a.steps > ids_all.shape[0]:
            raise InputError(f"--steps: {a.steps} (expected 1..{ids_all.shape[0]}, the dumped batches)")
        if a.warmup < 0 or a.warmup >= a.steps:
            raise InputError(f"--warmup: {a.warmup} (expected 0..{a.steps - 1})")
        base_lr = float(opt.get("lr", 1e-3))
        betas = tuple(float(b) for b in opt.get("betas", [0.9, 0.999]))
        eps = float(opt.get("eps", 1e-8))
        wd = float(opt.get("weight_decay", 0.01))
        decay_emb = bool(opt.get("decay_embeddings", False))
        clip = float(tr.get("clip_grad_norm", 0.0) or 0.0)
        max_steps = int(tr.get("max_steps", a.steps))
        lr_of = lr_schedule(cfg.get("scheduler", {}), base_lr, max_steps)

        model = glm52_torch.GLM52(spec, dtype)
        try:
            model.load_spec(weights)
        except ValueError as e:
            raise InputError(f"{a.dump}/weights.safetensors: {e}") from None
        check_flags(info, wd, decay_emb, model)
        optimizer = torch.optim.AdamW(model.param_groups(wd, decay_emb), lr=base_lr, betas=betas, eps=eps)
        params = [p for p in model.parameters()]

        ids_t = torch.from_numpy(ids_all[:a.steps].astype(np.int64))
        tg_t = torch.from_numpy(batches["targets"][:a.steps].astype(np.int64))
        docs = batches.get("doc_ids")
        doc_t = None if docs is None else torch.from_numpy(docs[:a.steps].astype(np.int64))
        history = []
        for step in range(a.steps):
            t0 = time.perf_counter()
            targets = tg_t[step]
            ntok = int((targets != -1).sum())
            loss, parts = model(ids_t[step], targets, None if doc_t is None else doc_t[step], float(ntok))
            loss.backward()
            if clip > 0:
                norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
            else:
                norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])))
            lr = lr_of(step)
            for g in optimizer.param_groups:
                g["lr"] = lr
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            dt = time.perf_counter() - t0
            history.append(dict(step=step + 1, loss=float(loss), lr=lr, grad_norm=norm, tokens=ntok,
                                step_time_ms=dt * 1e3, **parts))
            if not math.isfinite(float(loss)):
                raise RuntimeError(f"step {step + 1}: non-finite loss {float(loss)}")
        timed = history[a.warmup:]
        med_ms = statistics.median(h["step_time_ms"] for h in timed)
        tokens = statistics.mean(h["tokens"] for h in timed)
        env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "LD_LIBRARY_PATH", "LD_PRELOAD", "MALLOC_CONF")}
        res = dict(label=a.label, impl=f"pytorch {torch.__version__} eager {a.dtype}", threads=torch.get_num_threads(),
                   dtype=a.dtype, steps=a.steps, warmup=a.warmup, median_step_time_ms=med_ms,
                   tokens_per_s=tokens / (med_ms / 1e3), env=env, history=history)
        tmp = a.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(res, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, a.out)
        print(f"{a.label}: {res['tokens_per_s']:.0f} tokens/s (median step {med_ms:.1f} ms over steps "
              f"{a.warmup + 1}..{a.steps}), loss {history[0]['loss']:.6f} -> {history[-1]['loss']:.6f}")
        return 0
    except InputError as e:
        sys.stderr.write(f"train_torch: {e}\n")
        return 2
    except (OSError, RuntimeError) as e:
        sys.stderr.write(f"train_torch: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
