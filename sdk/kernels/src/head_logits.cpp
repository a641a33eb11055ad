#include <zcode/kernels/head_logits.h>

#include "in_register.h"

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace zcode::kernels {

namespace {

constexpr int kBlockWide = 12;   // AVX-512 tile columns, and the scalar variant's block
constexpr int kBlockNarrow = 6;  // AVX2 tile columns

// The tile loops below must be fully unrolled so that GCC keeps the
// accumulator arrays in registers (it spills them to the stack otherwise:
// 2.5x slower, seen in the assembly).
#define ZC_UNROLL _Pragma("GCC unroll 24")

// Calls f(std::integral_constant<int, c>) for c = v in [1, kMax]: the tile
// width of the last, narrower tile of a slice as a template argument.
template <int kMax, class F>
void with_width(int v, F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((v == I + 1 ? (f(std::integral_constant<int, I + 1>{}), 0) : 0), ...);
  }
  (std::make_integer_sequence<int, kMax>{});
}

#if defined(__x86_64__)

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (`__Y = __Y`), which its own
// -Wuninitialized reports once inlined into a function with a target attribute (GCC PR 105593,
// fixed in GCC 13). Silenced for the AVX-512 functions only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// A tile of 16·NP rows (NP panels) × NV columns: z in registers (one FMA
// chain per element over k), then the rows' statistics updated in place.
template <int NP, int NV>
__attribute__((target("avx512f,avx2,fma"))) inline void tile_avx512(int K, const float* hp, const float* W, long ldw,
                                                                    int j0, int rows, float* zt, long ldz, float* mx,
                                                                    float* sum, float* arg) {
  __m512 acc[NP][NV];
  ZC_UNROLL for (int p = 0; p < NP; ++p) ZC_UNROLL for (int v = 0; v < NV; ++v) acc[p][v] = _mm512_setzero_ps();
  const float* h1 = hp + int64_t{K} * kHeadPanelRows;
  const float* w = W + int64_t{j0} * ldw;
  for (int k = 0; k < K; ++k) {
    __m512 a0 = _mm512_loadu_ps(hp + int64_t{k} * kHeadPanelRows);
    __m512 a1 = NP == 2 ? _mm512_loadu_ps(h1 + int64_t{k} * kHeadPanelRows) : a0;
    if constexpr (NV > 1) {  // each read by NV columns: one load (in_register.h)
      ZC_IN_REGISTER(a0);
      if constexpr (NP == 2) ZC_IN_REGISTER(a1);
    }
    ZC_UNROLL for (int v = 0; v < NV; ++v) {
      const __m512 b = _mm512_set1_ps(w[v * ldw + k]);
      acc[0][v] = _mm512_fmadd_ps(a0, b, acc[0][v]);
      if constexpr (NP == 2) acc[1][v] = _mm512_fmadd_ps(a1, b, acc[1][v]);
    }
  }
  ZC_UNROLL for (int p = 0; p < NP; ++p) {
    const int left = rows - p * kHeadPanelRows;
    if (left <= 0) break;
    const __mmask16 mask = left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
    const int r0 = p * kHeadPanelRows;
    if (zt) ZC_UNROLL for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(zt + (j0 + v) * ldz + r0, mask, acc[p][v]);
    const __m512 m = _mm512_maskz_loadu_ps(mask, mx + r0);
    __m512 m1 = m, a = arg ? _mm512_maskz_loadu_ps(mask, arg + r0) : _mm512_setzero_ps();
    ZC_UNROLL for (int v = 0; v < NV; ++v) {
      const __mmask16 gt = _mm512_cmp_ps_mask(acc[p][v], m1, _CMP_GT_OQ);
      m1 = _mm512_mask_mov_ps(m1, gt, acc[p][v]);
      a = _mm512_mask_mov_ps(a, gt, _mm512_set1_ps(static_cast<float>(j0 + v)));
    }
    __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, sum + r0), exp_avx512(_mm512_sub_ps(m, m1)));
    ZC_UNROLL for (int v = 0; v < NV; ++v) s = _mm512_add_ps(s, exp_avx512(_mm512_sub_ps(acc[p][v], m1)));
    _mm512_mask_storeu_ps(mx + r0, mask, m1);
    _mm512_mask_storeu_ps(sum + r0, mask, s);
    if (arg) _mm512_mask_storeu_ps(arg + r0, mask, a);
  }
}

// Columns [j0, j0 + NV) of every row: tiles of 32 rows, the last of 16 when
// 16 or fewer are left.
template <int NV>
__attribute__((target("avx512f,avx2,fma"))) void columns_avx512(int M, int K, const float* hp, const float* W, long ldw,
                                                                int j0, float* zt, long ldz, float* mx, float* sum,
                                                                float* arg) {
  for (int r = 0; r < M; r += 2 * kHeadPanelRows) {
    const float* panel = hp + int64_t{r} * K;
    float* a = arg ? arg + r : nullptr;
    float* z = zt ? zt + r : nullptr;
    if (M - r > kHeadPanelRows) tile_avx512<2, NV>(K, panel, W, ldw, j0, M - r, z, ldz, mx + r, sum + r, a);
    else tile_avx512<1, NV>(K, panel, W, ldw, j0, M - r, z, ldz, mx + r, sum + r, a);
  }
}

__attribute__((target("avx512f,avx2,fma"))) void slice_avx512(int M, int n, int K, const float* hp, const float* W,
                                                              long ldw, float* zt, long ldz, float* mx, float* sum,
                                                              float* arg) {
  int j0 = 0;
  for (; j0 + kBlockWide <= n; j0 += kBlockWide)
    columns_avx512<kBlockWide>(M, K, hp, W, ldw, j0, zt, ldz, mx, sum, arg);
  if (j0 < n)
    with_width<kBlockWide - 1>(
        n - j0, [&](auto nv) { columns_avx512<decltype(nv)::value>(M, K, hp, W, ldw, j0, zt, ldz, mx, sum, arg); });
}

#pragma GCC diagnostic pop

// Lanes i < left of 8, as maskload/maskstore's mask.
__attribute__((target("avx2,fma"))) inline __m256i lanes_below(int left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// A tile of one panel (16 rows, two vectors of 8) × NV columns.
template <int NV>
__attribute__((target("avx2,fma"))) inline void tile_avx2(int K, const float* hp, const float* W, long ldw, int j0,
                                                          int rows, float* zt, long ldz, float* mx, float* sum,
                                                          float* arg) {
  __m256 acc[2][NV];
  ZC_UNROLL for (int p = 0; p < 2; ++p) ZC_UNROLL for (int v = 0; v < NV; ++v) acc[p][v] = _mm256_setzero_ps();
  const float* w = W + int64_t{j0} * ldw;
  for (int k = 0; k < K; ++k) {
    __m256 a0 = _mm256_loadu_ps(hp + int64_t{k} * kHeadPanelRows);
    __m256 a1 = _mm256_loadu_ps(hp + int64_t{k} * kHeadPanelRows + 8);
    if constexpr (NV > 1) {  // each read by NV columns: one load (in_register.h)
      ZC_IN_REGISTER(a0);
      ZC_IN_REGISTER(a1);
    }
    ZC_UNROLL for (int v = 0; v < NV; ++v) {
      const __m256 b = _mm256_broadcast_ss(w + v * ldw + k);
      acc[0][v] = _mm256_fmadd_ps(a0, b, acc[0][v]);
      acc[1][v] = _mm256_fmadd_ps(a1, b, acc[1][v]);
    }
  }
  ZC_UNROLL for (int p = 0; p < 2; ++p) {
    const int left = rows - p * 8;
    if (left <= 0) break;
    const __m256i mask = lanes_below(left);
    const int r0 = p * 8;
    if (zt) ZC_UNROLL for (int v = 0; v < NV; ++v) _mm256_maskstore_ps(zt + (j0 + v) * ldz + r0, mask, acc[p][v]);
    const __m256 m = _mm256_maskload_ps(mx + r0, mask);
    __m256 m1 = m, a = arg ? _mm256_maskload_ps(arg + r0, mask) : _mm256_setzero_ps();
    ZC_UNROLL for (int v = 0; v < NV; ++v) {
      const __m256 gt = _mm256_cmp_ps(acc[p][v], m1, _CMP_GT_OQ);
      m1 = _mm256_blendv_ps(m1, acc[p][v], gt);
      a = _mm256_blendv_ps(a, _mm256_set1_ps(static_cast<float>(j0 + v)), gt);
    }
    __m256 s = _mm256_mul_ps(_mm256_maskload_ps(sum + r0, mask), exp_avx2(_mm256_sub_ps(m, m1)));
    ZC_UNROLL for (int v = 0; v < NV; ++v) s = _mm256_add_ps(s, exp_avx2(_mm256_sub_ps(acc[p][v], m1)));
    _mm256_maskstore_ps(mx + r0, mask, m1);
    _mm256_maskstore_ps(sum + r0, mask, s);
    if (arg) _mm256_maskstore_ps(arg + r0, mask, a);
  }
}

template <int NV>
__attribute__((target("avx2,fma"))) void columns_avx2(int M, int K, const float* hp, const float* W, long ldw, int j0,
                                                      float* zt, long ldz, float* mx, float* sum, float* arg) {
  for (int r = 0; r < M; r += kHeadPanelRows)
    tile_avx2<NV>(K, hp + int64_t{r} * K, W, ldw, j0, M - r, zt ? zt + r : nullptr, ldz, mx + r, sum + r,
                  arg ? arg + r : nullptr);
}

__attribute__((target("avx2,fma"))) void slice_avx2(int M, int n, int K, const float* hp, const float* W, long ldw,
                                                    float* zt, long ldz, float* mx, float* sum, float* arg) {
  int j0 = 0;
  for (; j0 + kBlockNarrow <= n; j0 += kBlockNarrow)
    columns_avx2<kBlockNarrow>(M, K, hp, W, ldw, j0, zt, ldz, mx, sum, arg);
  if (j0 < n)
    with_width<kBlockNarrow - 1>(
        n - j0, [&](auto nv) { columns_avx2<decltype(nv)::value>(M, K, hp, W, ldw, j0, zt, ldz, mx, sum, arg); });
}

#endif  // __x86_64__

void slice_scalar(int M, int n, int K, const float* hp, const float* W, long ldw, float* zt, long ldz, float* mx,
                  float* sum, float* arg) {
  head_logits_generic<float>(M, n, K, hp, W, ldw, zt, ldz, mx, sum, arg, kBlockWide);
}

using SliceFn = void (*)(int, int, int, const float*, const float*, long, float*, long, float*, float*, float*);

SliceFn slice_fn(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx512f: return slice_avx512;
    case Isa::kAvx2Fma: return slice_avx2;
#endif
    default: return slice_scalar;
  }
}

// The vector variants update the statistics in place: start them here.
void run(SliceFn f, int M, int n, int K, const float* hp, const float* W, long ldw, float* zt, long ldz, float* mx,
         float* sum, float* arg) {
  for (int r = 0; r < M; ++r) {
    mx[r] = std::numeric_limits<float>::lowest();
    sum[r] = 0.f;
    if (arg) arg[r] = 0.f;
  }
  if (M > 0 && n > 0) f(M, n, K, hp, W, ldw, zt, ldz, mx, sum, arg);
}

}  // namespace

int head_logits_block(Isa isa) { return isa == Isa::kAvx2Fma ? kBlockNarrow : kBlockWide; }

void head_logits(int M, int n, int K, const float* hp, const float* W, long ldw, float* zt, long ldz, float* mx,
                 float* sum, float* arg) {
  static const SliceFn f = slice_fn(best_isa());
  run(f, M, n, K, hp, W, ldw, zt, ldz, mx, sum, arg);
}

bool head_logits_on(Isa isa, int M, int n, int K, const float* hp, const float* W, long ldw, float* zt, long ldz,
                    float* mx, float* sum, float* arg) {
  if (!isa_supported(isa)) return false;
  run(slice_fn(isa), M, n, K, hp, W, ldw, zt, ldz, mx, sum, arg);
  return true;
}

}  // namespace zcode::kernels
