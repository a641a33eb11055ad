#!/usr/bin/env bash
# zcode-host tokenizer train + tokenize end to end: trains a small unigram vocabulary on fortunes
# (JSONL and plain text), checks the specials the plugins report, encodes/decodes, and checks the
# errors for a bad JSONL record and a missing hf:// reference.
# Usage: cli_test.sh ZCODE_HOST
set -euo pipefail
HOST="$1"
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
F=/usr/share/games/fortunes/fortunes
[ -f "$F" ] || { echo "SKIP: $F missing (run scripts/install-deps.sh)"; exit 0; }
fail() { echo "FAIL: $*" >&2; exit 1; }

head -c 200000 "$F" > "$W/plain.txt"
/usr/bin/python3 -c 'import json,sys
for t in open(sys.argv[1], encoding="utf-8", errors="replace").read().split("\n%\n"): print(json.dumps({"text": t}))' \
  /usr/share/games/fortunes/wisdom > "$W/docs.jsonl"

"$HOST" tokenizer train --input "$W/plain.txt" "$W/docs.jsonl" --vocab-size 600 --model-type unigram --out "$W/tok" > "$W/train.log"
grep -q "unigram vocabulary of 600 pieces" "$W/train.log" || fail "train output: $(cat "$W/train.log")"
[ -f "$W/tok/tokenizer.model" ] && [ -f "$W/tok/zcode_tokenizer.json" ] || fail "model or marker missing"

"$HOST" tokenize --tokenizer "$W/tok" --info --moe-experts 2 > "$W/info.txt"
for want in $'0\t<pad>' $'1\t<bos>' $'2\t<eos>' $'3\t<mask>' $'1000\t<expert_0>' $'1001\t<expert_1>' $'250000\t<image>' 'vocab_size: 250001'; do
  grep -qF "$want" "$W/info.txt" || fail "--info lacks '$want': $(cat "$W/info.txt")"
done

ids="$("$HOST" tokenize --tokenizer "$W/tok" "The quick brown fox.")"
[ -n "$ids" ] || fail "no ids"
back="$("$HOST" tokenize --tokenizer "$W/tok" --decode "$ids")"
[ "$back" = "The quick brown fox." ] || fail "round trip gave '$back'"
# <mask> in text is ordinary text unless allowed.
"$HOST" tokenize --tokenizer "$W/tok" "a <mask> b" | tr ' ' '\n' | grep -qx 3 && fail "<mask> parsed without --allow-special"
"$HOST" tokenize --tokenizer "$W/tok" --allow-special "a <mask> b" | tr ' ' '\n' | grep -qx 3 || fail "<mask> not parsed with --allow-special"

printf '{"text": "ok"}\n{"txt": "bad"}\n' > "$W/bad.jsonl"
set +e
"$HOST" tokenizer train --input "$W/bad.jsonl" --vocab-size 100 --out "$W/tok2" 2> "$W/err.txt"; rc=$?
set -e
[ "$rc" = 2 ] || fail "bad record: exit $rc, expected 2"
grep -q 'bad.jsonl:2:1: missing field "text"' "$W/err.txt" || fail "bad record message: $(cat "$W/err.txt")"
# A record nested 10^6 deep is an error with its place, not a stack overflow: after
# `{"text": "a", "x": ` (19 bytes) the root and 255 lists are read, the 256th '[' is refused.
{ printf '{"text": "ok"}\n{"text": "a", "x": '; head -c 1000000 /dev/zero | tr '\0' '['; printf '\n'; } > "$W/deep.jsonl"
set +e
"$HOST" tokenizer train --input "$W/deep.jsonl" --vocab-size 100 --out "$W/tok3" 2> "$W/err3.txt"; rc=$?
set -e
[ "$rc" = 2 ] || fail "deep record: exit $rc, expected 2"
grep -q 'deep.jsonl:2:275: nesting deeper than 256 levels at x\[0\]\[0\]' "$W/err3.txt" || fail "deep record message: $(cat "$W/err3.txt")"

set +e
"$HOST" tokenize --tokenizer hf://no/such-model "x" 2> "$W/err2.txt"; rc=$?
set -e
[ "$rc" != 0 ] || fail "missing hf:// reference succeeded"
grep -q "scripts/fetch-assets.sh" "$W/err2.txt" || fail "not-found message: $(cat "$W/err2.txt")"
echo "cli_test: OK"
