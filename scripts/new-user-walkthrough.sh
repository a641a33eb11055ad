#!/usr/bin/env bash
# A new user's walk-through, as CI runs it: clone this repository into a fresh
# temporary folder, run the README's FIRST command there (taken from the
# README itself, so the two cannot drift apart), and check the run folder it
# leaves. Nothing from this checkout's build, assets or corpus is reused.
#
# The README's first command trains for the full quickstart (about 15 minutes
# on 2 cores). CI shortens the run through the command's documented
# pass-through arguments (ZCODE_WALKTHROUGH_ARGS), which keeps every stage.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STEPS="${ZCODE_WALKTHROUGH_STEPS:-20}"
ARGS="${ZCODE_WALKTHROUGH_ARGS:---set training.max_steps=$STEPS --set training.eval_every=$STEPS --set training.save_every=$STEPS --set scheduler.warmup_steps=5 --set evaluation.max_batches=8}"

# The first command of the README's "The two commands" block (the extractor
# that tests/quickstart/readme_commands_test.sh uses for every README block).
first_cmd=$(/usr/bin/python3 "$ROOT/tests/quickstart/readme_blocks.py" "$ROOT/README.md" "## The two commands" |
            awk 'NF{print; exit}' | sed 's/#.*//; s/[[:space:]]*$//')
[ -n "$first_cmd" ] || { echo "walkthrough: could not find the first command in README.md"; exit 1; }
echo "walkthrough: README's first command: $first_cmd"

tmp=$(mktemp -d /tmp/zcode-walkthrough.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
git clone --quiet "$ROOT" "$tmp/zcode"
cd "$tmp/zcode"
echo "walkthrough: fresh clone at $tmp/zcode ($(git log --oneline -1))"
# shellcheck disable=SC2086
$first_cmd $ARGS

run_dir="outputs/$(awk -F'"' '/^experiment_name:/{print $2}' examples/quickstart/config.yaml)"
/usr/bin/python3 tests/quickstart/check_run_folder.py "$run_dir" "$STEPS"
echo "walkthrough: OK"
