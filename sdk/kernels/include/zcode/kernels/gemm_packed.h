// zcode/kernels/gemm_packed.h: y = x · Wᵀ against a W packed once into
// column panels, for the decode step's LM head.
//
// A decode step multiplies its rows (1 to a few tens: the running batch) by
// the head's [V, d_model]. OpenBLAS packs W on every call; gemm_small_m.h
// streams W unpacked, one dot product per output, whose horizontal sums cost
// a third of its instructions once there are many rows. Here W is packed once
// per decode session (the weights do not change while it runs) into panels
// of 16 vocab rows, [K][16] each, so that an output vector of 16 logits is
// one broadcast of x[i, k] and one fused multiply-add per k, with no
// horizontal sum, and every panel is read from memory once per call
// whatever the number of rows.
//
// Numerics: every y[i, j] is one fused multiply-add chain over k = 0..K−1 in
// order, starting from 0: head_dot's (head_logits.h) bits, the same on every
// variant (AVX-512, AVX2, scalar), for every M, i, thread count and tile. So
// a row's logits depend neither on the other rows of the batch (continuous
// batching's invariance) nor on the machine's vector width; and they are the
// bits the forward-only head (head_logits) computes for the same row.
#pragma once

#include <zcode/kernels/isa.h>

#include <cstdint>

namespace zcode::kernels {

/// Vocab rows (columns of y) per panel.
inline constexpr int kPackedCols = 16;

/// Floats of the packed copy of W [N, K]: ceil(N / 16)·16·K.
inline int64_t packed_w_elems(int N, int K) { return int64_t{(N + kPackedCols - 1) / kPackedCols} * kPackedCols * K; }

/// Wp ← W [N, K] (row-major) as ceil(N/16) panels, each [K][16]:
/// Wp[(p·K + k)·16 + c] = W[16p + c, k], 0 for rows ≥ N. Wp holds
/// packed_w_elems(N, K) floats. Parallel over panels; no allocation.
void pack_w_panels(int N, int K, const float* W, float* Wp);

/// y[i, j] = Σ_k x[i, k]·W[j, k] (one fma chain in k order from 0) for
/// i < M, j < N, from Wp = pack_w_panels(N, K, W); x [M, K] row-major, y row
/// stride ldy ≥ N, overwritten, or with `accumulate` y[i, j] + that chain
/// (one rounded add after the chain: torch's beta = 1); columns ≥ N
/// untouched. Parallel over panel groups on the OpenMP pool, serial below
/// ~64 K multiply-adds, on best_isa()'s variant. No allocation, no throw.
void linear_fwd_packed(int M, int N, int K, const float* x, const float* Wp, float* y, long ldy,
                       bool accumulate = false);

/// linear_fwd_packed on a given variant (the tests check each against
/// head_dot). Returns false, computing nothing, when this CPU lacks it.
bool linear_fwd_packed_on(Isa isa, int M, int N, int K, const float* x, const float* Wp, float* y, long ldy,
                          bool accumulate = false);

}  // namespace zcode::kernels
