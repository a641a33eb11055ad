#!/usr/bin/python3
"""The cost model of docs/scaling.md: one GLM-5.2 training step in FLOPs, bytes and time.

Three parts, each a function of the model dims, the batch and the world size:

  1. Work: FLOPs of forward + backward (dense and MoE, causal attention) and
     the parameter counts (total, active, routed experts, the rest).
  2. Bytes moved per rank and step: data-parallel gradient reduction
     (reduce-scatter + all-gather, bucketed: what ZCode's reducer does),
     ZeRO-1 (reduce-scatter of the gradients + all-gather of the parameters)
     and expert-parallel alltoall (dispatch + combine, forward and backward).
  3. Time: (a) this machine (CPU ranks over Open MPI shared memory), with a
     FLOP rate and a per-step fixed cost calibrated on 1-rank steps and the
     reducer's collectives timed alone (bench_mpi_collectives), checked
     against measured 2- and 3-rank steps (--check SUMMARY.json, written by
     run.py); (b) H200 nodes of 8 GPUs over NVLink, InfiniBand between nodes,
     with the stated machine parameters (H200 dict below, sources in
     docs/scaling.md): predicted scaling efficiency of GLM-5.2 base and large
     on 8 to 1,024 GPUs. Part (b) cannot be checked on this machine.

  cost_model.py                      the H200 tables of docs/scaling.md (markdown)
  cost_model.py --check SUMMARY.json this machine: calibration and the 2-/3-rank check
  cost_model.py --mfu 0.6            the H200 tables with another kernel efficiency

Only the standard library; run.py imports it. Exit status 0, or 2 on bad input.
"""

import argparse
import json
import math
import statistics
import sys

# ----------------------------------------------------------------------------
# Model dims
# ----------------------------------------------------------------------------

# plugins/model/glm52/config.cpp's variant table: d_model, n_layers, n_heads,
# n_kv_heads, head_dim, ffn_hidden, moe_experts, moe_top_k, moe_ffn_hidden,
# first_dense_layers, max_seq_len. GPT-2 vocabulary (50257), tied embeddings,
# ScaleNorm, DeepNorm, no shared experts (the variants' defaults).
VARIANTS = {
    "base": (1024, 16, 16, 4, 64, 4096, 64, 2, 512, 1, 4096),
    "large": (2048, 24, 16, 4, 128, 8192, 64, 2, 1024, 1, 8192),
}
# plugins/model/glm52/README.md, "Variants (computed)": total / active parameters.
README_COUNTS = {"base": (1617.0e6, 154.2e6), "large": (9669.1e6, 697.4e6)}


class Dims:
    """A GLM-5.2 architecture; keys as the model's info_json (its resolved "architecture")."""

    def __init__(self, info):
        g = info.get
        self.V = int(info["vocab_size"])
        self.Vp = -(-self.V // 128) * 128
        self.d = int(info["d_model"])
        self.L = int(info["n_layers"])
        self.H = int(info["n_heads"])
        self.Hkv = int(g("n_kv_heads") or self.H)
        self.hd = int(g("head_dim") or self.d // self.H)
        self.ffn = int(g("ffn_hidden") or 0)
        self.E = int(g("moe_experts") or 0)
        self.k = int(g("moe_top_k") or 0)
        self.F = int(g("moe_ffn_hidden") or 0)
        self.shared = int(g("moe_shared_experts") or 0)
        self.first_dense = int(g("first_dense_layers", 0))
        self.seq = int(g("max_seq_len", 1024))
        self.tie = bool(g("tie_embeddings", True))
        self.rmsnorm = g("norm", "scalenorm") == "rmsnorm"
        self.R = 2 * math.floor(float(g("rotary_fraction", 1.0)) * self.hd / 2)

    @classmethod
    def variant(cls, name, vocab=50257):
        d, L, H, Hkv, hd, ffn, E, k, F, fd, T = VARIANTS[name]
        return cls(dict(vocab_size=vocab, d_model=d, n_layers=L, n_heads=H, n_kv_heads=Hkv, head_dim=hd,
                        ffn_hidden=ffn, moe_experts=E, moe_top_k=k, moe_ffn_hidden=F, first_dense_layers=fd,
                        max_seq_len=T))

    def is_moe(self, layer):
        return self.E > 0 and layer >= self.first_dense

    @property
    def moe_layers(self):
        return sum(1 for layer in range(self.L) if self.is_moe(layer))

    def params(self):
        """Counts as Config::count_params: total, active, routed-expert and other (non-expert) parameters."""
        gain = self.d if self.rmsnorm else 1
        other = self.Vp * self.d * (1 if self.tie else 2)
        experts = inactive = 0
        attn = (self.H * self.hd + 2 * self.Hkv * self.hd) * self.d + self.d * self.H * self.hd
        for layer in range(self.L):
            other += 2 * gain + attn + self.R // 2
            if self.is_moe(layer):
                one = 3 * self.F * self.d
                other += self.E * self.d + self.shared * one  # router, shared experts
                experts += self.E * one
                inactive += (self.E - self.k) * one
            else:
                other += 3 * self.ffn * self.d
        total = other + experts
        return dict(total=total, active=total - inactive, experts=experts, other=other)


# ----------------------------------------------------------------------------
# 1. FLOPs
# ----------------------------------------------------------------------------

def flops_per_token(m, seq):
    """Forward and training (forward + backward = 3 × forward) FLOPs per token.

    Matmuls: 2 FLOPs per multiply-add over the weights a token meets: q, k, v,
    o projections; the dense GLU (3·d·ffn) or the router (d·E) plus k routed
    and the shared experts (3·d·F each); the LM head over the V real columns.
    Attention: QKᵀ and PV, 2·2·H·hd per (query, key) pair, causal, so a
    sequence of T tokens has T(T+1)/2 pairs: (T+1)/2 keys per query on
    average. Backward = 2 × forward (input and weight gradients). Norms,
    softmax, RoPE, SiLU and the optimizer are left out (they are memory-bound:
    the time model prices them in bytes, not FLOPs).
    """
    attn_w = (m.H * m.hd + 2 * m.Hkv * m.hd) * m.d + m.d * m.H * m.hd
    mm = 0
    for layer in range(m.L):
        mm += attn_w
        mm += (m.d * m.E + (m.k + m.shared) * 3 * m.d * m.F) if m.is_moe(layer) else 3 * m.d * m.ffn
    mm += m.V * m.d
    fwd = 2.0 * mm + m.L * 4.0 * m.H * m.hd * (seq + 1) / 2.0
    return dict(fwd=fwd, train=3.0 * fwd, matmul_params=mm)


# ----------------------------------------------------------------------------
# 2. Bytes moved per rank and step
# ----------------------------------------------------------------------------

def dp_bytes(n_elems, ranks, elem_bytes):
    """Reduce-scatter + all-gather of n_elems (ring / bucketed): each rank sends, and receives,
    2·(R−1)/R·n·b bytes (the same as one ring allreduce). Buckets change the count of
    collectives (the latency term), not the bytes."""
    return 0.0 if ranks <= 1 else 2.0 * (ranks - 1) / ranks * n_elems * elem_bytes


def zero1_bytes(n_elems, ranks, grad_bytes, param_bytes):
    """ZeRO-1: reduce-scatter of the gradients, (R−1)/R·n·b_grad, then all-gather of the updated
    parameters, (R−1)/R·n·b_param."""
    return 0.0 if ranks <= 1 else (ranks - 1) / ranks * n_elems * (grad_bytes + param_bytes)


def ep_bytes(tokens, m, ep, act_bytes):
    """Expert-parallel alltoall per rank and step: every MoE layer sends each of the rank's
    `tokens` k times (one row of d per routed choice), a fraction (K−1)/K of them to other
    ranks (uniform routing), in four alltoalls: dispatch and combine in forward, and the two
    gradients of those in backward."""
    if ep <= 1:
        return 0.0
    return 4.0 * m.moe_layers * tokens * m.k * m.d * act_bytes * (ep - 1) / ep


def n_buckets(n_elems, elem_bytes, bucket_mb):
    return max(1, math.ceil(n_elems * elem_bytes / (bucket_mb * 1024 * 1024)))


# ----------------------------------------------------------------------------
# 3a. This machine: CPU ranks, Open MPI over shared memory
# ----------------------------------------------------------------------------
#
# One rank with one thread runs `ga` micro-batches of B×T tokens and then the
# per-step work (clip, AdamW, engine): T1(ga) = ga·t_mb + t_fix. A least-squares
# line through the measured 1-rank steps (ga = 1, 2, 3) gives t_mb, hence the
# FLOP rate F = FLOPs(micro-batch)/t_mb, and t_fix, hence an effective memory
# bandwidth for the per-step work, BW = 36 B·P/t_fix (AdamW reads p, g, m, v and
# writes p, m, v: 28 B; the clip norm reads g: 4 B; zeroing g: 4 B).
# R ranks × 1 thread on C cores (data parallel, the reducer of
# core/src/dist/gradient_reducer.cpp):
#   T_R = s·(ga·t_mb + t_fix + t_pack) + t_coll(R),   s = max(1, R/C)
#   t_pack = 16 B·P/BW   (the reducer packs the gradients into its flat buffer and
#                         unpacks them: read 4 + write 4 bytes, twice)
#   t_coll(R) = the reducer's reduce-scatter + all-gather of the flat gradient,
#               timed alone by bench_mpi_collectives for R ranks (a measured
#               machine parameter, like a network bandwidth).
# s models time-sharing (3 ranks on 2 cores). c models the ranks slowing each
# other on a machine whose every core is busy (shared caches and memory, the
# hypervisor): c = the step of a plain 1-rank run while another runs on the
# other core (run.py's 2x1r1t: two at once, no communication) / T1 of its ga,
# measured in the same round (1 where it was not measured, or on one core):
#   T_R = c·s·(ga·t_mb + t_fix + t_pack) + t_coll(R)
# The wait for a rank that is late is not modelled. The check below
# compares with the engine's comm_ms, which since 7ecfaf6 (2026-12-07 22:44
# UTC) excludes that wait (the step's sync_wait_ms); before, it included
# rank 0's share of it.

ADAMW_STEP_BYTES = 36.0
PACK_BYTES = 16.0


def fit_line(points):
    """Least squares y = a + b·x over [(x, y)]: (a, b). Two or more distinct x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        raise ValueError("fit_line: needs two distinct x")
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def calibrate_cpu(m, micro, seq, one_rank_points):
    """one_rank_points: [(ga, step_ms)] of 1 rank × 1 thread. Returns the machine parameters."""
    a, b = fit_line(one_rank_points)
    p = m.params()["total"]
    flops_mb = flops_per_token(m, seq)["train"] * micro * seq
    return dict(t_mb_ms=b, t_fix_ms=a, gflops=flops_mb / (b * 1e-3) / 1e9,
                bw_gbs=ADAMW_STEP_BYTES * p / (a * 1e-3) / 1e9 if a > 0 else float("nan"),
                flops_micro_batch=flops_mb, params=p)


def predict_cpu(cal, ranks, ga, cores, coll_ms, busy=1.0):
    s = max(1.0, ranks / cores)
    c = busy if ranks > 1 else 1.0
    t_pack = cal["t_fix_ms"] * PACK_BYTES / ADAMW_STEP_BYTES if ranks > 1 else 0.0
    compute = c * s * (ga * cal["t_mb_ms"] + cal["t_fix_ms"] + t_pack)
    comm = coll_ms if ranks > 1 else 0.0
    return dict(step_ms=compute + comm, compute_ms=compute, comm_ms=comm, share=s, busy=c)


def busy_factor(cal, pair_parts, cores, alone=None):
    """c of the model above: the median over run.py's two independent runs at once (2x1r1t's
    parts, each {"ga", "median_step_ms"}) of their step / the step of one run alone at that ga:
    `alone[ga]` where it was measured (run.py's 1r1t_ga1 for the pair's ga 1), else the
    calibrated line's (whose error at that ga then lands in c). 1.0 without the pair."""
    if not pair_parts or cores < 2:
        return 1.0
    alone = alone or {}
    return statistics.median(
        p["median_step_ms"] / (alone.get(p["ga"]) or predict_cpu(cal, 1, p["ga"], cores, 0.0)["step_ms"])
        for p in pair_parts)


def check_cpu(summary):
    """The 2- and 3-rank check on run.py's summary JSON: per config and round, the model
    calibrated on that round's 1-rank steps against that round's 2- and 3-rank steps.
    Returns {config: {...}} with per-round rows and medians."""
    out = {}
    cores = summary["conditions"]["cores"]
    micro, seq = summary["micro"], summary["seq"]
    for name, cfg in summary["configs"].items():
        arch = cfg.get("architecture")
        if not arch:
            continue
        m = Dims(arch)
        rows = []
        for rnd in cfg["rounds"]:
            runs = rnd["runs"]
            pts = [(runs[k]["ga"], runs[k]["median_step_ms"]) for k in ("1r1t_ga1", "1r1t", "1r1t_ga3")
                   if k in runs and runs[k].get("ok")]
            if len({x for x, _ in pts}) < 2:
                continue
            cal = calibrate_cpu(m, micro, seq, pts)
            alone = {runs[k]["ga"]: runs[k]["median_step_ms"] for k in ("1r1t_ga1", "1r1t", "1r1t_ga3")
                     if k in runs and runs[k].get("ok")}
            busy = busy_factor(cal, runs.get("2x1r1t", {}).get("parts"), cores, alone)
            row = dict(round=rnd["round"], calibration=cal, busy=busy, checks={})
            for key, ranks in (("2r1t", 2), ("3r1t", 3)):
                r = runs.get(key)
                coll = rnd.get("collectives", {}).get(str(ranks))
                if not r or not r.get("ok") or not coll:
                    continue
                pred = predict_cpu(cal, ranks, r["ga"], cores, coll["median_ms"], busy)
                meas = r["median_step_ms"]
                row["checks"][key] = dict(ranks=ranks, ga=r["ga"], predicted_ms=pred["step_ms"], measured_ms=meas,
                                          error=(pred["step_ms"] - meas) / meas, predicted_comm_ms=pred["comm_ms"],
                                          measured_comm_ms=r.get("median_comm_ms"))
            rows.append(row)
        med = {}
        for key in ("2r1t", "3r1t"):
            errs = [r["checks"][key]["error"] for r in rows if key in r["checks"]]
            if errs:
                med[key] = dict(median_error=statistics.median(errs), worst_error=max(errs, key=abs), n=len(errs))
        out[name] = dict(rounds=rows, summary=med, pooled=pooled_check(m, micro, seq, cores, cfg["rounds"]))
    return out


def pooled_check(m, micro, seq, cores, rounds):
    """The same check on the medians over rounds: the line through the median 1-rank step at each
    accumulation, the median collective time, against the median 2- and 3-rank steps (a round's
    three 1-rank points are few to fit a line through on a drifting machine)."""
    def med_of(key, field="median_step_ms"):
        xs = [r["runs"][key][field] for r in rounds if key in r["runs"] and r["runs"][key].get("ok")]
        return statistics.median(xs) if xs else None
    pts = []
    for key in ("1r1t_ga1", "1r1t", "1r1t_ga3"):
        v = med_of(key)
        if v is not None:
            ga = next(r["runs"][key]["ga"] for r in rounds if key in r["runs"])
            pts.append((ga, v))
    if len({x for x, _ in pts}) < 2:
        return None
    cal = calibrate_cpu(m, micro, seq, pts)
    parts = [p for r in rounds for p in r["runs"].get("2x1r1t", {}).get("parts", [])]
    busy = busy_factor(cal, parts, cores, dict(pts))
    res = dict(points=pts, calibration=cal, busy=busy, checks={})
    for key, ranks in (("2r1t", 2), ("3r1t", 3)):
        meas = med_of(key)
        colls = [r["collectives"][str(ranks)]["median_ms"] for r in rounds if str(ranks) in r.get("collectives", {})]
        if meas is None or not colls:
            continue
        ga = next(r["runs"][key]["ga"] for r in rounds if key in r["runs"])
        pred = predict_cpu(cal, ranks, ga, cores, statistics.median(colls), busy)
        res["checks"][key] = dict(ranks=ranks, ga=ga, predicted_ms=pred["step_ms"], measured_ms=meas,
                                  error=(pred["step_ms"] - meas) / meas, predicted_comm_ms=pred["comm_ms"],
                                  measured_comm_ms=med_of(key, "median_comm_ms"), compute_ms=pred["compute_ms"])
    return res


def print_check(result):
    for name, res in result.items():
        print(f"cost model on this machine, {name}: calibrated per round on 1 rank x 1 thread (ga 1, 2, 3)")
        for row in res["rounds"]:
            c = row["calibration"]
            print(f"  round {row['round']}: micro-batch {c['t_mb_ms']:.0f} ms = {c['gflops']:.1f} GFLOP/s, "
                  f"per-step fixed {c['t_fix_ms']:.0f} ms (= {c['bw_gbs']:.1f} GB/s over "
                  f"{ADAMW_STEP_BYTES:.0f} B/param), busy cores x{row['busy']:.3f}")
            for key, ch in row["checks"].items():
                mc = ch["measured_comm_ms"]
                print(f"    {ch['ranks']} ranks x 1 thread, ga {ch['ga']}: predicted {ch['predicted_ms']:.0f} ms, "
                      f"measured {ch['measured_ms']:.0f} ms, error {100 * ch['error']:+.1f} % "
                      f"(comm: model {ch['predicted_comm_ms']:.0f} ms, engine's comm_ms "
                      f"{'n/a' if mc is None else f'{mc:.0f} ms'})")
        for key, s in res["summary"].items():
            print(f"  {key}: median error {100 * s['median_error']:+.1f} % over {s['n']} round(s), "
                  f"worst {100 * s['worst_error']:+.1f} % (target within 15 %)")
        pooled = res.get("pooled")
        if pooled:
            c = pooled["calibration"]
            pts = ", ".join(f"ga {x}: {y:.0f} ms" for x, y in pooled["points"])
            print(f"  medians over rounds: 1 rank {pts} -> micro-batch {c['t_mb_ms']:.0f} ms = {c['gflops']:.1f} "
                  f"GFLOP/s, per-step fixed {c['t_fix_ms']:.0f} ms, busy cores x{pooled['busy']:.3f}")
            for key, ch in pooled["checks"].items():
                print(f"    {ch['ranks']} ranks: predicted {ch['predicted_ms']:.0f} ms (compute "
                      f"{ch['compute_ms']:.0f}, collectives {ch['predicted_comm_ms']:.0f}), measured "
                      f"{ch['measured_ms']:.0f} ms: error "
                      f"{100 * ch['error']:+.1f} % (target within 15 %)")


# ----------------------------------------------------------------------------
# 3b. H200 nodes (predictions; not checked here)
# ----------------------------------------------------------------------------

H200 = dict(
    peak_bf16=989e12,   # dense BF16 tensor-core FLOP/s (1,979e12 is the 2:4-sparsity figure)
    mfu=0.45,           # fraction of that peak the forward/backward kernels reach (assumption)
    hbm=4.8e12,         # HBM3e bytes/s
    hbm_eff=0.8,        # fraction of HBM bandwidth a streaming optimizer step reaches (assumption)
    nvlink=370e9,       # per-GPU effective NVLink bandwidth of a ring (450 GB/s line rate − protocol)
    ib=46e9,            # per-GPU InfiniBand NDR 400 Gb/s, one ConnectX-7 per GPU, achieved
    alltoall_eff=0.8,   # alltoall bandwidth as a fraction of the link's ring bandwidth (assumption)
    lat_nvl=10e-6,      # per hop of a collective inside a node, s (assumption)
    lat_ib=20e-6,       # per hop across nodes, s (assumption)
    gpus_per_node=8,
    mem=141e9,          # HBM capacity, bytes
)
# Bytes per parameter of the optimizer step: fp32 master, m and v read and written (24),
# the bf16 gradient read twice (grad norm, update: 4), the bf16 parameter written (2).
OPT_BYTES = 30.0


def coll_time(nbytes, group, hw, kind="allreduce"):
    """Time of one collective over `group` GPUs packed onto nodes of 8 (NVLink inside, IB between).

    allreduce (reduce-scatter + all-gather): inside a node 2·(G−1)/G·S/nvlink; across n
    nodes the two-level algorithm: reduce-scatter and all-gather inside each node
    (2·7/8·S/nvlink) and an allreduce of each GPU's S/8 across the n nodes over its own
    NIC (2·(n−1)/n·(S/8)/ib). half = one of reduce-scatter or all-gather (half of that).
    Latency: 2·log2(G) hops (tree-like), a fraction at IB latency when it spans nodes.
    """
    if group <= 1 or nbytes <= 0:
        return 0.0
    g8 = hw["gpus_per_node"]
    if group <= g8:
        t = 2.0 * (group - 1) / group * nbytes / hw["nvlink"]
        lat = 2 * math.log2(group) * hw["lat_nvl"]
    else:
        nodes = group / g8
        t = 2.0 * (g8 - 1) / g8 * nbytes / hw["nvlink"] + 2.0 * (nodes - 1) / nodes * (nbytes / g8) / hw["ib"]
        lat = 2 * math.log2(g8) * hw["lat_nvl"] + 2 * math.log2(nodes) * hw["lat_ib"]
    if kind == "half":
        return (t + lat) / 2.0
    return t + lat


def alltoall_time(nbytes_out, ep, hw):
    """One rank's alltoall over an expert group of `ep` GPUs: the (K−1)/K of its bytes that leave
    it (already counted in nbytes_out) go over NVLink to the ranks of its node and over its one
    NIC to the others (an alltoall cannot spread one GPU's traffic over the node's NICs)."""
    if ep <= 1 or nbytes_out <= 0:
        return 0.0
    g8 = hw["gpus_per_node"]
    in_node = min(ep, g8)
    per_peer = nbytes_out / (ep - 1)
    t_nvl = per_peer * (in_node - 1) / (hw["nvlink"] * hw["alltoall_eff"])
    t_ib = per_peer * (ep - in_node) / (hw["ib"] * hw["alltoall_eff"]) if ep > g8 else 0.0
    return max(t_nvl, t_ib) + (hw["lat_ib"] if ep > g8 else hw["lat_nvl"])


def memory_per_gpu(m, ranks, zero, ep, grad_bytes=2, param_bytes=2):
    """Model and optimizer state bytes per GPU, activations excluded: the parameters this GPU
    holds in bf16 (param_bytes) with their gradients (grad_bytes, bf16 as in llm.c), plus 12 B
    of fp32 master weight and Adam m, v per parameter, sharded over the data-parallel replicas
    of each parameter with ZeRO-1. EP divides the routed experts by K."""
    p = m.params()
    held = p["other"] + p["experts"] / ep
    opt = 12.0 * (p["other"] / (ranks if zero else 1) + p["experts"] / ep / (max(1, ranks // ep) if zero else 1))
    return (grad_bytes + param_bytes) * held + opt


def predict_h200(m, ranks, tokens_per_gpu, seq, zero=False, ep=1, hw=H200, grad_bytes=2, param_bytes=2,
                 bucket_mb=25.0, overlap=True):
    """Step time and efficiency of data parallel (+ ZeRO-1) (+ expert parallel K = ep) on `ranks` H200s.

    compute = FLOPs/token × tokens/GPU / (peak × mfu); backward is 2/3 of it.
    DP: gradients of the non-expert parameters reduce over all ranks, those of a rank's
    experts over the ranks/ep replicas of them; bf16 (grad_bytes). With ZeRO-1: reduce-scatter
    + all-gather of the parameters (param_bytes); without: allreduce.
    overlap=True: the reduce-scatter (or allreduce) of all buckets but the last runs under the
    backward pass, and the ZeRO-1 all-gather under the next forward; only what does not fit in
    that window is exposed. overlap=False: every byte is exposed.
    EP alltoall: not overlapped. Optimizer: OPT_BYTES per parameter this GPU updates, at
    hbm·hbm_eff. Efficiency = (the same step with free communication) / (the step): the
    weak-scaling efficiency of the layout, 1.0 when no communication is exposed.
    """
    p = m.params()
    f = flops_per_token(m, seq)["train"] * tokens_per_gpu
    t_comp = f / (hw["peak_bf16"] * hw["mfu"])
    t_bwd = t_comp * 2.0 / 3.0
    t_fwd = t_comp / 3.0
    dp_exp = max(1, ranks // ep)
    n_other, n_exp = p["other"], p["experts"] / ep
    # DP reduction (two groups: all ranks for the rest, ranks/ep for a rank's experts).
    if zero:
        t_rs = coll_time(n_other * grad_bytes, ranks, hw, "half") + coll_time(n_exp * grad_bytes, dp_exp, hw, "half")
        t_ag = coll_time(n_other * param_bytes, ranks, hw, "half") + coll_time(n_exp * param_bytes, dp_exp, hw, "half")
    else:
        t_rs = coll_time(n_other * grad_bytes, ranks, hw) + coll_time(n_exp * grad_bytes, dp_exp, hw)
        t_ag = 0.0
    buckets = n_buckets(n_other + n_exp, grad_bytes, bucket_mb)
    if overlap:
        last = t_rs / buckets
        exposed_dp = last + max(0.0, t_rs - last - t_bwd) + max(0.0, t_ag - t_fwd)
    else:
        exposed_dp = t_rs + t_ag
    t_ep = 4 * m.moe_layers * alltoall_time(ep_bytes(tokens_per_gpu, m, ep, 2) / (4 * max(1, m.moe_layers)), ep, hw) \
        if ep > 1 else 0.0
    held = n_other + n_exp
    updated = (n_other / ranks + n_exp / dp_exp) if zero else held
    t_opt = OPT_BYTES * updated / (hw["hbm"] * hw["hbm_eff"])
    step = t_comp + exposed_dp + t_ep + t_opt
    ideal = t_comp + t_opt
    return dict(step_s=step, compute_s=t_comp, dp_s=t_rs + t_ag, exposed_dp_s=exposed_dp, ep_s=t_ep, opt_s=t_opt,
                efficiency=ideal / step, mem_gb=memory_per_gpu(m, ranks, zero, ep, grad_bytes, param_bytes) / 1e9,
                dp_bytes=(zero1_bytes(n_other, ranks, grad_bytes, param_bytes) + zero1_bytes(n_exp, dp_exp, grad_bytes,
                                                                                           param_bytes))
                if zero else dp_bytes(n_other, ranks, grad_bytes) + dp_bytes(n_exp, dp_exp, grad_bytes),
                ep_bytes=ep_bytes(tokens_per_gpu, m, ep, 2))


WORLDS = (8, 16, 32, 64, 128, 256, 512, 1024)
# Layouts of the tables: name, ZeRO-1, expert-parallel K.
LAYOUTS = (("DP", False, 1), ("DP+ZeRO-1", True, 1), ("ZeRO-1+EP8", True, 8), ("ZeRO-1+EP64", True, 64))


def table_weak(name, tokens_per_gpu, hw, gb=2):
    m = Dims.variant(name)
    p = m.params()
    fl = flops_per_token(m, m.seq)
    lines = [f"**GLM-5.2 {name}**: {p['total'] / 1e9:.2f} B parameters ({p['active'] / 1e6:.0f} M active, routed "
             f"experts {p['experts'] / 1e9:.2f} B), seq {m.seq}, {fl['train'] / 1e9:.2f} GFLOP/token (train), "
             f"{tokens_per_gpu:,} tokens per GPU per step (weak scaling: the global batch grows with the GPUs).",
             "",
             "| layout | state GB/GPU (first → 1,024 GPUs) | " + " | ".join(str(w) for w in WORLDS) + " |",
             "| --- | --- | " + " | ".join("---" for _ in WORLDS) + " |"]
    for label, zero, ep in LAYOUTS:
        for overlap in (True, False):
            cells = []
            mems = []
            for w in WORLDS:
                if ep > w:
                    cells.append("—")
                    continue
                r = predict_h200(m, w, tokens_per_gpu, m.seq, zero=zero, ep=ep, hw=hw, overlap=overlap, grad_bytes=gb)
                mems.append(r["mem_gb"])
                fits = r["mem_gb"] <= hw["mem"] / 1e9
                cells.append(f"{r['efficiency']:.2f}" + ("" if fits else "*"))
            mem_s = f"{mems[0]:.0f} → {mems[-1]:.0f}" if abs(mems[0] - mems[-1]) >= 0.5 else f"{mems[0]:.0f}"
            lines.append(f"| {label}, {'overlapped' if overlap else 'not overlapped'} | {mem_s} | " +
                         " | ".join(cells) + " |")
    return "\n".join(lines)


def table_breakdown(name, tokens_per_gpu, hw, gb=2):
    m = Dims.variant(name)
    lines = [f"Step-time breakdown, GLM-5.2 {name}, {tokens_per_gpu:,} tokens/GPU (ms; DP exposed with overlap):", "",
             "| layout | GPUs | compute | DP bytes/GPU | DP time (exposed) | EP bytes/GPU | EP alltoall | optimizer "
             "| step | efficiency |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, zero, ep in LAYOUTS:
        for w in (8, 64, 1024):
            if ep > w:
                continue
            r = predict_h200(m, w, tokens_per_gpu, m.seq, zero=zero, ep=ep, hw=hw, grad_bytes=gb)
            lines.append(f"| {label} | {w} | {1e3 * r['compute_s']:.0f} | {r['dp_bytes'] / 1e9:.2f} GB | "
                         f"{1e3 * r['dp_s']:.0f} ({1e3 * r['exposed_dp_s']:.0f}) | {r['ep_bytes'] / 1e9:.2f} GB | "
                         f"{1e3 * r['ep_s']:.0f} | {1e3 * r['opt_s']:.1f} | {1e3 * r['step_s']:.0f} | "
                         f"{r['efficiency']:.2f} |")
    return "\n".join(lines)


def table_strong(name, global_tokens, hw, gb=2):
    m = Dims.variant(name)
    lines = [f"GLM-5.2 {name}, global batch fixed at {global_tokens:,} tokens ({global_tokens // m.seq} sequences "
             f"of {m.seq}); ZeRO-1 + EP8, overlapped. Efficiency against 8 GPUs' per-GPU throughput:", "",
             "| GPUs | " + " | ".join(str(w) for w in WORLDS) + " |",
             "| --- | " + " | ".join("---" for _ in WORLDS) + " |"]
    base = None
    cells, tok_cells = [], []
    for w in WORLDS:
        if global_tokens // m.seq < w:
            cells.append("—")
            tok_cells.append("—")
            continue
        t = global_tokens / w
        r = predict_h200(m, w, t, m.seq, zero=True, ep=8, hw=hw, grad_bytes=gb)
        thr = t / r["step_s"]
        base = thr if base is None else base
        cells.append(f"{thr / base:.2f}")
        tok_cells.append(f"{t:,.0f}")
    lines.append("| tokens/GPU | " + " | ".join(tok_cells) + " |")
    lines.append("| efficiency | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table_sensitivity(tokens_per_gpu, hw):
    """Efficiency on 64 and 1,024 GPUs (overlapped) as the kernel efficiency and the gradient width vary."""
    lines = [f"Sensitivity, {tokens_per_gpu:,} tokens/GPU, overlapped; efficiency on 64 / 1,024 GPUs:", "",
             "| model | layout | mfu 0.30, bf16 grads | mfu 0.45, bf16 | mfu 0.60, bf16 | mfu 0.45, fp32 grads |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name in ("base", "large"):
        m = Dims.variant(name)
        for label, zero, ep in LAYOUTS:
            cells = []
            for mfu, gb in ((0.30, 2), (0.45, 2), (0.60, 2), (0.45, 4)):
                h = dict(hw, mfu=mfu)
                e = [predict_h200(m, w, tokens_per_gpu, m.seq, zero=zero, ep=ep, hw=h, grad_bytes=gb)["efficiency"]
                     for w in (64, 1024)]
                cells.append(f"{e[0]:.2f} / {e[1]:.2f}")
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bench_dims_bytes():
    """Bytes per rank for the bench's dims (bench/common/glm52_bench.h, vocab of the GPT-2 BPE as ZCode
    loads it: 50268) on this machine: fp32 gradients, 25 MiB buckets."""
    rows = ["| config | parameters | GFLOP per micro-batch (4×256) | ranks | DP bytes/rank/step | buckets |",
            "| --- | --- | --- | --- | --- | --- |"]
    for name, extra in (("dense", dict(ffn_hidden=683, first_dense_layers=4)),
                        ("moe", dict(moe_experts=8, moe_top_k=2, moe_ffn_hidden=512, first_dense_layers=0))):
        info = dict(vocab_size=50268, d_model=256, n_layers=4, n_heads=4, max_seq_len=256, **extra)
        m = Dims(info)
        p = m.params()["total"]
        f = flops_per_token(m, 256)["train"] * 4 * 256 / 1e9
        for r in (2, 3):
            rows.append(f"| {name} | {p / 1e6:.2f} M | {f:.1f} | {r} | {dp_bytes(p, r, 4) / 1e6:.1f} MB | "
                        f"{n_buckets(p, 4, 25)} |")
    return "\n".join(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", metavar="SUMMARY.json", help="run.py's summary: calibrate and check on this machine")
    ap.add_argument("--mfu", type=float, default=H200["mfu"], help="H200 kernel efficiency (fraction of peak)")
    ap.add_argument("--tokens-per-gpu", type=int, default=16384)
    ap.add_argument("--grad-bytes", type=int, choices=(2, 4), default=2,
                    help="bytes of a gradient on the wire and in memory: 2 (bf16, llm.c) or 4 (fp32)")
    a = ap.parse_args(argv)
    if a.check:
        try:
            with open(a.check, encoding="utf-8") as fh:
                summary = json.load(fh)
        except (OSError, json.JSONDecodeError) as e:
            sys.stderr.write(f"cost_model: --check {a.check}: {e}\n")
            return 2
        print_check(check_cpu(summary))
        return 0
    if not 0 < a.mfu <= 1:
        sys.stderr.write("cost_model: --mfu must be in (0, 1]\n")
        return 2
    hw = dict(H200, mfu=a.mfu)
    for name, (tot, act) in README_COUNTS.items():
        p = Dims.variant(name).params()
        if abs(p["total"] - tot) > 0.06e6 or abs(p["active"] - act) > 0.06e6:
            sys.stderr.write(f"cost_model: {name} counts {p['total']}, {p['active']} differ from the README's\n")
            return 2
    print("Bench dims on this machine (fp32 gradients, 25 MiB buckets):\n")
    print(bench_dims_bytes())
    print(f"\nH200 predictions (mfu {hw['mfu']}, {'bf16' if a.grad_bytes == 2 else 'fp32'} gradients, bf16 parameters; "
          "* = model and optimizer state alone exceed 141 GB):\n")
    for name in ("base", "large"):
        print(table_weak(name, a.tokens_per_gpu, hw, a.grad_bytes))
        print()
        print(table_breakdown(name, a.tokens_per_gpu, hw, a.grad_bytes))
        print()
    print(table_sensitivity(a.tokens_per_gpu, hw))
    print()
    print(table_strong("base", 4 * 1024 * 1024, hw, a.grad_bytes))
    print()
    print(table_strong("large", 4 * 1024 * 1024, hw, a.grad_bytes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
