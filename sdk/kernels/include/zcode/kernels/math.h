// zcode/kernels/math.h: scalar math shared by the kernels, written so that
// loops over it vectorise (AVX-512 with -march=native).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace zcode::kernels {

/// exp(x) for float: Cody-Waite range reduction x = n·ln2 + r, |r| ≤ ln2/2
/// (n the nearest integer to x/ln2),
/// then the degree-6 minimax polynomial of Cephes' expf (max relative error
/// ≈ 2e-7 on [-87, 88]); inputs are clamped there (exp(-87.3) ≈ 1.2e-38
/// stands in for 0). Branch-free so `#pragma omp simd` loops vectorise.
inline float fast_exp(float x) {
  x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  // n = round(x/ln2) by the 1.5·2^23 trick: std::floor would not vectorise
  // without -fno-trapping-math.
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
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

/// Logistic sigmoid σ(x) = 1/(1+e^{-x}).
template <class T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + kexp(-x));
}

/// SplitMix64 (Steele, Lea & Flood 2014): a well-mixed 64-bit hash, used as
/// a counter-based RNG so results do not depend on thread scheduling.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/// Uniform double in [0, 1) from a 64-bit value (53 random bits).
inline double u01(uint64_t x) { return static_cast<double>(x >> 11) * 0x1.0p-53; }

}  // namespace zcode::kernels
