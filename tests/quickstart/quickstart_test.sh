#!/usr/bin/env bash
# The quickstart config at 30 steps (issue: "runs in the test suite"). Uses the
# built zcode-host and the real inputs that scripts/test.sh prepares
# (scripts/fetch-assets.sh, scripts/make-corpus.sh); fails, not skips, when they
# are missing, because the test command always provides them.
set -euo pipefail
HOST="$1"; SRC="$2"; WORK="$3"
STEPS=30
cd "$SRC"
for f in data/fortunes/train.jsonl data/fortunes/val.jsonl data/fortunes/tokenizer-4k/tokenizer.model; do
  [ -e "$f" ] || { echo "quickstart_test: $SRC/$f missing: run scripts/make-corpus.sh and scripts/make-tokenizer.sh (scripts/test.sh and the ctest fixture e2e.quickstart_tokenizer do)"; exit 1; }
done
rm -rf "$WORK"; mkdir -p "$WORK"
"$HOST" run examples/quickstart/config.yaml \
  --set experiment_name=quickstart_30 \
  --set logging.output_dir="$WORK" \
  --set training.max_steps=$STEPS \
  --set scheduler.warmup_steps=10 \
  --set training.eval_every=$STEPS \
  --set training.save_every=$STEPS \
  --set evaluation.max_batches=16
/usr/bin/python3 "$SRC/tests/quickstart/check_run_folder.py" "$WORK/quickstart_30" "$STEPS"
