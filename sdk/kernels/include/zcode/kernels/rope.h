// zcode/kernels/rope.h: rotary position embedding (Su et al. 2021, RoFormer,
// eq. 34) in the half-split pairing (x_i with x_{i+R/2}), with the gradient
// of the frequencies so they can be learned (GLM-5.2 "RoPE v2").
#pragma once

#include <cmath>
#include <cstdint>

namespace zcode::kernels {

/// In place: for every row n (position pos[n]) and each of the `heads` heads
/// (head h starts at x + n·ld + h·hd), the first R dims rotate:
///   θ = pos·inv_freq[i],  y_i = x_i cos θ − x_{i+R/2} sin θ,
///                         y_{i+R/2} = x_{i+R/2} cos θ + x_i sin θ.
/// inv_freq is [R/2]. Dims R..hd-1 pass through.
template <class T>
void rope_fwd(T* x, int64_t rows, int64_t ld, int heads, int hd, int R, const T* inv_freq, const int32_t* pos) {
  const int h2 = R / 2;
  if (h2 == 0) return;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    T c[512], s[512];  // R/2 ≤ 512 (head_dim ≤ 1024, checked by the model config)
    for (int i = 0; i < h2; ++i) {
      const T th = static_cast<T>(pos[n]) * inv_freq[i];
      c[i] = std::cos(th);
      s[i] = std::sin(th);
    }
    for (int h = 0; h < heads; ++h) {
      T* a = x + n * ld + static_cast<int64_t>(h) * hd;
      T* b = a + h2;
#pragma omp simd
      for (int i = 0; i < h2; ++i) {
        const T xa = a[i], xb = b[i];
        a[i] = xa * c[i] - xb * s[i];
        b[i] = xb * c[i] + xa * s[i];
      }
    }
  }
}

/// Backward of rope_fwd, in place on dy (becomes dx = R(−θ)·dy), given the
/// forward OUTPUT y. Also writes dtheta[n, i] = Σ_heads (dy_{i+R/2}·y_i −
/// dy_i·y_{i+R/2}) = ∂L/∂θ_{n,i}; the caller reduces it over rows
/// (∂L/∂inv_freq[i] = Σ_n pos[n]·dtheta[n,i]) in a fixed order.
template <class T>
void rope_bwd(T* dy, const T* y, int64_t rows, int64_t ld, int heads, int hd, int R, const T* inv_freq,
              const int32_t* pos, T* dtheta) {
  const int h2 = R / 2;
  if (h2 == 0) return;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    T c[512], s[512];
    T* dt = dtheta + n * h2;
    for (int i = 0; i < h2; ++i) {
      const T th = static_cast<T>(pos[n]) * inv_freq[i];
      c[i] = std::cos(th);
      s[i] = std::sin(th);
      dt[i] = T(0);
    }
    for (int h = 0; h < heads; ++h) {
      T* da = dy + n * ld + static_cast<int64_t>(h) * hd;
      T* db = da + h2;
      const T* ya = y + n * ld + static_cast<int64_t>(h) * hd;
      const T* yb = ya + h2;
#pragma omp simd
      for (int i = 0; i < h2; ++i) {
        const T ga = da[i], gb = db[i];
        dt[i] += gb * ya[i] - ga * yb[i];
        da[i] = ga * c[i] + gb * s[i];
        db[i] = gb * c[i] - ga * s[i];
      }
    }
  }
}

}  // namespace zcode::kernels
