#!/usr/bin/env bash
# usage: out_of_tree.sh BUILD_DIR SOURCE_DIR ZCODE_HOST SDK_HOST_TEST SANITIZE(0|1) BUILD_TYPE
set -euo pipefail
build="$1"; src="$2"; host="$3"; api_test="$4"; sanitize="$5"; btype="$6"
work=$(mktemp -d /tmp/zcode_sdk_XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
flags=(-G Ninja -DCMAKE_BUILD_TYPE="$btype" -DCMAKE_PREFIX_PATH="$prefix")
if [ "$sanitize" = "1" ]; then
  # the installed static core was built with sanitizers: consumers link them too
  san="-fsanitize=address,undefined -fno-omit-frame-pointer"
  flags+=(-DCMAKE_CXX_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_MODULE_LINKER_FLAGS="$san")
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"  # build tools only; the tests below set their own

echo "== cmake --install -> $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }
test -f "$prefix/include/zcode/abi.h"
test -f "$prefix/lib/cmake/ZCodeSDK/ZCodeSDKConfig.cmake"
test -f "$prefix/lib/cmake/ZCode/ZCodeConfig.cmake"

echo "== out-of-tree plugin: examples/plugins/hello_callback (find_package(ZCodeSDK))"
cmake -S "$src/examples/plugins/hello_callback" -B "$work/hello" "${flags[@]}" >"$work/hello.log" 2>&1 || { cat "$work/hello.log"; exit 1; }
cmake --build "$work/hello" >>"$work/hello.log" 2>&1 || { cat "$work/hello.log"; exit 1; }
test -f "$work/hello/libzcode_hello_callback.so"
test -f "$work/hello/libzcode_hello_callback.zcode.json"
"$src/tests/abi/check_exports.sh" "$work/hello"

echo "== zcode-host plugins list --plugin-path <hello build>"
out=$(env -u ZCODE_PLUGIN_PATH "$host" plugins list --no-bundled-plugins --plugin-path "$work/hello")
echo "$out"
echo "$out" | grep -Eq "^hello +callback +1\.0\.0 +[0-9]+\.[0-9]+ +$work/hello/libzcode_hello_callback\.so$"

echo "== host API: create hello and send events"
ZCODE_HELLO_DIR="$work/hello" "$api_test"

echo "== installed zcode-host finds the installed plugins (<prefix>/lib/zcode/plugins)"
n_build=$(env -u ZCODE_PLUGIN_PATH "$host" plugins list | wc -l)
n_inst=$(env -u ZCODE_PLUGIN_PATH "$prefix/bin/zcode-host" plugins list | wc -l)
echo "build tree: $n_build lines, install tree: $n_inst lines"
test "$n_build" = "$n_inst"

echo "== embedding: examples/embed (find_package(ZCode))"
cmake -S "$src/examples/embed" -B "$work/embed" "${flags[@]}" >"$work/embed.log" 2>&1 || { cat "$work/embed.log"; exit 1; }
cmake --build "$work/embed" >>"$work/embed.log" 2>&1 || { cat "$work/embed.log"; exit 1; }
set +e
msg=$("$work/embed/zcode_embed" "$work/no-such-config.yaml" 2>&1); rc=$?
set -e
echo "zcode_embed on a missing config: rc=$rc: $msg"
test "$rc" = 2
echo "$msg" | grep -q "no-such-config.yaml"
echo "out-of-tree SDK + embedding: OK"
