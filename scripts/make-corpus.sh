#!/usr/bin/env bash
# Builds the fortunes corpus used by the quickstart, the tests' e2e runs and
# bench/dataloader: data/fortunes/train.jsonl and data/fortunes/val.jsonl
# (data/ is git-ignored) from Debian's fortunes packages
# (scripts/install-deps.sh installs fortunes, fortunes-min, -de, -ru, -zh).
#
# One record per fortune: {"text": ..., "source": "<file name>"}. Fortune files
# are text separated by lines holding only "%". The .dat (strfile index) and
# .u8 (symlink) files are skipped, and so is any file that is not valid UTF-8
# (counted and reported, never converted by guesswork). Every 20th fortune in
# (sorted file, position) order goes to val, the rest to train. Idempotent:
# same inputs, same bytes; outputs are replaced atomically.
#
# Usage: scripts/make-corpus.sh [FORTUNES_DIR] [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=${1:-/usr/share/games/fortunes}
out=${2:-$root/data/fortunes}
[ -d "$src" ] || { echo "make-corpus: '$src' not found (run scripts/install-deps.sh)" >&2; exit 2; }
mkdir -p "$out"
/usr/bin/python3 - "$src" "$out" <<'PY'
import json, os, sys, tempfile

src, out = sys.argv[1], sys.argv[2]
files = []
for d, dirs, names in os.walk(src):
    dirs.sort()
    if os.path.basename(d) == "off":  # rot13-encoded offensive fortunes
        dirs[:] = []
        continue
    for n in sorted(names):
        p = os.path.join(d, n)
        if n.endswith((".dat", ".u8")) or os.path.islink(p) or not os.path.isfile(p):
            continue
        files.append(p)
files.sort()

train, val, skipped_files, index = [], [], [], 0
for p in files:
    raw = open(p, "rb").read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        skipped_files.append(f"{os.path.relpath(p, src)} (byte {e.start})")
        continue
    name = os.path.relpath(p, src)
    chunk = []
    for line in text.replace("\r\n", "\n").split("\n") + ["%"]:
        if line.strip() == "%":
            body = "\n".join(chunk).strip("\n")
            chunk = []
            if body.strip():
                rec = json.dumps({"text": body, "source": name}, ensure_ascii=False)
                (val if index % 20 == 19 else train).append(rec)
                index += 1
        else:
            chunk.append(line)

def write(path, lines):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in lines))
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)

write(os.path.join(out, "train.jsonl"), train)
write(os.path.join(out, "val.jsonl"), val)
print(f"make-corpus: {len(files)} files, {index} fortunes -> {len(train)} train, {len(val)} val in {out}")
if skipped_files:
    print(f"make-corpus: skipped {len(skipped_files)} non-UTF-8 file(s): {', '.join(skipped_files)}")
PY
