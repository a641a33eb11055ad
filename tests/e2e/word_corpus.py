"""The small learnable corpus of the Python e2e tests (profiler_trace_test,
generation_evaluator_test): document i is words (i·7 + w·3) mod 10 of WORDS
for w < base_words + i mod 7, so each word is the one three places after the
previous, which a small model learns within a few dozen steps."""
WORDS = ["alpha", "beta", "gamma", "delta", "sky", "river", "stone", "light", "the", "a"]


def document(i, base_words):
    """The words of document i (a list of str)."""
    return [WORDS[(i * 7 + w * 3) % 10] for w in range(base_words + i % 7)]


def write_corpus(work, docs, base_words, val_every):
    """WORK/train.jsonl and WORK/val.jsonl ({"text": "<words>."} per line):
    documents 0..docs-1, every val_every-th (i mod val_every = val_every - 1)
    to val, the rest to train."""
    with open(f"{work}/train.jsonl", "w") as tr, open(f"{work}/val.jsonl", "w") as va:
        for i in range(docs):
            (va if i % val_every == val_every - 1 else tr).write('{"text": "%s."}\n' % " ".join(document(i, base_words)))
