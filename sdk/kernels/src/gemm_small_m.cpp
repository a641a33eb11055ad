#include <zcode/kernels/gemm_small_m.h>

#include "in_register.h"

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace zcode::kernels {

namespace {

// W rows per block: eight independent FMA chains (enough to cover the FMA
// latency on both kinds of core) whose W rows stay in L1 while every row of x
// passes over them. A block is one unit of the parallel loop.
constexpr int kRows = 8;

using BlockFn = void (*)(int M, int K, const float* x, const float* W, int rows, float* y, long ldy, bool acc);

void block_scalar(int M, int K, const float* x, const float* W, int rows, float* y, long ldy, bool accumulate) {
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < rows; ++r) {
      const float* w = W + int64_t{r} * K;
      const float* xi = x + int64_t{i} * K;
      float s = 0.f;
      for (int k = 0; k < K; ++k) s += xi[k] * w[k];
      y[i * ldy + r] = accumulate ? y[i * ldy + r] + s : s;
    }
}

#if defined(__x86_64__)

// Sum of the 8 lanes in a fixed tree: (lo128 + hi128), then pairs, then the two halves.
__attribute__((target("avx2,fma"))) inline float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (`__Y = __Y`), which its own
// -Wuninitialized reports once inlined into a function with a target attribute (GCC PR 105593,
// fixed in GCC 13). Silenced for the AVX-512 functions only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Sum of the 16 lanes: (lanes 0-7 + lanes 8-15), then hsum_avx2's tree.
__attribute__((target("avx512f,avx2,fma"))) inline float hsum_avx512(__m512 v) {
  const __m512 hi = _mm512_shuffle_f32x4(v, v, 0xEE);  // lanes 8-15 into 0-7
  return hsum_avx2(_mm512_castps512_ps256(_mm512_add_ps(v, hi)));
}

// R rows of W against one row of x; R is 8 (a full block) or 1 (the tail).
// Each row's chain is the same instructions in the same order for either R.
template <int R>
__attribute__((target("avx512f,avx2,fma"))) inline void rows_avx512(int K, const float* xi, const float* W, float* yi,
                                                                    bool accumulate) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m512 xv = _mm512_loadu_ps(xi + k);
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(W + int64_t{r} * K + k), xv, acc[r]);
  }
  if (k < K) {
    const __mmask16 m = static_cast<__mmask16>((1u << (K - k)) - 1u);
    const __m512 xv = _mm512_maskz_loadu_ps(m, xi + k);
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, W + int64_t{r} * K + k), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    const float sum = hsum_avx512(acc[r]);
    yi[r] = accumulate ? yi[r] + sum : sum;
  }
}

// Four rows of x against four rows of W: sixteen chains, each the same
// instructions in the same order as rows_avx512's for its (row, W row), so the
// bits do not depend on which tile computed an output. Eight loads feed
// sixteen FMAs (rows_avx512: nine for eight), for batches of many rows.
__attribute__((target("avx512f,avx2,fma"))) inline void tile4x4_avx512(int K, const float* x, const float* W, float* y,
                                                                       long ldy, bool accumulate) {
  __m512 acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int r = 0; r < 4; ++r) acc[i][r] = _mm512_setzero_ps();
  int k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 xv[4];
    for (int i = 0; i < 4; ++i) {
      xv[i] = _mm512_loadu_ps(x + int64_t{i} * K + k);
      ZC_IN_REGISTER(xv[i]);  // read by 4 rows of W: one load
    }
    for (int r = 0; r < 4; ++r) {
      __m512 wv = _mm512_loadu_ps(W + int64_t{r} * K + k);
      ZC_IN_REGISTER(wv);  // read by 4 rows: one load
      for (int i = 0; i < 4; ++i) acc[i][r] = _mm512_fmadd_ps(wv, xv[i], acc[i][r]);
    }
  }
  if (k < K) {
    const __mmask16 m = static_cast<__mmask16>((1u << (K - k)) - 1u);
    __m512 xv[4];
    for (int i = 0; i < 4; ++i) xv[i] = _mm512_maskz_loadu_ps(m, x + int64_t{i} * K + k);
    for (int r = 0; r < 4; ++r) {
      const __m512 wv = _mm512_maskz_loadu_ps(m, W + int64_t{r} * K + k);
      for (int i = 0; i < 4; ++i) acc[i][r] = _mm512_fmadd_ps(wv, xv[i], acc[i][r]);
    }
  }
  for (int i = 0; i < 4; ++i)
    for (int r = 0; r < 4; ++r) {
      const float sum = hsum_avx512(acc[i][r]);
      float* yi = y + i * ldy + r;
      *yi = accumulate ? *yi + sum : sum;
    }
}

__attribute__((target("avx512f,avx2,fma"))) void block_avx512(int M, int K, const float* x, const float* W, int rows,
                                                              float* y, long ldy, bool accumulate) {
  int i0 = 0;
  if (rows == kRows)  // full blocks: four rows of x at a time, then the rest one by one
    for (; i0 + 4 <= M; i0 += 4)
      for (int r0 = 0; r0 < kRows; r0 += 4)
        tile4x4_avx512(K, x + int64_t{i0} * K, W + int64_t{r0} * K, y + i0 * ldy + r0, ldy, accumulate);
  for (int i = i0; i < M; ++i) {
    const float* xi = x + int64_t{i} * K;
    float* yi = y + i * ldy;
    if (rows == kRows) {
      rows_avx512<kRows>(K, xi, W, yi, accumulate);
    } else {
      for (int r = 0; r < rows; ++r) rows_avx512<1>(K, xi, W + int64_t{r} * K, yi + r, accumulate);
    }
  }
}

#pragma GCC diagnostic pop

template <int R>
__attribute__((target("avx2,fma"))) inline void rows_avx2(int K, const float* xi, const float* W, float* yi,
                                                          bool accumulate) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256 xv = _mm256_loadu_ps(xi + k);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(W + int64_t{r} * K + k), xv, acc[r]);
  }
  if (k < K) {
    alignas(32) static const int32_t ramp[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const __m256i m =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(K - k), _mm256_load_si256(reinterpret_cast<const __m256i*>(ramp)));
    const __m256 xv = _mm256_maskload_ps(xi + k, m);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_maskload_ps(W + int64_t{r} * K + k, m), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    const float sum = hsum_avx2(acc[r]);
    yi[r] = accumulate ? yi[r] + sum : sum;
  }
}

// Two rows of x against four rows of W (16 ymm registers: 8 chains, 2 x, 1 W):
// each chain as rows_avx2's, so the bits do not depend on the tile.
__attribute__((target("avx2,fma"))) inline void tile2x4_avx2(int K, const float* x, const float* W, float* y, long ldy,
                                                             bool accumulate) {
  __m256 acc[2][4];
  for (int i = 0; i < 2; ++i)
    for (int r = 0; r < 4; ++r) acc[i][r] = _mm256_setzero_ps();
  int k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + K + k);
    ZC_IN_REGISTER(x0);  // each read by 4 rows of W: one load
    ZC_IN_REGISTER(x1);
    for (int r = 0; r < 4; ++r) {
      __m256 wv = _mm256_loadu_ps(W + int64_t{r} * K + k);
      ZC_IN_REGISTER(wv);  // read by 2 rows: one load
      acc[0][r] = _mm256_fmadd_ps(wv, x0, acc[0][r]);
      acc[1][r] = _mm256_fmadd_ps(wv, x1, acc[1][r]);
    }
  }
  if (k < K) {
    alignas(32) static const int32_t ramp[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const __m256i m =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(K - k), _mm256_load_si256(reinterpret_cast<const __m256i*>(ramp)));
    const __m256 x0 = _mm256_maskload_ps(x + k, m), x1 = _mm256_maskload_ps(x + K + k, m);
    for (int r = 0; r < 4; ++r) {
      const __m256 wv = _mm256_maskload_ps(W + int64_t{r} * K + k, m);
      acc[0][r] = _mm256_fmadd_ps(wv, x0, acc[0][r]);
      acc[1][r] = _mm256_fmadd_ps(wv, x1, acc[1][r]);
    }
  }
  for (int i = 0; i < 2; ++i)
    for (int r = 0; r < 4; ++r) {
      const float sum = hsum_avx2(acc[i][r]);
      float* yi = y + i * ldy + r;
      *yi = accumulate ? *yi + sum : sum;
    }
}

__attribute__((target("avx2,fma"))) void block_avx2(int M, int K, const float* x, const float* W, int rows, float* y,
                                                    long ldy, bool accumulate) {
  int i0 = 0;
  if (rows == kRows)
    for (; i0 + 2 <= M; i0 += 2)
      for (int r0 = 0; r0 < kRows; r0 += 4)
        tile2x4_avx2(K, x + int64_t{i0} * K, W + int64_t{r0} * K, y + i0 * ldy + r0, ldy, accumulate);
  for (int i = i0; i < M; ++i) {
    const float* xi = x + int64_t{i} * K;
    float* yi = y + i * ldy;
    if (rows == kRows) {
      rows_avx2<kRows>(K, xi, W, yi, accumulate);
    } else {
      for (int r = 0; r < rows; ++r) rows_avx2<1>(K, xi, W + int64_t{r} * K, yi + r, accumulate);
    }
  }
}

#endif  // __x86_64__

BlockFn block_fn(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx512f: return block_avx512;
    case Isa::kAvx2Fma: return block_avx2;
#endif
    default: return block_scalar;
  }
}

void run(BlockFn f, int M, int N, int K, const float* x, const float* W, float* y, long ldy, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  const int64_t blocks = (int64_t{N} + kRows - 1) / kRows;
  // A fork/join costs a few microseconds: below ~64 K multiply-adds one thread is faster.
  const bool parallel = int64_t{M} * N * K >= (int64_t{1} << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t j0 = b * kRows;
    const int rows = static_cast<int>(N - j0 < kRows ? N - j0 : kRows);
    f(M, K, x, W + j0 * K, rows, y + j0, ldy, accumulate);
  }
}

}  // namespace

void linear_fwd_small_m(int M, int N, int K, const float* x, const float* W, float* y, long ldy, bool accumulate) {
  static const BlockFn f = block_fn(best_isa());
  run(f, M, N, K, x, W, y, ldy, accumulate);
}

bool linear_fwd_small_m_on(Isa isa, int M, int N, int K, const float* x, const float* W, float* y, long ldy,
                           bool accumulate) {
  if (!isa_supported(isa)) return false;
  run(block_fn(isa), M, N, K, x, W, y, ldy, accumulate);
  return true;
}

}  // namespace zcode::kernels
