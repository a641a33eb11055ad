// zcode/kernels/gemm.h: row-major GEMM over OpenBLAS, for float and double.
//
// The double overload exists so that model blocks templated on the float
// type can be gradient-checked in double precision with the same code.
#pragma once

namespace zcode::kernels {

/// C[M,N] = alpha · op(A) · op(B) + beta · C, all row-major.
/// op(A) is [M,K] (A stored [M,K] with lda, or [K,M] when trans_a).
/// op(B) is [K,N] (B stored [K,N] with ldb, or [N,K] when trans_b).
/// Calls cblas_sgemm / cblas_dgemm. M, N or K equal to 0 is a no-op except
/// for the beta scaling of C (K == 0 scales C by beta).
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
