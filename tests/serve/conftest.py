"""Fixtures of the server tests: a small checkpoint trained by zcode-host, and
`zcode-host serve` processes started on loopback (port 0: the port is read
from the line the server prints).

Environment (set by tests/serve/CMakeLists.txt): ZCODE_HOST (the binary),
ZCODE_SOURCE_DIR (for the GPT-2 tokenizer assets), ZCODE_SERVE_WORK (a
scratch folder of this build)."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest
import requests

HOST = os.environ["ZCODE_HOST"]
SRC = os.environ["ZCODE_SOURCE_DIR"]
WORK = os.environ["ZCODE_SERVE_WORK"]
API_KEY = "test-key"
MODEL = "served"

WORDS = ["alpha", "beta", "gamma", "delta", "sky", "river", "stone", "light", "the", "a",
         "héllo", "naïve", "日本"]


def write_corpus(d):
    with open(os.path.join(d, "train.jsonl"), "w", encoding="utf-8") as tr, \
         open(os.path.join(d, "val.jsonl"), "w", encoding="utf-8") as va:
        for i in range(120):
            s = " ".join(WORDS[(i * 7 + w * 3) % len(WORDS)] for w in range(12 + i % 7))
            (va if i % 6 == 5 else tr).write('{"text": "%s."}\n' % s)


@pytest.fixture(scope="session")
def checkpoint():
    """A nano MoE trained 60 steps on a corpus with multi-byte characters
    (é, ï, 日本: GPT-2's byte-level BPE splits them across tokens)."""
    d = os.path.join(WORK, "run")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    write_corpus(d)
    cfg = os.path.join(d, "config.yaml")
    with open(cfg, "w") as f:
        f.write(f"""experiment_name: {MODEL}
seed: 7
hardware: {{accelerator: cpu, num_threads: 2}}
model: {{type: GLM5pt2, variant: nano, d_model: 64, n_layers: 2, n_heads: 4, n_kv_heads: 2, head_dim: 16,
        moe_experts: 4, moe_top_k: 2, moe_ffn_hidden: 64, ffn_hidden: 128, max_seq_len: 128}}
data: {{train_path: {d}/train.jsonl, val_path: {d}/val.jsonl, tokenizer: {SRC}/assets/hf/gpt2, batch_size: 4,
       num_workers: 0, cache_dir: {d}/cache}}
optimizer: {{name: AdamW, lr: 0.01, weight_decay: 0.01}}
scheduler: {{type: cosine_with_warmup, warmup_steps: 2}}
training: {{max_steps: 60, eval_every: 60, save_every: 60, log_every: 20}}
logging: {{console_log_level: WARNING, output_dir: {d}/outputs}}
evaluation: {{plugins: [lm], split: val, batch_size: 2}}
""")
    r = subprocess.run([HOST, "run", cfg], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return os.path.join(d, "outputs", MODEL, "checkpoints", "latest")


class Served:
    """One `zcode-host serve` process."""

    def __init__(self, checkpoint, *flags):
        self.log_path = os.path.join(WORK, f"serve_{os.getpid()}_{time.monotonic_ns()}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([HOST, "serve", "--checkpoint", checkpoint, "--port", "0", *flags],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        assert m, f"no listening line: {line!r}; log: {open(self.log_path).read()}"
        self.url = f"http://127.0.0.1:{m.group(1)}"

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self.log.close()
        return rc

    def stderr(self):
        with open(self.log_path) as f:
            return f.read()


@pytest.fixture(scope="session")
def server(checkpoint):
    """The main server: 8 slots, prompt chunks of 5 tokens (so prompts arrive
    over several steps), an API key."""
    s = Served(checkpoint, "--slots", "8", "--prefill-chunk", "5", "--max-queue", "16", "--api-key", API_KEY,
               "--max-body-mb", "0.05")
    yield s
    assert s.stop() == 0, s.stderr()


def auth():
    return {"Authorization": f"Bearer {API_KEY}"}


def post(server, path, body, **kw):
    return requests.post(server.url + path, json=body, headers=auth(), timeout=60, **kw)


def generate_cli(checkpoint, prompt, *flags):
    """`zcode-host generate`'s text for a prompt (the reference of the server's answers)."""
    r = subprocess.run([HOST, "generate", "--checkpoint", checkpoint, "--prompt", prompt, *flags],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode("utf-8")
    assert out.endswith("\n")
    return out[:-1]
