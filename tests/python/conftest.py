"""Fixtures of the Python package tests: the package from the build tree
(ZCODE_PYTHONPATH), zcode-host beside it (ZCODE_HOST), a tiny corpus and a
trained engine shared by the tests that only read it."""
import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.environ["ZCODE_PYTHONPATH"])
import zcode  # noqa: E402

HOST = os.environ["ZCODE_HOST"]
SRC = os.environ["ZCODE_SOURCE_DIR"]
WORK = os.environ["ZCODE_PYTHON_WORK"]
WORDS = ["alpha", "beta", "gamma", "delta", "sky", "river", "stone", "light", "the", "a", "héllo", "naïve"]


def write_corpus(d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "train.jsonl"), "w", encoding="utf-8") as tr, \
         open(os.path.join(d, "val.jsonl"), "w", encoding="utf-8") as va:
        for i in range(120):
            s = " ".join(WORDS[(i * 7 + w * 3) % len(WORDS)] for w in range(12 + i % 7))
            (va if i % 6 == 5 else tr).write('{"text": "%s."}\n' % s)


def config_dict(d, name, steps=20):
    return {
        "experiment_name": name, "seed": 7,
        "hardware": {"accelerator": "cpu", "num_threads": 2},
        "model": {"type": "GLM5pt2", "variant": "nano", "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
                  "head_dim": 16, "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 64, "ffn_hidden": 128,
                  "max_seq_len": 64},
        "data": {"train_path": f"{d}/train.jsonl", "val_path": f"{d}/val.jsonl",
                 "tokenizer": f"{SRC}/assets/hf/gpt2", "batch_size": 4, "num_workers": 0, "cache_dir": f"{d}/cache"},
        "optimizer": {"name": "AdamW", "lr": 0.01, "weight_decay": 0.01},
        "scheduler": {"type": "cosine_with_warmup", "warmup_steps": 2},
        "training": {"max_steps": steps, "eval_every": 10, "save_every": 10, "log_every": 5},
        "logging": {"console_log_level": "WARNING", "output_dir": f"{d}/outputs"},
        "evaluation": {"plugins": ["lm"], "split": "val", "batch_size": 2},
    }


@pytest.fixture(scope="session")
def work():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    write_corpus(WORK)
    return WORK


class Recorder:
    def __init__(self):
        self.steps, self.evals, self.checkpoints = [], [], []

    def on_step_end(self, step, metrics):
        self.steps.append((step, metrics))

    def on_eval_end(self, step, metrics):
        self.evals.append((step, metrics))

    def on_checkpoint(self, path):
        self.checkpoints.append(path)


@pytest.fixture(scope="session")
def trained(work):
    """An Engine that ran 20 steps, with a recording callback."""
    cfg = zcode.HarnessConfig.from_dict(config_dict(work, "trained"))
    engine = zcode.Engine(cfg)
    rec = engine.add_callback(Recorder())
    assert engine.run() == 0
    return engine, rec


def cli(*args):
    r = subprocess.run([HOST, *args], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode("utf-8")
