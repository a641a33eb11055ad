"""The Python package `zcode` (pybind11 over core/), with pytest: the guide's
run.py, config errors, callbacks, zero-copy parameters, the tokenizer and
model from Python, evaluate and generate against the CLI, Ctrl-C."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from conftest import HOST, SRC, WORK, Recorder, cli, config_dict, zcode

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHONPATH = os.environ["ZCODE_PYTHONPATH"]

# The guide's 2.3.1 config.yaml, changed only where the CPU needs it
# (README "Python": accelerator, mixed_precision, variant, max_steps, and
# warmup_steps with it: a warmup longer than the run is a config error).
GUIDE_CONFIG = """experiment_name: "glm5pt2_hello"
seed: 123
hardware:
  accelerator: "cpu"
  devices: 1
  mixed_precision: false
model:
  type: "GLM5pt2"
  variant: "nano"
  moe_experts: 8
  moe_top_k: 1
  max_seq_len: 1024
data:
  train_path: "data/sample_train.jsonl"
  val_path:   "data/sample_val.jsonl"
  tokenizer: "hf://gpt2"
  batch_size: 32
optimizer:
  name: "AdamW"
  lr: 5e-4
  weight_decay: 0.0
scheduler:
  type: "linear_with_warmup"
  warmup_steps: 1
training:
  max_steps: 2
  gradient_accumulation: 1
  clip_grad_norm: 1.0
logging:
  mlflow: true
  wandb: false
  console_log_level: "INFO"
"""

# The guide's 2.3.3 run.py, verbatim.
GUIDE_RUN_PY = """import zcode
from zcode import HarnessConfig, Engine

def main():
    cfg = HarnessConfig.from_yaml("config.yaml")
    engine = Engine(cfg)
    engine.run()   # handles setup, training, validation, checkpointing

if __name__ == "__main__":
    main()
"""


def py_env():
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, ZCODE_ASSETS_DIR=os.path.join(SRC, "assets"))
    return env


def test_guide_run_py_runs_verbatim(tmp_path):
    (tmp_path / "data").mkdir()
    lines = ['{"text": "Hello world! This is a tiny test."}', '{"text": "ZCode makes training GLM‑5.2 easy."}',
             '{"text": "We love reproducible experiments."}']
    (tmp_path / "data" / "sample_train.jsonl").write_text("\n".join(lines * 200) + "\n", encoding="utf-8")
    (tmp_path / "data" / "sample_val.jsonl").write_text("\n".join(lines * 20) + "\n", encoding="utf-8")
    (tmp_path / "config.yaml").write_text(GUIDE_CONFIG)
    (tmp_path / "run.py").write_text(GUIDE_RUN_PY)
    r = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, env=py_env(), capture_output=True, timeout=600)
    out = r.stdout.decode() + r.stderr.decode()
    assert r.returncode == 0, out
    assert "[INFO] Loading config from config.yaml" in out
    assert "Initializing GLM5pt2 (nano) with 8 experts, top_k=1" in out
    assert "Training complete. Best val loss:" in out
    run = tmp_path / "outputs" / "glm5pt2_hello"
    assert (run / "checkpoints" / "step_2" / "model.safetensors").exists()
    assert (run / "logs" / "mlflow").is_dir()  # logging.mlflow: true, the guide's logs/mlflow/


def test_config_errors_carry_every_problem_with_its_path(work):
    d = config_dict(work, "bad")
    d["optimizer"]["lr"] = -1
    d["training"]["max_steps"] = "ten"
    with pytest.raises(zcode.ValidationError) as e:
        zcode.HarnessConfig.from_dict(d)
    paths = [p for p, _ in e.value.errors]
    assert "optimizer.lr" in paths and "training.max_steps" in paths
    # The same messages as `zcode-host validate`.
    path = os.path.join(work, "bad.json")
    with open(path, "w") as f:
        json.dump(d, f)
    r = subprocess.run([HOST, "validate", path], capture_output=True, text=True)
    assert r.returncode == 2
    for p, m in e.value.errors:
        assert f"{p}: {m}" in r.stdout + r.stderr
    with pytest.raises(zcode.ValidationError):
        zcode.HarnessConfig.from_yaml(os.path.join(work, "missing.yaml"))
    # A plugin option's typo, checked against the glm52 plugin's schema.
    d = config_dict(work, "typo")
    d["model"]["moe_top_kk"] = 2
    with pytest.raises(zcode.ValidationError) as e:
        zcode.HarnessConfig.from_dict(d)
    assert [p for p, _ in e.value.errors] == ["model.moe_top_kk"]
    assert "moe_top_k" in str(e.value)


def test_config_attributes_and_overrides(work):
    cfg = zcode.HarnessConfig.from_dict(config_dict(work, "attrs"))
    assert cfg.model.d_model == 64 and cfg.optimizer.name == "AdamW" and cfg.experiment_name == "attrs"
    assert cfg.to_dict()["training"]["max_steps"] == 20
    c2 = cfg.with_overrides(["training.max_steps=3", "optimizer.lr=0.002"])
    assert c2.training.max_steps == 3 and c2.optimizer.lr == 0.002 and cfg.training.max_steps == 20
    with pytest.raises(zcode.ValidationError):
        cfg.with_overrides(["optimizer.lr=-5"])
    with pytest.raises(AttributeError):
        cfg.model.d_model = 3


def test_callbacks_see_every_step_evaluation_and_checkpoint(trained):
    engine, rec = trained
    assert [s for s, _ in rec.steps] == list(range(1, 21))
    assert all(np.isfinite(m["loss"]) for _, m in rec.steps)
    assert [s for s, _ in rec.evals][-1] == 20 and "perplexity" in rec.evals[-1][1]
    assert rec.checkpoints and all(os.path.isdir(p) for p in rec.checkpoints)
    assert rec.checkpoints[-1].endswith("step_20")
    # metrics.json of the run holds the same last training loss.
    with open(os.path.join(engine.run_dir, "metrics.json")) as f:
        history = json.load(f)["history"]["train"]
    assert history[-1]["loss"] == rec.steps[-1][1]["loss"]


def test_parameters_are_the_models_buffers(trained):
    engine, _ = trained
    model = engine.model
    params, addresses = model.parameters(), model.parameter_addresses()
    assert set(params) == set(addresses)
    for name, a in params.items():
        assert a.dtype == np.float32
        assert a.__array_interface__["data"][0] == addresses[name], name  # no copy
    ids = np.array([engine.tokenizer.encode("alpha beta gamma delta sky")], dtype=np.int32)
    before = model.forward_logprobs(ids)
    assert before.shape == ids.shape and np.all(before[:, :-1] < 0) and before[0, -1] == 0
    w = params["embed.weight"]
    saved = w.copy()
    w *= 0.5  # writes the model's own buffer
    after = model.forward_logprobs(ids)
    assert not np.array_equal(before, after)
    w[...] = saved
    assert np.array_equal(model.forward_logprobs(ids), before)
    # Into PyTorch in a few lines: the same memory.
    import torch
    t = torch.from_numpy(params["embed.weight"])
    assert t.data_ptr() == addresses["embed.weight"]


def test_tokenizer_batches(trained):
    engine, _ = trained
    tok = engine.tokenizer
    texts = ["alpha beta", "héllo naïve 日本", ""]
    ids = tok.encode(texts)
    assert ids[0] == [26591, 12159] and ids[2] == []  # GPT-2's ids for "alpha", " beta"
    assert tok.decode(ids) == texts
    assert tok.encode("sky") == ids_of_cli("sky")


def ids_of_cli(text):
    out = cli("tokenize", "--tokenizer", os.path.join(SRC, "assets", "hf", "gpt2"), "--text", text)
    return [int(x) for x in out.split()]


def test_evaluate_equals_the_cli(trained):
    engine, _ = trained
    got = engine.evaluate("val")
    out = os.path.join(WORK, "eval.json")
    ckpt = os.path.join(engine.run_dir, "checkpoints", "latest")
    cli("evaluate", "--checkpoint", ckpt, "--split", "val", "--out", out)
    with open(out) as f:
        ref = json.load(f)["metrics"]
    assert got == pytest.approx(ref, rel=0, abs=0)


def test_generate_equals_the_cli(trained):
    engine, _ = trained
    ckpt = os.path.join(engine.run_dir, "checkpoints", "latest")
    prompts = ["alpha beta", "the river", "héllo"]
    got = engine.generate(prompts, strategy="greedy", max_new_tokens=20)
    for p, g in zip(prompts, got):
        ref = cli("generate", "--checkpoint", ckpt, "--prompt", p, "--strategy", "greedy", "--max-new-tokens", "20")
        assert g["text"] == ref[:-1]
        assert engine.tokenizer.decode(g["ids"]).startswith(g["text"])
    s = engine.generate("sky", strategy="sample", temperature=0.8, top_p=0.9, seed=4, max_new_tokens=25)
    ref = cli("generate", "--checkpoint", ckpt, "--prompt", "sky", "--strategy", "sample", "--temperature", "0.8",
              "--top-p", "0.9", "--seed", "4", "--max-new-tokens", "25")
    assert s["text"] == ref[:-1] and s["finish_reason"] in ("stop", "length")
    # From a checkpoint, without training.
    fresh = zcode.Engine.from_checkpoint(ckpt)
    assert fresh.generate(prompts[0], strategy="greedy", max_new_tokens=20)["text"] == got[0]["text"]
    with pytest.raises(ValueError):
        engine.generate("x", strategy="beam")
    # More new tokens than the 64-token context: clamped as the CLI clamps them (63, the prompt
    # cut to its last token), the same text as the CLI's.
    long = engine.generate("alpha beta", strategy="greedy", max_new_tokens=100)
    ref = cli("generate", "--checkpoint", ckpt, "--prompt", "alpha beta", "--strategy", "greedy",
              "--max-new-tokens", "100")
    assert long["text"] == ref[:-1] and len(long["ids"]) <= 63


def test_generate_penalties_and_logit_bias_equal_the_cli(trained):
    engine, _ = trained
    ckpt = os.path.join(engine.run_dir, "checkpoints", "latest")
    # The id from the tokenizer command, not from the code under test.
    river = int(cli("tokenize", "--tokenizer", os.path.join(SRC, "assets", "hf", "gpt2"), " river").split()[0])
    b = engine.generate("alpha beta", strategy="greedy", max_new_tokens=8, logit_bias={river: 100})
    assert b["ids"] == [river] * 8 and b["text"] == " river" * 8
    ref = cli("generate", "--checkpoint", ckpt, "--prompt", "alpha beta", "--strategy", "greedy",
              "--max-new-tokens", "8", "--logit-bias", f"{river}=100")
    assert b["text"] == ref[:-1]
    f = engine.generate("alpha beta", strategy="greedy", max_new_tokens=20, frequency_penalty=1.5,
                        presence_penalty=-0.2, logit_bias={13: -3.5})
    ref = cli("generate", "--checkpoint", ckpt, "--prompt", "alpha beta", "--strategy", "greedy",
              "--max-new-tokens", "20", "--frequency-penalty", "1.5", "--presence-penalty=-0.2", "--logit-bias",
              "13=-3.5")
    assert f["text"] == ref[:-1]
    with pytest.raises(ValueError, match=r"logit_bias: token id 70000 is outside the vocabulary \[0, "):
        engine.generate("x", max_new_tokens=2, logit_bias={70000: 1.0})
    with pytest.raises(TypeError, match="logit_bias: key '7' is not a token id"):
        engine.generate("x", max_new_tokens=2, logit_bias={"7": 1.0})
    with pytest.raises(ValueError, match=r"presence_penalty: 3\.000000 is outside \[-2, 2\]"):
        engine.generate("x", max_new_tokens=2, presence_penalty=3)


def test_save_checkpoint_and_resume(work):
    cfg = zcode.HarnessConfig.from_dict(config_dict(work, "resume", steps=3))
    e = zcode.Engine(cfg)
    e.run()
    path = e.save_checkpoint()
    assert path.endswith("step_3") and os.path.isdir(path)
    more = zcode.Engine(cfg.with_overrides(["training.max_steps=5"]), checkpoint=path)
    more.run()
    assert os.path.isdir(os.path.join(more.run_dir, "checkpoints", "step_5"))


def test_a_callback_that_raises_stops_the_run_with_its_traceback(work):
    class Boom:
        def on_step_end(self, step, metrics):
            if step == 2:
                raise ValueError("boom at step two")

    e = zcode.Engine(zcode.HarnessConfig.from_dict(config_dict(work, "boom", steps=6)))
    e.add_callback(Boom())
    with pytest.raises(zcode.RunError) as err:
        e.run()
    assert err.value.exit_code == 1
    with open(os.path.join(e.run_dir, "logs", "console.log")) as f:
        log = f.read()
    assert "Traceback (most recent call last)" in log and "ValueError: boom at step two" in log
    assert "on_step_end" in log


def test_ctrl_c_stops_training_cleanly(work):
    d = config_dict(work, "interrupt", steps=100000)
    d["training"]["save_every"] = 100000
    d["logging"]["console_log_level"] = "INFO"
    script = textwrap.dedent(f"""
        import json, zcode
        cfg = zcode.HarnessConfig.from_dict(json.loads({json.dumps(json.dumps(d))}))
        class Tell:
            def on_step_end(self, step, metrics):
                if step == 3:
                    print("STEP3", flush=True)
        e = zcode.Engine(cfg)
        e.add_callback(Tell())
        try:
            e.run()
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], env=py_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if "STEP3" in line:
            break
    p.send_signal(signal.SIGINT)
    rest = p.stdout.read()
    assert p.wait(timeout=120) == 0, rest
    assert "INTERRUPTED" in rest
    ck = os.path.join(work, "outputs", "interrupt", "checkpoints")
    assert any(n.startswith("step_") for n in os.listdir(ck))


def test_zcode_command_is_zcode_host():
    z = os.path.join(os.path.dirname(HOST), "zcode")
    r = subprocess.run([z, "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("zcode-host ")
    assert zcode.__version__ in r.stdout
