// zcode/kernels/gemm_avx512.h: ZCode's own single-precision GEMM for CPUs
// with AVX-512, for when OpenBLAS runs an AVX2 kernel on them.
//
// OpenBLAS picks its kernel once, when it loads, from OPENBLAS_CORETYPE or
// its own CPU detection; an environment that names `Haswell` on an AVX-512
// CPU (the AMD EPYC VM of 2026-12-07 does) halves its sgemm: 94–110 against
// 188–202 GFLOP/s on one core of that VM with `SkylakeX`, the same build. ZCode
// never overrides the environment's choice for OpenBLAS (README, "OpenBLAS
// kernel choice"); instead kernels::gemm (gemm.h) runs this kernel for float
// when gemm_engine() says so.
//
// The algorithm is the blocked one of Goto & van de Geijn, "Anatomy of
// high-performance matrix multiplication" (ACM TOMS 34(3), 2008): B packed in
// kKc × kNc panels of 32-column slivers, A in kMc × kKc blocks of 14-row
// slivers, a 14 × 32 register tile of fused multiply-adds. One departure:
// a column panel narrower than kNc keeps kNc / nc (nc rounded up to 32) of
// its K blocks packed at once, and those run inside each row block, so that
// C stays in cache across them (the arithmetic, and so the bits, are those
// of Goto's order).
//
// Numerics: every C element is alpha times one FMA chain over k in order,
// restarted every 256 k (the K block), each block's chain then added to C
// (the first block: + beta·C, C not read when beta is 0). The bits depend on
// K, alpha and beta only: not on M, N, the element's place, the thread count
// or the machine (every AVX-512 CPU rounds the same FMA chain the same way).
// So a row of a batch gets the same bits whatever the other rows (continuous
// batching), and a run gets the same bits on 1 or 2 threads (OpenBLAS's
// differ in the last bits between thread counts).
#pragma once

namespace zcode::kernels {

/// C[M,N] = alpha·op(A)·op(B) + beta·C, row-major, as kernels::gemm (gemm.h),
/// on up to `threads` OpenMP threads (one when called inside a parallel
/// region). alpha 0 follows BLAS: A and B are not read, C = beta·C (C not read
/// either when beta is 0). Returns false, leaving C untouched, when this CPU
/// lacks AVX-512F, when M, N or K is not positive, a pointer is null, a
/// leading dimension is below its row length (lda < K, or M when trans_a;
/// ldb < N, or K when trans_b; ldc < N), or when a thread's packing buffers (2.2 MiB
/// a thread, from a pool that grows to the most threads that ever ran these
/// GEMMs at once and is then kept, so a steady training step allocates
/// nothing) cannot be allocated. Thread-safe: any threads may call it at once.
bool sgemm_avx512(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                  int ldb, float beta, float* C, int ldc, int threads);

}  // namespace zcode::kernels
