// zcode/kernels/gemm_small_m.h: y = x · Wᵀ for a few rows of x, streaming W once.
//
// Decoding multiplies a handful of rows (the batch) by large weights, above
// all the LM head's [V, d_model]. OpenBLAS's sgemm packs W into its panel
// layout on every call, at M = 1 as at M = 8, and then runs at a fraction of
// the memory bandwidth (bench/decode/RESULTS.md, 2-core AMD EPYC Zen 4 VM,
// 2026-12-02: 7-12 GB/s for the 51.5 MB head, 49-79 % of a decode step). Here each W row is read from memory once
// and used for every row of x while it is in L1: no packing, no zero-fill of y.
//
// Numerics: y[i, j] is one dot product of x[i, :] and W[j, :] summed in a
// fixed order (vector lanes over k, then a fixed reduction tree), the same
// whatever M, i, the position of j in its block and the thread count, so a
// row's logits do not depend on the other rows in the batch nor on threads.
// The AVX-512 and the AVX2 variants sum in different orders: the last bits
// differ between machines, as everything of OpenBLAS's does.
#pragma once

#include <zcode/kernels/isa.h>

namespace zcode::kernels {

/// The most rows of x the decode step sends here (glm52's fwd_linear and
/// head). A limit of the design, not a measured crossover: each block of W is
/// re-read from L1 once per row of x, so past a few tens of rows sgemm's
/// register blocking wins; where exactly has not been searched on any machine.
inline constexpr int kSmallM = 16;

/// y[i, j] = Σ_k x[i, k] · W[j, k] for i < M, j < N (torch.nn.Linear without
/// bias: y = x · Wᵀ), float32, x [M, K] and W [N, K] contiguous row-major,
/// y row stride ldy ≥ N: overwritten (never read), or with `accumulate`
/// y[i, j] + that sum (a residual add, sgemm's beta = 1). Parallel over blocks
/// of W rows on the OpenMP pool (threads.h), serial below ~64 K multiply-adds,
/// on best_isa()'s variant (isa.h).
/// Any M ≥ 0 is correct; it is fast for M ≤ kSmallM. No allocation, no throw.
void linear_fwd_small_m(int M, int N, int K, const float* x, const float* W, float* y, long ldy,
                        bool accumulate = false);

/// linear_fwd_small_m on a given variant (the tests check each against a
/// double-precision reference). Returns false, computing nothing, when this
/// CPU lacks the variant's instructions.
bool linear_fwd_small_m_on(Isa isa, int M, int N, int K, const float* x, const float* W, float* y, long ldy,
                           bool accumulate = false);

}  // namespace zcode::kernels
