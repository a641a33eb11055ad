#!/usr/bin/env bash
# ZCode's first command (README): from a fresh Debian 12 machine to a trained
# nano GLM-5.2 MoE on the fortunes corpus, on the CPU.
#   install deps -> fetch tokenizer assets -> make corpus -> build release ->
#   zcode-host run examples/quickstart/config.yaml
# Idempotent. Extra arguments go to `zcode-host run` (e.g. --overwrite,
# --set training.max_steps=20).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="${ZCODE_JOBS:-2}"

scripts/install-deps.sh
for s in fetch-assets.sh make-corpus.sh; do
  if [ -e "scripts/$s" ]; then
    echo "==> scripts/$s"
    bash "scripts/$s"
  else
    echo "quickstart: scripts/$s does not exist yet; skipped"
  fi
done
echo "==> build (release preset)"
cmake --preset release >/dev/null
# Only what the run needs: the host and the bundled plugins (scripts/test.sh
# builds the tests and benchmarks).
cmake --build --preset release -j "$JOBS" --target zcode-host zcode_plugins
echo "==> zcode-host run examples/quickstart/config.yaml $*"
exec build/release/bin/zcode-host run examples/quickstart/config.yaml "$@"
