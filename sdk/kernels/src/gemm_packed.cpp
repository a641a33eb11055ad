#include <zcode/kernels/gemm_packed.h>

#include "in_register.h"

#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace zcode::kernels {

namespace {

constexpr int kP = kPackedCols;
// Panels per unit of the parallel loop: 64 columns, 64 KB of Wp at K = 256,
// read from L2 once per tile of rows.
constexpr int kGroup = 4;

// One group of `panels` panels (the last of them with `last_cols` valid
// columns) against every row of x.
// acc: y += the products (beta 1) instead of y = them.
using GroupFn = void (*)(int M, int K, const float* x, const float* Wp, int panels, int last_cols, float* y, long ldy,
                         bool acc);

// Stores 16 results of panel c, or only the valid ones of a partial last panel.
inline void store_cols(float* dst, const float* v, int cols, bool acc) {
  if (acc)
    for (int j = 0; j < cols; ++j) dst[j] += v[j];
  else std::memcpy(dst, v, sizeof(float) * size_t(cols));
}

void group_scalar(int M, int K, const float* x, const float* Wp, int panels, int last_cols, float* y, long ldy,
                  bool accumulate) {
  for (int i = 0; i < M; ++i)
    for (int c = 0; c < panels; ++c) {
      float acc[kP] = {};
      const float* w = Wp + int64_t{c} * K * kP;
      const float* xi = x + int64_t{i} * K;
      for (int k = 0; k < K; ++k)
        for (int j = 0; j < kP; ++j) acc[j] = std::fma(xi[k], w[int64_t{k} * kP + j], acc[j]);
      store_cols(y + i * ldy + c * kP, acc, c == panels - 1 ? last_cols : kP, accumulate);
    }
}

#if defined(__x86_64__)

// GCC 12's AVX-512 intrinsics trip its own -Wuninitialized once inlined into a
// function with a target attribute (GCC PR 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// R rows of x against C panels: R·C accumulators of 16 lanes, one
// broadcast of x[i, k] per row and one load per panel per k.
template <int R, int C>
__attribute__((target("avx512f,avx2,fma"))) inline void tile_avx512(int K, const float* x, const float* Wp,
                                                                    int last_cols, bool last_partial, float* y,
                                                                    long ldy, bool accumulate) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  const int64_t ps = int64_t{K} * kP;  // panel stride
  for (int k = 0; k < K; ++k) {
    __m512 w[C];
    for (int c = 0; c < C; ++c) {
      w[c] = _mm512_loadu_ps(Wp + c * ps + int64_t{k} * kP);
      if constexpr (R > 1) ZC_IN_REGISTER(w[c]);  // read by R rows: one load
    }
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(x[int64_t{r} * K + k]);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(xb, w[c], acc[r][c]);
    }
  }
  const __mmask16 tail = static_cast<__mmask16>((1u << last_cols) - 1u);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float* dst = y + r * ldy + c * kP;
      if (last_partial && c == C - 1) {
        __m512 v = acc[r][c];
        if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(tail, dst), v);
        _mm512_mask_storeu_ps(dst, tail, v);
      } else {
        _mm512_storeu_ps(dst, accumulate ? _mm512_add_ps(_mm512_loadu_ps(dst), acc[r][c]) : acc[r][c]);
      }
    }
}

template <int C>
__attribute__((target("avx512f,avx2,fma"))) void rows_avx512(int M, int K, const float* x, const float* Wp,
                                                             int last_cols, float* y, long ldy, bool a) {
  const bool partial = last_cols < kP;
  int i = 0;
  for (; i + 4 <= M; i += 4) tile_avx512<4, C>(K, x + int64_t{i} * K, Wp, last_cols, partial, y + i * ldy, ldy, a);
  const float* xi = x + int64_t{i} * K;
  float* yi = y + i * ldy;
  switch (M - i) {
    case 3: tile_avx512<3, C>(K, xi, Wp, last_cols, partial, yi, ldy, a); break;
    case 2: tile_avx512<2, C>(K, xi, Wp, last_cols, partial, yi, ldy, a); break;
    case 1: tile_avx512<1, C>(K, xi, Wp, last_cols, partial, yi, ldy, a); break;
    default: break;
  }
}

__attribute__((target("avx512f,avx2,fma"))) void group_avx512(int M, int K, const float* x, const float* Wp, int panels,
                                                              int last_cols, float* y, long ldy, bool a) {
  switch (panels) {
    case 4: rows_avx512<4>(M, K, x, Wp, last_cols, y, ldy, a); break;
    case 3: rows_avx512<3>(M, K, x, Wp, last_cols, y, ldy, a); break;
    case 2: rows_avx512<2>(M, K, x, Wp, last_cols, y, ldy, a); break;
    case 1: rows_avx512<1>(M, K, x, Wp, last_cols, y, ldy, a); break;
    default: break;
  }
}

#pragma GCC diagnostic pop

// AVX2: a panel is two 8-lane halves; R rows against one or two panels
// (at most 8 accumulators of the 16 ymm registers).
template <int R, int C>
__attribute__((target("avx2,fma"))) inline void tile_avx2(int K, const float* x, const float* Wp, int last_cols,
                                                          bool last_partial, float* y, long ldy, bool accumulate) {
  __m256 acc[R][2 * C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < 2 * C; ++c) acc[r][c] = _mm256_setzero_ps();
  const int64_t ps = int64_t{K} * kP;
  for (int k = 0; k < K; ++k) {
    __m256 w[2 * C];
    for (int c = 0; c < C; ++c) {
      w[2 * c] = _mm256_loadu_ps(Wp + c * ps + int64_t{k} * kP);
      w[2 * c + 1] = _mm256_loadu_ps(Wp + c * ps + int64_t{k} * kP + 8);
      if constexpr (R > 1) {
        ZC_IN_REGISTER(w[2 * c]);
        ZC_IN_REGISTER(w[2 * c + 1]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 xb = _mm256_broadcast_ss(x + int64_t{r} * K + k);
      for (int c = 0; c < 2 * C; ++c) acc[r][c] = _mm256_fmadd_ps(xb, w[c], acc[r][c]);
    }
  }
  // Unrolled, so acc stays in registers: a loop indexing it at run time made
  // GCC keep acc on the stack and store all of it at every k (2026-12-07).
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      float* dst = y + r * ldy + c * kP;
      if (last_partial && c == C - 1) {
        alignas(32) float v[kP];
        _mm256_store_ps(v, acc[r][2 * c]);
        _mm256_store_ps(v + 8, acc[r][2 * c + 1]);
        store_cols(dst, v, last_cols, accumulate);
      } else if (accumulate) {
        _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(dst), acc[r][2 * c]));
        _mm256_storeu_ps(dst + 8, _mm256_add_ps(_mm256_loadu_ps(dst + 8), acc[r][2 * c + 1]));
      } else {
        _mm256_storeu_ps(dst, acc[r][2 * c]);
        _mm256_storeu_ps(dst + 8, acc[r][2 * c + 1]);
      }
    }
}

template <int C>
__attribute__((target("avx2,fma"))) void rows_avx2(int M, int K, const float* x, const float* Wp, int last_cols,
                                                   bool partial, float* y, long ldy, bool a) {
  int i = 0;
  for (; i + 2 <= M; i += 2) tile_avx2<2, C>(K, x + int64_t{i} * K, Wp, last_cols, partial, y + i * ldy, ldy, a);
  if (i < M) tile_avx2<1, C>(K, x + int64_t{i} * K, Wp, last_cols, partial, y + i * ldy, ldy, a);
}

__attribute__((target("avx2,fma"))) void group_avx2(int M, int K, const float* x, const float* Wp, int panels,
                                                    int last_cols, float* y, long ldy, bool a) {
  const int64_t ps = int64_t{K} * kP;
  int c = 0;
  for (; c + 2 <= panels; c += 2)
    rows_avx2<2>(M, K, x, Wp + c * ps, c + 2 == panels ? last_cols : kP, c + 2 == panels && last_cols < kP, y + c * kP,
                 ldy, a);
  if (c < panels) rows_avx2<1>(M, K, x, Wp + c * ps, last_cols, last_cols < kP, y + c * kP, ldy, a);
}

#endif  // __x86_64__

GroupFn group_fn(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx512f: return group_avx512;
    case Isa::kAvx2Fma: return group_avx2;
#endif
    default: return group_scalar;
  }
}

void run(GroupFn f, int M, int N, int K, const float* x, const float* Wp, float* y, long ldy, bool acc) {
  if (M <= 0 || N <= 0) return;
  const int panels = (N + kP - 1) / kP;
  const int groups = (panels + kGroup - 1) / kGroup;
  const int last_cols = N - (panels - 1) * kP;
  // A fork/join costs a few microseconds: below ~64 K multiply-adds one thread is faster.
  const bool parallel = int64_t{M} * N * K >= (int64_t{1} << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int g = 0; g < groups; ++g) {
    const int p0 = g * kGroup;
    const int n = panels - p0 < kGroup ? panels - p0 : kGroup;
    f(M, K, x, Wp + int64_t{p0} * K * kP, n, p0 + n == panels ? last_cols : kP, y + int64_t{p0} * kP, ldy, acc);
  }
}

}  // namespace

void pack_w_panels(int N, int K, const float* W, float* Wp) {
  const int panels = (N + kP - 1) / kP;
#pragma omp parallel for schedule(static) if (int64_t{N} * K >= (int64_t{1} << 16))
  for (int p = 0; p < panels; ++p) {
    float* panel = Wp + int64_t{p} * K * kP;
    for (int c = 0; c < kP; ++c) {
      const int j = p * kP + c;
      const float* row = W + int64_t{j} * K;
      for (int k = 0; k < K; ++k) panel[int64_t{k} * kP + c] = j < N ? row[k] : 0.f;
    }
  }
}

void linear_fwd_packed(int M, int N, int K, const float* x, const float* Wp, float* y, long ldy, bool accumulate) {
  static const GroupFn f = group_fn(best_isa());
  run(f, M, N, K, x, Wp, y, ldy, accumulate);
}

bool linear_fwd_packed_on(Isa isa, int M, int N, int K, const float* x, const float* Wp, float* y, long ldy,
                          bool accumulate) {
  if (!isa_supported(isa)) return false;
  run(group_fn(isa), M, N, K, x, Wp, y, ldy, accumulate);
  return true;
}

}  // namespace zcode::kernels
