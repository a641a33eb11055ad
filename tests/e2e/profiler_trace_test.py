#!/usr/bin/env python3
"""The profiler's Chrome trace (issue 21 item 5), end to end.

Two runs of a small GLM-5.2 (3 layers: one dense, two MoE with a shared
expert), deepnorm and prenorm:
  - `zcode-host profile --steps 3` with profile_shapes and profile_memory:
    every step traced;
  - `zcode-host run` with profiling.enabled and the guide's schedule
    (wait 1, warmup 1, active 2, repeat 1): only steps 3 and 4 traced, and
    the evaluation and checkpoint that follow step 4 are in the trace.

Checks, from the file alone (a reader of the Trace Event Format as
chrome://tracing and Perfetto read it, written here from the format's
documentation, not from our writer):
  - the schema: a {"traceEvents": [...]} object; every event has a name,
    a ph of X (complete), C (counter) or M (metadata), integer pid and tid;
    X and C have a numeric ts >= 0, X a dur >= 0; C args are numbers;
    M are thread_name records;
  - per traced step, the engine's phases data_wait, forward_backward,
    clip_grad_norm and optimizer_step;
  - per forward_backward and per layer, every model phase forward and
    backward (norm, qkv_proj, rope, attention, out_proj, and ffn on the
    dense layer or router, experts, shared_expert on the MoE layers), plus
    embedding (both ways), lm_head_loss and zero_grad;
  - the model's spans lie inside forward_backward on its track, do not
    overlap one another, and their durations sum to within 5 % of it in
    the best traced step of each run (a preemption between two spans
    lengthens one step; a phase left outside the spans shows in all);
  - profile_shapes: tokens = batch x seq and the FLOPs of the GEMM phases
    equal the analytic counts computed here from the config (2 per
    multiply-add: qkv_proj 2·N·d·(H+2·Hkv)·hd, out_proj 2·N·H·hd·d,
    router 2·N·d·E, shared_expert 6·N·d·F, ffn 6·N·d·F_dense, attention
    2·B·T²·H·hd (causal), lm_head_loss 6·N·V·d; backward twice the forward);
  - profile_memory: a "memory" counter per traced step whose
    parameters_mib and workspace_mib equal the model's own glm52_memory
    counter (the preflight estimate against what the model allocated), and
    whose parameters_mib equals the parameter count computed here × 4 B;
  - the scheduled run traces exactly the active steps and shows
    "evaluation" and "checkpoint".

Usage: profiler_trace_test.py ZCODE_HOST SOURCE_DIR WORK_DIR
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

from word_corpus import write_corpus

B, T = 4, 32
D, L, H, HKV, HD = 64, 3, 4, 2, 16
E, K, F, FD, S = 4, 2, 32, 96, 1
V = 50257  # GPT-2's vocabulary (assets/hf/gpt2)
# The model's vocabulary: GPT-2's plus the GLM-5.2 specials it lacks, appended
# (plugins/tokenizer/README.md): <pad>, <mask>, <expert_0..E-1>, <image>.
V_MODEL = V + 2 + E + 1
V_PADDED = 50304  # the embedding's rows: V_MODEL rounded up to a multiple of 128 (glm52 README)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def config(work, src, name, residual, profiling, max_steps):
    path = f"{work}/{name}.yaml"
    with open(path, "w") as f:
        f.write(f"""experiment_name: {name}
seed: 11
hardware: {{accelerator: cpu, num_threads: 2}}
model: {{type: GLM5pt2, variant: nano, d_model: {D}, n_layers: {L}, n_heads: {H}, n_kv_heads: {HKV},
        head_dim: {HD}, moe_experts: {E}, moe_top_k: {K}, moe_ffn_hidden: {F}, moe_shared_experts: {S},
        first_dense_layers: 1, ffn_hidden: {FD}, max_seq_len: {T}, residual: {residual},
        tie_embeddings: true}}
data: {{train_path: {work}/train.jsonl, val_path: {work}/val.jsonl, tokenizer: {src}/assets/hf/gpt2,
       batch_size: {B}, num_workers: 0, cache_dir: {work}/cache}}
optimizer: {{name: AdamW, lr: 0.003}}
scheduler: {{type: cosine_with_warmup, warmup_steps: 1}}
training: {{max_steps: {max_steps}, eval_every: 4, save_every: 4, log_every: 1}}
evaluation: {{batch_size: 4, max_batches: 2}}
logging: {{output_dir: {work}/runs}}
profiling: {profiling}
""")
    return path


def run(args, cwd):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        fail(f"{' '.join(args)} exited {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def load_trace(path):
    check(os.path.exists(path), f"no trace at {path}")
    with open(path) as f:
        doc = json.load(f)
    check(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list), "not a {traceEvents: [...]} object")
    for i, e in enumerate(doc["traceEvents"]):
        where = f"traceEvents[{i}] {e}"
        check(isinstance(e.get("name"), str) and e["name"], "no name: " + where)
        check(e.get("ph") in ("X", "C", "M"), "ph not X/C/M: " + where)
        check(isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), "pid/tid not integers: " + where)
        if e["ph"] in ("X", "C"):
            check(isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, "bad ts: " + where)
        if e["ph"] == "X":
            check(isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, "bad dur: " + where)
            check("args" not in e or isinstance(e["args"], dict), "args not an object: " + where)
        if e["ph"] == "C":
            check(isinstance(e.get("args"), dict) and e["args"], "counter without args: " + where)
            check(all(isinstance(v, (int, float)) for v in e["args"].values()), "counter args not numbers: " + where)
        if e["ph"] == "M":
            check(e["name"] == "thread_name" and isinstance(e.get("args", {}).get("name"), str), "bad metadata: " + where)
    return doc["traceEvents"]


def param_count(residual):
    """GLM-5.2's parameters from the README's layout, counted here."""
    qkv = (H + 2 * HKV) * HD * D
    attn = qkv + H * HD * D + HD // 2  # wqkv, wo, learned RoPE bands (rotary = head_dim)
    n = V_PADDED * D  # tied embedding
    for layer in range(L):
        norms = 2  # ScaleNorm: one gain per norm
        if layer < 1:
            ffn = 3 * FD * D
        else:
            ffn = E * D + (E + S) * 3 * F * D
        n += attn + norms + ffn
    return n + (1 if residual == "prenorm" else 0)  # the final norm's gain


def expected_phases(layer, direction):
    p = {"norm", "qkv_proj", "rope", "attention", "out_proj"}
    p |= {"ffn"} if layer < 1 else {"router", "experts", "shared_expert"}
    return p


def check_steps(events, label, shapes, memory, want_steps, residual="deepnorm"):
    xs = [e for e in events if e["ph"] == "X"]
    fbs = [e for e in xs if e["name"] == "forward_backward" and e.get("cat") == "step"]
    check(len(fbs) == want_steps, f"{label}: {len(fbs)} forward_backward spans, expected {want_steps}")
    for name in ("data_wait", "clip_grad_norm", "optimizer_step"):
        n = sum(1 for e in xs if e["name"] == name and e.get("cat") == "step")
        check(n >= want_steps, f"{label}: {n} {name} spans for {want_steps} steps")
    steps = [e for e in xs if re.fullmatch(r"ProfilerStep#[0-9]+", e["name"])]
    check(len(steps) == want_steps, f"{label}: {len(steps)} ProfilerStep#N spans, expected {want_steps}")
    for fb in fbs:
        check(any(p["ts"] <= fb["ts"] and fb["ts"] + fb["dur"] <= p["ts"] + p["dur"] + 1e-3 for p in steps),
              f"{label}: a forward_backward outside every ProfilerStep span")
    model = [e for e in xs if e.get("cat") in ("forward", "backward", "forward_backward", "model")]
    N = B * T
    ratios = []
    for s, fb in enumerate(fbs):
        t0, t1 = fb["ts"], fb["ts"] + fb["dur"]
        inside = [e for e in model if e["tid"] == fb["tid"] and e["ts"] >= t0 - 1e-3 and e["ts"] < t1]
        for e in inside:
            check(e["ts"] + e["dur"] <= t1 + 1e-3, f"{label} step {s}: {e['name']} ends after forward_backward")
        seen = {}
        for e in inside:
            seen.setdefault((e["cat"], e["args"].get("layer", -1) if "args" in e else -1), set()).add(e["name"])
        for layer in range(L):
            for d in ("forward", "backward"):
                missing = expected_phases(layer, d) - seen.get((d, layer), set())
                check(not missing, f"{label} step {s}: layer {layer} {d} lacks {sorted(missing)}")
        check("embedding" in seen.get(("forward", -1), set()), f"{label} step {s}: no forward embedding")
        check("embedding" in seen.get(("backward", -1), set()), f"{label} step {s}: no backward embedding")
        check("lm_head_loss" in seen.get(("forward_backward", -1), set()), f"{label} step {s}: no lm_head_loss")
        check("zero_grad" in seen.get(("model", -1), set()), f"{label} step {s}: no zero_grad")
        # Leaves: sorted by start, each ends before the next begins.
        inside.sort(key=lambda e: e["ts"])
        for a, b in zip(inside, inside[1:]):
            check(a["ts"] + a["dur"] <= b["ts"] + 1e-3, f"{label} step {s}: {a['name']} overlaps {b['name']}")
        total = sum(e["dur"] for e in inside)
        ratio = total / fb["dur"]
        edges = [t0] + [x for e in inside for x in (e["ts"], e["ts"] + e["dur"])] + [t1]
        gap = max(edges[i + 1] - edges[i] for i in range(0, len(edges) - 1, 2))
        print(f"{label} step {s}: {len(inside)} model spans cover {ratio:.4f} of forward_backward "
              f"({fb['dur']:.0f} us, largest gap {gap:.0f} us)")
        check(ratio <= 1.0 + 1e-6, f"{label} step {s}: model spans sum to {ratio:.4f} of forward_backward")
        ratios.append(ratio)
        if shapes:
            check(fb.get("args") == {"micro_batches": 1, "batch_size": B, "seq": T}, f"forward_backward args {fb.get('args')}")
            want = {
                "qkv_proj": 2 * N * D * (H + 2 * HKV) * HD,
                "out_proj": 2 * N * H * HD * D,
                "router": 2 * N * D * E,
                "shared_expert": 6 * N * D * F * S,
                "ffn": 6 * N * D * FD,
                "attention": 2 * B * T * T * H * HD,
                "lm_head_loss": 6 * N * V_MODEL * D,
            }
            for e in inside:
                if e["cat"] == "model":  # zero_grad, setup: no rows of their own
                    continue
                a = e["args"]
                check(a.get("tokens") == N, f"{label}: {e['name']} tokens {a.get('tokens')} != {N}")
                if e["name"] in want:
                    w = want[e["name"]] * (2 if e["cat"] == "backward" else 1)
                    check(math.isclose(a["flops"], w, rel_tol=1e-5),
                          f"{label}: {e['cat']} {e['name']} flops {a['flops']} != {w}")
    # Work the model leaves outside its spans would be missing from every
    # step; a time slice lost to another process (CI runs tests side by side
    # on 2 cores: one 4 ms preemption between two spans cost a step 10 %)
    # lands in one. So the best step must reach 95 %.
    check(ratios and max(ratios) >= 0.95,
          f"{label}: the model spans cover at most {max(ratios, default=0):.4f} of forward_backward in any step")
    if memory:
        mem = [e for e in events if e["ph"] == "C" and e["name"] == "memory"]
        own = [e for e in events if e["ph"] == "C" and e["name"] == "glm52_memory"]
        check(len(mem) == want_steps, f"{label}: {len(mem)} memory counters for {want_steps} steps")
        check(own, f"{label}: no glm52_memory counter")
        for k in ("parameters_mib", "gradients_mib", "optimizer_state_mib", "workspace_mib", "rss_mib"):
            check(k in mem[0]["args"] and mem[0]["args"][k] > 0, f"{label}: memory counter lacks {k}: {mem[0]}")
        # The model's own counter holds what its tensors need; the estimate
        # what it allocates: the same rounded up to 2 MiB huge pages.
        want_mib = param_count(residual) * 4 / 2**20
        for k in ("parameters_mib", "gradients_mib"):
            check(math.isclose(own[0]["args"][k], want_mib, abs_tol=2e-3),
                  f"{label}: the model's {k} {own[0]['args'][k]} != {want_mib:.3f} (counted here)")
            check(mem[0]["args"][k] == math.ceil(want_mib / 2) * 2,
                  f"{label}: estimate {k} {mem[0]['args'][k]} is not {want_mib:.3f} MiB in 2 MiB pages")
        w_est, w_own = mem[0]["args"]["workspace_mib"], own[0]["args"]["workspace_mib"]
        check(w_own <= w_est < w_own + 2 * 16, f"{label}: workspace estimate {w_est} MiB vs the model's {w_own}")
        check(math.isclose(mem[0]["args"]["optimizer_state_mib"], 2 * want_mib, abs_tol=2e-3),
              f"{label}: AdamW state {mem[0]['args']['optimizer_state_mib']} != 2 x {want_mib:.3f} MiB")
    return fbs


def main():
    host, src, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    write_corpus(work, docs=200, base_words=30, val_every=8)

    for residual in ("deepnorm", "prenorm"):
        prof = "{enabled: false, profile_memory: true, profile_shapes: true}"
        cfg = config(work, src, f"prof_{residual}", residual, prof, 10)
        run([host, "profile", "--config", cfg, "--steps", "3"], work)
        events = load_trace(f"{work}/runs/prof_{residual}/profile/trace.json")
        check_steps(events, f"profile {residual}", True, True, 3, residual)

    sched = "{enabled: true, schedule: 'wait=1,warmup=1,active=2,repeat=1'}"
    cfg = config(work, src, "sched", "deepnorm", sched, 6)
    run([host, "run", cfg], work)
    events = load_trace(f"{work}/runs/sched/trace.json")
    check_steps(events, "scheduled run", False, False, 2)
    names = {e["name"] for e in events if e["ph"] == "X" and e.get("cat") == "step"}
    check({"evaluation", "checkpoint"} <= names, f"scheduled run: no evaluation/checkpoint span in {sorted(names)}")
    check(not any("args" in e and "flops" in e["args"] for e in events), "shapes recorded without profile_shapes")

    # trace_handler tensorboard: the file torch.profiler.tensorboard_trace_handler
    # would write (<host>_<pid>.<ms>.pt.trace.json in the TensorBoard log folder).
    tb = "{enabled: false, trace_handler: tensorboard}"
    cfg = config(work, src, "tb", "deepnorm", tb, 10)
    run([host, "profile", "--config", cfg, "--steps", "4"], work)
    folder = f"{work}/runs/tb/profile/logs/tensorboard"
    files = [f for f in os.listdir(folder) if re.fullmatch(r"[^.]+_[0-9]+\.[0-9]{13}\.pt\.trace\.json", f)] \
        if os.path.isdir(folder) else []
    check(len(files) == 1, f"trace_handler tensorboard: expected one <host>_<pid>.<ms>.pt.trace.json in {folder}")
    check(not os.path.exists(f"{work}/runs/tb/profile/trace.json"), "trace_handler tensorboard also wrote trace.json")
    check_steps(load_trace(f"{folder}/{files[0]}"), "tensorboard handler", False, False, 4)
    print("OK")


if __name__ == "__main__":
    main()
