#!/usr/bin/python3
"""bench/distributed's peer: GLM-5.2 training steps under PyTorch DDP over gloo.

One process per rank, started by mpirun (rank and size from Open MPI's
OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE; MASTER_ADDR and MASTER_PORT from
the environment, as torch.distributed's env:// rendezvous reads them). Each
rank builds bench/quickstart_vs_pytorch/glm52_torch.GLM52 from the
architecture ZCode resolved (--arch: the "architecture" object of a ZCode
checkpoint's state.json, so both sides train the same dims), initialises it by
the spec's init rules (plugins/model/glm52/README.md, "Init"; own seed, DDP
broadcasts rank 0's weights), wraps it in
torch.nn.parallel.DistributedDataParallel (gloo, 25 MiB buckets,
gradient_as_bucket_view) and runs --steps training steps of
  --grad-accum micro-batches of --micro random sequences of --seq tokens
  (DDP's no_sync on all but the last), loss normalised by the step's
  global target tokens (DDP averages over ranks), backward,
  clip_grad_norm_(1.0), AdamW (betas 0.9/0.999, weight decay 0.01 on the
  plugin's groups, GLM52.param_groups),
timing each step with time.perf_counter(). Random token ids instead of the
corpus: the work of a step does not depend on which ids it sees (dropless MoE
routes over whatever the router gives; capacity_factor 0 in the bench).

Rank 0 writes --out (JSON): label, torch version, threads, world, micro,
grad_accum, seq, steps, warmup, step_times_ms (every step),
median_step_ms (steps after --warmup), tokens_per_step (global),
tokens_per_s, losses.

  mpirun -np 2 /usr/bin/python3 torch_ddp.py --arch ARCH.json --out R.json
         [--micro 4] [--grad-accum 1] [--seq 256] [--steps 8] [--warmup 3]
         [--threads 1] [--label NAME]

Exit status: 0 success, 1 runtime failure, 2 bad input (one line on stderr).
"""

import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quickstart_vs_pytorch"))
import glm52_torch  # noqa: E402


class InputError(ValueError):
    """Bad arguments or architecture: one actionable line."""


def spec_init(model, seed):
    """The spec's init (plugins/model/glm52/README.md, "Init"), with numpy's generator.

    Xavier-normal std = gain·sqrt(2/(fan_in+fan_out)) with gain β (DeepNorm) for
    wv, wo and every FFN/expert matrix, 1 for wq and wk; router and embedding
    std 0.02; ScaleNorm gains √d (RMSNorm weights 1); RoPE log-frequencies
    −(2i/R)·ln(rope_theta). Not ZCode's random stream: the same distribution.
    """
    s = model.spec
    rng = np.random.default_rng(seed)
    out = {}
    for name, param, view in model._views():
        shape = tuple(view(param.data).shape)
        if name in ("embed.weight", "lm_head.weight") or name.endswith("moe.router"):
            out[name] = rng.normal(0.0, 0.02, shape)
        elif name.endswith("norm.weight") or name == "norm_f.weight":
            out[name] = np.full(shape, math.sqrt(s.d) if s.norm == "scalenorm" else 1.0)
        elif name.endswith("rope_log_inv_freq"):
            i = np.arange(shape[0])
            out[name] = -(2.0 * i / s.R) * math.log(s.rope_theta)
        else:
            gain = 1.0 if name.endswith(("attn.wq", "attn.wk")) else s.beta
            fan_out, fan_in = shape
            out[name] = rng.normal(0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), shape)
    model.load_spec({k: v.astype(np.float32) for k, v in out.items()})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", required=True, help="JSON file: the model's resolved architecture (info_json)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--micro", type=int, default=4, help="sequences per micro-batch and rank")
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of the timing")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--label", default="pytorch ddp gloo")
    a = ap.parse_args(argv)
    try:
        if a.micro < 1 or a.grad_accum < 1 or a.seq < 2:
            raise InputError("--micro, --grad-accum >= 1 and --seq >= 2 are required")
        if a.warmup < 0 or a.warmup >= a.steps:
            raise InputError(f"--warmup: {a.warmup} (expected 0..{a.steps - 1})")
        rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
        world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
        if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
            raise InputError("MASTER_ADDR and MASTER_PORT must be set (run.py sets them)")
        try:
            with open(a.arch, encoding="utf-8") as fh:
                info = json.load(fh)
            spec = glm52_torch.Spec(info)
        except (OSError, json.JSONDecodeError, KeyError, glm52_torch.NotSupported) as e:
            raise InputError(f"--arch {a.arch}: {e}") from None
        if spec.capacity_factor > 0 and spec.E > 0 and spec.first_dense < spec.L:
            raise InputError("--arch: capacity_factor > 0; the bench trains dropless (capacity_factor 0)")

        torch.set_num_threads(a.threads)
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=600))
        model = glm52_torch.GLM52(spec, torch.float32)
        spec_init(model, a.seed)
        ddp = DDP(model, bucket_cap_mb=25, gradient_as_bucket_view=True)
        opt = torch.optim.AdamW(model.param_groups(0.01), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
        params = list(model.parameters())
        gen = torch.Generator().manual_seed(a.seed * 1000003 + rank)
        local_tokens = a.micro * a.seq * a.grad_accum
        global_tokens = local_tokens * world
        times, losses = [], []
        for step in range(a.steps):
            ids = [torch.randint(0, spec.V, (a.micro, a.seq), generator=gen) for _ in range(a.grad_accum)]
            tgt = [torch.randint(0, spec.V, (a.micro, a.seq), generator=gen) for _ in range(a.grad_accum)]
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=False)
            total = 0.0
            for m in range(a.grad_accum):
                last = m == a.grad_accum - 1
                # DDP averages gradients over ranks, so each rank normalises by
                # its own tokens: the mean is the global step's normalisation.
                if last:
                    loss, _ = ddp(ids[m], tgt[m], None, float(local_tokens))
                    loss.backward()
                else:
                    with ddp.no_sync():
                        loss, _ = ddp(ids[m], tgt[m], None, float(local_tokens))
                        loss.backward()
                total += float(loss)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            times.append((time.perf_counter() - t0) * 1e3)
            losses.append(total)
            if not math.isfinite(total):
                raise RuntimeError(f"step {step + 1}: non-finite loss {total}")
        dist.barrier()
        dist.destroy_process_group()
        if rank == 0:
            med = statistics.median(times[a.warmup:])
            res = dict(label=a.label, impl=f"pytorch {torch.__version__} DDP gloo", threads=torch.get_num_threads(),
                       world=world, micro=a.micro, grad_accum=a.grad_accum, seq=a.seq, steps=a.steps,
                       warmup=a.warmup, step_times_ms=times, median_step_ms=med, tokens_per_step=global_tokens,
                       tokens_per_s=global_tokens / (med / 1e3), losses=losses,
                       env={k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "LD_LIBRARY_PATH", "LD_PRELOAD",
                                                             "MALLOC_CONF", "OPENBLAS_CORETYPE")})
            tmp = a.out + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(res, fh)
            os.replace(tmp, a.out)
            print(f"{a.label}: {res['tokens_per_s']:.0f} tokens/s (median step {med:.1f} ms over steps "
                  f"{a.warmup + 1}..{a.steps}), loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
        return 0
    except InputError as e:
        sys.stderr.write(f"torch_ddp: {e}\n")
        return 2
    except (OSError, RuntimeError) as e:
        sys.stderr.write(f"torch_ddp: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
