#include <zcode/kernels/gemm.h>

#include <cblas.h>

namespace zcode::kernels {

namespace {
template <class T>
void scale_only(int M, int N, T beta, T* C, int ldc) {
  if (beta == T(1)) return;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      C[static_cast<long>(i) * ldc + j] = beta == T(0) ? T(0) : C[static_cast<long>(i) * ldc + j] * beta;
}
}  // namespace

void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
          float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_only(M, N, beta, C, ldc);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}

void gemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda, const double* B, int ldb,
          double beta, double* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_only(M, N, beta, C, ldc);
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}

}  // namespace zcode::kernels
