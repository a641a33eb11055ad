#!/usr/bin/env bash
# Checks that every tracked C/C++ source (.c .cc .cpp .h .hpp .cu .cuh) is
# formatted as .clang-format says, with clang-format 14 (Debian 12's; other
# versions format differently). Generated tables (*.inc) are not checked.
# Exits non-zero and lists the files that differ; `scripts/check-format.sh
# --fix` rewrites them in place instead.
#
# Environment:
#   CLANG_FORMAT   the clang-format binary (default: clang-format-14)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CF="${CLANG_FORMAT:-clang-format-14}"
if ! command -v "$CF" >/dev/null; then
  echo "check-format: $CF not found (scripts/install-deps.sh installs clang-format-14)" >&2
  exit 2
fi

mapfile -t files < <(git ls-files -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  "$CF" -i --style=file "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi

bad=()
for f in "${files[@]}"; do
  "$CF" --dry-run --Werror --style=file "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -ne 0 ]; then
  printf '%s\n' "${bad[@]}"
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format" \
       "(see one with: $CF --dry-run --Werror FILE; fix all with: scripts/check-format.sh --fix)" >&2
  exit 1
fi
echo "check-format: all ${#files[@]} files formatted"
