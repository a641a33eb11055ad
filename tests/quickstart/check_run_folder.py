#!/usr/bin/env python3
"""Checks a quickstart run folder: every output exists, and the validation loss
fell from step 0 (before any update) to the last evaluation.

usage: check_run_folder.py RUN_DIR MAX_STEPS

The expected files are the guide's run folder (chapter 2.4) as ZCode writes it:
config.yaml, logs/console.log, checkpoints/step_N/{model,optimizer}.safetensors
+ state.json, metrics.json, model_card.md. Exits 1 with one line per problem.
"""
import json
import os
import struct
import sys


def fail(problems):
    for p in problems:
        print("quickstart check: " + p)
    sys.exit(1)


def safetensors_names(path):
    # Format: 8-byte little-endian header length, then a JSON header.
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {k for k in header if k != "__metadata__"}


def main():
    run_dir, max_steps = sys.argv[1], int(sys.argv[2])
    problems = []
    for rel in ["config.yaml", "logs/console.log", "metrics.json", "model_card.md",
                f"checkpoints/step_{max_steps}/model.safetensors",
                f"checkpoints/step_{max_steps}/optimizer.safetensors",
                f"checkpoints/step_{max_steps}/state.json"]:
        p = os.path.join(run_dir, rel)
        if not os.path.isfile(p) or os.path.getsize(p) == 0:
            problems.append(f"missing or empty: {p}")
    if problems:
        fail(problems)

    names = safetensors_names(os.path.join(run_dir, f"checkpoints/step_{max_steps}/model.safetensors"))
    for want in ["embed.weight", "layers.0.attn.wq", "layers.1.moe.router", "layers.1.moe.experts.7.w2"]:
        if want not in names:
            problems.append(f"model.safetensors has no tensor '{want}'")

    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    val = metrics.get("history", {}).get("val", [])
    by_step = {int(e["step"]): e for e in val if "step" in e}
    if 0 not in by_step:
        problems.append(f"metrics.json: no validation at step 0 (val history steps: {sorted(by_step)})")
    if max_steps not in by_step:
        problems.append(f"metrics.json: no validation at step {max_steps} (val history steps: {sorted(by_step)})")
    if problems:
        fail(problems)

    def val_loss(e):
        for k in ("loss", "val_loss", "lm/loss"):
            if k in e:
                return float(e[k])
        fail([f"metrics.json: val entry at step {e.get('step')} has no loss: {sorted(e)}"])

    l0, ln = val_loss(by_step[0]), val_loss(by_step[max_steps])
    print(f"quickstart check: val loss step 0 = {l0:.4f}, step {max_steps} = {ln:.4f}")
    if not ln < l0:
        problems.append(f"val loss did not fall: step 0 {l0:.4f}, step {max_steps} {ln:.4f}")

    with open(os.path.join(run_dir, "model_card.md")) as f:
        card = f.read()
    for needle in ["train.jsonl", "perplexity"]:
        if needle not in card.lower() and needle not in card:
            problems.append(f"model_card.md does not mention '{needle}'")
    if problems:
        fail(problems)
    print("quickstart check: run folder OK")


if __name__ == "__main__":
    main()
