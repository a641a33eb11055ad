#!/usr/bin/env bash
# Quickstart vs PyTorch: trains the quickstart job (examples/quickstart/config.yaml,
# GLM-5.2 nano MoE on the fortunes corpus, its 4k tokenizer) for N steps with
# `zcode-host run`, and the same model with PyTorch on the same batches from
# the same initial weights: float32 as installed, float32 tuned (OpenMP
# OpenBLAS + jemalloc) and float64 (the exact trajectory for the noise floor).
# Prints tokens/s of each, the ratios, both loss curves and, last, the ratio
# ZCode / tuned PyTorch. Builds nothing.
#
#   bench/quickstart_vs_pytorch/run.sh [--steps N] [--compare M] [--warmup W] [--work DIR] [--keep]
#                                      [--set key=value]...   (more config overrides, for every run)
#
# Environment: ZCODE_BUILD_DIR (default build/release) holds bin/zcode-host,
# bin/quickstart_dump and lib/zcode/plugins. Exit status: 0 all checks pass,
# 1 a run or a check failed, 2 usage or a missing prerequisite.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="${ZCODE_BUILD_DIR:-$ROOT/build/release}"
PY=/usr/bin/python3
CONFIG=examples/quickstart/config.yaml
STEPS=60
COMPARE=50
WARMUP=5
WORK=""
KEEP=0
EXTRA_SETS=()

die() { echo "run.sh: $1" >&2; exit "${2:-2}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) STEPS="${2:?--steps needs a value}"; shift 2 ;;
    --compare) COMPARE="${2:?--compare needs a value}"; shift 2 ;;
    --warmup) WARMUP="${2:?--warmup needs a value}"; shift 2 ;;
    --work) WORK="${2:?--work needs a value}"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --set) EXTRA_SETS+=(--set "${2:?--set needs key=value}"); shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$STEPS" =~ ^[0-9]+$ && "$STEPS" -ge 2 ]] || die "--steps: '$STEPS' (expected an integer >= 2)"
[[ "$COMPARE" =~ ^[0-9]+$ && "$COMPARE" -ge 1 && "$COMPARE" -le "$STEPS" ]] || die "--compare: '$COMPARE' (expected 1..$STEPS)"
[[ "$WARMUP" =~ ^[0-9]+$ && "$WARMUP" -lt "$STEPS" ]] || die "--warmup: '$WARMUP' (expected 0..$((STEPS - 1)))"

# ---- prerequisites (clear errors, nothing is built or installed here) --------
for f in bin/zcode-host bin/quickstart_dump; do
  [[ -x "$BUILD/$f" ]] || die "$BUILD/$f not found: configure and build first, e.g.
  cmake --preset release && cmake --build build/release --target zcode-host quickstart_dump zcode_plugin_bpe zcode_plugin_jsonl zcode_plugin_glm52 zcode_plugin_optimizers zcode_plugin_schedulers zcode_plugin_lm zcode_plugin_callbacks
(or set ZCODE_BUILD_DIR to another build folder)"
done
for p in bpe jsonl glm52 optimizers schedulers lm callbacks; do
  [[ -f "$BUILD/lib/zcode/plugins/libzcode_$p.so" ]] || die "$BUILD/lib/zcode/plugins/libzcode_$p.so not found: build target zcode_plugin_$p"
done
"$PY" -c 'import torch, numpy' 2>/dev/null || die "$PY cannot import torch and numpy: run scripts/install-deps.sh (Debian python3-torch)"
cd "$ROOT"
[[ -f data/fortunes/train.jsonl ]] || die "data/fortunes/train.jsonl not found: run scripts/make-corpus.sh"
[[ -f data/fortunes/tokenizer-4k/tokenizer.model ]] ||
  die "data/fortunes/tokenizer-4k not found: run scripts/make-tokenizer.sh (the quickstart's tokenizer)"
OPENBLAS_OMP=/usr/lib/x86_64-linux-gnu/openblas-openmp
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
[[ -f "$OPENBLAS_OMP/libblas.so.3" ]] || die "$OPENBLAS_OMP/libblas.so.3 not found (package libopenblas0-openmp): run scripts/install-deps.sh"
[[ -f "$JEMALLOC" ]] || die "$JEMALLOC not found (package libjemalloc2): run scripts/install-deps.sh"

# OpenBLAS misdetects some CPUs as 'Prescott' (generic kernels, ~8x slower
# GEMMs; the glm52 plugin warns about it). ZCode and PyTorch both run their
# GEMMs on OpenBLAS, so the fix applies to every run alike.
blas_core() {
  "$PY" -c 'import ctypes; l = ctypes.CDLL("libopenblas.so.0"); l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())' 2>/dev/null || echo unknown
}
CORE="$(blas_core)"
if [[ -z "${OPENBLAS_CORETYPE:-}" && "$CORE" == Prescott ]]; then
  if grep -q -w avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -q -w avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
  [[ -n "${OPENBLAS_CORETYPE:-}" ]] && CORE="$CORE -> $(blas_core) (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE for every run)"
fi

if [[ -z "$WORK" ]]; then
  WORK="$(mktemp -d /tmp/zcode_quickstart_vs_pytorch.XXXXXX)"
  [[ "$KEEP" == 1 ]] || trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"

# The Engine always evaluates after the last step; on the full val split that
# takes longer than the timed steps on a loaded machine, so it gets a small
# val file (at a fixed path, so its token cache is reused). Train batches do
# not depend on data.val_path (plugins/dataloader/README.md).
VAL_SMALL="$ROOT/.cache/zcode/bench/fortunes_val_64.jsonl"
mkdir -p "$(dirname "$VAL_SMALL")"
if ! cmp -s <(head -n 64 data/fortunes/val.jsonl) "$VAL_SMALL" 2>/dev/null; then
  head -n 64 data/fortunes/val.jsonl > "$VAL_SMALL.tmp.$$" && mv "$VAL_SMALL.tmp.$$" "$VAL_SMALL"
fi

# Every figure comes from the same overrides: N steps, every step logged, no
# evaluation or checkpoint before the end, 2 threads, metrics_json only; the
# warm-up scaled to N as the quickstart's 200 of 2,500 steps (8 %, at least 1).
WARMUP=$(( STEPS * 8 / 100 > 0 ? STEPS * 8 / 100 : 1 ))
SETS=(--set "data.val_path=$VAL_SMALL" --set "training.max_steps=$STEPS" --set "scheduler.warmup_steps=$WARMUP"
      --set training.log_every=1 --set "training.eval_every=$STEPS"
      --set "training.save_every=$STEPS" --set hardware.num_threads=2 --set "logging.output_dir=$WORK/runs"
      --set 'callbacks=[{type: metrics_json}]' --set callbacks_replace_defaults=true ${EXTRA_SETS[@]+"${EXTRA_SETS[@]}"})

echo "== conditions =="
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores visible; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "OpenBLAS core: $CORE"
echo "torch: $("$PY" -c 'import torch; print(torch.__version__)'); config: $CONFIG, $STEPS steps, timing from step $((WARMUP + 1))"
echo

echo "== PyTorch model vs the float64 reference (tests/reference/glm52_reference.py) =="
OMP_NUM_THREADS=2 "$PY" "$HERE/glm52_torch.py" || die "the PyTorch model does not match the reference" 1
echo

echo "== initial weights and batches (quickstart_dump) =="
"$BUILD/bin/quickstart_dump" "$CONFIG" --steps "$STEPS" --out "$WORK/dump" "${SETS[@]}" || die "quickstart_dump failed" 1

echo "== ZCode: zcode-host run =="
if ! "$BUILD/bin/zcode-host" run "$CONFIG" "${SETS[@]}" --overwrite > "$WORK/zcode.log" 2>&1; then
  tail -20 "$WORK/zcode.log" >&2
  die "zcode-host run failed (log: $WORK/zcode.log)" 1
fi
METRICS="$(ls "$WORK"/runs/*/metrics.json 2>/dev/null | head -1)"
[[ -n "$METRICS" ]] || die "zcode-host run wrote no metrics.json under $WORK/runs" 1
echo "metrics: $METRICS"

echo "== PyTorch as installed =="
OMP_NUM_THREADS=2 "$PY" "$HERE/train_torch.py" --dump "$WORK/dump" --steps "$STEPS" --warmup "$WARMUP" \
  --label "pytorch as installed" --out "$WORK/torch_installed.json" || die "PyTorch (as installed) failed" 1

echo "== PyTorch tuned (OpenMP OpenBLAS + jemalloc) =="
OMP_NUM_THREADS=2 LD_LIBRARY_PATH="$OPENBLAS_OMP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LD_PRELOAD="$JEMALLOC" \
  MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 \
  "$PY" "$HERE/train_torch.py" --dump "$WORK/dump" --steps "$STEPS" --warmup "$WARMUP" \
  --label "pytorch tuned" --out "$WORK/torch_tuned.json" || die "PyTorch (tuned) failed" 1

echo "== PyTorch float64 (exact trajectory, tuned environment) =="
OMP_NUM_THREADS=2 LD_LIBRARY_PATH="$OPENBLAS_OMP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LD_PRELOAD="$JEMALLOC" \
  MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 \
  "$PY" "$HERE/train_torch.py" --dump "$WORK/dump" --steps "$COMPARE" --warmup "$((WARMUP < COMPARE ? WARMUP : 0))" \
  --dtype float64 --label "pytorch float64" --out "$WORK/torch_f64.json" || die "PyTorch (float64) failed" 1
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

"$PY" "$HERE/report.py" --zcode "$METRICS" --installed "$WORK/torch_installed.json" --tuned "$WORK/torch_tuned.json" \
  --f64 "$WORK/torch_f64.json" --compare "$COMPARE" --warmup "$WARMUP" --json "$WORK/summary.json"
