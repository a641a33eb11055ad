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

echo "== the installed layout is self-contained: no source or build path in a binary"
# (GCC may store a short literal as immediates, which `strings` cannot see: the check that
# counts is the behavioural one below, where a baked source path would be searched first.)
# strings goes to a file first: `strings | grep -q` under pipefail reads a match in a large
# binary as no match (grep exits at the first hit, strings dies of SIGPIPE, status 141), which
# is how a build path in every binary once passed here and failed only for the smallest one.
# The build maps both trees away with -ffile-prefix-map (CMakeLists.txt), debug info included.
# GCC 12 does not apply that map to ASan's and UBSan's source locations (.rodata strings naming
# each instrumented .cpp or header), so in a sanitizer build a string that is exactly a source
# file of the tree (.c .cpp .h .hpp .inc) is let through, and counted; a baked folder or asset
# path still fails.
sanitizer_locations=0
find "$src" "$(cd "$src" && pwd -P)" -path "$build" -prune -o -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.inc' \) -print >"$work/source_files.txt"
# Sources the build generates (protoc's tensorboard.pb.cc and .pb.h, core's generated/git_commit.cpp)
# are instrumented the same way.
find "$build" "$(cd "$build" && pwd -P)" -type f \( -name '*.pb.cc' -o -name '*.pb.h' -o -path '*/generated/*.cpp' \) \
  -print >>"$work/source_files.txt"
for f in "$prefix/bin/zcode-host" "$prefix"/lib/zcode/plugins/*.so; do
  strings -a "$f" >"$work/strings.txt"
  if [ "$sanitize" = "1" ]; then
    before=$(wc -l <"$work/strings.txt")
    grep -vxFf "$work/source_files.txt" "$work/strings.txt" >"$work/strings.kept" || true
    mv "$work/strings.kept" "$work/strings.txt"
    sanitizer_locations=$((sanitizer_locations + before - $(wc -l <"$work/strings.txt")))
  fi
  for tree in "$(cd "$src" && pwd -P)" "$(cd "$build" && pwd -P)" "$src" "$build"; do
    if grep -F "$tree" "$work/strings.txt" >"$work/hits.txt"; then
      echo "FAIL: $f contains the path $tree:"; head -5 "$work/hits.txt"; exit 1
    fi
  done
done
[ "$sanitize" = "1" ] && echo "   ($sanitizer_locations sanitizer source locations naming files of the tree were let through)"
if [ -f "$src/assets/hf/gpt2/vocab.json" ] && [ -f "$src/assets/hf/llama2/tokenizer.json" ]; then
  test -f "$prefix/share/zcode/assets/hf/gpt2/vocab.json"
  test -f "$prefix/share/zcode/assets/hf/llama2/tokenizer.json"
  # Moved elsewhere, with no variable, hub cache or home assets to fall back on, the installed
  # host still resolves hf://gpt2 and hf://llama2 from its own share/zcode/assets.
  moved="$work/moved"
  cp -a "$prefix" "$moved"
  mkdir -p "$work/home"
  for name in gpt2 llama2; do
    info=$(cd "$work" && env -u ZCODE_PLUGIN_PATH -u ZCODE_ASSETS_DIR -u HF_HOME -u HF_HUB_CACHE -u XDG_DATA_HOME \
           HOME="$work/home" "$moved/bin/zcode-host" tokenize --tokenizer "hf://$name" --info)
    echo "$info" | grep -F "file: $moved/share/zcode/assets/hf/$name/" || { echo "FAIL: hf://$name: $info"; exit 1; }
  done
  rm -rf "$moved"
else
  echo "SKIP: assets not fetched (scripts/fetch-assets.sh): the installed hf://gpt2 is not checked"
fi

echo "== the installed Python package and the zcode command"
"$prefix/bin/zcode" --version | head -1 | grep -q '^zcode-host ' || { echo "FAIL: $prefix/bin/zcode --version"; exit 1; }
pydir=$(find "$prefix/lib" -maxdepth 3 -type d -name dist-packages | head -n1)
if [ -n "$pydir" ] && [ -d "$pydir/zcode" ]; then
  # The one line of the README: PYTHONPATH=<prefix>/lib/python3.X/dist-packages (for /usr/local,
  # Debian's python3 looks there already). The package finds the installed plugins beside it.
  got=$(cd "$work" && env -u ZCODE_PLUGIN_PATH PYTHONPATH="$pydir" /usr/bin/python3 -c \
        'import zcode, zcode._zcode as z; print(zcode.__version__, *z.bundled_plugin_dirs())')
  echo "   $got"
  case "$got" in *" $prefix/lib/zcode/plugins") ;; *) echo "FAIL: installed zcode: $got"; exit 1 ;; esac
else
  echo "SKIP: the Python package was not built (pybind11-dev or /usr/bin/python3 missing)"
fi

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
