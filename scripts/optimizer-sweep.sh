#!/usr/bin/env bash
# Trains the nano GLM-5.2 model (examples/quickstart/config.yaml) for 200
# steps on the fortunes corpus once per optimizer and prints the validation
# loss at steps 50, 100, 150 and 200 (plugins/optimizer/README.md records them).
#   scripts/optimizer-sweep.sh [BUILD_DIR] [OPTIMIZER...]
# BUILD_DIR defaults to build/release; the optimizers default to all six.
# Each run's folder and log go under outputs/optimizer-sweep/<optimizer>/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${1:-build/release}"
shift || true
HOST="$BUILD/bin/zcode-host"
[ -x "$HOST" ] || { echo "optimizer-sweep: $HOST not found (build zcode-host and the plugins first)" >&2; exit 2; }
OPTS=("$@")
[ ${#OPTS[@]} -gt 0 ] || OPTS=(adamw lamb adafactor sophia sgd zerosum_sgd)
OUT=outputs/optimizer-sweep
mkdir -p "$OUT"

# The optimizer section per optimizer: lrs picked for a 200-step nano run
# (the guide's ranges are for large models; SGD needs a far larger lr).
optimizer_yaml() {
  case "$1" in
    adamw)       echo '{name: adamw, lr: 2.0e-3, betas: [0.9, 0.95], weight_decay: 0.01}' ;;
    lamb)        echo '{name: lamb, lr: 5.0e-3, betas: [0.9, 0.95], weight_decay: 0.01}' ;;
    adafactor)   echo '{name: adafactor, lr: 2.0e-3, weight_decay: 0.0}' ;;
    sophia)      echo '{name: sophia, lr: 1.0e-3, betas: [0.965, 0.99], rho: 0.04, weight_decay: 0.1, hessian_update_interval: 10}' ;;
    sgd)         echo '{name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.0}' ;;
    zerosum_sgd) echo '{name: zerosum_sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.0}' ;;
    *) echo "optimizer-sweep: unknown optimizer '$1'" >&2; exit 2 ;;
  esac
}

for opt in "${OPTS[@]}"; do
  dir="$OUT/$opt"
  mkdir -p "$dir"
  cfg="$dir/config.yaml"
  # The quickstart config with its optimizer section replaced (a flow mapping
  # on one line) and this run's folder and length.
  awk -v repl="optimizer: $(optimizer_yaml "$opt")" '
    /^optimizer:/ { print repl; skip = 1; next }
    skip && /^[^ #]/ { skip = 0 }
    !skip { print }' examples/quickstart/config.yaml > "$cfg.tmp"
  mv "$cfg.tmp" "$cfg"
  echo "==> $opt"
  "$HOST" run "$cfg" --overwrite \
      --set experiment_name="sweep_$opt" --set logging.output_dir="$dir" \
      --set training.max_steps=200 --set training.eval_every=50 --set training.save_every=200 \
      > "$dir/run.log" 2>&1 || { echo "$opt: run failed, see $dir/run.log"; tail -3 "$dir/run.log"; continue; }
  grep -iE "val|eval" "$dir/run.log" | tail -6
done
