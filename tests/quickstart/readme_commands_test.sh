#!/usr/bin/env bash
# The README's own commands, exactly as written (issue 17, item 2): the
# ```sh blocks of "The two commands" (the quickstart), "After training:" and
# "Writing a plugin" are read from README.md at test time
# (tests/quickstart/readme_blocks.py), so they cannot drift from what is run.
#
#   readme_commands_test.sh HOST SRC BINARY_DIR WORK
#
# - The quickstart block runs in SRC, as the README says, with the training
#   shortened by appended --set overrides only (as
#   scripts/new-user-walkthrough.sh does) and its run folder put under WORK
#   (logging.output_dir), so a user's own outputs/ is never touched. It runs
#   with ZCODE_QUICKSTART_NO_SETUP=1: the script's own command line, but not
#   its setup steps (install-deps, fetch-assets, make-corpus, cmake configure
#   and build), which would reconfigure and rebuild build/release in the
#   middle of ctest; those steps are not tested here.
#   `scripts/test.sh` is the command that runs this test: not run again here.
# - "After training" runs in WORK, a folder that holds what the README's
#   relative paths name (examples/, data/, assets/ of SRC and the outputs/ of
#   the shortened run), with zcode-host on PATH. Its commands run as written,
#   but WORK/examples/quickstart/config.yaml (the --config of its evaluate) is
#   a copy of the README's config with evaluation.max_batches 64 -> 4, to keep
#   the test short; everything else in examples/ is SRC's own.
# - "Writing a plugin" runs in WORK too (build/release is this build), as
#   written except that its /tmp/zcode and /tmp/hello are rewritten (sed) to
#   WORK/zcode and WORK/hello: the test deletes only what it created, never a
#   user's /tmp/zcode (which may be a clone of this repository).
# Needs the release preset's build folder (SRC/build/release), because
# scripts/quickstart.sh runs exactly that one, and the corpus and assets
# (data/, assets/ of SRC); exits 77 (skipped) otherwise.
set -euo pipefail
HOST="$1"; SRC="$2"; BIN="$3"; WORK="$4"
STEPS=4
if [ "$(realpath -m "$BIN")" != "$(realpath -m "$SRC/build/release")" ]; then
  echo "readme_commands_test: skipped: scripts/quickstart.sh builds $SRC/build/release, and this is $BIN"
  exit 77
fi
for f in build/release/bin/zcode-host data/fortunes/train.jsonl data/fortunes/val.jsonl; do
  [ -e "$SRC/$f" ] || { echo "readme_commands_test: skipped: $SRC/$f does not exist (run scripts/quickstart.sh once)"; exit 77; }
done
blocks() { /usr/bin/python3 "$SRC/tests/quickstart/readme_blocks.py" "$SRC/README.md" "$1"; }
rm -rf "$WORK"; mkdir -p "$WORK"
export PATH="$(dirname "$HOST"):$PATH"

# 1. The quickstart block.
SHORT=(--set training.max_steps=$STEPS --set training.eval_every=$STEPS --set training.save_every=$STEPS
       --set scheduler.warmup_steps=2 --set evaluation.max_batches=4 --set logging.output_dir="$WORK/outputs")
ran_quickstart=0
while IFS= read -r line; do
  cmd="${line%%#*}"; cmd="${cmd%"${cmd##*[![:space:]]}"}"
  [ -n "$cmd" ] || continue
  case "$cmd" in
    scripts/test.sh) echo "readme_commands_test: '$cmd' not run: it is the test command that runs this test" ;;
    scripts/quickstart.sh)
      echo "readme_commands_test: (in $SRC) $cmd ${SHORT[*]}"
      (cd "$SRC" && ZCODE_QUICKSTART_NO_SETUP=1 $cmd "${SHORT[@]}")
      ran_quickstart=1 ;;
    *) echo "readme_commands_test: the quickstart block has a command this test does not know: '$cmd'"; exit 1 ;;
  esac
done < <(blocks "## The two commands")
[ "$ran_quickstart" = 1 ] || { echo "readme_commands_test: no scripts/quickstart.sh in the quickstart block"; exit 1; }
exp=$(awk -F'"' '/^experiment_name:/{print $2}' "$SRC/examples/quickstart/config.yaml")
/usr/bin/python3 "$SRC/tests/quickstart/check_run_folder.py" "$WORK/outputs/$exp" "$STEPS"

# 2. "After training", as written, where its relative paths resolve.
for d in data assets; do ln -s "$SRC/$d" "$WORK/$d"; done
mkdir -p "$WORK/examples/quickstart"
for e in "$SRC"/examples/*; do [ "$(basename "$e")" = quickstart ] || ln -s "$e" "$WORK/examples/"; done
for e in "$SRC"/examples/quickstart/*; do [ "$(basename "$e")" = config.yaml ] || ln -s "$e" "$WORK/examples/quickstart/"; done
sed -E 's/^(  max_batches:) *64( |$)/\1 4\2/' "$SRC/examples/quickstart/config.yaml" > "$WORK/examples/quickstart/config.yaml"
grep -Eq '^  max_batches: 4( |$)' "$WORK/examples/quickstart/config.yaml" ||
  { echo "readme_commands_test: examples/quickstart/config.yaml has no 'evaluation.max_batches: 64' to shorten"; exit 1; }
mkdir -p "$WORK/build"; ln -s "$BIN" "$WORK/build/release"
blocks "After training:" > "$WORK/after_training.sh"
echo "readme_commands_test: (in $WORK) After training:"; cat "$WORK/after_training.sh"
(cd "$WORK" && bash -euo pipefail after_training.sh) > "$WORK/after_training.out"
cat "$WORK/after_training.out"
/usr/bin/python3 - "$WORK/val.json" "$WORK/after_training.out" <<'PY'
import json, math, sys
m = json.load(open(sys.argv[1]))["metrics"]
assert math.isfinite(m["loss"]) and m["loss"] > 0, f"val.json: loss {m['loss']}"
assert m["tokens"] > 0, "val.json: no tokens evaluated"
text = open(sys.argv[2], encoding="utf-8", errors="replace").read()
assert text.strip(), "generate printed nothing"
print(f"readme_commands_test: evaluate loss {m['loss']:.4f} over {m['tokens']:.0f} tokens; generate printed {len(text)} bytes")
PY

# 3. "Writing a plugin", as written but for its /tmp paths, which go under WORK.
blocks "## Writing a plugin" > "$WORK/plugin.readme.sh"
grep -q '/tmp/zcode' "$WORK/plugin.readme.sh" && grep -q '/tmp/hello' "$WORK/plugin.readme.sh" ||
  { echo "readme_commands_test: the plugin block no longer names /tmp/zcode and /tmp/hello: update this test"; exit 1; }
sed -e "s#/tmp/zcode#$WORK/zcode#g" -e "s#/tmp/hello#$WORK/hello#g" "$WORK/plugin.readme.sh" > "$WORK/plugin.sh"
echo "readme_commands_test: (in $WORK) Writing a plugin:"; cat "$WORK/plugin.sh"
(cd "$WORK" && bash -euo pipefail plugin.sh > "$WORK/plugin.out" 2>&1) || { cat "$WORK/plugin.out"; exit 1; }
tail -n 20 "$WORK/plugin.out"
grep -Eq '^hello[[:space:]]' "$WORK/plugin.out" || grep -Eq '[[:space:]]hello[[:space:]]' "$WORK/plugin.out" ||
  { echo "readme_commands_test: 'plugins list --plugin-path $WORK/hello' does not list the hello callback"; exit 1; }
# The run folder holds ~100 MiB of checkpoints; the links in WORK go, their targets stay.
rm -rf "$WORK"
echo "readme_commands_test: OK"
