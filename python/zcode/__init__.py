"""ZCode from Python: the guide's API over the C++ core.

    import zcode
    from zcode import HarnessConfig, Engine

    cfg = HarnessConfig.from_yaml("config.yaml")
    engine = Engine(cfg)
    engine.run()   # setup, training, validation, checkpointing

Everything runs in this process through the same engine as `zcode-host run`
(the bundled plugins are found beside this package); the GIL is released
while it trains, evaluates or generates. Errors: HarnessConfig raises
ValidationError (every problem, each with its dotted config path, the same
messages as `zcode-host validate`); Engine.run raises RunError when the run
fails (its one-line reason is in the log above) and KeyboardInterrupt after a
Ctrl-C has stopped it cleanly (the step finished and was checkpointed).
"""

import json as _json

from . import _zcode

__all__ = ["HarnessConfig", "Engine", "ValidationError", "RunError", "Model", "Tokenizer", "__version__"]


def _number(name, v):
    if v is None:  # as OpenAI's null: the default, no penalty
        return 0.0
    # bool is an int in Python; a flag passed where a number belongs is a mistake.
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"generate: {name}: expected a number, found {type(v).__name__} {v!r}")
    return float(v)


def _logit_bias(d):
    """{token id: bias} as the scheduler's (id, bias) pairs; ranges and the
    vocabulary are checked by the scheduler (ValueError naming logit_bias)."""
    if d is None:
        return []
    if not isinstance(d, dict):
        raise TypeError(f"generate: logit_bias: expected a dict {{token id: bias}}, found {type(d).__name__}")
    out = []
    for k, v in d.items():
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"generate: logit_bias: key {k!r} is not a token id (expected an int)")
        if not -2**31 <= k < 2**31:
            raise ValueError(f"generate: logit_bias: token id {k} is outside the vocabulary")
        out.append((k, _number(f"logit_bias[{k}]", v)))
    return out


class ValidationError(ValueError):
    """A config that cannot run. `errors` lists (path, message) pairs, e.g.
    ("optimizer.lr", "expected a number > 0, found -1"); str() is the whole
    report, one error per line."""

    def __init__(self, message, errors=()):
        super().__init__(message)
        self.errors = [tuple(e) for e in errors]


class RunError(RuntimeError):
    """A run, evaluation or generation that failed; `exit_code` is the CLI's
    (1 runtime failure, 2 usage or config error)."""

    def __init__(self, exit_code, message):
        super().__init__(message)
        self.exit_code = exit_code


_zcode._set_errors(ValidationError, RunError)
__version__ = _zcode.version()

_late, _blas = _zcode.prepare_blas()
if _late:
    import warnings as _warnings

    _warnings.warn("OpenBLAS was loaded before zcode (NumPy or torch imported first), so it runs the kernel it "
                   f"chose itself, not ZCode's ({_blas}); results may differ from zcode-host's in the last bits. "
                   "Import zcode first, or set OPENBLAS_CORETYPE in the environment.", RuntimeWarning, stacklevel=2)


class _Section:
    """Read-only attribute access to one config section (dicts nest)."""

    def __init__(self, path, data):
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name):
        try:
            v = self._data[name]
        except KeyError:
            raise AttributeError(f"{self._path}.{name}: no such field (fields: {', '.join(sorted(self._data))})") \
                from None
        return _Section(f"{self._path}.{name}", v) if isinstance(v, dict) else v

    def __getitem__(self, name):
        return self.__getattr__(name)

    def __setattr__(self, name, value):
        raise AttributeError(f"{self._path}.{name}: the config is read-only; use "
                             f"cfg.with_overrides(['{self._path}.{name}=...'])")

    def __iter__(self):
        return iter(self._data)

    def __repr__(self):
        return f"<{self._path}: {self._data!r}>"

    def to_dict(self):
        return _json.loads(_json.dumps(self._data))


class HarnessConfig:
    """A validated config: every section and default resolved, checked against
    the bundled plugins' option schemas (and those on `plugin_paths`)."""

    def __init__(self, _native):
        self._native = _native
        self._dict = _json.loads(_native.to_json())

    @classmethod
    def from_yaml(cls, path, plugin_paths=()):
        """Loads a YAML (or JSON) file. Raises ValidationError."""
        return cls(_zcode._Config.from_file(str(path), list(plugin_paths)))

    from_file = from_yaml

    @classmethod
    def from_dict(cls, d, plugin_paths=()):
        """A config from a dict of sections, as the YAML would give it."""
        return cls(_zcode._Config.from_text(_json.dumps(d), "<dict>", list(plugin_paths)))

    @classmethod
    def from_checkpoint(cls, path, plugin_paths=()):
        """The config a checkpoint was trained with (its state.json)."""
        return cls(_zcode._Config.from_checkpoint(str(path), list(plugin_paths)))

    def with_overrides(self, sets):
        """A new config with `zcode-host --set` overrides applied, e.g.
        ["training.max_steps=10", "optimizer.lr=1e-3"]. Raises ValidationError."""
        if isinstance(sets, str):
            sets = [sets]
        return HarnessConfig(self._native.with_overrides(list(sets)))

    def to_dict(self):
        """Every section, defaults included, as plain dicts."""
        return _json.loads(self._native.to_json())

    def to_yaml(self):
        return self._native.to_yaml()

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        d = self.__dict__["_dict"]
        if name not in d:
            raise AttributeError(f"{name}: no such config section (sections: {', '.join(sorted(d))})")
        v = d[name]
        return _Section(name, v) if isinstance(v, dict) else v

    def __repr__(self):
        return f"<HarnessConfig {self._dict.get('experiment_name')!r} from {self._native.origin}>"


class Model:
    """The model of a run (after run()) or of a checkpoint. Parameters and
    gradients are NumPy arrays over the model's own float32 buffers (no copy:
    writing one changes the model). They keep the Engine object alive, and
    stay valid until that Engine runs again (a new run() builds a new model;
    copy what must outlive it)."""

    def __init__(self, stage):
        self._stage = stage

    def parameters(self):
        """{name: float32 array} in the model's order, e.g. "layers.0.attn.wq"."""
        return self._stage.parameters()

    def gradients(self):
        """{name: float32 array}: the gradients of the last step."""
        return self._stage.gradients()

    def parameter_addresses(self):
        """{name: address of the C++ buffer} (for checking that nothing was copied)."""
        return self._stage.parameter_addresses()

    def forward_logprobs(self, ids, targets=None):
        """log p(target) per position, float32 [batch, seq], for int ids
        [batch, seq]; targets default to the next id (the last position gets 0)."""
        return self._stage.forward_logprobs(ids, targets)

    def info(self):
        """The resolved architecture (the plugin's info_json)."""
        return _json.loads(self._stage.info_json())

    def state_dict(self):
        """The parameters as a dict of torch-compatible NumPy arrays (the same
        objects as parameters(); torch.from_numpy shares them)."""
        return self.parameters()


class Tokenizer:
    """The tokenizer of a run or checkpoint; batch encode and decode."""

    def __init__(self, stage):
        self._stage = stage

    def encode(self, texts):
        """A str -> its ids; a list of str -> a list of id lists."""
        if isinstance(texts, str):
            return self._stage.encode([texts])[0]
        return self._stage.encode(list(texts))

    def decode(self, ids):
        """ids -> str; a list of id lists -> a list of str (invalid UTF-8 as U+FFFD)."""
        single = len(ids) == 0 or isinstance(ids[0], int)
        out = [b.decode("utf-8", "replace") for b in self._stage.decode([list(ids)] if single else
                                                                         [list(x) for x in ids])]
        return out[0] if single else out


class Engine:
    """Runs one experiment from a HarnessConfig, as `zcode-host run` does."""

    def __init__(self, config, checkpoint=""):
        if not isinstance(config, HarnessConfig):
            raise TypeError("Engine(config): expected a zcode.HarnessConfig, found " + type(config).__name__)
        self.config = config
        self._native = _zcode._Engine(config._native, str(checkpoint))

    @classmethod
    def from_checkpoint(cls, path, plugin_paths=()):
        """An engine over a checkpoint folder (.../checkpoints/step_N or
        .../latest) and the config it was trained with: generate() and
        evaluate() use it, run() resumes training from it."""
        return cls(HarnessConfig.from_checkpoint(path, plugin_paths), checkpoint=str(path))

    def run(self, overwrite=False):
        """Trains for training.max_steps (or resumes), evaluating and
        checkpointing as configured. Returns 0; raises RunError on failure and
        KeyboardInterrupt after Ctrl-C stopped it (checkpointed)."""
        rc = self._native.run(overwrite)
        if rc == 130:
            raise KeyboardInterrupt("training stopped by a signal after its checkpoint")
        if rc != 0:
            raise RunError(rc, f"the run failed with exit code {rc} (the reason is in the log above and in "
                               f"{self._native.run_dir()}/logs/console.log)")
        return rc

    train = run

    def add_callback(self, callback):
        """`callback` has any of on_step_end(step, metrics), on_eval_end(step,
        metrics) (metrics: dict) and on_checkpoint(path); returning True from
        one stops the run after that step. An exception stops the run: its
        traceback goes to the log and run() raises RunError."""
        if not any(hasattr(callback, m) for m in ("on_step_end", "on_eval_end", "on_checkpoint")):
            raise TypeError("add_callback: the object has none of on_step_end, on_eval_end, on_checkpoint")
        self._native.add_callback(callback)
        return callback

    def evaluate(self, split="val", checkpoint=""):
        """Evaluates a checkpoint (default: Engine.from_checkpoint's, else the
        run's latest) on `split`; returns the metrics dict (loss, perplexity,
        bits_per_byte, ...)."""
        return self._native.evaluate(split, str(checkpoint))

    def generate(self, prompts, max_new_tokens=None, strategy=None, temperature=None, top_k=None, top_p=None,
                 seed=None, stop=None, checkpoint="", presence_penalty=0.0, frequency_penalty=0.0, logit_bias=None):
        """Generates for a prompt (str, or a list of token ids) or a batch (a
        list of them), all at once
        through the server's continuous-batching scheduler. Options default
        to the config's `generation` section; strategy greedy or sample.
        presence_penalty and frequency_penalty (in [-2, 2]) and logit_bias (a
        dict {token id: bias in [-100, 100]}, at most 300) are OpenAI's, by
        the procedure of zcode/generation/generate.h (step 0). The
        ids equal `zcode-host generate`'s for the same options and seed.
        Returns {"text", "ids", "finish_reason"} (a list for a batch)."""
        g = self.config.to_dict().get("generation", {})
        strategy = strategy or g.get("strategy", "greedy")
        if strategy not in ("greedy", "sample"):
            raise ValueError(f"generate: strategy '{strategy}' is not supported here (greedy, sample); "
                             "zcode-host generate has beam and contrastive search")
        p = _zcode._Sampling()
        p.temperature = 0.0 if strategy == "greedy" else float(g.get("temperature", 1.0) if temperature is None
                                                                else temperature)
        p.top_k = int(g.get("top_k", 0) if top_k is None else top_k)
        p.top_p = float(g.get("top_p", 1.0) if top_p is None else top_p)
        if seed is None:
            seed = g.get("seed")
            if seed is None:
                seed = self.config.seed
        p.seed = int(seed)
        p.max_new_tokens = int(g.get("max_new_tokens", 64) if max_new_tokens is None else max_new_tokens)
        p.presence_penalty = _number("presence_penalty", presence_penalty)
        p.frequency_penalty = _number("frequency_penalty", frequency_penalty)
        p.logit_bias = _logit_bias(logit_bias)
        stops = list(g.get("stop", [])) + ([stop] if isinstance(stop, str) else list(stop or []))
        single = isinstance(prompts, str) or (isinstance(prompts, (list, tuple)) and len(prompts) > 0 and
                                              isinstance(prompts[0], int))
        batch = [prompts] if single else [x if isinstance(x, str) else [int(i) for i in x] for x in prompts]
        out = self._native.generate([x if isinstance(x, str) else list(x) for x in batch], p, stops,
                                    str(checkpoint))
        for o in out:
            o["text"] = o["text"].decode("utf-8")
        return out[0] if single else out

    def save_checkpoint(self):
        """Writes a checkpoint of the current state (after run()); returns its folder."""
        return self._native.save_checkpoint()

    @property
    def model(self):
        """The model: the trained one after run(), else the checkpoint's."""
        return Model(self._native.stage("model"))

    @property
    def tokenizer(self):
        return Tokenizer(self._native.stage("tokenizer"))

    @property
    def run_dir(self):
        return self._native.run_dir()
