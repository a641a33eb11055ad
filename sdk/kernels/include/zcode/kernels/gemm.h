// zcode/kernels/gemm.h: row-major GEMM, for float and double.
//
// Float runs on one of two engines, chosen once per process (gemm_engine):
// OpenBLAS's sgemm, or ZCode's own AVX-512 kernel (gemm_avx512.h) on CPUs
// with AVX-512 whose OpenBLAS runs an AVX2 or older kernel. Double is always
// OpenBLAS's dgemm; it exists so that model blocks templated on the float
// type can be gradient-checked in double precision with the same code.
#pragma once

#include <string>
#include <string_view>

namespace zcode::kernels {

/// The engine of the float gemm.
enum class GemmEngine { kOpenBlas, kAvx512 };

/// The float gemm's engine, decided at the first call and kept for the
/// process unless set_gemm_engine changes it (a resume takes its
/// checkpoint's). The environment variable ZCODE_GEMM picks it:
/// `openblas`; `avx512` (ZCode's kernel; OpenBLAS where the CPU lacks
/// AVX-512F); unset, empty or `auto`: `avx512` when the CPU has AVX-512F and
/// OpenBLAS's kernel family (blas_core) is not one of its AVX-512 ones
/// (SkylakeX, Cooperlake, SapphireRapids), else `openblas`. Any other value
/// prints one line to stderr naming it and the accepted ones, and counts as
/// `auto`.
GemmEngine gemm_engine();

/// One line for logs and benchmark headers, e.g. "zcode avx512 (OpenBLAS
/// kernel Haswell; ZCODE_GEMM unset)".
std::string gemm_engine_description();

/// "avx512" or "openblas": an engine's name in ZCODE_GEMM and in checkpoints.
const char* gemm_engine_name(GemmEngine e);

/// The engine named `name` (gemm_engine_name's spelling) into *out; false,
/// *out untouched, for any other name.
bool parse_gemm_engine(std::string_view name, GemmEngine* out);

/// Runs the float gemm on `e` for the rest of the process: a resume follows
/// the engine its checkpoint was trained on (as it follows the recorded
/// blocking), so that it continues the run's bits. `why` goes into
/// gemm_engine_description(). Returns false, changing nothing, for kAvx512 on
/// a CPU without AVX-512F. Scope: the engine belongs to this copy of
/// zcode_kernels, a static library, so each plugin that links it has its own
/// (the model plugin's runs the model's GEMMs); within it, every caller.
/// Threading: call it while no GEMM of that copy runs (a model's load_state,
/// before training starts); gemm_engine_description may be read meanwhile.
bool set_gemm_engine(GemmEngine e, const std::string& why);

/// C[M,N] = alpha · op(A) · op(B) + beta · C, all row-major.
/// op(A) is [M,K] (A stored [M,K] with lda, or [K,M] when trans_a).
/// op(B) is [K,N] (B stored [K,N] with ldb, or [N,K] when trans_b).
/// Float: gemm_engine()'s engine (sgemm_avx512 on OpenBLAS's thread count,
/// or cblas_sgemm); double: cblas_dgemm. M, N or K equal to 0 is a no-op
/// except for the beta scaling of C (K == 0 scales C by beta).
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc);
void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A, int lda, const double* B,
          int ldb, double beta, double* C, int ldc);

/// Linear layer forward, torch.nn.Linear convention: y[M,N] = x[M,K] · W[N,K]ᵀ
/// (+ beta·y). Contiguous rows.
template <class T>
inline void linear_fwd(int M, int N, int K, const T* x, const T* W, T* y, T beta = T(0)) {
  gemm(false, true, M, N, K, T(1), x, K, W, K, beta, y, N);
}
/// dx[M,K] (+)= dy[M,N] · W[N,K] (beta 0: overwrite, 1: accumulate).
template <class T>
inline void linear_bwd_x(int M, int N, int K, const T* dy, const T* W, T* dx, T beta) {
  gemm(false, false, M, K, N, T(1), dy, N, W, K, beta, dx, K);
}
/// dW[N,K] += dy[M,N]ᵀ · x[M,K] (gradients accumulate).
template <class T>
inline void linear_bwd_w(int M, int N, int K, const T* dy, const T* x, T* dW) {
  gemm(true, false, N, K, M, T(1), dy, N, x, K, T(1), dW, K);
}

}  // namespace zcode::kernels
