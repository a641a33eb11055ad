#!/usr/bin/env bash
# Every built plugin in the bundled folder exports exactly one dynamic symbol,
# the negotiation entry point (abi.h LOADING RULES). Globs the folder at test
# time, so plugins added later are checked without editing this test.
# usage: check_exports.sh PLUGIN_DIR [more .so files...]
set -u
dir="$1"; shift
files=("$dir"/*.so "$@")
status=0; checked=0
for f in "${files[@]}"; do
  [ -e "$f" ] || continue
  checked=$((checked + 1))
  syms=$(nm -D --defined-only "$f" | awk '{print $NF}' | sort)
  if [ "$syms" != "zcode_plugin_negotiate" ]; then
    echo "FAIL $f exports:"; echo "$syms" | sed 's/^/    /'
    status=1
  else
    echo "ok   $f"
  fi
done
if [ "$checked" -eq 0 ]; then
  echo "SKIP: no plugin in $dir (nothing built yet)"
  exit 77
fi
exit "$status"
