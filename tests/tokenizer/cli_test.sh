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
# Marker version 2 (issue 17): the specials missing from the 600 learned pieces follow them, so the
# vocabulary has no gap (version 1 put <expert_i> at 1000 + i and <image> at 250000: 250001 rows).
grep -q '"version":2' "$W/tok/zcode_tokenizer.json" || fail "marker: $(cat "$W/tok/zcode_tokenizer.json")"
for want in $'0\t<pad>' $'1\t<bos>' $'2\t<eos>' $'3\t<mask>' $'600\t<expert_0>' $'601\t<expert_1>' $'602\t<image>' 'vocab_size: 603'; do
  grep -qF "$want" "$W/info.txt" || fail "--info lacks '$want': $(cat "$W/info.txt")"
done
# A tokenizer trained before (marker version 1) keeps its ids.
mkdir -p "$W/tok_v1" && cp "$W/tok/tokenizer.model" "$W/tok_v1/"
sed 's/"version":2/"version":1/' "$W/tok/zcode_tokenizer.json" > "$W/tok_v1/zcode_tokenizer.json"
"$HOST" tokenize --tokenizer "$W/tok_v1" --info --moe-experts 2 > "$W/info_v1.txt"
for want in $'1000\t<expert_0>' $'1001\t<expert_1>' $'250000\t<image>' 'vocab_size: 250001'; do
  grep -qF "$want" "$W/info_v1.txt" || fail "v1 --info lacks '$want': $(cat "$W/info_v1.txt")"
done

# Both train: a few steps of a tiny model on each (the v1 vocabulary has 249398 unassigned ids,
# which the data loader failed on before issue 17: "decode: id 603 is not assigned to any token").
for t in tok tok_v1; do
  cat > "$W/run_$t.yaml" <<YAML
experiment_name: spm_$t
hardware: {num_threads: 1}
model: {type: GLM5pt2, variant: nano, d_model: 16, n_layers: 1, n_heads: 1, n_kv_heads: 1, head_dim: 16,
        moe_experts: 2, moe_top_k: 1, moe_ffn_hidden: 16, ffn_hidden: 32, max_seq_len: 16}
data: {train_path: $W/docs.jsonl, val_path: $W/docs.jsonl, tokenizer: {type: sentencepiece, path: $W/$t},
       batch_size: 2, num_workers: 0,
       cache_dir: $W/cache}
training: {max_steps: 2, log_every: 1, eval_every: 2, save_every: 2, eval_at_start: false}
evaluation: {max_batches: 1}
logging: {output_dir: $W/outputs}
YAML
  "$HOST" run "$W/run_$t.yaml" > "$W/run_$t.log" 2>&1 || fail "training on $t: $(tail -5 "$W/run_$t.log")"
  grep -q "Step 2/2 | loss: " "$W/run_$t.log" || fail "no step 2 on $t: $(cat "$W/run_$t.log")"
done
grep -q "Tokenizer: sentencepiece (vocab size 603)" "$W/run_tok.log" || fail "v2 vocab: $(grep Tokenizer "$W/run_tok.log")"
grep -q "unassigned" "$W/run_tok_v1.log" || fail "v1 run does not report the unassigned ids"

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
