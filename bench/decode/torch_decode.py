#!/usr/bin/python3
"""bench_decode's PyTorch peer: greedy KV-cache decoding with glm52_torch.GLM52.

Reads the job bench_decode writes (JSON):
  {"model": <the glm52 plugin's info_json>, "weights": "<file>.safetensors"
   (the model's tensors under their spec names, float32), "prompts": [[id, ...], ...]
   (rows of equal length P), "new_tokens": N, "batches": [1, 8], "warmup": 1}
and, for each batch size b, decodes the first b prompts greedily:
  prefill  GLM52.extend(prompts [b, P]) fills the cache and gives new token 0
           (arg-max of the last position's logits; ties: lowest id);
  decode   N steps, each GLM52.extend(token [b, 1]) -> new token i+1,
so N + 1 new tokens per sequence. `warmup` untimed decodes come first; the
first of them also records, per step and sequence, the top-2 logits and the
mean logit (what bench_decode compares with ZCode's); the timed decode
records only the tokens, and must reproduce the warm-up's. Times are
time.perf_counter() around the prefill (with its arg-max) and around the
decode loop. Everything runs under torch.inference_mode in one process.

Writes JSON: {"label", "torch", "threads", "dtype", "runs": [{"batch",
"prefill_s", "decode_s", "head_s" (the LM head's matmul alone, for the
timing split), "tokens" [b][N+1], "timed_equal_warmup",
"top1", "top1_logit", "top2", "top2_logit", "mean_logit" (each [b][N+1])}]}.

  torch_decode.py --job JOB.json --out OUT.json [--threads 2] [--label NAME] [--dtype float32|float64]

Exit status: 0 success, 1 runtime failure, 2 bad input (one line on stderr).
"""

import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quickstart_vs_pytorch"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import glm52_torch  # noqa: E402
import safetensors_io  # noqa: E402


class InputError(ValueError):
    """A bad job file or weights: one actionable line."""


def load_job(path):
    try:
        with open(path, encoding="utf-8") as fh:
            job = json.load(fh)
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"--job {path}: {e}") from e
    for key in ("model", "weights", "prompts", "new_tokens", "batches"):
        if key not in job:
            raise InputError(f"--job {path}: missing key '{key}'")
    prompts = job["prompts"]
    if not prompts or any(len(p) != len(prompts[0]) or not p for p in prompts):
        raise InputError(f"--job {path}: 'prompts' must be non-empty rows of one length")
    if max(job["batches"]) > len(prompts) or min(job["batches"]) < 1:
        raise InputError(f"--job {path}: batches {job['batches']} need 1..{len(prompts)} prompts")
    return job


def top2(logits):
    """(top1 id (lowest on ties, as torch.argmax), its logit, the runner-up's id and logit) per row."""
    vals, idx = torch.topk(logits, 2, dim=-1)
    first = torch.argmax(logits, -1)
    second = torch.where(idx[:, 0] == first, idx[:, 1], idx[:, 0])
    return first, vals[:, 0], second, vals[:, 1]


def greedy(model, prompts, new, record):
    """One greedy decode of prompts int64 [b, P]: (tokens [b, new+1], prefill s, decode s, stats or None)."""
    b, P = prompts.shape
    cache = model.new_cache(b, P + new)
    tokens = torch.empty(b, new + 1, dtype=torch.int64)
    rows = [] if record else None
    with torch.inference_mode():
        t0 = time.perf_counter()
        logits = model.extend(prompts, cache)
        tok = torch.argmax(logits, -1)
        t1 = time.perf_counter()
        tokens[:, 0] = tok
        if record:
            rows.append((logits.double().mean(-1), *top2(logits)))
        for i in range(new):
            logits = model.extend(tok[:, None], cache)
            tok = torch.argmax(logits, -1)
            tokens[:, i + 1] = tok
            if record:
                rows.append((logits.double().mean(-1), *top2(logits)))
        t2 = time.perf_counter()
    stats = None
    if record:
        cols = ["mean_logit", "top1", "top1_logit", "top2", "top2_logit"]
        stats = {c: torch.stack([r[j] for r in rows], 1).tolist() for j, c in enumerate(cols)}
        if stats["top1"] != tokens.tolist():
            raise RuntimeError("recorded top-1 ids differ from the decoded tokens")
    return tokens, t1 - t0, t2 - t1, stats


def head_time(model, b):
    """Seconds of the LM head alone, h [b, d] @ head[:V].t() as GLM52._head does it
    (median of 20 after one warm-up): the timing split bench_decode prints."""
    head = model.embed if model.lm_head is None else model.lm_head
    h = torch.full((b, model.spec.d), 0.01, dtype=model.dtype)
    times = []
    with torch.inference_mode():
        for i in range(21):
            t0 = time.perf_counter()
            h @ head[:model.spec.V].t()
            if i:
                times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--job", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--label", default="pytorch")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    a = ap.parse_args(argv)
    try:
        if a.threads < 1:
            raise InputError(f"--threads {a.threads}: expected >= 1")
        job = load_job(a.job)
        torch.set_num_threads(a.threads)
        dtype = getattr(torch, a.dtype)
        try:
            weights = safetensors_io.load(job["weights"])[0]
        except (OSError, safetensors_io.SafetensorsError) as e:
            raise InputError(f"weights: {e}") from e
        try:
            model = glm52_torch.GLM52(glm52_torch.Spec(job["model"]), dtype)
            model.load_spec(weights)
        except ValueError as e:  # NotSupported and load_spec's messages
            raise InputError(f"model: {e}") from e
        model.eval()
        prompts = torch.tensor(job["prompts"], dtype=torch.int64)
        if int(prompts.min()) < 0 or int(prompts.max()) >= model.spec.V:
            raise InputError(f"--job {a.job}: prompt ids outside [0, {model.spec.V})")
        new, warmup = int(job["new_tokens"]), max(1, int(job.get("warmup", 1)))
        runs = []
        for b in job["batches"]:
            p = prompts[:b].contiguous()
            ref, _, _, stats = greedy(model, p, new, True)
            for _ in range(warmup - 1):
                greedy(model, p, new, False)
            tokens, pre_s, dec_s, _ = greedy(model, p, new, False)
            runs.append(dict(batch=b, prefill_s=pre_s, decode_s=dec_s, head_s=head_time(model, b), tokens=tokens.tolist(),
                             timed_equal_warmup=bool(torch.equal(tokens, ref)), **stats))
        out = dict(label=a.label, torch=torch.__version__, threads=torch.get_num_threads(), dtype=a.dtype, runs=runs)
        with open(a.out, "w", encoding="utf-8") as fh:
            json.dump(out, fh)
        return 0
    except InputError as e:
        print(f"torch_decode.py: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001  (one line for the bench's log)
        print(f"torch_decode.py: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
