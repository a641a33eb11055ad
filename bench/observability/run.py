#!/usr/bin/python3
"""bench/observability: what the metric sinks cost a training run.

Runs the quickstart job (examples/quickstart/config.yaml, shortened to --steps steps, no
evaluation before the end, one checkpoint at the end) through the real `zcode-host run` twice
per round, back to back, the order swapped every other round:

  none  callbacks_replace_defaults: true, callbacks: [checkpoint] (no console lines, no
        metrics.json, no metrics.jsonl, no model card: nothing but the final checkpoint)
  all   the default callbacks (console, metrics_json, metrics_jsonl, checkpoint, model_card)
        plus every sink: logging.tensorboard (histograms every 100 steps, its default),
        logging.mlflow (the file store in the run folder) and logging.prometheus (port 0);
        the quickstart's samples callback is off in both (it generates text: not a sink)

and times each whole command (wall clock, from fork to exit). Prints per round the two times and
their ratio all / none, then the median ratio over rounds: how much slower a run with every sink
is than one with none. Whole-run time counts everything the sinks add (loading their plugins,
the per-step records, the histograms, the artifacts), so the per-step cost is at most this.

  bench/observability/run.py [--zcode-host build/release/bin/zcode-host] [--rounds 5]
                             [--steps 100] [--threads 0] [--work DIR] [--keep]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(host, work, name, steps, threads, variant):
    out = os.path.join(work, name)
    args = [host, "run", os.path.join(ROOT, "examples/quickstart/config.yaml"), "--overwrite",
            "--set", f"experiment_name={name}", "--set", f"logging.output_dir={work}",
            "--set", f"training.max_steps={steps}", "--set", "scheduler.warmup_steps=1", "--set", "training.eval_every=100000",
            "--set", "training.eval_at_start=false", "--set", "training.save_every=100000",
            "--set", "evaluation.max_batches=4", "--set", f"hardware.num_threads={threads}",
            "--set", f"data.cache_dir={work}/cache"]
    if variant == "none":
        args += ["--set", "callbacks_replace_defaults=true", "--set", "callbacks=[{type: checkpoint}]",
                 "--set", "logging.tensorboard=false"]  # the quickstart turns it on
    else:
        args += ["--set", "logging.tensorboard=true", "--set", "logging.mlflow=true",
                 "--set", "logging.prometheus={port: 0}", "--set", "callbacks=[{type: samples, enabled: false}]"]
    t0 = time.monotonic()
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"{variant}: zcode-host exited {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zcode-host", default=os.path.join(ROOT, "build/release/bin/zcode-host"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="zcode_bench_obs_")
    os.makedirs(work, exist_ok=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"bench/observability: {a.steps} quickstart steps, {a.rounds} paired rounds; CPU {cpu}, "
          f"{os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    run(a.zcode_host, work, "warmup", 31, a.threads, "all")  # token cache, page cache
    ratios = []
    for r in range(a.rounds):
        order = ["none", "all"] if r % 2 == 0 else ["all", "none"]
        t = {v: run(a.zcode_host, work, f"r{r}_{v}", a.steps, a.threads, v) for v in order}
        ratios.append(t["all"] / t["none"])
        print(f"round {r}: none {t['none']:.2f} s, all sinks {t['all']:.2f} s, ratio {ratios[-1]:.4f}")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median(ratios)
    print(f"all sinks / none, whole run: median {med:.4f} ({(med - 1) * 100:+.2f} %), rounds "
          f"{min(ratios):.4f}-{max(ratios):.4f}")


if __name__ == "__main__":
    main()
