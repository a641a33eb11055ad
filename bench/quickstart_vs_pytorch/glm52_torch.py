#!/usr/bin/python3
"""GLM-5.2 for training in PyTorch: the bench's fast, faithful peer of the glm52 plugin.

Same math as the specification (plugins/model/glm52/README.md) and its float64
reference (tests/reference/glm52_reference.py), written for speed the way a
PyTorch user would: fused QKV and W1|W3 projections, grouped-query attention
without expanding K/V, and batched expert dispatch (one index_select, two bmm
over a [experts, capacity, d_model] buffer, one index_add) instead of per-token
or per-expert Python loops. Parameters are stored fused; `state_dict_spec()`
and `load_spec()` convert from and to the spec's tensor names, so the
weights of a ZCode run load here and the result is comparable name by name.

Any dtype works (float32 for the bench, float64 for the noise floor and the
reference check). `check_reference()` compares this forward and its gradients
with the reference on small random cases. For inference (bench/decode):
`logits()` is the full recompute and `new_cache()` + `extend()` the KV-cache
decode (a prefill, then one token per sequence per step), both with the
plugin's inference semantics (dropless MoE); `check_decode()` compares the
cached decode with the recompute and the recompute with the reference. Run
as a script it runs both checks: exit 0 when they match, 1 otherwise.

Torch 1.13 (Debian's python3-torch): no scaled_dot_product_attention, no
nn.RMSNorm, so attention and norms are explicit.
"""

import math
import os
import sys

import torch
import torch.nn.functional as F


class NotSupported(ValueError):
    """A model option this bench implementation does not implement (one line)."""


class Spec:
    """Resolved architecture, from the model's info_json (quickstart_dump's model.json).

    Keys as in the README's config options, with explicit dims (no variant
    table here). Derived values follow the README: R = 2·floor(rotary_fraction·hd/2),
    Vp = V rounded up to 128, DeepNet α = (2L)^(1/4), β = (8L)^(-1/4)
    (Wang et al. 2022); when info_json carries them they must agree.
    Raises NotSupported for dynamic_head_mask.enabled (not implemented here).
    """

    def __init__(self, info):
        g = info.get
        self.V = int(info["vocab_size"])
        self.Vp = -(-self.V // 128) * 128
        self.d = int(info["d_model"])
        self.L = int(info["n_layers"])
        self.H = int(info["n_heads"])
        self.Hkv = int(info["n_kv_heads"])
        self.hd = int(info["head_dim"])
        self.first_dense = int(g("first_dense_layers", 0))
        self.ffn_hidden = int(g("ffn_hidden") or 0)
        self.E = int(g("moe_experts") or 0)
        self.k = int(g("moe_top_k") or 0)
        self.F = int(g("moe_ffn_hidden") or 0)
        self.shared = int(g("moe_shared_experts", 0) or 0)
        self.capacity_factor = float(g("capacity_factor", 1.25))
        self.aux_coef = float(g("moe_aux_loss_coef", 0.01))
        self.z_coef = float(g("moe_z_loss_coef", 0.001))
        self.norm_topk_prob = bool(g("norm_topk_prob", True))
        self.router = g("router_activation", "softmax")
        self.rope_theta = float(g("rope_theta", 10000.0))
        self.R = 2 * math.floor(float(g("rotary_fraction", 1.0)) * self.hd / 2)
        self.norm = g("norm", "scalenorm")
        self.residual = g("residual", "deepnorm")
        self.eps = float(g("norm_eps", 1e-6))
        self.tie = bool(g("tie_embeddings", True))
        dhm = g("dynamic_head_mask") or {}
        if dhm.get("enabled", False):
            raise NotSupported("model.dynamic_head_mask.enabled: true is not implemented in the bench's PyTorch model")
        deep = self.residual == "deepnorm"
        self.alpha = (2.0 * self.L) ** 0.25 if deep else 1.0
        self.beta = (8.0 * self.L) ** -0.25 if deep else 1.0
        for key, mine in (("vocab_padded", self.Vp), ("rotary_dims", self.R),
                          ("deepnorm_alpha", self.alpha), ("deepnorm_beta", self.beta)):
            if key in info and abs(float(info[key]) - mine) > 1e-12 * max(1.0, abs(mine)):
                raise NotSupported(f"model info {key}: {info[key]} differs from the spec's {mine}")
        if self.H % self.Hkv:
            raise NotSupported(f"model.n_kv_heads: {self.Hkv} does not divide n_heads {self.H}")

    def is_moe(self, layer):
        return self.E > 0 and layer >= self.first_dense


def _glu_fused(x, w13, w2, hidden):
    """GLU FFN with SiLU (Shazeer 2020, eq. 6): W2·(SiLU(W1·x) ⊙ W3·x), W1|W3 fused [2F, d]. x [n, d]."""
    h = x @ w13.t()
    return (F.silu(h[:, :hidden]) * h[:, hidden:]) @ w2.t()


class GLM52(torch.nn.Module):
    """The model; `forward(ids, targets, doc_ids, normalizer)` returns (loss, parts).

    ids, targets int64 [B, T] (targets −1 = excluded); doc_ids int64 [B, T] or
    None (cross-document attention). normalizer = target tokens of the step.
    loss = ce + aux + z exactly as the README's Loss section; parts holds the
    three terms as floats.
    """

    def __init__(self, spec, dtype=torch.float32):
        super().__init__()
        s = self.spec = spec
        P = torch.nn.Parameter
        z = lambda *shape: P(torch.zeros(*shape, dtype=dtype))  # noqa: E731  (filled by load_spec)
        gshape = (1,) if s.norm == "scalenorm" else (s.d,)
        self.embed = z(s.Vp, s.d)
        self.lm_head = None if s.tie else z(s.Vp, s.d)
        self.layers = torch.nn.ModuleList()
        for layer in range(s.L):
            m = torch.nn.Module()
            m.attn_norm, m.ffn_norm = z(*gshape), z(*gshape)
            m.wqkv = z((s.H + 2 * s.Hkv) * s.hd, s.d)
            m.wo = z(s.d, s.H * s.hd)
            m.rope = z(s.R // 2)
            if s.is_moe(layer):
                m.router = z(s.E, s.d)
                m.w13 = z(s.E, 2 * s.F, s.d)  # experts' W1|W3, [E, 2F, d]
                m.w2 = z(s.E, s.d, s.F)
                m.shared13 = torch.nn.ParameterList([z(2 * s.F, s.d) for _ in range(s.shared)])
                m.shared2 = torch.nn.ParameterList([z(s.d, s.F) for _ in range(s.shared)])
            else:
                m.w13 = z(2 * s.ffn_hidden, s.d)
                m.w2 = z(s.d, s.ffn_hidden)
            self.layers.append(m)
        self.norm_f = z(*gshape) if s.residual == "prenorm" else None
        self.dtype = dtype

    # ---- names of the spec <-> fused storage ---------------------------------

    def _views(self):
        """(spec name, parameter, slice function) for every spec tensor."""
        s = self.spec
        out = [("embed.weight", self.embed, lambda t: t)]
        if self.lm_head is not None:
            out.append(("lm_head.weight", self.lm_head, lambda t: t))
        q, kv = s.H * s.hd, s.Hkv * s.hd
        for layer, m in enumerate(self.layers):
            p = f"layers.{layer}."
            out += [(p + "attn_norm.weight", m.attn_norm, lambda t: t),
                    (p + "attn.wq", m.wqkv, lambda t: t[:q]),
                    (p + "attn.wk", m.wqkv, lambda t: t[q:q + kv]),
                    (p + "attn.wv", m.wqkv, lambda t: t[q + kv:]),
                    (p + "attn.wo", m.wo, lambda t: t),
                    (p + "attn.rope_log_inv_freq", m.rope, lambda t: t),
                    (p + "ffn_norm.weight", m.ffn_norm, lambda t: t)]
            if s.is_moe(layer):
                out.append((p + "moe.router", m.router, lambda t: t))
                for e in range(s.E):
                    q_ = f"{p}moe.experts.{e}."
                    out += [(q_ + "w1", m.w13, lambda t, e=e: t[e, :s.F]),
                            (q_ + "w3", m.w13, lambda t, e=e: t[e, s.F:]),
                            (q_ + "w2", m.w2, lambda t, e=e: t[e])]
                for e in range(s.shared):
                    q_ = f"{p}moe.shared.{e}."
                    out += [(q_ + "w1", m.shared13[e], lambda t: t[:s.F]),
                            (q_ + "w3", m.shared13[e], lambda t: t[s.F:]),
                            (q_ + "w2", m.shared2[e], lambda t: t)]
            else:
                f = s.ffn_hidden
                out += [(p + "ffn.w1", m.w13, lambda t, f=f: t[:f]),
                        (p + "ffn.w3", m.w13, lambda t, f=f: t[f:]),
                        (p + "ffn.w2", m.w2, lambda t: t)]
        if self.norm_f is not None:
            out.append(("norm_f.weight", self.norm_f, lambda t: t))
        return out

    def load_spec(self, tensors):
        """Copies spec-named arrays (numpy or tensors) into the fused parameters.

        Raises ValueError naming a missing, unexpected or wrongly shaped tensor.
        """
        views = self._views()
        names = {n for n, _, _ in views}
        extra = sorted(set(tensors) - names)
        if extra:
            raise ValueError(f"weights: unexpected tensor '{extra[0]}' (not a parameter of this model)")
        with torch.no_grad():
            for name, param, view in views:
                if name not in tensors:
                    raise ValueError(f"weights: missing tensor '{name}'")
                dst = view(param.data)
                src = torch.as_tensor(tensors[name])
                if tuple(src.shape) != tuple(dst.shape):
                    raise ValueError(f"weights: '{name}' has shape {list(src.shape)}, expected {list(dst.shape)}")
                dst.copy_(src.to(self.dtype))

    def spec_tensors(self, grads=False):
        """{spec name: tensor} of the values (or the gradients, zeros where None)."""
        out = {}
        for name, param, view in self._views():
            src = param.grad if grads else param.data
            if src is None:
                src = torch.zeros_like(param.data)
            out[name] = view(src).detach().clone()
        return out

    def param_groups(self, weight_decay, decay_embeddings=False):
        """AdamW groups with the optimizers plugin's rules (plugins/optimizer/optimizers/param_groups.h):
        norm gains and RoPE frequencies never decay (ZC_PARAM_NO_DECAY), the embedding/LM head only
        with decay_embeddings (ZC_PARAM_EMBEDDING), everything else (attention, router, experts,
        dense FFN) decays by weight_decay."""
        no_decay, decay = [], []
        for m in self.layers:
            no_decay += [m.attn_norm, m.ffn_norm, m.rope]
        if self.norm_f is not None:
            no_decay.append(self.norm_f)
        emb = [self.embed] + ([self.lm_head] if self.lm_head is not None else [])
        (decay if decay_embeddings else no_decay).extend(emb)
        ids = {id(p) for p in no_decay + decay}
        decay += [p for p in self.parameters() if id(p) not in ids]
        return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]

    # ---- blocks ---------------------------------------------------------------

    def _norm(self, x, g):
        """ScaleNorm (Nguyen & Salazar 2019, eq. 4) g·x/sqrt(Σx² + eps), or RMSNorm
        (Zhang & Sennrich 2019) w ⊙ x/sqrt(mean x² + eps). x [..., d]."""
        if self.spec.norm == "scalenorm":
            return x * (g * torch.rsqrt((x * x).sum(-1, keepdim=True) + self.spec.eps))
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.spec.eps) * g

    def _rope(self, x, log_inv_freq, pos0=0):
        """RoPE v2 (Su et al. 2021, eq. 34; half-split pairs i, i+R/2) with learnable
        log-frequencies. x [B, T, heads, hd] at positions pos0 .. pos0+T-1."""
        half = log_inv_freq.shape[0]
        if half == 0:
            return x
        t = torch.arange(pos0, pos0 + x.shape[1], dtype=x.dtype)
        theta = t[:, None] * torch.exp(log_inv_freq)[None, :]  # [T, R/2]
        cos, sin = torch.cos(theta)[:, None, :], torch.sin(theta)[:, None, :]
        x1, x2, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)

    def _attention(self, m, x, mask):
        """Causal grouped-query attention (Vaswani et al. 2017, eq. 1; Ainslie et al. 2023).

        x [B, T, d] -> [B, T, d]. Query head h reads KV head h // g, g = H/Hkv:
        the g query heads of a KV head are stacked along the time axis
        ([B, Hkv, g·T, hd]) so K and V are never copied per query head.
        mask bool [B or 1, 1, 1, T, T], True = may attend.
        """
        s = self.spec
        B, T, _ = x.shape
        g = s.H // s.Hkv
        qkv = x @ m.wqkv.t()
        q = qkv[..., :s.H * s.hd].view(B, T, s.H, s.hd)
        k = qkv[..., s.H * s.hd:(s.H + s.Hkv) * s.hd].view(B, T, s.Hkv, s.hd)
        v = qkv[..., (s.H + s.Hkv) * s.hd:].view(B, T, s.Hkv, s.hd)
        q = self._rope(q, m.rope)
        k = self._rope(k, m.rope)
        q = q.view(B, T, s.Hkv, g, s.hd).permute(0, 2, 3, 1, 4).reshape(B, s.Hkv, g * T, s.hd)
        k = k.permute(0, 2, 3, 1)  # [B, Hkv, hd, T]
        v = v.permute(0, 2, 1, 3)  # [B, Hkv, T, hd]
        scores = (q @ k).view(B, s.Hkv, g, T, T) * (1.0 / math.sqrt(s.hd))
        scores = scores.masked_fill(~mask, float("-inf"))
        prob = torch.softmax(scores, dim=-1).view(B, s.Hkv, g * T, T)
        o = (prob @ v).view(B, s.Hkv, g, T, s.hd).permute(0, 3, 1, 2, 4).reshape(B, T, s.H * s.hd)
        return o @ m.wo.t()

    def _moe(self, m, x, capacity_factor=None, stats=True):
        """Top-k MoE FFN (Shazeer et al. 2017) with capacity (Fedus et al. 2021).

        x [B, T, d] -> ([B, T, d], aux_l, zsum_l). Assignments are ordered rank
        r = 0..k-1 (outer), token n (inner); an expert keeps its first C =
        ceil(capacity_factor·N·k/E) (all when capacity_factor <= 0; None:
        the spec's training capacity_factor, inference passes 0). Kept
        tokens are gathered into a [E, C, d] buffer (unused slots read a zero
        row), two bmm compute W1|W3 and W2 for all experts at once, and an
        index_add scatters gate·y back. aux_l = E·Σ_e f_e·P_e (Switch
        Transformer eq. 4, f_e a constant count); zsum_l = Σ_n logsumexp(z_n)²
        (ST-MoE eq. 5); both None when stats is false (inference).
        """
        s = self.spec
        cf = s.capacity_factor if capacity_factor is None else capacity_factor
        B, T, d = x.shape
        N, E, k = B * T, s.E, s.k
        xf = x.reshape(N, d)
        z = xf @ m.router.t()  # [N, E]
        p = torch.softmax(z, -1) if s.router == "softmax" else torch.sigmoid(z)
        topv, idx = torch.topk(p, k, dim=-1)  # [N, k]; exact ties are the only order difference
        gate = topv / topv.sum(-1, keepdim=True) if s.norm_topk_prob else topv
        with torch.no_grad():
            flat_e = idx.t().reshape(-1)  # [k·N], rank-major priority order
            onehot = F.one_hot(flat_e, E)
            pos = (onehot.cumsum(0) * onehot).sum(-1) - 1  # slot of each assignment in its expert
            counts = onehot.sum(0)
            if cf > 0:
                cap = math.ceil(cf * N * k / E)
                keep = pos < cap
            else:
                cap = int(counts.max())
                keep = torch.ones_like(pos, dtype=torch.bool)
            flat_tok = torch.arange(N).repeat(k)
            kept = keep.nonzero().squeeze(1)
            slot = flat_e[kept] * cap + pos[kept]
            tok = flat_tok[kept]
            gather = torch.full((E * cap,), N, dtype=torch.int64)
            gather[slot] = tok
        xpad = torch.cat([xf, xf.new_zeros(1, d)])
        disp = xpad.index_select(0, gather).view(E, cap, d)
        h = torch.bmm(disp, m.w13.transpose(1, 2))  # [E, C, 2F]
        y = torch.bmm(F.silu(h[..., :s.F]) * h[..., s.F:], m.w2.transpose(1, 2)).view(E * cap, d)
        w = gate.t().reshape(-1)[kept]
        out = xf.new_zeros(N, d).index_add(0, tok, y.index_select(0, slot) * w[:, None])
        for e in range(s.shared):
            out = out + _glu_fused(xf, m.shared13[e], m.shared2[e], s.F)
        if not stats:
            return out.view(B, T, d), None, None
        f = counts.to(x.dtype) / (N * k)
        pn = p if s.router == "softmax" else p / p.sum(1, keepdim=True)
        aux_l = E * (f * pn.mean(0)).sum()
        zsum_l = torch.logsumexp(z, -1).pow(2).sum()
        return out.view(B, T, d), aux_l, zsum_l

    def _block(self, m, h, attn, ffn):
        """One layer around its attention and FFN functions (the plugin README, forward pass 2):
        deepnorm (DeepNet, Wang et al. 2022) h = Norm(α·h + f(h)) for both
        sub-blocks; prenorm h = h + f(Norm(h))."""
        s = self.spec
        if s.residual == "deepnorm":
            h = self._norm(s.alpha * h + attn(h), m.attn_norm)
            return self._norm(s.alpha * h + ffn(h), m.ffn_norm)
        h = h + attn(self._norm(h, m.attn_norm))
        return h + ffn(self._norm(h, m.ffn_norm))

    # ---- model -------------------------------------------------------------------

    def forward(self, ids, targets, doc_ids, normalizer):
        s = self.spec
        B, T = ids.shape
        mask = torch.ones(T, T, dtype=torch.bool).tril()  # key j <= query t
        if doc_ids is not None:
            mask = mask[None] & (doc_ids[:, :, None] == doc_ids[:, None, :])
            mask = mask[:, None, None]
        else:
            mask = mask[None, None, None]
        h = F.embedding(ids, self.embed)
        auxes, zsums = [], []
        for layer, m in enumerate(self.layers):
            def ffn(x):
                if not s.is_moe(layer):
                    return _glu_fused(x.reshape(B * T, s.d), m.w13, m.w2, s.ffn_hidden).view(B, T, s.d)
                y, aux_l, zsum_l = self._moe(m, x)
                auxes.append(aux_l)
                zsums.append(zsum_l)
                return y
            h = self._block(m, h, lambda x: self._attention(m, x, mask), ffn)
        if self.norm_f is not None:
            h = self._norm(h, self.norm_f)
        head = self.embed if self.lm_head is None else self.lm_head
        # Columns >= V are −inf in the spec: they take no probability and no
        # gradient, which is the same as leaving them out of the softmax.
        logits = h.reshape(B * T, s.d) @ head[:s.V].t()
        ce = F.cross_entropy(logits, targets.reshape(-1), ignore_index=-1, reduction="sum") / normalizer
        zero = logits.new_zeros(())
        aux = s.aux_coef * sum(auxes, zero) * (B * T) / normalizer
        zl = s.z_coef * sum(zsums, zero) / normalizer
        loss = ce + aux + zl
        return loss, {"ce_loss": float(ce), "aux_loss": float(aux), "z_loss": float(zl)}

    # ---- inference: full recompute and KV-cache decoding ------------------------
    #
    # As the glm52 plugin's forward_logits and decode_step (its README, "MoE at
    # evaluation"): the MoE is dropless, so a token's logits never depend on
    # the other tokens of the call, and greedy decoding with the cache equals
    # greedy decoding by recompute; one sequence is one document (causal mask
    # only). dynamic_head_mask is refused by Spec, so attention has no head
    # mask here either.

    def _ffn_infer(self, layer, m, x):
        """The layer's FFN at inference, x [B, T, d] -> [B, T, d]: the dense GLU, or
        the dropless MoE: with fewer tokens than experts (a decode step at a small
        batch) a loop over the experts the tokens chose, which reads only their
        weights; otherwise the batched dispatch of _moe with capacity 0."""
        s = self.spec
        B, T, d = x.shape
        if not s.is_moe(layer):
            return _glu_fused(x.reshape(B * T, d), m.w13, m.w2, s.ffn_hidden).view(B, T, d)
        if B * T >= s.E:
            return self._moe(m, x, capacity_factor=0.0, stats=False)[0]
        xf = x.reshape(B * T, d)
        z = xf @ m.router.t()
        p = torch.softmax(z, -1) if s.router == "softmax" else torch.sigmoid(z)
        topv, idx = torch.topk(p, s.k, dim=-1)
        gate = (topv / topv.sum(-1, keepdim=True) if s.norm_topk_prob else topv).reshape(-1)
        out = xf.new_zeros(B * T, d)
        for e in range(s.shared):
            out += _glu_fused(xf, m.shared13[e], m.shared2[e], s.F)
        flat = idx.reshape(-1)  # assignment a = token·k + rank
        for e in flat.unique().tolist():
            sel = (flat == e).nonzero().squeeze(1)
            tok = sel // s.k
            y = _glu_fused(xf.index_select(0, tok), m.w13[e], m.w2[e], s.F)
            out.index_add_(0, tok, y * gate[sel, None])
        return out.view(B, T, d)

    def _attention_cached(self, m, x, kc, vc, pos0):
        """_attention for T new positions pos0 .. pos0+T-1 of every sequence, with
        the keys (after RoPE) and values of positions < pos0 in kc, vc [B, Hkv,
        max_len, hd]; writes this call's keys and values there. Position pos0+t
        attends to keys 0 .. pos0+t (no mask needed when T = 1). x [B, T, d]."""
        s = self.spec
        B, T, _ = x.shape
        g = s.H // s.Hkv
        end = pos0 + T
        qkv = x @ m.wqkv.t()
        # RoPE on the query and key heads in one call (one cos/sin table).
        qk = self._rope(qkv[..., :(s.H + s.Hkv) * s.hd].view(B, T, s.H + s.Hkv, s.hd), m.rope, pos0)
        q = qk[:, :, :s.H]
        kc[:, :, pos0:end] = qk[:, :, s.H:].permute(0, 2, 1, 3)
        vc[:, :, pos0:end] = qkv[..., (s.H + s.Hkv) * s.hd:].view(B, T, s.Hkv, s.hd).permute(0, 2, 1, 3)
        q = q.view(B, T, s.Hkv, g, s.hd).permute(0, 2, 3, 1, 4).reshape(B, s.Hkv, g * T, s.hd)
        scores = (q @ kc[:, :, :end].transpose(2, 3)).view(B, s.Hkv, g, T, end) * (1.0 / math.sqrt(s.hd))
        if T > 1:
            mask = torch.arange(end)[None, :] <= torch.arange(pos0, end)[:, None]  # [T, end]
            scores = scores.masked_fill(~mask, float("-inf"))
        prob = torch.softmax(scores, dim=-1).view(B, s.Hkv, g * T, end)
        o = (prob @ vc[:, :, :end]).view(B, s.Hkv, g, T, s.hd).permute(0, 3, 1, 2, 4).reshape(B, T, s.H * s.hd)
        return o @ m.wo.t()

    def _head(self, h):
        """Final norm (prenorm) and the LM head over the real vocab: h [..., d] -> [..., V]."""
        if self.norm_f is not None:
            h = self._norm(h, self.norm_f)
        head = self.embed if self.lm_head is None else self.lm_head
        return h @ head[:self.spec.V].t()

    @torch.inference_mode()
    def logits(self, ids):
        """Next-token logits [B, T, V] of ids int64 [B, T] by full recompute (no
        cache): dropless MoE, causal mask, as the plugin's forward_logits."""
        T = ids.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool).tril()[None, None, None]
        h = F.embedding(ids, self.embed)
        for layer, m in enumerate(self.layers):
            h = self._block(m, h, lambda x: self._attention(m, x, mask), lambda x: self._ffn_infer(layer, m, x))
        return self._head(h)

    @torch.inference_mode()
    def new_cache(self, batch, max_len):
        """An empty KVCache for `batch` sequences of at most max_len tokens."""
        return KVCache(self.spec, batch, max_len, self.dtype)

    @torch.inference_mode()
    def extend(self, ids, cache, all_logits=False):
        """Appends ids int64 [B, T] to every sequence of `cache` and returns the
        next-token logits of the last new position, [B, V] ([B, T, V] of all of
        them with all_logits). T ≥ 1: a whole prompt (prefill) or one token per
        sequence (a decode step). New position t sits at cache.length + t for
        RoPE and attends to the cached keys and to the new ones up to itself.
        Raises ValueError when B is not the cache's batch or the cache is full."""
        B, T = ids.shape
        pos0 = cache.length
        if B != cache.batch or T < 1 or pos0 + T > cache.max_len:
            raise ValueError(f"extend: ids [{B}, {T}] do not fit a cache of batch {cache.batch} with "
                             f"{cache.max_len - pos0} free positions")
        h = F.embedding(ids, self.embed)
        for layer, m in enumerate(self.layers):
            kc, vc = cache.k[layer], cache.v[layer]
            h = self._block(m, h, lambda x: self._attention_cached(m, x, kc, vc, pos0),
                            lambda x: self._ffn_infer(layer, m, x))
        cache.length = pos0 + T
        return self._head(h if all_logits else h[:, -1])


class KVCache:
    """Keys (after RoPE) and values of every layer for `batch` sequences of at
    most max_len tokens: k[l], v[l] [batch, Hkv, max_len, hd]. `length`
    positions are filled, the same number in every sequence."""

    def __init__(self, spec, batch, max_len, dtype):
        shape = (batch, spec.Hkv, max_len, spec.hd)
        self.k = [torch.zeros(shape, dtype=dtype) for _ in range(spec.L)]
        self.v = [torch.zeros(shape, dtype=dtype) for _ in range(spec.L)]
        self.batch, self.max_len, self.length = batch, max_len, 0


# ------------------------------------------------------------------------------
# Check against the float64 reference
# ------------------------------------------------------------------------------

def _reference_module():
    here = os.path.dirname(os.path.abspath(__file__))
    ref_dir = os.path.join(here, "..", "..", "tests", "reference")
    sys.path.insert(0, os.path.abspath(ref_dir))
    import glm52_reference  # noqa: E402
    return glm52_reference


# Small cases: the quickstart's block structure (scalenorm, deepnorm, softmax
# router, tied, one dense layer, capacity drops) and every other option.
CHECK_CASES = [
    ("quickstart-like", dict(vocab_size=300, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, head_dim=8,
                             ffn_hidden=48, moe_experts=8, moe_top_k=2, moe_ffn_hidden=24, first_dense_layers=1,
                             capacity_factor=1.25, moe_aux_loss_coef=0.01, moe_z_loss_coef=0.001,
                             rope_theta=10000.0, rotary_fraction=1.0), dict(docs=1, no_doc_ids=True)),
    ("other-options", dict(vocab_size=260, d_model=24, n_layers=2, n_heads=6, n_kv_heads=3, head_dim=4,
                           ffn_hidden=40, moe_experts=4, moe_top_k=2, moe_ffn_hidden=16, moe_shared_experts=1,
                           first_dense_layers=0, capacity_factor=0.0, moe_aux_loss_coef=0.05,
                           moe_z_loss_coef=0.01, norm_topk_prob=False, router_activation="sigmoid",
                           rope_theta=500.0, rotary_fraction=0.5, norm="rmsnorm", residual="prenorm",
                           tie_embeddings=False), dict(docs=3, no_doc_ids=False)),
]


def check_reference(verbose=True):
    """Loss and gradients of GLM52 (float64 and float32) against the reference (float64).

    Returns (ok, lines). Tolerances: float64 1e-10 relative (same math, other
    reduction order); float32 2e-5 relative on the loss and 1e-3 of the
    largest gradient per tensor.
    """
    ref = _reference_module()
    ok, lines = True, []
    for name, opts, bopts in CHECK_CASES:
        cfg = ref.Config(opts)
        g = torch.Generator().manual_seed(7)
        W = {n: v.to(torch.float64) for n, v in ref.comparison_params(cfg, g).items()}
        ids, tg, docs = ref.make_batch(cfg, g, 3, 24, bopts["docs"])
        ids_t, tg_t = torch.from_numpy(ids).long(), torch.from_numpy(tg).long()
        doc_t = None if bopts["no_doc_ids"] else torch.from_numpy(docs).long()
        norm = float((tg_t != -1).sum())
        P = {n: v.clone().requires_grad_(True) for n, v in W.items()}
        loss_ref, _, metrics = ref.loss_and_metrics(cfg, P, ids_t, tg_t, doc_t, norm)
        dropped = metrics.get("moe_dropped_fraction", 0.0)
        loss_ref.backward()
        for dtype, rtol_loss, gtol in ((torch.float64, 1e-10, 1e-10), (torch.float32, 2e-5, 1e-3)):
            info = dict(opts, vocab_size=cfg.vocab_size)
            model = GLM52(Spec(info), dtype)
            model.load_spec({n: v.detach().numpy() for n, v in W.items()})
            loss, _ = model(ids_t, tg_t, doc_t, norm)
            loss.backward()
            grads = model.spec_tensors(grads=True)
            rel = abs(float(loss) - float(loss_ref)) / abs(float(loss_ref))
            worst, worst_name = 0.0, ""
            for n, p in P.items():
                scale = float(p.grad.abs().max()) or 1.0
                err = float((grads[n].double() - p.grad).abs().max()) / scale
                if err > worst:
                    worst, worst_name = err, n
            good = rel <= rtol_loss and worst <= gtol
            ok &= good
            lines.append(f"reference check {name} {str(dtype).replace('torch.', '')} (dropped {dropped:.3f}): loss {float(loss):.10f} vs "
                         f"{float(loss_ref):.10f} (rel {rel:.1e}, tol {rtol_loss:.0e}), worst gradient "
                         f"{worst:.1e} of max|g| ({worst_name}, tol {gtol:.0e}) {'ok' if good else 'FAIL'}")
    if verbose:
        print("\n".join(lines))
    return ok, lines


# The KV-cache check adds a dense-only model to the two cases above (whose
# MoE layers have experts > the decode batch, so a decode step takes the
# per-expert loop of _ffn_infer and the prefill the batched dispatch).
DECODE_CASES = CHECK_CASES + [
    ("dense", dict(vocab_size=300, d_model=32, n_layers=2, n_heads=4, n_kv_heads=4, head_dim=8, ffn_hidden=48,
                   first_dense_layers=2, rope_theta=10000.0, rotary_fraction=1.0), {}),
]


def check_decode(verbose=True):
    """The KV-cache decode (extend) against the full recompute (logits), and that against the reference.

    Per case, batch 3, 20 tokens, weights from the reference's comparison_params
    (jittered RoPE frequencies and gains): (1) logits() against the
    reference's logits_of with dropless MoE (capacity_factor 0, as inference
    runs); (2) a prefill of 7 tokens, one extend of 3 (several new positions
    over a filled cache), then 10 single-token steps, each call's logits
    against logits() of the same prefix. Error = max |Δ| / max |logit|;
    tolerance 1e-10 in float64, 1e-4 in float32 (against the float64
    recompute). Returns (ok, lines).
    """
    ref = _reference_module()
    ok, lines = True, []
    B, T, chunks = 3, 20, [7, 3] + [1] * 10
    for name, opts, _ in DECODE_CASES:
        cfg = ref.Config(opts)
        cfg0 = ref.Config(dict(opts, capacity_factor=0.0) if cfg.has_moe else opts)
        g = torch.Generator().manual_seed(11)
        W = {n: v.to(torch.float64) for n, v in ref.comparison_params(cfg, g).items()}
        ids = torch.randint(0, cfg.vocab_size, (B, T), generator=g)
        with torch.no_grad():
            want = ref.logits_of(cfg0, W, ids, None)[0][..., :cfg.vocab_size]
        scale = float(want.abs().max())
        full = {}
        for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
            model = GLM52(Spec(dict(opts, vocab_size=cfg.vocab_size)), dtype)
            model.load_spec({n: v.numpy() for n, v in W.items()})
            got = model.logits(ids)
            err_full = float((got.double() - want).abs().max()) / scale
            if dtype == torch.float64:
                full = {t: model.logits(ids[:, :t]) for t in range(1, sum(chunks) + 1)}
            cache = model.new_cache(B, T)
            err_dec, t0 = 0.0, 0
            for n in chunks:
                out = model.extend(ids[:, t0:t0 + n], cache, all_logits=True)
                exp = full[t0 + n][:, t0:t0 + n]  # float64 recompute of the same prefix
                err_dec = max(err_dec, float((out.double() - exp).abs().max()) / scale)
                t0 += n
            good = err_full <= tol and err_dec <= tol
            ok &= good
            lines.append(f"decode check {name} {str(dtype).replace('torch.', '')}: recompute vs reference {err_full:.1e}, "
                         f"KV cache ({'+'.join(map(str, chunks[:2]))}+1x{len(chunks) - 2} tokens) vs recompute "
                         f"{err_dec:.1e} of max|logit| {scale:.2f} (tol {tol:.0e}) {'ok' if good else 'FAIL'}")
    if verbose:
        print("\n".join(lines))
    return ok, lines


if __name__ == "__main__":
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    ok_ref = check_reference()[0]
    ok_dec = check_decode()[0]
    sys.exit(0 if ok_ref and ok_dec else 1)
