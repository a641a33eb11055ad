#!/usr/bin/env python3
"""The `mlflow` callback's file store, read by a reader written here from MLflow's
documented file-store layout (MLflow 2.x "mlruns"), not from our writer.

Trains a nano GLM-5.2 for 8 steps with `logging.mlflow: true` (the store goes to
<run>/logs/mlflow), then resumes the run to step 12 (`--resume latest`, more
steps), and checks:

  - the store as MLflow makes one: experiment "0" (Default), .trash, our
    experiment's meta.yaml (artifact_location, creation_time, experiment_id
    equal to its folder, last_update_time, lifecycle_stage, name);
  - one run, continued by the resume: meta.yaml's run_id = run_uuid = folder,
    experiment_id (a string), status 3 (FINISHED), start_time <= end_time,
    artifact_uri, run_name, user_id, source_type, tags;
  - metrics/<key>: lines "timestamp value step" (int, float, int), each value
    of logs/metrics.jsonl once at its step (train_<key>, eval_<key>), no others;
  - params/<key>: the resolved config's leaves (optimizer.lr = 0.003, ...);
    tags/mlflow.runName;
  - artifacts/: config.yaml, model_card.md and metrics.json, byte for byte.

Usage: mlflow_file_store_test.py ZCODE_HOST SOURCE_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

import yaml


def main():
    host, src, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    words = ["alpha", "beta", "gamma", "delta", "sky", "river", "stone", "light", "the", "a"]
    with open(f"{work}/train.jsonl", "w") as tr, open(f"{work}/val.jsonl", "w") as va:
        for i in range(60):
            s = " ".join(words[(i * 7 + w * 3) % 10] for w in range(12 + i % 7)) + "."
            (va if i % 6 == 5 else tr).write(json.dumps({"text": s}) + "\n")
    with open(f"{work}/mlfs.yaml", "w") as c:
        c.write(f"""experiment_name: mlfs
seed: 7
hardware: {{accelerator: cpu, num_threads: 1}}
model: {{type: GLM5pt2, variant: nano, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1, head_dim: 16,
        moe_experts: 4, moe_top_k: 2, moe_ffn_hidden: 32, ffn_hidden: 64, max_seq_len: 32}}
data: {{train_path: {work}/train.jsonl, val_path: {work}/val.jsonl, tokenizer: {src}/assets/hf/gpt2,
       batch_size: 2, num_workers: 0, cache_dir: {work}/cache}}
optimizer: {{name: AdamW, lr: 0.003}}
training: {{max_steps: 8, eval_every: 4, save_every: 4, log_every: 1}}
logging: {{output_dir: {work}/outputs, mlflow: true}}
""")
    for args in (["run", f"{work}/mlfs.yaml"],
                 ["run", f"{work}/mlfs.yaml", "--resume", "latest", "--set", "training.max_steps=12"]):
        run = subprocess.run([host] + args, capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout + run.stderr)
            print(f"FAIL: zcode-host {' '.join(args)} exited {run.returncode}")
            return 1
    rd = f"{work}/outputs/mlfs"
    root = f"{rd}/logs/mlflow"

    def load(p):
        with open(p) as f:
            return yaml.safe_load(f)

    check(os.path.isdir(f"{root}/.trash"), ".trash missing")
    default = load(f"{root}/0/meta.yaml")
    check(default["name"] == "Default" and default["experiment_id"] == "0", f"experiment 0: {default}")
    exps = [d for d in os.listdir(root) if d not in ("0", ".trash")]
    check(len(exps) == 1, f"experiments {exps}")
    exp_id = exps[0]
    em = load(f"{root}/{exp_id}/meta.yaml")
    for k, t in (("artifact_location", str), ("creation_time", int), ("experiment_id", str),
                 ("last_update_time", int), ("lifecycle_stage", str), ("name", str)):
        check(isinstance(em.get(k), t), f"experiment meta.yaml: {k} = {em.get(k)!r}")
    check(em["experiment_id"] == exp_id and em["name"] == "mlfs" and em["lifecycle_stage"] == "active",
          f"experiment meta.yaml: {em}")
    check(em["artifact_location"] == "file://" + os.path.abspath(f"{root}/{exp_id}"), em["artifact_location"])

    runs = [d for d in os.listdir(f"{root}/{exp_id}") if d != "meta.yaml"]
    check(len(runs) == 1, f"runs {runs} (the resume must continue the run)")
    run_id = runs[0]
    rdir = f"{root}/{exp_id}/{run_id}"
    check(re.fullmatch(r"[0-9a-f]{32}", run_id) is not None, f"run id {run_id}")
    rm = load(f"{rdir}/meta.yaml")
    check(rm["run_id"] == run_id == rm["run_uuid"], f"run ids {rm['run_id']} {rm['run_uuid']}")
    check(rm["experiment_id"] == exp_id and isinstance(rm["experiment_id"], str), f"run experiment_id {rm}")
    check(rm["status"] == 3, f"status {rm['status']} (FINISHED is 3)")
    check(isinstance(rm["start_time"], int) and isinstance(rm["end_time"], int) and rm["start_time"] <= rm["end_time"],
          f"times {rm['start_time']} {rm['end_time']}")
    check(rm["artifact_uri"] == "file://" + os.path.abspath(f"{rdir}/artifacts"), rm["artifact_uri"])
    check(rm["run_name"] == "mlfs" and rm["lifecycle_stage"] == "active", f"run meta {rm}")
    check(isinstance(rm["user_id"], str) and isinstance(rm["source_type"], int) and rm["tags"] == [], f"run meta {rm}")

    points = {}
    for key in os.listdir(f"{rdir}/metrics"):
        for line in open(f"{rdir}/metrics/{key}"):
            ts, value, step = line.split()
            check(re.fullmatch(r"\d+", ts) is not None and re.fullmatch(r"-?\d+", step) is not None, f"{key}: {line!r}")
            check((key, int(step)) not in points, f"{key} at step {step} twice")
            points[(key, int(step))] = float(value)
    expected = {}
    for line in open(f"{rd}/logs/metrics.jsonl"):
        r = json.loads(line)
        prefix = "train_" if r["event"] == "step" else "eval_"
        for k, v in r.items():
            if k not in ("event", "step", "max_steps") and isinstance(v, (int, float)):
                expected[(prefix + k, r["step"])] = float(v)
    check(max(s for _, s in expected) == 12, "metrics.jsonl does not reach step 12")
    check(points == expected, f"metric points differ: missing {sorted(set(expected) - set(points))[:5]}, "
          f"extra {sorted(set(points) - set(expected))[:5]}, "
          f"values {[k for k in expected if k in points and points[k] != expected[k]][:5]}")

    def read(p):
        with open(p, "rb") as f:
            return f.read()

    params = {k: read(f"{rdir}/params/{k}").decode() for k in os.listdir(f"{rdir}/params")}
    check(params.get("optimizer.lr") == "0.003", f"optimizer.lr = {params.get('optimizer.lr')!r}")
    check(params.get("model.d_model") == "32", f"model.d_model = {params.get('model.d_model')!r}")
    check(params.get("training.max_steps") == "8", f"training.max_steps = {params.get('training.max_steps')!r} "
          "(params are the first run's: MLflow does not let a param change)")
    check(read(f"{rdir}/tags/mlflow.runName") == b"mlfs", "tags/mlflow.runName")
    for a in ("config.yaml", "model_card.md", "metrics.json"):
        check(os.path.exists(f"{rdir}/artifacts/{a}") and read(f"{rdir}/artifacts/{a}") == read(f"{rd}/{a}"),
              f"artifact {a}")

    for f in failures:
        print("FAIL:", f)
    print(f"mlflow_file_store_test: experiment {exp_id}, run {run_id}, {len(points)} metric points, "
          f"{len(params)} params; {len(failures)} failure(s)")
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
