#!/usr/bin/python3
"""Prints the quickstart-vs-PyTorch figures from one bench run (run.sh calls it).

Inputs: the ZCode run's metrics.json (history of every step: loss, lr,
grad_norm, tokens, step_time_ms) and the train_torch.py results of PyTorch as
installed, PyTorch tuned (both float32) and PyTorch float64.

Checks (exit 1 when one fails, after printing everything):
- same start: |ZCode step-1 loss − float64 step-1 loss| <= 1e-5 and the
  same for PyTorch float32 (same weights, same batch: only float32 rounding
  separates them); the same lr at every step (ZCode's logged lr vs the bench's
  schedule, 1e-12 relative).
- loss curves within noise over the first --compare steps: the float64 run
  is the exact trajectory; PyTorch float32's distance from it,
  e32 = max_s |pt32(s) − f64(s)|, is the float32 noise of this job (rounding,
  amplified by training and by MoE routing flips). ZCode agrees within noise
  when max_s |zc(s) − f64(s)| <= 3·e32 (floor 1e-4). A wrong gradient or
  optimizer term drifts far beyond that within a few steps.
Tokens/s of each run = mean target tokens per step / median step time over
the steps after --warmup (the same rule for ZCode and PyTorch).
"""

import argparse
import json
import statistics
import sys


def load(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def zcode_history(metrics_path):
    m = load(metrics_path)
    hist = m.get("history", {}).get("train", [])
    if not hist:
        raise ValueError(f"{metrics_path}: no train history (was training.log_every 1?)")
    steps = [h["step"] for h in hist]
    if steps != list(range(1, len(hist) + 1)):
        raise ValueError(f"{metrics_path}: history has steps {steps[:5]}..., expected every step from 1")
    return hist


def tokens_per_s(hist, warmup):
    timed = hist[warmup:]
    med = statistics.median(h["step_time_ms"] for h in timed)
    return statistics.mean(h["tokens"] for h in timed) / (med / 1e3), med


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zcode", required=True, help="metrics.json of the zcode-host run")
    ap.add_argument("--installed", required=True)
    ap.add_argument("--tuned", required=True)
    ap.add_argument("--f64", required=True)
    ap.add_argument("--compare", type=int, default=50, help="steps of the loss comparison")
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of the timing")
    ap.add_argument("--json", help="write the summary figures here")
    a = ap.parse_args(argv)

    zc = zcode_history(a.zcode)
    inst, tuned, f64 = load(a.installed), load(a.tuned), load(a.f64)
    pt, pti, p64 = tuned["history"], inst["history"], f64["history"]
    n = min(a.compare, len(zc), len(pt), len(p64), len(pti))
    ok = True

    # ---- same start ---------------------------------------------------------------
    print("== same weights, same batches ==")
    l64 = p64[0]["loss"]
    for name, v in (("ZCode (zcode-host run)", zc[0]["loss"]), ("PyTorch float32", pt[0]["loss"])):
        d = abs(v - l64)
        good = d <= 1e-5
        ok &= good
        print(f"step-1 loss {name:24s} {v:.9f}  float64 {l64:.9f}  |Δ| {d:.2e} (tol 1e-05) "
              f"{'ok' if good else 'FAIL'}")
    g64 = p64[0]["grad_norm"]
    print(f"step-1 grad_norm ZCode {zc[0]['grad_norm']:.7f}  PyTorch float32 {pt[0]['grad_norm']:.7f}  float64 {g64:.7f}")
    lr_err = max(abs(z["lr"] - p["lr"]) / max(abs(p["lr"]), 1e-300) for z, p in zip(zc, pt))
    good = lr_err <= 1e-12
    ok &= good
    print(f"lr schedule: ZCode's logged lr vs the bench's, max relative |Δ| {lr_err:.1e} over {min(len(zc), len(pt))} "
          f"steps {'ok' if good else 'FAIL'}")

    # ---- loss curves --------------------------------------------------------------
    print(f"\n== loss curves, steps 1..{n} ==")
    print(f"{'step':>4} {'lr':>10} {'ZCode':>10} {'PyTorch32':>10} {'PyTorch64':>10} {'ZC-PT32':>9} {'ZC-PT64':>9} "
          f"{'PT32-PT64':>9}")
    for s in range(n):
        z, p, q = zc[s]["loss"], pt[s]["loss"], p64[s]["loss"]
        print(f"{s + 1:4d} {zc[s]['lr']:10.3e} {z:10.6f} {p:10.6f} {q:10.6f} {z - p:9.2e} {z - q:9.2e} {p - q:9.2e}")
    d_zp = max(abs(zc[s]["loss"] - pt[s]["loss"]) for s in range(n))
    d_z64 = max(abs(zc[s]["loss"] - p64[s]["loss"]) for s in range(n))
    e32 = max(abs(pt[s]["loss"] - p64[s]["loss"]) for s in range(n))
    d_it = max(abs(pti[s]["loss"] - pt[s]["loss"]) for s in range(n))
    bound = max(3 * e32, 1e-4)
    within = d_z64 <= bound
    ok &= within
    print(f"max |ZCode − PyTorch32|            {d_zp:.2e}")
    print(f"max |ZCode − PyTorch64|            {d_z64:.2e}")
    print(f"max |PyTorch32 − PyTorch64| (e32)  {e32:.2e}   (float32 noise of this job)")
    print(f"max |PyTorch32 installed − tuned|  {d_it:.2e}   (other BLAS/allocator, same model code)")
    print(f"within noise: max |ZCode − PyTorch64| <= max(3·e32, 1e-4) = {bound:.2e}: {'yes' if within else 'NO'}")
    print(f"loss at step {n}: ZCode {zc[n - 1]['loss']:.4f}, PyTorch32 {pt[n - 1]['loss']:.4f}, "
          f"PyTorch64 {p64[n - 1]['loss']:.4f}")

    # ---- throughput -----------------------------------------------------------------
    zc_tps, zc_ms = tokens_per_s(zc, a.warmup)
    print(f"\n== throughput (steps {a.warmup + 1}..; tokens = target tokens per step / median step time) ==")
    rows = [("ZCode (zcode-host run, 2 threads)", zc_tps, zc_ms, len(zc)),
            ("PyTorch as installed (float32)", inst["tokens_per_s"], inst["median_step_time_ms"], len(pti)),
            ("PyTorch tuned (float32)", tuned["tokens_per_s"], tuned["median_step_time_ms"], len(pt)),
            ("PyTorch float64 (loss reference)", f64["tokens_per_s"], f64["median_step_time_ms"], len(p64))]
    for name, tps, ms, steps in rows:
        print(f"{name:36s} {tps:9.0f} tokens/s   median step {ms:8.1f} ms   ({steps} steps)")
    r_inst = zc_tps / inst["tokens_per_s"]
    r_tuned = zc_tps / tuned["tokens_per_s"]
    print(f"ZCode / PyTorch as installed: {r_inst:.2f}x")
    if a.json:
        summary = dict(zcode_tokens_per_s=zc_tps, pytorch_installed_tokens_per_s=inst["tokens_per_s"],
                       pytorch_tuned_tokens_per_s=tuned["tokens_per_s"], pytorch_f64_tokens_per_s=f64["tokens_per_s"],
                       ratio_vs_installed=r_inst, ratio_vs_tuned=r_tuned, compare_steps=n,
                       max_abs_dloss_zcode_pt32=d_zp, max_abs_dloss_zcode_pt64=d_z64, e32=e32,
                       max_abs_dloss_installed_tuned=d_it, within_noise=within, checks_ok=bool(ok),
                       step1_loss=dict(zcode=zc[0]["loss"], pt32=pt[0]["loss"], pt64=l64))
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=1)
    if not ok:
        print("CHECKS FAILED (see the lines marked FAIL/NO above)")
    print(f"ZCode / PyTorch tuned: {r_tuned:.2f}x")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write(f"report: {e}\n")
        sys.exit(2)
