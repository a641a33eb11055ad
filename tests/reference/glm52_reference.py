#!/usr/bin/python3
"""Independent PyTorch reference of the GLM-5.2 model.

Written from the specification in plugins/model/glm52/README.md only (not
from the C++ plugin), in plain PyTorch ops, float64, with autograd for the
gradients. The C++ comparison tests (tests/model_reference/) run it as a
subprocess; tests/reference/test_glm52_reference.py checks it on its own.

Command line (run with Debian's /usr/bin/python3, which has torch):

  compute the loss, metrics, per-token log-probabilities and gradients:
    glm52_reference.py --config C.json --weights W.safetensors \
                       --batch B.safetensors --out R.safetensors
  make random test weights and a random batch for a config (add --out R to
  also compute on them in the same process):
    glm52_reference.py --config C.json --make-weights W.safetensors \
                       --make-batch B.safetensors --seed 1 \
                       --batch-size 2 --seq-len 16 --docs 3

Files:
  C.json  the `model` options object exactly as the C++ model receives it as
          options_json, with "vocab_size" (normally from the tokenizer).
  W       fp32 parameters under the README's tensor names.
  B       int32 `input_ids`, `targets` (-1 = excluded) [batch, seq], and
          optionally `doc_ids` [batch, seq] (absent = cross-document attention
          allowed, like zc_batch.doc_ids.data == NULL). __metadata__
          "loss_normalizer" (decimal; default: the batch's target count).
  R       F64 gradients under the parameter names, F64 `logprobs` [batch, seq]
          (0 where target == -1); __metadata__ holds every metric as a decimal
          string ("loss", "ce_loss", "aux_loss", "z_loss", "moe_load_<e>",
          "moe_dropped_fraction", "masked_head_fraction", "tokens") and two
          diagnostics for the fp32-vs-fp64 comparison: "min_topk_gap" (the
          smallest gap between adjacent router probabilities among the first
          k+1 ranks, over tokens and MoE layers; a tie within fp32 rounding
          could pick other experts in fp32) and "min_entropy_margin" (smallest
          |entropy - entropy_threshold| of the dynamic head mask).

Exit status: 0 success, 1 runtime failure, 2 bad input (one line on stderr).
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the test command installs python3-torch; fail loudly
    sys.stderr.write(f"glm52_reference: cannot import torch ({e}); install Debian's python3-torch "
                     "(scripts/install-deps.sh) and run with /usr/bin/python3\n")
    sys.exit(1)

DT = torch.float64


class InputError(ValueError):
    """Bad config, weights or batch: the message is one actionable line."""


# --------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------

_KEYS = {"type", "variant", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_hidden",
         "moe_experts", "moe_top_k", "moe_ffn_hidden", "moe_shared_experts", "first_dense_layers",
         "capacity_factor", "moe_aux_loss_coef", "moe_z_loss_coef", "norm_topk_prob",
         "router_activation", "max_seq_len", "rope_theta", "rotary_fraction", "norm", "residual",
         "norm_eps", "tie_embeddings", "dynamic_head_mask", "vocab_size"}


def _canon(name):
    return name.lower().replace("-", "_")


class Config:
    """The resolved `model` section.

    The reference has no variant table (it belongs to the implementation), so
    every dim without a default in the spec must be given explicitly. Spec
    defaults: norm scalenorm, residual deepnorm, norm_eps 1e-6,
    router_activation softmax, norm_topk_prob true, moe_shared_experts 0,
    tie_embeddings true, dynamic_head_mask.enabled false.
    Raises InputError naming `model.<key>`, the value found and the expectation.
    """

    def __init__(self, opts):
        if not isinstance(opts, dict):
            raise InputError(f"model: expected a JSON object, found {type(opts).__name__}")
        for key in opts:
            if key not in _KEYS:
                raise InputError(f"model.{key}: unknown option (expected one of {sorted(_KEYS)})")
        if "type" in opts and _canon(str(opts["type"])) not in ("glm52", "glm5pt2"):
            raise InputError(f"model.type: '{opts['type']}' is not glm52 (alias GLM5pt2)")
        if opts.get("variant") is not None:
            raise InputError("model.variant: the reference has no variant table; give explicit dims")

        def num(key, kind=int, default=None, minimum=None, maximum=None, required=True):
            v = opts.get(key, default)
            if v is None:
                if required:
                    raise InputError(f"model.{key}: missing (the reference needs it explicitly)")
                return None
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
            if kind is int:
                ok = ok and float(v).is_integer()
            if not ok:
                raise InputError(f"model.{key}: expected {'an integer' if kind is int else 'a number'}, found {v!r}")
            v = kind(v)
            if minimum is not None and v < minimum:
                raise InputError(f"model.{key}: {v} is below the minimum {minimum}")
            if maximum is not None and v > maximum:
                raise InputError(f"model.{key}: {v} is above the maximum {maximum}")
            return v

        def choice(key, default, allowed):
            v = opts.get(key, default)
            if not isinstance(v, str) or _canon(v) not in allowed:
                raise InputError(f"model.{key}: {v!r} is not one of {list(allowed)}")
            return _canon(v)

        def flag(key, default):
            v = opts.get(key, default)
            if not isinstance(v, bool):
                raise InputError(f"model.{key}: expected true or false, found {v!r}")
            return v

        self.vocab_size = num("vocab_size", minimum=1)
        self.padded_vocab = -(-self.vocab_size // 128) * 128
        self.d_model = num("d_model", minimum=1)
        self.n_layers = num("n_layers", minimum=1)
        self.n_heads = num("n_heads", minimum=1)
        self.n_kv_heads = num("n_kv_heads", minimum=1)
        if self.n_heads % self.n_kv_heads:
            raise InputError(f"model.n_kv_heads: {self.n_kv_heads} does not divide n_heads {self.n_heads}")
        self.head_dim = num("head_dim", minimum=1)
        self.first_dense_layers = num("first_dense_layers", minimum=0, maximum=self.n_layers)
        self.has_dense = self.first_dense_layers > 0
        self.has_moe = self.first_dense_layers < self.n_layers
        self.ffn_hidden = num("ffn_hidden", minimum=1, required=self.has_dense)
        self.moe_experts = num("moe_experts", minimum=1, required=self.has_moe)
        self.moe_top_k = num("moe_top_k", minimum=1, maximum=self.moe_experts, required=self.has_moe)
        self.moe_ffn_hidden = num("moe_ffn_hidden", minimum=1, required=self.has_moe)
        self.moe_shared_experts = num("moe_shared_experts", default=0, minimum=0)
        self.capacity_factor = num("capacity_factor", float, required=self.has_moe)
        self.moe_aux_loss_coef = num("moe_aux_loss_coef", float, minimum=0, required=self.has_moe)
        self.moe_z_loss_coef = num("moe_z_loss_coef", float, minimum=0, required=self.has_moe)
        self.norm_topk_prob = flag("norm_topk_prob", True)
        self.router_activation = choice("router_activation", "softmax", ("softmax", "sigmoid"))
        self.max_seq_len = num("max_seq_len", minimum=1, required=False)
        self.rope_theta = num("rope_theta", float, minimum=1e-300)
        self.rotary_fraction = num("rotary_fraction", float, minimum=0, maximum=1)
        self.rotary_dims = 2 * math.floor(self.rotary_fraction * self.head_dim / 2)
        self.norm = choice("norm", "scalenorm", ("scalenorm", "rmsnorm"))
        self.residual = choice("residual", "deepnorm", ("deepnorm", "prenorm"))
        self.norm_eps = num("norm_eps", float, default=1e-6, minimum=0)
        self.tie_embeddings = flag("tie_embeddings", True)
        dhm = opts.get("dynamic_head_mask", {}) or {}
        if not isinstance(dhm, dict) or set(dhm) - {"enabled", "entropy_threshold"}:
            raise InputError(f"model.dynamic_head_mask: expected {{enabled, entropy_threshold}}, found {dhm!r}")
        self.head_mask = dhm.get("enabled", False)
        if not isinstance(self.head_mask, bool):
            raise InputError(f"model.dynamic_head_mask.enabled: expected true or false, found {self.head_mask!r}")
        self.entropy_threshold = None
        if self.head_mask:
            t = dhm.get("entropy_threshold")
            if not isinstance(t, (int, float)) or isinstance(t, bool):
                raise InputError(f"model.dynamic_head_mask.entropy_threshold: expected a number, found {t!r}")
            self.entropy_threshold = float(t)
        # DeepNet (Wang et al. 2022), decoder-only: alpha = (2L)^(1/4), beta = (8L)^(-1/4).
        deep = self.residual == "deepnorm"
        self.alpha = (2.0 * self.n_layers) ** 0.25 if deep else 1.0
        self.beta = (8.0 * self.n_layers) ** -0.25 if deep else 1.0

    def is_moe_layer(self, layer):
        return layer >= self.first_dense_layers


# --------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------

def param_shapes(cfg):
    """Ordered {name: shape} of every parameter, names and shapes from the README table."""
    d, hd = cfg.d_model, cfg.head_dim
    norm_shape = [1] if cfg.norm == "scalenorm" else [d]
    s = {"embed.weight": [cfg.padded_vocab, d]}
    if not cfg.tie_embeddings:
        s["lm_head.weight"] = [cfg.padded_vocab, d]
    for l in range(cfg.n_layers):
        p = f"layers.{l}."
        s[p + "attn_norm.weight"] = norm_shape
        s[p + "attn.wq"] = [cfg.n_heads * hd, d]
        s[p + "attn.wk"] = [cfg.n_kv_heads * hd, d]
        s[p + "attn.wv"] = [cfg.n_kv_heads * hd, d]
        s[p + "attn.wo"] = [d, cfg.n_heads * hd]
        s[p + "attn.rope_log_inv_freq"] = [cfg.rotary_dims // 2]
        s[p + "ffn_norm.weight"] = norm_shape
        if not cfg.is_moe_layer(l):
            f = cfg.ffn_hidden
            s[p + "ffn.w1"], s[p + "ffn.w3"], s[p + "ffn.w2"] = [f, d], [f, d], [d, f]
        else:
            f = cfg.moe_ffn_hidden
            s[p + "moe.router"] = [cfg.moe_experts, d]
            for e in range(cfg.moe_experts):
                q = f"{p}moe.experts.{e}."
                s[q + "w1"], s[q + "w3"], s[q + "w2"] = [f, d], [f, d], [d, f]
            for e in range(cfg.moe_shared_experts):
                q = f"{p}moe.shared.{e}."
                s[q + "w1"], s[q + "w3"], s[q + "w2"] = [f, d], [f, d], [d, f]
    if cfg.residual == "prenorm":
        s["norm_f.weight"] = norm_shape
    return s


def rope_init(cfg):
    """rope_log_inv_freq init, [R/2]: -(2i/R)·ln(rope_theta) (README, Attention)."""
    r = cfg.rotary_dims
    i = torch.arange(r // 2, dtype=DT)
    return -(2.0 * i / r) * math.log(cfg.rope_theta) if r else i


def init_params(cfg, generator):
    """Parameters as the README's Init section draws them (float64 here).

    Xavier-normal std = gain·sqrt(2/(fan_in+fan_out)) (Glorot & Bengio 2010),
    gain beta for wv, wo and FFN/expert matrices, 1 for wq, wk; router and
    embedding (and the untied head) std 0.02; scalenorm g = sqrt(d), rmsnorm
    w = 1; RoPE as rope_init.
    """
    out = {}
    for name, shape in param_shapes(cfg).items():
        if name.endswith("norm.weight") or name == "norm_f.weight":
            v = torch.full(shape, math.sqrt(cfg.d_model) if cfg.norm == "scalenorm" else 1.0, dtype=DT)
        elif name.endswith("rope_log_inv_freq"):
            v = rope_init(cfg)
        elif name in ("embed.weight", "lm_head.weight") or name.endswith("moe.router"):
            v = 0.02 * torch.randn(shape, dtype=DT, generator=generator)
        else:
            gain = 1.0 if name.endswith(("attn.wq", "attn.wk")) else cfg.beta
            std = gain * math.sqrt(2.0 / (shape[0] + shape[1]))
            v = std * torch.randn(shape, dtype=DT, generator=generator)
        out[name] = v
    return out


def comparison_params(cfg, generator):
    """Random weights for comparisons: the init, made less symmetric.

    Gains and RoPE frequencies are jittered (their gradients then differ per
    element), and the embedding/router are larger than their init so that
    attention is peaked (entropies spread on both sides of a threshold) and
    router probabilities are well separated (no near-ties in top-k).
    """
    p = init_params(cfg, generator)
    for name, v in p.items():
        shape = list(v.shape)
        if name.endswith("norm.weight") or name == "norm_f.weight":
            p[name] = v * (1.0 + 0.2 * (torch.rand(shape, dtype=DT, generator=generator) - 0.5))
        elif name.endswith("rope_log_inv_freq"):
            p[name] = v + 0.1 * torch.randn(shape, dtype=DT, generator=generator)
        elif name in ("embed.weight", "lm_head.weight"):
            p[name] = 0.5 * torch.randn(shape, dtype=DT, generator=generator)
        elif name.endswith("moe.router"):
            p[name] = 0.5 * torch.randn(shape, dtype=DT, generator=generator)
        elif not name.endswith(("attn.wq", "attn.wk")):
            p[name] = v / cfg.beta  # gain 1: layers contribute visibly
    return p


# --------------------------------------------------------------------------
# Blocks (each a plain function of tensors; autograd gives the backward)
# --------------------------------------------------------------------------

def scale_norm(x, g, eps):
    """ScaleNorm (Nguyen & Salazar 2019, eq. 4): g·x/sqrt(sum_i x_i^2 + eps).

    x [..., d]; g [1]. Returns [..., d].
    """
    return g * x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def rms_norm(x, w, eps):
    """RMSNorm (Zhang & Sennrich 2019, eq. 4): w ⊙ x/sqrt(mean_i x_i^2 + eps). x [..., d]; w [d]."""
    return w * x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def norm(cfg, x, w):
    return scale_norm(x, w, cfg.norm_eps) if cfg.norm == "scalenorm" else rms_norm(x, w, cfg.norm_eps)


def rope(x, log_inv_freq):
    """RoPE v2 (Su et al. 2021, eq. 34, half-split pairing) with learnable log-frequencies.

    x [B, T, heads, hd]; log_inv_freq [R/2]. Dims 0..R-1 rotate, the rest pass.
    For position t and pair i: θ = t·exp(log_inv_freq[i]);
    y_i = x_i cos θ − x_{i+R/2} sin θ, y_{i+R/2} = x_{i+R/2} cos θ + x_i sin θ.
    """
    half = log_inv_freq.shape[0]
    if half == 0:
        return x
    t = torch.arange(x.shape[1], dtype=DT)
    theta = t[:, None] * torch.exp(log_inv_freq)[None, :]  # [T, R/2]
    cos = torch.cos(theta)[None, :, None, :]
    sin = torch.sin(theta)[None, :, None, :]
    x1, x2, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def attention(cfg, P, pre, x, doc_ids, stats):
    """Causal grouped-query attention with RoPE v2, document mask and dynamic head mask.

    x [B, T, d] -> [B, T, d]. doc_ids [B, T] int or None (no document mask).
    Scores q·kᵀ/sqrt(hd) (Vaswani et al. 2017, eq. 1); query head h reads kv
    head h // (H/Hkv) (Ainslie et al. 2023). Head mask: a (token, head) whose
    attention entropy −Σ P ln P (nats) exceeds the threshold outputs 0; the
    mask is a constant in backward.
    """
    B, T, _ = x.shape
    H, Hkv, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    q = (x @ P[pre + "attn.wq"].t()).view(B, T, H, hd)
    k = (x @ P[pre + "attn.wk"].t()).view(B, T, Hkv, hd)
    v = (x @ P[pre + "attn.wv"].t()).view(B, T, Hkv, hd)
    q = rope(q, P[pre + "attn.rope_log_inv_freq"])
    k = rope(k, P[pre + "attn.rope_log_inv_freq"])
    kv_of_head = torch.arange(H) // (H // Hkv)
    k, v = k[:, :, kv_of_head], v[:, :, kv_of_head]  # [B, T, H, hd]
    s = torch.einsum("bthd,bjhd->bhtj", q, k) / math.sqrt(hd)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()[None, None]  # key j <= query t
    if doc_ids is not None:
        allowed = allowed & (doc_ids[:, None, :, None] == doc_ids[:, None, None, :])
    s = s.masked_fill(~allowed, float("-inf"))
    prob = torch.softmax(s, dim=-1)  # [B, H, T, T]
    o = torch.einsum("bhtj,bjhd->bthd", prob, v)  # [B, T, H, hd]
    if cfg.head_mask:
        with torch.no_grad():
            entropy = -torch.special.xlogy(prob, prob).sum(-1)  # [B, H, T], 0·ln 0 = 0
            keep = (entropy <= cfg.entropy_threshold).to(DT)
            stats["masked_heads"] += int((keep == 0).sum())
            stats["min_entropy_margin"] = min(stats["min_entropy_margin"],
                                              float((entropy - cfg.entropy_threshold).abs().min()))
        o = o * keep.permute(0, 2, 1)[..., None]
    stats["head_slots"] += B * T * H
    return o.reshape(B, T, H * hd) @ P[pre + "attn.wo"].t()


def glu(x, w1, w3, w2):
    """GLU FFN with SiLU (Shazeer 2020, eq. 6 "SwiGLU"): W2·(SiLU(W1·x) ⊙ W3·x). x [n, d] -> [n, d]."""
    return (F.silu(x @ w1.t()) * (x @ w3.t())) @ w2.t()


def route(cfg, p):
    """Top-k expert choice per token: indices [N, k], lower expert index first on ties.

    p [N, E] router probabilities (only their order is used, no gradient).
    """
    pn = p.detach().numpy()
    order = np.argsort(-pn, axis=1, kind="stable")  # stable: equal p keep index order
    return torch.from_numpy(order[:, :cfg.moe_top_k].copy())


def capacity_keep(cfg, idx):
    """Which (token, rank) assignments fit the expert capacity. idx [N, k] -> bool [N, k].

    C = ceil(capacity_factor·N·k/E); slots are taken in priority order rank
    r = 0..k-1 (outer), token n = 0..N-1 (inner). capacity_factor <= 0 is
    dropless. Returns (keep, C) with C = None when dropless.
    """
    N, k = idx.shape
    E = cfg.moe_experts
    if cfg.capacity_factor <= 0:
        return torch.ones(N, k, dtype=torch.bool), None
    cap = math.ceil(cfg.capacity_factor * N * k / E)
    keep = torch.zeros(N, k, dtype=torch.bool)
    used = [0] * E
    for r in range(k):
        for n in range(N):
            e = int(idx[n, r])
            if used[e] < cap:
                used[e] += 1
                keep[n, r] = True
    return keep, cap


def moe(cfg, P, pre, x, stats):
    """MoE FFN (Shazeer et al. 2017; Fedus et al. 2021): x [B, T, d] -> ([B, T, d], aux_l, zsum_l).

    aux_l = E·Σ_e f_e·P_e (Switch Transformer eq. 4; f_e counts top-k choices
    before capacity, a constant); zsum_l = Σ_n logsumexp(z_n)² (ST-MoE eq. 5,
    before the coefficient and the normaliser).
    """
    B, T, d = x.shape
    N, E, k = B * T, cfg.moe_experts, cfg.moe_top_k
    xf = x.reshape(N, d)
    z = xf @ P[pre + "moe.router"].t()  # [N, E]
    p = torch.softmax(z, -1) if cfg.router_activation == "softmax" else torch.sigmoid(z)
    idx = route(cfg, p)
    sel = p.gather(1, idx)  # [N, k]
    gate = sel / sel.sum(1, keepdim=True) if cfg.norm_topk_prob else sel
    keep, _ = capacity_keep(cfg, idx)
    out = torch.zeros(N, d, dtype=DT)
    kept_per_expert = []
    for e in range(E):
        rows, ranks = torch.nonzero(keep & (idx == e), as_tuple=True)
        kept_per_expert.append(int(rows.numel()))
        if rows.numel() == 0:
            continue
        q = f"{pre}moe.experts.{e}."
        y = glu(xf[rows], P[q + "w1"], P[q + "w3"], P[q + "w2"])
        out = out.index_add(0, rows, gate[rows, ranks][:, None] * y)
    for s in range(cfg.moe_shared_experts):
        q = f"{pre}moe.shared.{s}."
        out = out + glu(xf, P[q + "w1"], P[q + "w3"], P[q + "w2"])
    f = torch.bincount(idx.reshape(-1), minlength=E).to(DT) / (N * k)  # constant: a count
    pn = p if cfg.router_activation == "softmax" else p / p.sum(1, keepdim=True)
    aux_l = E * (f * pn.mean(0)).sum()
    zsum_l = (torch.logsumexp(z, -1) ** 2).sum()
    total_kept = sum(kept_per_expert)
    for e in range(E):
        stats["moe_load"][e] += kept_per_expert[e] / total_kept if total_kept else 0.0
    stats["dropped"] += N * k - total_kept
    stats["assignments"] += N * k
    with torch.no_grad():
        ranked = torch.sort(p.detach(), dim=1, descending=True).values[:, :min(k + 1, E)]
        if ranked.shape[1] > 1:
            stats["min_topk_gap"] = min(stats["min_topk_gap"],
                                        float((ranked[:, :-1] - ranked[:, 1:]).min()))
    return out.view(B, T, d), aux_l, zsum_l


# --------------------------------------------------------------------------
# Model: forward and loss
# --------------------------------------------------------------------------

def logits_of(cfg, P, input_ids, doc_ids, stats=None):
    """Forward pass to padded logits [B, T, Vp] (columns >= V are −inf).

    Also returns the per-MoE-layer aux_l and zsum_l lists. input_ids int64
    [B, T] in [0, V); doc_ids int64 [B, T] or None.
    """
    if stats is None:
        stats = new_stats(cfg)
    B, T = input_ids.shape
    h = P["embed.weight"][input_ids]
    auxes, zsums = [], []

    def ffn(l, x):
        pre = f"layers.{l}."
        if not cfg.is_moe_layer(l):
            return glu(x, P[pre + "ffn.w1"], P[pre + "ffn.w3"], P[pre + "ffn.w2"])
        y, aux_l, zsum_l = moe(cfg, P, pre, x, stats)
        auxes.append(aux_l)
        zsums.append(zsum_l)
        return y

    for l in range(cfg.n_layers):
        pre = f"layers.{l}."
        if cfg.residual == "deepnorm":
            h = norm(cfg, cfg.alpha * h + attention(cfg, P, pre, h, doc_ids, stats), P[pre + "attn_norm.weight"])
            h = norm(cfg, cfg.alpha * h + ffn(l, h), P[pre + "ffn_norm.weight"])
        else:
            h = h + attention(cfg, P, pre, norm(cfg, h, P[pre + "attn_norm.weight"]), doc_ids, stats)
            h = h + ffn(l, norm(cfg, h, P[pre + "ffn_norm.weight"]))
    if cfg.residual == "prenorm":
        h = norm(cfg, h, P["norm_f.weight"])
    head = P["embed.weight"] if cfg.tie_embeddings else P["lm_head.weight"]
    logits = h @ head.t()
    pad = torch.arange(cfg.padded_vocab) >= cfg.vocab_size
    return logits.masked_fill(pad, float("-inf")), auxes, zsums


def new_stats(cfg):
    return {"masked_heads": 0, "head_slots": 0, "dropped": 0, "assignments": 0,
            "moe_load": [0.0] * (cfg.moe_experts or 0),
            "min_topk_gap": float("inf"), "min_entropy_margin": float("inf")}


def loss_and_metrics(cfg, P, input_ids, targets, doc_ids, loss_normalizer):
    """The loss forward_backward reports, as a differentiable scalar, with metrics.

    ce = Σ_{targets≠−1} −log softmax(logits)[target] / Nstep;
    aux = moe_aux_loss_coef·Σ_l aux_l·N/Nstep; z = moe_z_loss_coef·Σ_l zsum_l/Nstep
    (README, Loss). Returns (loss, logprobs [B, T] with 0 at excluded targets, metrics dict).
    """
    stats = new_stats(cfg)
    B, T = input_ids.shape
    N = B * T
    logits, auxes, zsums = logits_of(cfg, P, input_ids, doc_ids, stats)
    logp = torch.log_softmax(logits, dim=-1)
    valid = targets != -1
    tok_logp = logp.gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    tok_logp = torch.where(valid, tok_logp, torch.zeros((), dtype=DT))
    ce = -tok_logp.sum() / loss_normalizer
    zero = torch.zeros((), dtype=DT)
    aux = cfg.moe_aux_loss_coef * sum(auxes, zero) * N / loss_normalizer if auxes else zero
    zl = cfg.moe_z_loss_coef * sum(zsums, zero) / loss_normalizer if zsums else zero
    loss = ce + aux + zl
    n_moe = len(auxes)
    m = {"loss": float(loss), "ce_loss": float(ce), "aux_loss": float(aux), "z_loss": float(zl),
         "tokens": float(valid.sum()),
         "masked_head_fraction": stats["masked_heads"] / stats["head_slots"],
         "min_topk_gap": stats["min_topk_gap"], "min_entropy_margin": stats["min_entropy_margin"]}
    if n_moe:
        m["moe_dropped_fraction"] = stats["dropped"] / stats["assignments"]
        for e in range(cfg.moe_experts):
            m[f"moe_load_{e}"] = stats["moe_load"][e] / n_moe
    return loss, tok_logp, m


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------

def load_config(path):
    try:
        with open(path, encoding="utf-8") as f:
            opts = json.load(f)
    except FileNotFoundError:
        raise InputError(f"--config: file '{path}' not found") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}:{e.colno}: {e.msg}") from None
    return Config(opts)


def load_weights(cfg, path):
    """fp32 (or fp64) weights -> float64 leaf tensors requiring grad. Exact names and shapes required."""
    tensors = _load(path, "--weights")
    shapes = param_shapes(cfg)
    for name in tensors:
        if name not in shapes:
            raise InputError(f"{path}: unexpected tensor '{name}' (not a parameter of this config)")
    P = {}
    for name, shape in shapes.items():
        if name not in tensors:
            raise InputError(f"{path}: missing tensor '{name}' (expected shape {shape})")
        t = tensors[name]
        if list(t.shape) != shape:
            raise InputError(f"{path}: tensor '{name}' has shape {list(t.shape)}, expected {shape}")
        if t.dtype not in (np.float32, np.float64):
            raise InputError(f"{path}: tensor '{name}' has dtype {t.dtype}, expected F32")
        P[name] = torch.from_numpy(t.astype(np.float64)).requires_grad_(True)
    return P


def load_batch(cfg, path):
    """Returns input_ids, targets, doc_ids (or None) as int64 [B, T] and the loss normaliser."""
    tensors, meta = _load(path, "--batch", with_meta=True)
    out = []
    for name in ("input_ids", "targets", "doc_ids"):
        t = tensors.get(name)
        if t is None:
            if name == "doc_ids":
                out.append(None)
                continue
            raise InputError(f"{path}: missing tensor '{name}' (int32 [batch, seq])")
        if t.dtype != np.int32 or t.ndim != 2:
            raise InputError(f"{path}: tensor '{name}' is {t.dtype} {list(t.shape)}, expected int32 [batch, seq]")
        out.append(torch.from_numpy(t.astype(np.int64)))
    ids, targets, docs = out
    for name, t in (("targets", targets), ("doc_ids", docs)):
        if t is not None and t.shape != ids.shape:
            raise InputError(f"{path}: '{name}' shape {list(t.shape)} differs from input_ids {list(ids.shape)}")
    V = cfg.vocab_size
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= V):
        raise InputError(f"{path}: input_ids outside [0, {V}): min {int(ids.min())}, max {int(ids.max())}")
    bad = (targets != -1) & ((targets < 0) | (targets >= V))
    if bool(bad.any()):
        raise InputError(f"{path}: target {int(targets[bad][0])} outside [0, {V}) and not -1")
    if cfg.max_seq_len is not None and ids.shape[1] > cfg.max_seq_len:
        raise InputError(f"{path}: seq {ids.shape[1]} exceeds model.max_seq_len {cfg.max_seq_len}")
    count = int((targets != -1).sum())
    try:
        normalizer = float(meta.get("loss_normalizer", count))
    except ValueError:
        raise InputError(f"{path}: __metadata__.loss_normalizer {meta['loss_normalizer']!r} is not a number") from None
    if not normalizer > 0:
        raise InputError(f"{path}: loss_normalizer {normalizer} must be > 0")
    return ids, targets, docs, normalizer


def _load(path, flag, with_meta=False):
    if not os.path.exists(path):
        raise InputError(f"{flag}: file '{path}' not found")
    try:
        tensors, meta = safetensors_io.load(path)
    except safetensors_io.SafetensorsError as e:
        raise InputError(str(e)) from None
    return (tensors, meta) if with_meta else tensors


def make_batch(cfg, generator, batch, seq, docs):
    """Random packed batch: `docs` documents per row (random lengths), next-token targets.

    The last target of every document is −1 (no next token in the document),
    and the last row ends in a padded tail (pad id 0, targets −1). Returns
    int32 numpy input_ids, targets, doc_ids [batch, seq].
    """
    V = cfg.vocab_size
    ids = torch.randint(0, V, (batch, seq), generator=generator)
    doc_ids = torch.zeros(batch, seq, dtype=torch.int64)
    for b in range(batch):
        cuts = torch.randperm(seq - 1, generator=generator)[:docs - 1] + 1 if docs > 1 else torch.zeros(0)
        for c in sorted(int(c) for c in cuts):
            doc_ids[b, c:] += 1
    targets = torch.full((batch, seq), -1, dtype=torch.int64)
    same_doc = doc_ids[:, 1:] == doc_ids[:, :-1]
    targets[:, :-1] = torch.where(same_doc, ids[:, 1:], torch.full_like(ids[:, 1:], -1))
    pad = max(1, seq // 4)
    ids[-1, -pad:] = 0
    targets[-1, -pad - 1:] = -1
    doc_ids[-1, -pad:] = doc_ids[-1, -pad - 1] + 1
    return (ids.to(torch.int32).numpy(), targets.to(torch.int32).numpy(), doc_ids.to(torch.int32).numpy())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="model options JSON (with vocab_size)")
    ap.add_argument("--weights", help="fp32 weights (safetensors) to compute with")
    ap.add_argument("--batch", help="batch (safetensors) to compute on")
    ap.add_argument("--out", help="where to write the reference loss, metrics and grads (safetensors)")
    ap.add_argument("--make-weights", help="write random test weights here")
    ap.add_argument("--make-batch", help="write a random batch here")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--docs", type=int, default=1, help="documents per row (>1 also writes doc_ids)")
    ap.add_argument("--no-doc-ids", action="store_true", help="omit doc_ids (cross-document attention)")
    ap.add_argument("--normalizer-scale", type=float, default=1.0,
                    help="loss_normalizer = scale × target count (as if other micro-batches existed)")
    a = ap.parse_args(argv)
    try:
        cfg = load_config(a.config)
        if a.make_weights or a.make_batch:
            g = torch.Generator().manual_seed(a.seed)
            if a.make_weights:
                W = {k: v.to(torch.float32) for k, v in comparison_params(cfg, g).items()}
                safetensors_io.save(a.make_weights, W)
            if a.make_batch:
                if a.batch_size < 1 or a.seq_len < 2 or not 1 <= a.docs <= a.seq_len - 1:
                    raise InputError(f"--batch-size {a.batch_size} --seq-len {a.seq_len} --docs {a.docs}: "
                                     "expected batch >= 1, seq >= 2, 1 <= docs < seq")
                ids, tg, docs = make_batch(cfg, g, a.batch_size, a.seq_len, a.docs)
                count = int((tg != -1).sum())
                batch = {"input_ids": ids, "targets": tg}
                if not a.no_doc_ids:
                    batch["doc_ids"] = docs
                safetensors_io.save(a.make_batch, batch,
                                    {"loss_normalizer": repr(float(count * a.normalizer_scale))})
            if not a.out:
                return 0
            a.weights = a.weights or a.make_weights
            a.batch = a.batch or a.make_batch
        if not (a.weights and a.batch and a.out):
            raise InputError("--weights, --batch and --out are required (or --make-weights/--make-batch)")
        P = load_weights(cfg, a.weights)
        ids, targets, docs, normalizer = load_batch(cfg, a.batch)
        loss, tok_logp, metrics = loss_and_metrics(cfg, P, ids, targets, docs, normalizer)
        loss.backward()
        out = {name: p.grad if p.grad is not None else torch.zeros_like(p) for name, p in P.items()}
        out["logprobs"] = tok_logp.detach()
        safetensors_io.save(a.out, out, {k: repr(float(v)) for k, v in metrics.items()})
        return 0
    except InputError as e:
        sys.stderr.write(f"glm52_reference: {e}\n")
        return 2
    except OSError as e:
        sys.stderr.write(f"glm52_reference: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
