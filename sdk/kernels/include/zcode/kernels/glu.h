// zcode/kernels/glu.h: the SiLU-gated linear unit (SwiGLU, Shazeer 2020,
// "GLU Variants Improve Transformer", eq. 5 with Swish_1 = SiLU).
#pragma once

#include <zcode/kernels/math.h>

#include <cstdint>

namespace zcode::kernels {

/// g[n, 0:F] = SiLU(a[n, 0:F]) ⊙ a[n, F:2F]; a is [rows, 2F] (the fused
/// W1|W3 projection), g is [rows, F]. SiLU(x) = x·σ(x) (Elfwing et al. 2018).
template <class T>
void silu_glu_fwd(const T* a, T* g, int64_t rows, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* a1 = a + n * 2 * F;
    const T* a3 = a1 + F;
    T* gn = g + n * F;
#pragma omp simd
    for (int64_t i = 0; i < F; ++i) gn[i] = a1[i] * sigmoid(a1[i]) * a3[i];
  }
}

/// Backward of silu_glu_fwd: da[n,0:F] = dg ⊙ a3 ⊙ SiLU'(a1),
/// da[n,F:2F] = dg ⊙ SiLU(a1), with SiLU'(x) = σ(x)·(1 + x·(1 − σ(x))).
/// da is [rows, 2F] and may alias a (each element is read before written).
template <class T>
void silu_glu_bwd(const T* a, const T* dg, T* da, int64_t rows, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* a1 = a + n * 2 * F;
    const T* a3 = a1 + F;
    const T* dgn = dg + n * F;
    T* d1 = da + n * 2 * F;
    T* d3 = d1 + F;
#pragma omp simd
    for (int64_t i = 0; i < F; ++i) {
      const T x = a1[i], u = a3[i], s = sigmoid(x);
      const T dgi = dgn[i];
      d1[i] = dgi * u * s * (T(1) + x * (T(1) - s));
      d3[i] = dgi * x * s;
    }
  }
}

}  // namespace zcode::kernels
