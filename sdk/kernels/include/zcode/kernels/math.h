// zcode/kernels/math.h: scalar math shared by the kernels, written so that
// loops over it vectorise (AVX-512 with -march=native).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace zcode::kernels {

/// The constants of fast_exp and of its vector forms below (exp_avx512,
/// exp_avx2), in one place: ln2 split for Cody-Waite's reduction (hi has 9
/// significant bits, so n·hi is exact for |n| < 2^15), and the coefficients
/// of Cephes' expf polynomial, highest degree first.
namespace expf_poly {
inline constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
inline constexpr float kC5 = 1.9875691500e-4f, kC4 = 1.3981999507e-3f, kC3 = 8.3334519073e-3f, kC2 = 4.1665795894e-2f,
                       kC1 = 1.6666665459e-1f, kC0 = 5.0000001201e-1f;
inline constexpr float kMin = -87.3f, kMax = 88.7f;  // fast_exp's clamp
}  // namespace expf_poly

/// exp(x) for float: Cody-Waite range reduction x = n·ln2 + r, |r| ≤ ln2/2
/// (n the nearest integer to x/ln2),
/// then the degree-6 minimax polynomial of Cephes' expf (max relative error
/// ≈ 2e-7 on [-87, 88]); inputs are clamped there (exp(-87.3) ≈ 1.2e-38
/// stands in for 0). Branch-free so `#pragma omp simd` loops vectorise.
inline float fast_exp(float x) {
  using namespace expf_poly;
  x = x < kMin ? kMin : (x > kMax ? kMax : x);
  // n = round(x/ln2) by the 1.5·2^23 trick: std::floor would not vectorise
  // without -fno-trapping-math.
  constexpr float kRound = 12582912.0f;
  const float n = (x * kLog2e + kRound) - kRound;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kC5;
  p = p * r + kC4;
  p = p * r + kC3;
  p = p * r + kC2;
  p = p * r + kC1;
  p = p * r + kC0;
  p = p * r * r + r + 1.0f;
  // __builtin_bit_cast, not memcpy: GCC 12 treats a memcpy into a local as a
  // memory clobber and then refuses to vectorise the calling loop.
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * __builtin_bit_cast(float, bits);
}

/// exp in the working precision: fast_exp for float, std::exp for double
/// (the double build is the gradient-check reference).
inline float kexp(float x) { return fast_exp(x); }
inline double kexp(double x) { return std::exp(x); }

#if defined(__x86_64__)
/// exp over 16 float lanes: fast_exp's reduction and polynomial, the scaling
/// by 2^n done by vscalefps, which replaces the clamp, the float-to-int
/// conversion and the exponent shift (and underflows to 0 for very negative
/// arguments instead of stopping at exp(−87.3)). Used by exp_shifted_sum
/// below and head_logits.cpp; callable from code built without -mavx512f on
/// a CPU that has it (isa.h chooses).
__attribute__((target("avx512f,avx2,fma"))) inline __m512 exp_avx512(__m512 t) {
  using namespace expf_poly;
  // The mask forms: GCC 12 warns that the plain ones read an undefined source.
  const __m512 tl = _mm512_mul_ps(t, _mm512_set1_ps(kLog2e));
  const __m512 k = _mm512_mask_roundscale_ps(tl, 0xFFFF, tl, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Hi), t);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kC5), r, _mm512_set1_ps(kC4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC0));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_mask_scalef_ps(p, 0xFFFF, p, k);
}

/// exp over 8 float lanes: fast_exp step for step, clamp included. The
/// clamp's operands in this order: maxps/minps return the second when either
/// is NaN, so a NaN goes through (a NaN logit makes its row's sum NaN).
/// Callable from code built without -mavx2 on a CPU that has it.
__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
  using namespace expf_poly;
  x = _mm256_min_ps(_mm256_set1_ps(kMax), _mm256_max_ps(_mm256_set1_ps(kMin), x));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kC5), r, _mm256_set1_ps(kC4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC0));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}
#endif

/// max_j x[j] over x[0, n), n ≥ 1 (−inf for n = 0).
template <class T>
inline T max_of(const T* x, int64_t n) {
  T mx = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
  return mx;
}

/// x[j] ← exp(x[j] − shift) in place for j in [0, n); returns Σ_j of the
/// new x[j] (the softmax denominator when shift = max x). kexp's accuracy.
template <class T>
inline T exp_shifted_sum(T* x, int64_t n, T shift) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    const T e = kexp(x[j] - shift);
    x[j] = e;
    sum += e;
  }
  return sum;
}

#if defined(__AVX512F__)
/// AVX-512 float version: exp_avx512 (above) over the row. It runs over
/// every logit of the unfused LM head; in `perf` of the head, the max-and-exp
/// pass went from ~6 % to ~5 % of its time.
template <>
inline float exp_shifted_sum<float>(float* x, int64_t n, float shift) {
  const __m512 sh = _mm512_set1_ps(shift);
  auto exp16 = [&](__m512 v) { return exp_avx512(_mm512_sub_ps(v, sh)); };
  __m512 acc = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 e = exp16(_mm512_loadu_ps(x + j));
    _mm512_storeu_ps(x + j, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (j < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - j)) - 1u);
    const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_maskz_loadu_ps(m, x + j)));
    _mm512_mask_storeu_ps(x + j, m, e);
    acc = _mm512_add_ps(acc, e);
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}
#endif

/// Logistic sigmoid σ(x) = 1/(1+e^{-x}).
template <class T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + kexp(-x));
}

}  // namespace zcode::kernels
