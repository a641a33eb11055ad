// zcode/kernels/rope.h: rotary position embedding (Su et al. 2021, RoFormer,
// eq. 34) in the half-split pairing (x_i with x_{i+R/2}), with the gradient
// of the frequencies so they can be learned (GLM-5.2 "RoPE v2").
#pragma once

#include <cmath>
#include <cstdint>

namespace zcode::kernels {

/// cos/sin table of the rotation angles: for table row p (position
/// pos0 + p) and pair i, θ = (pos0 + p)·inv_freq[i]; cos_tab, sin_tab are
/// [n_pos, R/2]. Built once per layer so rows that share a position share it.
template <class T>
void rope_table(const T* inv_freq, int n_pos, int pos0, int R, T* cos_tab, T* sin_tab) {
  const int h2 = R / 2;
#pragma omp parallel for schedule(static)
  for (int p = 0; p < n_pos; ++p)
    for (int i = 0; i < h2; ++i) {
      const T th = static_cast<T>(pos0 + p) * inv_freq[i];
      cos_tab[p * h2 + i] = std::cos(th);
      sin_tab[p * h2 + i] = std::sin(th);
    }
}

/// rope_table's row for each of `n` arbitrary positions: row r holds
/// position pos[r], with rope_table's expression (so the same bits as its row
/// pos[r] − pos0). Serial: a decode step has few rows.
template <class T>
void rope_table_at(const T* inv_freq, int n, const int32_t* pos, int R, T* cos_tab, T* sin_tab) {
  const int h2 = R / 2;
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < h2; ++i) {
      const T th = static_cast<T>(pos[p]) * inv_freq[i];
      cos_tab[p * h2 + i] = std::cos(th);
      sin_tab[p * h2 + i] = std::sin(th);
    }
}

/// In place: for every row n (table row tab[n]) and each of the `heads` heads
/// (head h starts at x + n·ld + h·hd), the first R dims rotate:
///   y_i = x_i cos θ − x_{i+R/2} sin θ,  y_{i+R/2} = x_{i+R/2} cos θ + x_i sin θ,
/// with cos θ, sin θ from the tables of rope_table. Dims R..hd-1 pass through.
template <class T>
void rope_fwd(T* x, int64_t rows, int64_t ld, int heads, int hd, int R, const T* cos_tab, const T* sin_tab,
              const int32_t* tab) {
  const int h2 = R / 2;
  if (h2 == 0) return;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* c = cos_tab + static_cast<int64_t>(tab[n]) * h2;
    const T* s = sin_tab + static_cast<int64_t>(tab[n]) * h2;
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
void rope_bwd(T* dy, const T* y, int64_t rows, int64_t ld, int heads, int hd, int R, const T* cos_tab, const T* sin_tab,
              const int32_t* tab, T* dtheta) {
  const int h2 = R / 2;
  if (h2 == 0) return;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* c = cos_tab + static_cast<int64_t>(tab[n]) * h2;
    const T* s = sin_tab + static_cast<int64_t>(tab[n]) * h2;
    T* dt = dtheta + n * h2;
    for (int i = 0; i < h2; ++i) dt[i] = T(0);
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
