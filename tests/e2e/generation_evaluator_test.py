#!/usr/bin/env python3
"""The `generation` evaluator plugin end to end, against independent paths:

Trains a nano GLM-5.2 on the e2e corpus with evaluation.plugins [lm,
generation], the generation evaluator reading a prompts file, and checks:
  - every evaluation of logs/metrics.jsonl carries generation_bleu, _rouge1,
    _rouge2, _rougeL, _meteor, _distinct_1, _distinct_2, _entropy,
    _repetition and _documents, beside lm's metrics;
  - each hypothesis in logs/generation_eval.jsonl (the last evaluation) is
    `zcode-host generate`'s greedy continuation of its prompt on the final
    checkpoint (a separate process, the CLI's own path);
  - the last evaluation's BLEU, ROUGE and METEOR equal `zcode-host score` on
    those hypotheses and references (the metrics' own tests check score
    against NLTK and published examples);
  - a typo in the evaluator's options is refused with its dotted path, and
    the lm evaluator does not see the generation evaluator's subsection.

Usage: generation_evaluator_test.py ZCODE_HOST SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

from word_corpus import document, write_corpus


def main():
    host, src, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    write_corpus(work, docs=120, base_words=12, val_every=6)
    # Prompts and references cut from validation documents: each word is the
    # one three places after the previous in word_corpus.WORDS, which the model learns,
    # so the scores are far from 0 and their equality with `score` means something.
    prompts = []
    for i in (5, 11, 17, 23):
        seq = document(i, 12)
        prompts.append((" ".join(seq[:5]), " " + " ".join(seq[5:10])))
    with open(f"{work}/prompts.jsonl", "w") as f:
        for p, r in prompts:
            f.write(json.dumps({"prompt": p, "reference": r}) + "\n")

    def config(name, evaluation):
        path = f"{work}/{name}.yaml"
        with open(path, "w") as f:
            f.write(f"""experiment_name: {name}
seed: 7
hardware: {{accelerator: cpu, num_threads: 2}}
model: {{type: GLM5pt2, variant: nano, d_model: 64, n_layers: 2, n_heads: 4, n_kv_heads: 2, head_dim: 16,
        moe_experts: 4, moe_top_k: 2, moe_ffn_hidden: 64, ffn_hidden: 128, max_seq_len: 64}}
data: {{train_path: {work}/train.jsonl, val_path: {work}/val.jsonl, tokenizer: {src}/assets/hf/gpt2,
       batch_size: 4, num_workers: 0, cache_dir: {work}/cache}}
optimizer: {{name: AdamW, lr: 0.01, weight_decay: 0.01}}
scheduler: {{type: cosine_with_warmup, warmup_steps: 2}}
training: {{max_steps: 60, eval_every: 30, save_every: 60, log_every: 10}}
generation: {{strategy: greedy}}
logging: {{console_log_level: WARNING, output_dir: {work}/outputs}}
evaluation: {evaluation}
""")
        return path

    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            print("FAIL:", what)

    # Bad options first: the path names the field.
    bad = config("bad", "{plugins: [lm, generation], generation: {max_documentz: 3}}")
    r = subprocess.run([host, "validate", bad], capture_output=True, text=True)
    check(r.returncode == 2 and "evaluation.generation.max_documentz" in r.stdout + r.stderr,
          f"typo refused with its path: {r.stdout}{r.stderr}")
    stray = config("stray", "{plugins: [lm], generation: {max_documents: 3}}")
    r = subprocess.run([host, "validate", stray], capture_output=True, text=True)
    check(r.returncode == 2 and "evaluation.generation" in r.stdout + r.stderr,
          f"a subsection of an evaluator not listed is refused: {r.stdout}{r.stderr}")

    # evaluation.split: train continues training documents (data.train_path);
    # a config without the split's file is refused, naming the key.
    train = config("train_split", "{plugins: [lm, generation], split: train, generation: {max_documents: 2, "
                   "max_new_tokens: 4}}")
    r = subprocess.run([host, "run", train, "--set", "training.max_steps=2", "--set", "training.eval_every=2"],
                       capture_output=True, text=True)
    first_train = json.loads(open(f"{work}/train.jsonl").readline())["text"]
    recs = [json.loads(line) for line in open(f"{work}/outputs/train_split/logs/generation_eval.jsonl")] \
        if r.returncode == 0 else []
    check(len(recs) == 2 and first_train.startswith(recs[0]["prompt"]),
          f"split train reads data.train_path: {r.stderr[-300:]} {recs[:1]}")
    noval = config("noval", "{plugins: [lm, generation]}")
    text = open(noval).read().replace(f", val_path: {work}/val.jsonl", ", val_fraction: 0.1")
    open(noval, "w").write(text)
    r = subprocess.run([host, "run", noval], capture_output=True, text=True)
    check(r.returncode != 0 and "data.val_path" in r.stderr, f"no val file, no prompts: refused: {r.stderr[-300:]}")

    cfg = config("gen", "{plugins: [lm, generation], generation: {prompts_file: " + work +
                 "/prompts.jsonl, max_new_tokens: 8}}")
    r = subprocess.run([host, "run", cfg], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        sys.exit(1)
    run = f"{work}/outputs/gen"
    evals = [json.loads(line) for line in open(f"{run}/logs/metrics.jsonl") if '"event":"eval"' in line
             or '"event": "eval"' in line]
    keys = ["bleu", "rouge1", "rouge2", "rougeL", "meteor", "distinct_1", "distinct_2", "entropy", "repetition",
            "documents"]
    check(len(evals) >= 2, f"evaluations in metrics.jsonl: {len(evals)}")

    def find(rec, k):
        for sect in (rec, rec.get("val", {}), rec.get("metrics", {})):
            if isinstance(sect, dict) and k in sect:
                return sect[k]
        return None

    for e in evals:
        for k in keys:
            check(find(e, "generation_" + k) is not None, f"generation_{k} in {json.dumps(e)[:200]}")
        check(find(e, "perplexity") is not None, "lm's perplexity beside them")
    last = evals[-1]
    check(find(last, "generation_documents") == len(prompts), "documents = the prompts file's lines")

    recs = [json.loads(line) for line in open(f"{run}/logs/generation_eval.jsonl")]
    check([x["prompt"] for x in recs] == [p for p, _ in prompts], "the prompts file's prompts")
    ckpt = f"{run}/checkpoints/latest"
    for x in recs:
        g = subprocess.run([host, "generate", "--checkpoint", ckpt, "--prompt", x["prompt"], "--strategy", "greedy",
                            "--max-new-tokens", "8"], capture_output=True, text=True)
        check(g.returncode == 0 and g.stdout[:-1] == x["hypothesis"],
              f"hypothesis of {x['prompt']!r} = zcode-host generate: {x['hypothesis']!r} vs {g.stdout!r}")

    with open(f"{work}/hyp.txt", "w") as f:
        f.write("".join(x["hypothesis"].replace("\n", " ") + "\n" for x in recs))
    with open(f"{work}/ref.txt", "w") as f:
        f.write("".join(x["reference"] + "\n" for x in recs))

    def score(metric):
        s = subprocess.run([host, "score", "--metric", metric, "--hypotheses", f"{work}/hyp.txt", "--references",
                            f"{work}/ref.txt", "--json"], capture_output=True, text=True)
        return json.loads(s.stdout)

    near = lambda a, b: a is not None and abs(a - b) <= 1e-9 * max(1.0, abs(b))
    check(near(find(last, "generation_bleu"), score("bleu")["score"]), "BLEU = zcode-host score")
    rg = score("rouge")
    for k in ("rouge1", "rouge2", "rougeL"):
        check(near(find(last, "generation_" + k), rg[k]["fmeasure"]), f"{k} = zcode-host score")
    check(near(find(last, "generation_meteor"), score("meteor")["score"]), "METEOR = zcode-host score")
    if failures:
        sys.exit(1)
    check(find(last, "generation_bleu") > 20, f"the learned pattern scores: BLEU {find(last, 'generation_bleu')}")
    if failures:
        sys.exit(1)
    print(f"ok: {len(evals)} evaluations, BLEU {find(last, 'generation_bleu'):.2f}, "
          f"ROUGE-L {find(last, 'generation_rougeL'):.3f}, METEOR {find(last, 'generation_meteor'):.3f}")


if __name__ == "__main__":
    main()
