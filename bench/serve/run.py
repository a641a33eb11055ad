#!/usr/bin/python3
"""bench/serve: `zcode-host serve` under load, against a sequential baseline and
PyTorch, in one run.

1. A checkpoint with the glm52 benchmarks' MoE (or dense) dims
   (bench/common/glm52_bench.h: vocab 50257, 4 layers, d 256, 4 heads; 8
   experts of hidden 512, top-2), trained one step on the fortunes corpus
   (the weights only need to be the same on both sides).
2. `zcode-host serve` with 32 slots; 32 prompts of --prompt random token ids
   (seed 2026), greedy, --new tokens each, sent as token ids.
3. This script's own streaming client (threads; wrk and hey cannot time
   server-sent events) sends the 32 prompts at 1, 8 and 32 concurrent
   requests: throughput (generated tokens / wall time), time to first token
   and inter-token latency (gaps between the stream's events) p50/p99.
   The sequential baseline: the same prompts one at a time through
   zcode.Engine.generate in one warm Python process (the same scheduler,
   without HTTP); concurrency 1 is printed beside it.
4. The PyTorch peer: bench/decode/torch_decode.py (glm52_torch.GLM52 with a
   KV cache) on the checkpoint's weights and the same prompts, batch 32,
   tuned (OpenMP OpenBLAS, jemalloc) with the OpenBLAS kernel the server
   picked; tokens/s over its prefill and decode.
Paired rounds (default 3): each round runs the three loads and then the peer;
the ratios are medians over rounds of the per-round ratios (the machines are
shared and noisy). Prints the figures, then last the three ratios with their
goals.

  bench/serve/run.py [--zcode-host build/release/bin/zcode-host] [--config moe|dense]
                     [--prompt 64] [--new 64] [--threads 2] [--rounds 3] [--max-step-tokens N]
                     [--work DIR]

Exit status: 0 done, 1 a step failed (its output tail is printed), 2 bad usage.
"""

import argparse
import concurrent.futures as cf
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PY = "/usr/bin/python3"
OPENBLAS_OMP = "/usr/lib/x86_64-linux-gnu/openblas-openmp"
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
MODEL_DIMS = {
    "moe": "d_model: 256, n_layers: 4, n_heads: 4, moe_experts: 8, moe_top_k: 2, moe_ffn_hidden: 512, "
           "first_dense_layers: 0, capacity_factor: 0, moe_aux_loss_coef: 0.01, max_seq_len: 256",
    "dense": "d_model: 256, n_layers: 4, n_heads: 4, ffn_hidden: 683, first_dense_layers: 4, max_seq_len: 256",
}
SLOTS = 32


class Failed(RuntimeError):
    pass


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q / 100.0 * len(xs)))]


def make_checkpoint(a, work):
    corpus = os.path.join(ROOT, "data", "fortunes", "train.jsonl")
    if not os.path.exists(corpus):
        raise Failed(f"{corpus} not found: run scripts/make-corpus.sh")
    cfg = os.path.join(work, "config.yaml")
    with open(cfg, "w", encoding="utf-8") as f:
        f.write(f"""experiment_name: bench_serve_{a.config}
seed: 1337
hardware: {{accelerator: cpu, num_threads: {a.threads}}}
model: {{type: GLM5pt2, variant: nano, {MODEL_DIMS[a.config]}}}
data: {{train_path: {corpus}, tokenizer: {ROOT}/assets/hf/gpt2, batch_size: 1, num_workers: 0,
       cache_dir: {work}/cache, val_fraction: 0.01}}
optimizer: {{name: AdamW, lr: 0.001}}
training: {{max_steps: 1, save_every: 1, eval_every: 1000, log_every: 1}}
logging: {{console_log_level: WARNING, output_dir: {work}/outputs}}
evaluation: {{plugins: [lm], split: val, batch_size: 1}}
""")
    p = subprocess.run([a.zcode_host, "run", cfg, "--overwrite"], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise Failed("training the checkpoint failed:\n" + "\n".join((p.stdout + p.stderr).splitlines()[-15:]))
    return os.path.join(work, "outputs", f"bench_serve_{a.config}", "checkpoints", "step_1")


def one_request(url, model, prompt, new):
    """Streams one completion; returns (tokens, ttft s, [inter-event gaps s], total s)."""
    body = {"model": model, "prompt": prompt, "max_tokens": new, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    times, tokens = [], 0
    with requests.post(url + "/v1/completions", json=body, stream=True, timeout=600) as r:
        if r.status_code != 200:
            raise Failed(f"HTTP {r.status_code}: {r.text[:200]}")
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
            elif ev["choices"] and ev["choices"][0]["text"]:
                times.append(time.perf_counter())
    end = time.perf_counter()
    gaps = [b - a_ for a_, b in zip(times, times[1:])]
    return tokens, (times[0] - t0) if times else float("nan"), gaps, end - t0


def scrape(url):
    out = {}
    for line in requests.get(url + "/metrics", timeout=10).text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            k, v = line.split(" ")[:2]
            out[k] = float(v)
    return out


def load(url, model, prompts, new, concurrency):
    m0 = scrape(url)
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(concurrency) as ex:
        res = list(ex.map(lambda p: one_request(url, model, p, new), prompts))
    wall = time.perf_counter() - t0
    toks = sum(r[0] for r in res)
    gaps = [g for r in res for g in r[2]]
    ttft = [r[1] for r in res]
    m1 = scrape(url)
    d = {k: m1[k] - m0.get(k, 0) for k in m1}
    steps = max(d["zcode_serve_decode_steps_total"], 1)
    return {"model_share": d["zcode_serve_model_seconds_total"] / wall,
            "sampling_share": d["zcode_serve_sampling_seconds_total"] / wall,
            "step_ms": 1e3 * d["zcode_serve_model_seconds_total"] / steps,
            "mean_batch": d["zcode_serve_step_tokens_total"] / steps,
            "concurrency": concurrency, "tokens": toks, "wall_s": wall, "tokens_per_s": toks / wall,
            "ttft_p50": pct(ttft, 50), "ttft_p99": pct(ttft, 99), "itl_p50": pct(gaps, 50), "itl_p99": pct(gaps, 99)}


ENGINE_BASELINE = r'''
import json, sys, time
import zcode  # before anything that loads OpenBLAS
ckpt, prompts, new = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
engine = zcode.Engine.from_checkpoint(ckpt)
engine.generate(prompts[0], strategy="greedy", max_new_tokens=4)  # warm: load, first step
t0 = time.perf_counter()
tokens = sum(len(engine.generate(p, strategy="greedy", max_new_tokens=new)["ids"]) for p in prompts)
print(json.dumps({"tokens": tokens, "wall_s": time.perf_counter() - t0}))
'''


def engine_baseline(a, ckpt, prompts):
    """The same prompts one at a time through zcode.Engine.generate in one warm process."""
    pypath = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.zcode_host))), "python")
    env = dict(os.environ, PYTHONPATH=pypath)
    p = subprocess.run([PY, "-c", ENGINE_BASELINE, ckpt, json.dumps(prompts), str(a.new)], capture_output=True,
                       text=True, env=env, check=False)
    if p.returncode != 0:
        raise Failed("the Engine.generate baseline failed:\n" + "\n".join((p.stdout + p.stderr).splitlines()[-15:]))
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["tokens_per_s"] = r["tokens"] / r["wall_s"]
    return r


def torch_peer(a, work, ckpt, prompts, blas_kernel):
    with open(os.path.join(ckpt, "state.json"), encoding="utf-8") as f:
        arch = json.load(f)["stages"]["model"]["architecture"]
    job = os.path.join(work, "torch_job.json")
    with open(job, "w", encoding="utf-8") as f:
        json.dump({"model": arch, "weights": os.path.join(ckpt, "model.safetensors"), "prompts": prompts,
                   "new_tokens": a.new - 1, "batches": [len(prompts)], "warmup": 1}, f)
    out = os.path.join(work, "torch_out.json")
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), LD_LIBRARY_PATH=OPENBLAS_OMP, LD_PRELOAD=JEMALLOC,
               MALLOC_CONF="dirty_decay_ms:-1,muzzy_decay_ms:-1")
    if blas_kernel:
        env["OPENBLAS_CORETYPE"] = blas_kernel
    p = subprocess.run([PY, os.path.join(ROOT, "bench", "decode", "torch_decode.py"), "--job", job, "--out", out,
                        "--threads", str(a.threads), "--label", "pytorch tuned"],
                       capture_output=True, text=True, env=env, check=False)
    if p.returncode != 0:
        raise Failed("the PyTorch peer failed:\n" + "\n".join((p.stdout + p.stderr).splitlines()[-15:]))
    with open(out, encoding="utf-8") as f:
        run = json.load(f)["runs"][0]
    toks = len(prompts) * a.new
    return {"tokens": toks, "prefill_s": run["prefill_s"], "decode_s": run["decode_s"],
            "tokens_per_s": toks / (run["prefill_s"] + run["decode_s"]),
            "decode_tokens_per_s": len(prompts) * (a.new - 1) / run["decode_s"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zcode-host", default=os.path.join(ROOT, "build", "release", "bin", "zcode-host"))
    ap.add_argument("--config", choices=["moe", "dense"], default="moe")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-env", action="append", default=[], metavar="K=V",
                    help="an environment variable for the server only (repeatable)")
    ap.add_argument("--max-step-tokens", type=int, default=0, help="the server's flag (0: its default)")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench_serve"))
    a = ap.parse_args()
    if not os.access(a.zcode_host, os.X_OK):
        print(f"run.py: --zcode-host {a.zcode_host} is not an executable (build with cmake --preset release)",
              file=sys.stderr)
        return 2
    if a.prompt + a.new > 256 or a.prompt < 1 or a.new < 2:
        print("run.py: --prompt + --new must be <= 256 (max_seq_len), --prompt >= 1, --new >= 2", file=sys.stderr)
        return 2
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"bench/serve: {a.config}, {SLOTS} prompts of {a.prompt} ids, {a.new} new tokens greedy, "
          f"{a.threads} threads, {cpu}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    try:
        ckpt = make_checkpoint(a, a.work)
        rng = random.Random(2026)
        prompts = [[rng.randrange(50257) for _ in range(a.prompt)] for _ in range(SLOTS)]
        log = open(os.path.join(a.work, "serve.log"), "w")
        env = dict(os.environ)
        for kv in a.server_env:
            k, _, v = kv.partition("=")
            env[k] = v
        srv = subprocess.Popen([a.zcode_host, "serve", "--checkpoint", ckpt, "--port", "0", "--slots", str(SLOTS),
                                "--prefill-chunk", "64", "--max-queue", "64", "--max-step-tokens",
                                str(a.max_step_tokens)],
                               stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        try:
            line = srv.stdout.readline()
            m = re.search(r"listening on (http://\S+)", line)
            if not m:
                raise Failed("the server did not start: " + open(os.path.join(a.work, "serve.log")).read()[-2000:])
            url, model = m.group(1), f"bench_serve_{a.config}"
            one_request(url, model, prompts[0], 4)  # warm
            kernel = re.search(r"OpenBLAS kernel (\w+)", open(os.path.join(a.work, "serve.log")).read())
            kernel = kernel.group(1) if kernel else None
            # Paired rounds: the three loads, then the peer, back to back; ratios per round.
            rounds = []
            for _ in range(a.rounds):
                res = [load(url, model, prompts, a.new, c) for c in (1, 8, 32)]
                rounds.append((res, torch_peer(a, a.work, ckpt, prompts, kernel), engine_baseline(a, ckpt, prompts)))
        finally:
            srv.terminate()
            srv.wait(timeout=60)
            log.close()
    except (Failed, requests.RequestException) as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 1
    print(f"OpenBLAS kernel: {kernel} (the server's choice; the peer runs with it); {a.rounds} paired rounds")
    print(f"{'round':>5} {'concurrency':>11} {'tokens':>7} {'wall s':>8} {'tok/s':>8} {'TTFT p50':>9} {'TTFT p99':>9} "
          f"{'ITL p50':>8} {'ITL p99':>8} {'step':>8} {'batch':>6} {'model':>6} {'sampling':>8}")
    ratios = []
    for k, (results, peer, base) in enumerate(rounds):
        for r in results:
            print(f"{k + 1:>5} {r['concurrency']:>11} {r['tokens']:>7} {r['wall_s']:>8.2f} {r['tokens_per_s']:>8.1f} "
                  f"{r['ttft_p50'] * 1e3:>7.0f}ms {r['ttft_p99'] * 1e3:>7.0f}ms {r['itl_p50'] * 1e3:>6.1f}ms "
                  f"{r['itl_p99'] * 1e3:>6.1f}ms {r['step_ms']:>6.1f}ms {r['mean_batch']:>6.1f} "
                  f"{100 * r['model_share']:>5.0f}% {100 * r['sampling_share']:>7.0f}%")
        print(f"{k + 1:>5} pytorch tuned, batch {SLOTS}: {peer['tokens']} tokens, prefill {peer['prefill_s']:.2f} s, "
              f"decode {peer['decode_s']:.2f} s: {peer['tokens_per_s']:.1f} tok/s "
              f"({peer['decode_tokens_per_s']:.1f} in decode)")
        print(f"{k + 1:>5} Engine.generate one prompt at a time (warm process): {base['tokens']} tokens, "
              f"{base['wall_s']:.2f} s: {base['tokens_per_s']:.1f} tok/s")
        seq, c32 = results[0], results[2]
        ratios.append((c32["tokens_per_s"] / base["tokens_per_s"], c32["itl_p99"] / seq["itl_p99"],
                       c32["tokens_per_s"] / peer["tokens_per_s"], c32["tokens_per_s"] / seq["tokens_per_s"]))
    print("(step: mean model time of one decode step; batch: mean tokens per step; model, sampling: shares of "
          "the wall time in the model and in picking tokens / making text, from the server's /metrics)")
    med = [statistics.median(r[i] for r in ratios) for i in range(4)]
    rng = [(min(r[i] for r in ratios), max(r[i] for r in ratios)) for i in range(4)]
    print(f"(throughput at 32 concurrent / the server at 1 concurrent: {med[3]:.2f}x, rounds "
          f"{rng[3][0]:.2f}-{rng[3][1]:.2f})")
    print(f"throughput at 32 concurrent / sequential Engine.generate: {med[0]:.2f}x (rounds "
          f"{rng[0][0]:.2f}-{rng[0][1]:.2f}; goal >= 5x)")
    print(f"p99 inter-token latency at 32 / single stream: {med[1]:.2f} (rounds {rng[1][0]:.2f}-{rng[1][1]:.2f}; "
          f"goal < 2)")
    print(f"zcode serve at 32 / pytorch tuned batch 32: {med[2]:.2f}x (rounds {rng[2][0]:.2f}-{rng[2][1]:.2f}; "
          f"goal >= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
