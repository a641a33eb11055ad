#!/usr/bin/env python3
"""The `tensorboard` callback's event file, read independently of our writer.

Trains a nano GLM-5.2 for 8 steps through zcode-host with `logging.tensorboard:
true` (histograms every 4 steps), then reads logs/tensorboard/events.out.tfevents.*
with Debian's python3-protobuf (classes made by Debian's protoc from
plugins/callbacks/tensorboard/tensorboard.proto) and python3-crc32c, and checks:

  - the file name TensorBoard's loader looks for, and nothing after the last record;
  - every record's framing: u64 length, masked CRC-32C of the length, data,
    masked CRC-32C of the data (the mask as TFRecord documents it, written here);
  - the first event is file_version "brain.Event:2";
  - every step and evaluation record of logs/metrics.jsonl is there as
    train/<key> and eval/<key> scalars at its step, each equal to the float32
    of the logged value, and there are no others;
  - the `samples` callback's lines of logs/samples.jsonl as text summaries
    ("samples/<i>", plugin "text", a scalar string tensor "**prompt**text") at their steps;
  - the histograms at steps 4 and 8: per parameter group (the rule of
    plugins/callbacks/common/model_views.h, restated below), the step-8
    parameter histograms against the step-8 checkpoint's weights computed
    here with NumPy (count, min, max, sum, sum of squares, the bucket counts
    by the documented equal-width rule); gradient and activation histograms
    for their structure (counts add up to num, limits ascend to max).

Usage: tensorboard_events_test.py ZCODE_HOST SOURCE_DIR WORK_DIR
Exit 0 when every check holds, 1 with the failures listed otherwise.
"""
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import crc32c
import numpy as np


def masked(data):
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def group_of(name):
    """'layers.3.moe.experts.1.w1' -> 'layers.3.moe'; 'embed.weight' -> 'embed'."""
    parts = name.split(".")
    if parts[0] == "layers":
        return ".".join(parts[:3]) if len(parts) > 3 else name
    return parts[0]


def main():
    host, src, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    words = ["alpha", "beta", "gamma", "delta", "sky", "river", "stone", "light", "the", "a"]
    with open(f"{work}/train.jsonl", "w") as tr, open(f"{work}/val.jsonl", "w") as va:
        for i in range(60):
            s = " ".join(words[(i * 7 + w * 3) % 10] for w in range(12 + i % 7)) + "."
            (va if i % 6 == 5 else tr).write(json.dumps({"text": s}) + "\n")
    steps = 8
    with open(f"{work}/tb.yaml", "w") as c:
        c.write(f"""experiment_name: tb
seed: 7
hardware: {{accelerator: cpu, num_threads: 1}}
model: {{type: GLM5pt2, variant: nano, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1, head_dim: 16,
        moe_experts: 4, moe_top_k: 2, moe_ffn_hidden: 32, ffn_hidden: 64, max_seq_len: 32}}
data: {{train_path: {work}/train.jsonl, val_path: {work}/val.jsonl, tokenizer: {src}/assets/hf/gpt2,
       batch_size: 2, num_workers: 0, cache_dir: {work}/cache}}
optimizer: {{name: AdamW, lr: 0.003}}
training: {{max_steps: {steps}, eval_every: 4, save_every: 4, log_every: 1}}
logging: {{output_dir: {work}/outputs, tensorboard: true}}
callbacks: [{{type: samples, every: 4, max_new_tokens: 6, prompts: ["the sky", "a river"]}},
            {{type: tensorboard, histogram_every: 4, bins: 16}}]
""")
    run = subprocess.run([host, "run", f"{work}/tb.yaml"], capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout + run.stderr)
        print(f"FAIL: zcode-host run exited {run.returncode}")
        return 1
    rd = f"{work}/outputs/tb"

    subprocess.run(["protoc", f"--python_out={work}", f"-I{src}/plugins/callbacks/tensorboard", "tensorboard.proto"],
                   check=True)
    sys.path.insert(0, work)
    import tensorboard_pb2 as tb  # noqa: E402  (made just above)

    files = glob.glob(f"{rd}/logs/tensorboard/*")
    check(len(files) == 1, f"one event file expected, found {files}")
    name = os.path.basename(files[0])
    check(re.fullmatch(r"events\.out\.tfevents\.\d{10}\.[^/]+", name) is not None, f"file name {name}")
    blob = open(files[0], "rb").read()
    events, at = [], 0
    while at < len(blob):
        if at + 12 > len(blob):
            failures.append(f"torn record header at byte {at}")
            break
        (n,) = struct.unpack_from("<Q", blob, at)
        (len_crc,) = struct.unpack_from("<I", blob, at + 8)
        check(len_crc == masked(blob[at:at + 8]), f"record at byte {at}: length CRC")
        data = blob[at + 12:at + 12 + n]
        (data_crc,) = struct.unpack_from("<I", blob, at + 12 + n)
        check(data_crc == masked(data), f"record at byte {at}: data CRC")
        e = tb.Event()
        e.ParseFromString(data)
        events.append(e)
        at += 16 + n
    check(at == len(blob), f"{len(blob) - at} bytes after the last record")
    check(events and events[0].file_version == "brain.Event:2", "first event is not file_version brain.Event:2")

    scalars, histos, texts = {}, {}, {}
    for e in events[1:]:
        for v in e.summary.value:
            kind = v.WhichOneof("value")
            if kind == "tensor":
                check(v.metadata.plugin_data.plugin_name == "text" and v.tensor.dtype == tb.DT_STRING
                      and len(v.tensor.tensor_shape.dim) == 0 and len(v.tensor.string_val) == 1, f"text {v.tag}")
                check((e.step, v.tag) not in texts, f"text {v.tag} at step {e.step} twice")
                texts[(e.step, v.tag)] = v.tensor.string_val[0].decode()
                continue
            key = (e.step, v.tag)
            target = scalars if kind == "simple_value" else histos
            check(key not in target, f"step {e.step} tag {v.tag} written twice")
            target[key] = v.simple_value if kind == "simple_value" else v.histo

    f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]  # noqa: E731
    expected = {}
    for line in open(f"{rd}/logs/metrics.jsonl"):
        r = json.loads(line)
        prefix = "train/" if r["event"] == "step" else "eval/"
        for k, v in r.items():
            if k not in ("event", "step", "max_steps") and isinstance(v, (int, float)):
                expected[(r["step"], prefix + k)] = f32(float(v))
    check(len(expected) > 8 * 10, f"only {len(expected)} logged values")
    for key, v in expected.items():
        check(key in scalars, f"scalar {key} missing")
        if key in scalars:
            check(scalars[key] == v, f"scalar {key}: {scalars[key]!r} != float32 of the logged {v!r}")
    for key in scalars:
        check(key in expected, f"scalar {key} was not logged")

    # Text: each line of logs/samples.jsonl (steps 4 and 8, two prompts) as "**prompt**text".
    want_texts, index = {}, {}
    for line in open(f"{rd}/logs/samples.jsonl"):
        r = json.loads(line)
        i = index[r["step"]] = index.get(r["step"], -1) + 1
        want_texts[(r["step"], f"samples/{i}")] = f"**{r['prompt']}**{r['text']}"
    check(sorted(want_texts) == [(4, "samples/0"), (4, "samples/1"), (8, "samples/0"), (8, "samples/1")],
          f"samples.jsonl lines {sorted(want_texts)}")
    check(texts == want_texts, f"text summaries {texts} != samples.jsonl {want_texts}")

    # Histograms: at steps 4 and 8 only.
    check(sorted({s for s, _ in histos}) == [4, 8], f"histogram steps {sorted({s for s, _ in histos})}")
    for (step, tag), h in histos.items():
        limits, counts = list(h.bucket_limit), list(h.bucket)
        check(len(limits) == 16 and len(counts) == 16, f"{tag}@{step}: {len(limits)} limits, {len(counts)} buckets")
        check(sum(counts) == h.num, f"{tag}@{step}: buckets add to {sum(counts)}, num {h.num}")
        check(all(a <= b for a, b in zip(limits, limits[1:])) and limits[-1] == h.max, f"{tag}@{step}: limits")
        check(h.min <= h.max, f"{tag}@{step}: min > max")
    check(any(t.startswith("activations/") for _, t in histos), "no activation histograms")

    sys.path.insert(0, f"{src}/tests/reference")
    import safetensors_io  # noqa: E402
    weights, _ = safetensors_io.load(f"{rd}/checkpoints/step_{steps}/model.safetensors")
    groups = {}
    for pname, w in weights.items():
        groups.setdefault(group_of(pname), []).append(np.asarray(w, dtype=np.float32).ravel())
    total = 0
    for g, parts in groups.items():
        x = np.concatenate(parts).astype(np.float64)
        h = histos.get((steps, "params/" + g))
        check(h is not None, f"params/{g}@{steps} missing")
        grad = histos.get((steps, "grads/" + g))
        check(grad is not None and grad.num == x.size, f"grads/{g}@{steps}: num")
        if h is None:
            continue
        total += h.num
        lo, hi = x.min(), x.max()
        width = (hi - lo) / 16
        idx = np.clip(np.ceil((x - lo) / width) - 1 if width > 0 else np.zeros_like(x), 0, 15).astype(int)
        want = np.bincount(idx, minlength=16).astype(float).tolist()
        check(h.num == x.size and h.min == lo and h.max == hi, f"params/{g}: num/min/max {h.num},{h.min},{h.max}")
        check(list(h.bucket) == want, f"params/{g}: buckets {list(h.bucket)} != {want}")
        check(abs(h.sum - x.sum()) <= 1e-9 * np.abs(x).sum() + 1e-12, f"params/{g}: sum {h.sum} vs {x.sum()}")
        check(abs(h.sum_squares - (x * x).sum()) <= 1e-9 * (x * x).sum(), f"params/{g}: sum of squares")
    log = run.stdout + run.stderr
    m = re.search(r"top_k=\d+: (\d+) parameters", log)
    check(m is not None and int(m.group(1)) == total, f"histograms cover {total} parameters; the log says "
          f"{m.group(1) if m else '?'}")

    for f in failures:
        print("FAIL:", f)
    print(f"tensorboard_events_test: {len(events)} records, {len(scalars)} scalars, {len(histos)} histograms, "
          f"{len(groups)} parameter groups, {total} parameters; {len(failures)} failure(s)")
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
