#!/usr/bin/env bash
# Trains the quickstart's tokenizer on the fortunes corpus: a SentencePiece
# BPE vocabulary of 4096 pieces (specials included) with byte fallback, in
# data/fortunes/tokenizer-4k/ (tokenizer.model + zcode_tokenizer.json), with
# ZCode's own `zcode-host tokenizer train`. A 4k vocabulary instead of GPT-2's
# 50k makes the LM head ~12x cheaper, and pieces learned on this corpus (English,
# German, Russian) cover it in fewer tokens per byte than GPT-2's byte-level
# pieces do for German and Russian.
#
# Idempotent: an existing vocabulary is kept (delete the folder to retrain);
# the new one is written to a temporary folder and renamed into place, so a
# killed run never leaves half a tokenizer. Needs data/fortunes/train.jsonl
# (scripts/make-corpus.sh) and a built zcode-host.
#
# Usage: scripts/make-tokenizer.sh [ZCODE_HOST] [CORPUS_DIR]
#   ZCODE_HOST  default build/release/bin/zcode-host
#   CORPUS_DIR  default data/fortunes
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
host=${1:-$root/build/release/bin/zcode-host}
corpus=${2:-$root/data/fortunes}
out=$corpus/tokenizer-4k
if [ -f "$out/tokenizer.model" ] && [ -f "$out/zcode_tokenizer.json" ]; then
  echo "make-tokenizer: $out exists (delete it to retrain)"
  exit 0
fi
[ -x "$host" ] || { echo "make-tokenizer: $host not found: build first (cmake --preset release && cmake --build --preset release --target zcode-host zcode_plugins)" >&2; exit 2; }
[ -f "$corpus/train.jsonl" ] || { echo "make-tokenizer: $corpus/train.jsonl not found: run scripts/make-corpus.sh" >&2; exit 2; }
tmp=$(mktemp -d "$corpus/.tokenizer-4k.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# character_coverage 0.999: at SentencePiece's default (0.9995) the corpus's
# rare characters alone need more than 4096 pieces; byte fallback keeps every
# character encodable.
"$host" tokenizer train --input "$corpus/train.jsonl" --vocab-size 4096 --model-type bpe \
  --character-coverage 0.999 --byte-fallback --out "$tmp/tok" >"$tmp/train.log" 2>&1 ||
  { cat "$tmp/train.log" >&2; echo "make-tokenizer: training failed" >&2; exit 1; }
grep -v "^trainer_interface\|^bpe_model_trainer\|^unigram_model\|^normalizer\|^$" "$tmp/train.log" || true
# Another process may have finished first: keep its folder.
if mv -T "$tmp/tok" "$out" 2>/dev/null; then
  echo "make-tokenizer: $out"
else
  echo "make-tokenizer: $out was made meanwhile by another run; kept"
fi
