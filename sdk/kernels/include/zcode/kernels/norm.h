// zcode/kernels/norm.h: ScaleNorm and RMSNorm, forward and backward side by side.
#pragma once

#include <cmath>
#include <cstdint>

namespace zcode::kernels {

/// ScaleNorm (Nguyen & Salazar 2019, "Transformers without Tears", eq. 4):
/// y = g·x / sqrt(Σ_i x_i² + eps). x, y [rows, d]; one scalar gain g;
/// rstd[rows] out = 1/sqrt(Σ x² + eps) (kept for backward). y may alias x.
template <class T>
void scalenorm_fwd(const T* x, T* y, T* rstd, int64_t rows, int64_t d, T g, T eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* xn = x + n * d;
    T ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < d; ++i) ss += xn[i] * xn[i];
    const T r = T(1) / std::sqrt(ss + eps);
    rstd[n] = r;
    const T k = g * r;
    T* yn = y + n * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) yn[i] = xn[i] * k;
  }
}

/// Backward of scalenorm_fwd: with c = Σ_j dy_j·x_j,
///   dx_i (=, or += when accumulate) g·r·dy_i − g·r³·x_i·c,
///   dg_rows[n] = r·c  (∂L/∂g per row; the caller sums rows in order).
template <class T>
void scalenorm_bwd(const T* x, const T* rstd, const T* dy, T* dx, T* dg_rows, int64_t rows, int64_t d, T g,
                   bool accumulate) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* xn = x + n * d;
    const T* dyn = dy + n * d;
    T* dxn = dx + n * d;
    const T r = rstd[n];
    T c = 0;
#pragma omp simd reduction(+ : c)
    for (int64_t i = 0; i < d; ++i) c += dyn[i] * xn[i];
    dg_rows[n] = r * c;
    const T a = g * r, b = g * r * r * r * c;
    if (accumulate) {
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) dxn[i] += a * dyn[i] - b * xn[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) dxn[i] = a * dyn[i] - b * xn[i];
    }
  }
}

/// RMSNorm (Zhang & Sennrich 2019, eq. 4): y = w ⊙ x / sqrt(mean_i x_i² + eps).
/// x, y [rows, d]; w [d]; rstd[rows] out.
template <class T>
void rmsnorm_fwd(const T* x, T* y, T* rstd, int64_t rows, int64_t d, const T* w, T eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* xn = x + n * d;
    T ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < d; ++i) ss += xn[i] * xn[i];
    const T r = T(1) / std::sqrt(ss / static_cast<T>(d) + eps);
    rstd[n] = r;
    T* yn = y + n * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) yn[i] = xn[i] * r * w[i];
  }
}

/// Backward of rmsnorm_fwd: with c = Σ_j dy_j·w_j·x_j,
///   dx_i (=, or +=) r·w_i·dy_i − x_i·r³·c/d,
///   dw_i += Σ_n dy_{n,i}·x_{n,i}·r_n (columns in parallel, rows in order).
template <class T>
void rmsnorm_bwd(const T* x, const T* rstd, const T* dy, T* dx, T* dw, int64_t rows, int64_t d, const T* w,
                 bool accumulate) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* xn = x + n * d;
    const T* dyn = dy + n * d;
    T* dxn = dx + n * d;
    const T r = rstd[n];
    T c = 0;
#pragma omp simd reduction(+ : c)
    for (int64_t i = 0; i < d; ++i) c += dyn[i] * w[i] * xn[i];
    const T b = r * r * r * c / static_cast<T>(d);
    if (accumulate) {
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) dxn[i] += r * w[i] * dyn[i] - b * xn[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) dxn[i] = r * w[i] * dyn[i] - b * xn[i];
    }
  }
  constexpr int64_t kCols = 16;
  const int64_t blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for schedule(static)
  for (int64_t bk = 0; bk < blocks; ++bk) {
    const int64_t i0 = bk * kCols, i1 = i0 + kCols < d ? i0 + kCols : d;
    T acc[kCols] = {};
    for (int64_t n = 0; n < rows; ++n) {
      const T r = rstd[n];
      for (int64_t i = i0; i < i1; ++i) acc[i - i0] += dy[n * d + i] * x[n * d + i] * r;
    }
    for (int64_t i = i0; i < i1; ++i) dw[i] += acc[i - i0];
  }
}

}  // namespace zcode::kernels
