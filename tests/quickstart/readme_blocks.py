#!/usr/bin/env python3
"""Prints the ```sh command blocks of one part of README.md, as written.

    readme_blocks.py README.md MARKER

MARKER is a heading ("## The two commands") or a line of its own
("After training:"); the blocks are those after the marker up to the next
"## " heading, concatenated. The README's commands are tested from this
output (tests/quickstart/readme_commands_test.sh and
scripts/new-user-walkthrough.sh), so the two cannot drift apart. Exits 1
with a message naming the marker when it or its blocks are missing.
"""
import sys


def blocks(lines, marker):
    try:
        start = next(i for i, l in enumerate(lines) if l.rstrip() == marker)
    except StopIteration:
        raise SystemExit(f"readme_blocks: no line '{marker}' in the README")
    out, inside = [], False
    for line in lines[start + 1:]:
        if not inside and line.startswith("## "):
            break
        if line.startswith("```"):
            if inside:
                inside = False
            elif line.strip() == "```sh":
                inside = True
            continue
        if inside:
            out.append(line)
    if not out:
        raise SystemExit(f"readme_blocks: no ```sh block after '{marker}' in the README")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write("".join(blocks(f.read().splitlines(keepends=True), sys.argv[2])))
