#!/usr/bin/env python3
"""METEOR of `zcode-host score --metric meteor` and our Porter stemmer against NLTK 3.8 from
Debian (python3-nltk): nltk.stem.PorterStemmer (its default NLTK_EXTENSIONS mode) and
nltk.translate.meteor_score.meteor_score with its defaults (alpha 0.9, beta 3, gamma 0.5),
NLTK's WordNet reader pointed at the same WordNet 3.0 files (Debian's wordnet-base, in
/usr/share/wordnet; NLTK also wants a `lexnames` file, which wordnet-base lacks: the test
writes the 45 lexicographer file names of lexnames(5WN) into a folder of links).

  1. Stems of every word of Debian's wamerican list (lower-cased, letters only) and of the
     fortunes corpus: equal, word by word.
  2. METEOR per segment on 300 fortunes (data/fortunes/val.jsonl), each against two
     references made from it: one with words replaced by a WordNet synonym (chosen here with
     NLTK), inflected or dropped, one with a swapped pair; equal to 1e-12.

Usage: meteor_vs_nltk.py ZCODE_HOST STEM_TOOL SOURCE_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

from nltk.corpus.reader.wordnet import WordNetCorpusReader
from nltk.stem.porter import PorterStemmer
from nltk.translate.meteor_score import meteor_score

LEXNAMES = """adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body
noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location noun.motive
noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process noun.quantity noun.relation
noun.shape noun.state noun.substance noun.time verb.body verb.change verb.cognition verb.communication
verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion verb.perception
verb.possession verb.social verb.stative verb.weather adj.ppl""".split()


def main():
    host, stem_tool, src, work = sys.argv[1:5]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    wn_dir = "/usr/share/wordnet"
    if not os.path.exists(f"{wn_dir}/index.noun"):
        print(f"FAIL: {wn_dir} is missing (scripts/install-deps.sh installs wordnet-base)")
        return 1
    linked = f"{work}/wordnet"
    os.makedirs(linked)
    for f in os.listdir(wn_dir):
        os.symlink(f"{wn_dir}/{f}", f"{linked}/{f}")
    with open(f"{linked}/lexnames", "w") as f:
        for i, name in enumerate(LEXNAMES):
            f.write(f"{i:02d}\t{name}\t{1 if name.startswith('noun') else 2 if name.startswith('verb') else 4 if name.startswith('adv') else 3}\n")
    wn = WordNetCorpusReader(linked, None)
    failures = []

    # 1. Stems.
    corpus = os.path.join(src, "data/fortunes/val.jsonl")
    docs = [json.loads(l)["text"] for l in open(corpus, encoding="utf-8")]
    words = set()
    for w in open("/usr/share/dict/words", encoding="utf-8", errors="replace"):
        w = w.strip().lower()
        if re.fullmatch(r"[a-z]+", w):
            words.add(w)
    for d in docs:
        words.update(re.findall(r"[a-z]+", d.lower()))
    words = sorted(words)
    out = subprocess.run([stem_tool], input="\n".join(words) + "\n", capture_output=True, text=True, check=True)
    ours = out.stdout.split("\n")[:-1]
    stemmer = PorterStemmer()
    diff = [(w, o, stemmer.stem(w)) for w, o in zip(words, ours) if o != stemmer.stem(w)]
    print(f"stems: {len(words)} words, {len(diff)} differ from NLTK's PorterStemmer")
    if len(ours) != len(words) or diff:
        failures.append(f"stems differ, e.g. {diff[:10]}")

    # 2. METEOR on fortunes with edited references.
    def synonym(word):
        for s in wn.synsets(word):
            for l in s.lemmas():
                n = l.name()
                if "_" not in n and n.lower() != word:
                    return n
        return None

    hyps, ref1, ref2 = [], [], []
    for d in docs:
        toks = d.split()
        if not 6 <= len(toks) <= 40:
            continue
        k = len(hyps)
        a = list(toks)
        for i in range(len(a)):
            if (i + k) % 4 == 0:
                s = synonym(a[i].lower())
                if s:
                    a[i] = s
            elif (i + k) % 7 == 3 and a[i].isalpha():
                a[i] = a[i] + ("s" if not a[i].endswith("s") else "")
        del a[(k * 3) % len(a)]
        b = list(toks)
        i = (k * 5) % (len(b) - 1)
        b[i], b[i + 1] = b[i + 1], b[i]
        hyps.append(" ".join(toks))
        ref1.append(" ".join(a))
        ref2.append(" ".join(b))
        if len(hyps) == 300:
            break
    for name, lines in (("hyp.txt", hyps), ("ref1.txt", ref1), ("ref2.txt", ref2)):
        with open(f"{work}/{name}", "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    for refs in (["ref1.txt"], ["ref1.txt", "ref2.txt"]):
        args = [host, "score", "--metric", "meteor", "--json", "--hypotheses", f"{work}/hyp.txt"]
        for r in refs:
            args += ["--references", f"{work}/{r}"]
        out = subprocess.run(args, capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stdout + out.stderr)
            return 1
        got = json.loads(out.stdout)["segments"]
        sets = [[l.rstrip("\n") for l in open(f"{work}/{r}", encoding="utf-8")] for r in refs]
        want = [meteor_score([s[i].split() for s in sets], hyps[i].split(), wordnet=wn) for i in range(len(hyps))]
        bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > 1e-12]
        mean = sum(want) / len(want)
        print(f"meteor, {len(refs)} reference(s): {len(hyps)} segments, mean zcode {sum(got) / len(got):.12f} "
              f"NLTK {mean:.12f}; {len(bad)} segments differ")
        if bad or len(got) != len(want):
            failures.append(f"meteor with {refs}: e.g. {bad[:5]}")
        if not 0.3 < mean < 0.99:
            failures.append(f"meteor mean {mean} is not informative")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
