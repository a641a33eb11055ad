#!/usr/bin/env bash
# ZCode's first command (README): from a fresh Debian 12 machine to a trained
# nano GLM-5.2 MoE on the fortunes corpus, on the CPU.
#   install deps -> fetch tokenizer assets -> make corpus -> build release ->
#   train the corpus's 4k tokenizer -> zcode-host run examples/quickstart/config.yaml
# Idempotent. Extra arguments go to `zcode-host run` (e.g. --overwrite,
# --set training.max_steps=20).
# ZCODE_QUICKSTART_NO_SETUP=1 skips the setup steps (deps, assets, corpus,
# build) and only runs: for a tree already set up and built (the README test
# uses it so that it does not reconfigure the build it runs in).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="${ZCODE_JOBS:-2}"

if [ "${ZCODE_QUICKSTART_NO_SETUP:-0}" = 1 ]; then
  for f in build/release/bin/zcode-host examples/quickstart/config.yaml data/fortunes/tokenizer-4k/tokenizer.model; do
    [ -e "$f" ] || { echo "quickstart: ZCODE_QUICKSTART_NO_SETUP=1 but $ROOT/$f does not exist: run scripts/quickstart.sh without it first" >&2; exit 1; }
  done
  echo "==> setup skipped (ZCODE_QUICKSTART_NO_SETUP=1)"
  echo "==> zcode-host run examples/quickstart/config.yaml $*"
  exec build/release/bin/zcode-host run examples/quickstart/config.yaml "$@"
fi

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
echo "==> scripts/make-tokenizer.sh"
scripts/make-tokenizer.sh build/release/bin/zcode-host
echo "==> zcode-host run examples/quickstart/config.yaml $*"
exec build/release/bin/zcode-host run examples/quickstart/config.yaml "$@"
