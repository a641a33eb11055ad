#!/usr/bin/env bash
# The long fuzz run: every libFuzzer target of tests/fuzz for a fixed number
# of executions (ctest's `fuzz` label runs each for 60 s only). Prints the
# executions, the rate and the outcome of each target and the total, and
# exits non-zero when a target crashes (the crashing input is kept and its
# path printed) or when a target stops short of its count.
#
# Usage: scripts/fuzz-long.sh [BUILD_DIR]   (default build/release; the
#        targets are built there first, which needs clang++)
# Environment:
#   ZCODE_FUZZ_RUNS="name=N ..."  executions per target; the defaults below
#                                 make 10 million in all, at least 1 million
#                                 each (the issue 17 bar)
#   ZCODE_FUZZ_OUT=DIR            where the working corpora, logs and crash
#                                 inputs go (default: a new folder in /tmp)
#   ZCODE_FUZZ_PARALLEL=1         run the targets at the same time (one
#                                 process each) instead of one after another
# Run it niced on a shared machine: nice -n 10 scripts/fuzz-long.sh
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build/release}"
OUT="${ZCODE_FUZZ_OUT:-$(mktemp -d /tmp/zcode-fuzz-long.XXXXXX)}"
mkdir -p "$OUT"

# Executions per target. The fast target takes the larger share; each one
# runs at least 1,000,000.
declare -A RUNS=([safetensors_fuzz]=8000000 [tokenizer_fuzz]=1000000 [config_fuzz]=1000000)
for kv in ${ZCODE_FUZZ_RUNS:-}; do RUNS[${kv%%=*}]=${kv#*=}; done

# Seed corpora: the same folders as tests/fuzz/CMakeLists.txt gives ctest.
declare -A CORPUS=(
  [safetensors_fuzz]="$ROOT/tests/fuzz/safetensors_corpus"
  [tokenizer_fuzz]="$ROOT/tests/fuzz/tokenizer_corpus"
  [config_fuzz]="$ROOT/tests/config/guide $ROOT/tests/fuzz/config_corpus"
)
TARGETS=(safetensors_fuzz tokenizer_fuzz config_fuzz)

cmake --build "$BUILD" --target "${TARGETS[@]}" >"$OUT/build.log" 2>&1 || {
  echo "fuzz-long: building the fuzz targets failed (needs clang++); see $OUT/build.log" >&2
  exit 2
}

# One target: runs it, writes "<executions> <exec/s> <seconds> <outcome>" to $OUT/<target>.result.
run_target() {
  local t=$1 bin="$BUILD/bin/$1" work="$OUT/$1.corpus" start rc secs n rate outcome
  rm -rf "$work" && mkdir -p "$work"
  for c in ${CORPUS[$t]}; do cp -r "$c/." "$work/"; done
  start=$(date +%s)
  # -runs counts every execution, the seed inputs included; crash inputs go
  # to $OUT/<target>.crash-*. -entropic=0: with libFuzzer's entropic
  # scheduler the tokenizer and config targets spent half their time in its
  # bookkeeping (UpdateFeatureFrequency); without it they run 1.8x as many
  # inputs per second.
  ASAN_OPTIONS=detect_leaks=1 "$bin" -runs="${RUNS[$t]}" -entropic=0 -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$OUT/$t." "$work" >"$OUT/$t.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$OUT/$t.log" | tail -1)
  # Stopped early (killed): the last status line "#N ..." says how far it got.
  [ -n "$n" ] || n=$(grep -o '^#[0-9]*' "$OUT/$t.log" | tail -1 | tr -d '#')
  n=${n:-0}
  outcome="no crash"
  if [ "$rc" -eq 72 ]; then  # libFuzzer's exit code after SIGINT: stopped by hand, no finding
    outcome="INTERRUPTED at $n of ${RUNS[$t]} executions (no crash)"
  elif [ "$rc" -ne 0 ]; then
    outcome="FAILED (exit $rc): $(ls "$OUT/$t".crash-* "$OUT/$t".timeout-* "$OUT/$t".oom-* 2>/dev/null | head -1); log $OUT/$t.log"
  elif [ "$n" -lt "${RUNS[$t]}" ]; then
    outcome="FAILED: stopped at $n of ${RUNS[$t]} executions; log $OUT/$t.log"
  fi
  echo "$n ${rate:-?} $secs $outcome" >"$OUT/$t.result"
}

if [ "${ZCODE_FUZZ_PARALLEL:-0}" = 1 ]; then
  for t in "${TARGETS[@]}"; do run_target "$t" & done
  wait
else
  for t in "${TARGETS[@]}"; do run_target "$t"; done
fi

status=0
total=0
printf '%-18s %12s %10s %8s  %s\n' target executions exec/s seconds outcome
for t in "${TARGETS[@]}"; do
  read -r n rate secs outcome <"$OUT/$t.result"
  [ "$outcome" = "no crash" ] || status=1
  total=$((total + n))
  printf '%-18s %12s %10s %8s  %s\n' "$t" "$n" "$rate" "$secs" "$outcome"
done
printf '%-18s %12s\n' total "$total"
echo "logs and corpora: $OUT"
exit $status
