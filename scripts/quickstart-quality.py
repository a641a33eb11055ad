#!/usr/bin/env python3
"""What the quickstart's model is worth (issue 21, item 8), read from a run folder.

  /usr/bin/python3 scripts/quickstart-quality.py outputs/glm52_nano_quickstart [--warmup-steps 100]

Prints, and checks against the quickstart's goals:
  - the last evaluation's validation bits per byte (goal <= 2.3) from
    logs/metrics.jsonl;
  - the largest dropped-assignment fraction (moe_dropped_fraction) of the
    logged steps after the warm-up (goal < 5 %);
  - for each sample of the last samples round (logs/samples.jsonl) of an
    English prompt, the share of its alphabetic words found in Debian's
    wamerican list /usr/share/dict/american-english, case-folded (goal >= 1/2).
Exit 0 when every goal holds, 1 otherwise, 2 on a missing file.
"""
import argparse
import json
import os
import re
import sys

WORDS = "/usr/share/dict/american-english"
ENGLISH_PROMPTS = ("The meaning of life is", "You will", "A fortune: ")


def read_jsonl(path):
    if not os.path.exists(path):
        print(f"quickstart-quality: {path} not found", file=sys.stderr)
        sys.exit(2)
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--warmup-steps", type=int, default=100)
    a = ap.parse_args()
    if not os.path.exists(WORDS):
        print(f"quickstart-quality: {WORDS} not found (Debian package wamerican)", file=sys.stderr)
        sys.exit(2)
    with open(WORDS, encoding="utf-8") as f:
        words = {w.strip().casefold() for w in f}

    records = read_jsonl(os.path.join(a.run_dir, "logs/metrics.jsonl"))
    evals = [r for r in records if r.get("event") == "eval"]
    steps = [r for r in records if r.get("event") == "step" and r["step"] > a.warmup_steps]
    ok = True
    if not evals:
        print("no evaluation in metrics.jsonl")
        return 1
    bpb = evals[-1]["bits_per_byte"]
    print(f"val bits per byte at step {evals[-1]['step']}: {bpb:.4f} (goal <= 2.3)")
    ok &= bpb <= 2.3
    if steps:
        worst = max(steps, key=lambda r: r.get("moe_dropped_fraction", 0))
        d = worst.get("moe_dropped_fraction", 0)
        print(f"dropped assignments after step {a.warmup_steps}: at most {100 * d:.2f} % (step {worst['step']}; "
              f"goal < 5 %) over {len(steps)} logged steps")
        ok &= d < 0.05
    samples = read_jsonl(os.path.join(a.run_dir, "logs/samples.jsonl"))
    last = max((s["step"] for s in samples), default=None)
    for s in samples:
        if s["step"] != last or s["prompt"] not in ENGLISH_PROMPTS:
            continue
        alpha = re.findall(r"[^\W\d_]+", s["text"])
        english = [w for w in alpha if w.casefold() in words]
        share = len(english) / len(alpha) if alpha else 0.0
        print(f"step {last}: {s['prompt']!r} -> {s['text']!r}: {len(english)}/{len(alpha)} English words "
              f"({100 * share:.0f} %; goal >= 50 %)")
        ok &= share >= 0.5
    print("quickstart-quality: " + ("all goals met" if ok else "goals MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
