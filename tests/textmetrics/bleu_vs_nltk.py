#!/usr/bin/env python3
"""Corpus BLEU of `zcode-host score --metric bleu` against NLTK's corpus_bleu (Debian's
python3-nltk), on hand-made and on real sentence pairs.

NLTK scores token lists, so the text is tokenized here by a Python statement of the
mteval-v13a rules (written for this test, not taken from our C++); NLTK's smoothing
method3 is mteval's "exp" smoothing (1 / 2^k for the k-th order without matches) and its
corpus_bleu uses the closest reference length, as sacreBLEU does. NLTK counts at least one
candidate n-gram per segment and order, sacreBLEU none for a segment shorter than n, so
every segment here has 4 tokens or more.

Real pairs: 300 fortunes of data/fortunes/val.jsonl (scripts/make-corpus.sh), each against
two references made from it by fixed edits (a dropped word, a swapped pair, a replaced
word), so the scores fall between 0 and 100.

Usage: bleu_vs_nltk.py ZCODE_HOST SOURCE_DIR WORK_DIR
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu


def tok13a(line):
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    line = f" {line} "
    line = re.sub(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 ", line)
    line = re.sub(r"([^0-9])([\.,])", r"\1 \2 ", line)
    line = re.sub(r"([\.,])([^0-9])", r" \1 \2", line)
    line = re.sub(r"([0-9])(-)", r"\1 \2 ", line)
    return line.split()


def edits(words, k):
    w = list(words)
    if len(w) > 3:
        del w[(3 * k + 1) % len(w)]
    if len(w) > 4:
        i = (5 * k + 2) % (len(w) - 1)
        w[i], w[i + 1] = w[i + 1], w[i]
    if len(w) > 6:
        w[(7 * k + 3) % len(w)] = "something"
    return " ".join(w)


def main():
    host, src, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    hand = [
        ("The cat sat on the mat, quietly.", ["A cat sat on the mat quietly.", "The cat was sitting on the mat."]),
        ("It costs $3.50 (about 3,000 yen) today!", ["It costs $3.50 - about 3,000 yen - today.",
                                                     "Today it costs 3.50 dollars, about 3,000 yen."]),
        ('He said "no" & left at 10-11pm.', ["He said &quot;no&quot; and left at 10-11 pm.",
                                            'He answered "no" and left around 10pm.']),
        ("Numbers like 1.5, 2,5 and 3-4 stay apart.", ["Numbers like 1.5, 2,5 and 3-4 stay apart.",
                                                       "numbers such as 1.5 and 3-4 are kept apart"]),
    ]
    real = []
    corpus = os.path.join(src, "data/fortunes/val.jsonl")
    if not os.path.exists(corpus):
        print(f"FAIL: {corpus} is missing (scripts/make-corpus.sh makes it)")
        return 1
    for line in open(corpus, encoding="utf-8"):
        text = " ".join(json.loads(line)["text"].split())
        words = text.split()
        if 6 <= len(words) <= 60 and text.isascii():
            k = len(real)
            real.append((text, [edits(words, k), edits(words, k + 7)]))
        if len(real) == 300:
            break
    failures = []
    for name, pairs in (("hand-made", hand), ("fortunes", real)):
        hyps = [h for h, _ in pairs]
        nrefs = len(pairs[0][1])
        for path, lines in [("hyp.txt", hyps)] + [(f"ref{r}.txt", [p[1][r] for p in pairs]) for r in range(nrefs)]:
            with open(os.path.join(work, path), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        args = [host, "score", "--metric", "bleu", "--json", "--hypotheses", os.path.join(work, "hyp.txt")]
        for r in range(nrefs):
            args += ["--references", os.path.join(work, f"ref{r}.txt")]
        out = subprocess.run(args, capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stdout + out.stderr)
            return 1
        ours = json.loads(out.stdout)
        hyp_tok = [tok13a(h) for h in hyps]
        ref_tok = [[tok13a(r) for r in refs] for _, refs in pairs]
        if min(len(t) for t in hyp_tok) < 4:
            failures.append(f"{name}: a hypothesis shorter than 4 tokens (the comparison needs 4)")
        theirs = 100 * corpus_bleu(ref_tok, hyp_tok, smoothing_function=SmoothingFunction().method3)
        hyp_len = sum(len(t) for t in hyp_tok)
        ref_len = 0
        for h, refs in zip(hyp_tok, ref_tok):
            ref_len += min((abs(len(r) - len(h)), len(r)) for r in refs)[1]
        bp = 1.0 if hyp_len >= ref_len else math.exp(1 - ref_len / hyp_len)
        print(f"{name}: {len(pairs)} segments, {nrefs} references: zcode {ours['score']:.10f}, "
              f"NLTK {theirs:.10f}; hyp_len {ours['hyp_len']} / {hyp_len}, ref_len {ours['ref_len']} / {ref_len}")
        if abs(ours["score"] - theirs) > 1e-9 * max(1.0, theirs):
            failures.append(f"{name}: BLEU {ours['score']!r} != NLTK {theirs!r}")
        if (ours["hyp_len"], ours["ref_len"]) != (hyp_len, ref_len) or abs(ours["bp"] - bp) > 1e-12:
            failures.append(f"{name}: lengths or BP differ")
        if not 5 < theirs < 95:
            failures.append(f"{name}: BLEU {theirs} is not in the informative middle range")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
