// zcode/sdk/hash.h: the one FNV-1a and the one SplitMix64 of the project
// (header-only, constexpr).
//
// Seeds derived from these feed every recorded figure (weight init, data
// order, the validation split, sampling), so their outputs are fixed by the
// published algorithms and must never change.
#pragma once

#include <cstdint>
#include <string_view>

namespace zcode::sdk {

// ---- FNV-1a ------------------------------------------------------------------

/// FNV-1a 64-bit offset basis (14695981039346656037).
inline constexpr uint64_t kFnv1a64OffsetBasis = 0xcbf29ce484222325ull;
/// FNV-1a 64-bit prime, 2^40 + 2^8 + 0xb3 (1099511628211).
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ull;

/// FNV-1a, 64-bit, over the bytes of `text`, starting from `h` (the offset
/// basis by default; pass an earlier result to hash a concatenation piecewise).
/// For each byte: h ^= byte; h *= prime. Source: Fowler, Noll and Vo,
/// "The FNV Non-Cryptographic Hash Algorithm" (draft-eastlake-fnv;
/// isthe.com/chongo/tech/comp/fnv). fnv1a64("") = 0xcbf29ce484222325,
/// fnv1a64("a") = 0xaf63dc4c8601ec8c.
constexpr uint64_t fnv1a64(std::string_view text, uint64_t h = kFnv1a64OffsetBasis) noexcept {
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnv1a64Prime;
  }
  return h;
}

// ---- SplitMix64 ----------------------------------------------------------------
//
// Steele, Lea and Flood, "Fast Splittable Pseudorandom Number Generators"
// (OOPSLA 2014), with the mixing constants of Vigna's reference splitmix64.c
// (Stafford's "variant 13"). The generator adds the golden gamma to its state
// and outputs mix64(state); the three functions below are that one algorithm
// seen as a finalizer, a counter-based hash, and a stateful generator.

/// The golden gamma, 2^64 / φ rounded to odd: the SplitMix64 state increment.
inline constexpr uint64_t kSplitMix64Gamma = 0x9e3779b97f4a7c15ull;

/// The SplitMix64 output function (the finalizer, no increment): a bijective
/// 64-bit mix. z = (z ^ z>>30) * 0xbf58476d1ce4e5b9;
/// z = (z ^ z>>27) * 0x94d049bb133111eb; return z ^ z>>31. mix64(0) = 0.
constexpr uint64_t mix64(uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// The output of one SplitMix64 step from state `x`, the state left
/// unchanged: mix64(x + gamma). A well-mixed 64-bit hash of `x`, used as a
/// counter-based RNG so results do not depend on thread scheduling.
/// splitmix64(0) = 0xe220a8397b1dcdaf (the first output of a generator seeded 0).
constexpr uint64_t splitmix64(uint64_t x) noexcept { return mix64(x + kSplitMix64Gamma); }

/// One step of the SplitMix64 generator: advances *state by gamma and returns
/// mix64 of the new state. Seeded 0, its first outputs are 0xe220a8397b1dcdaf,
/// 0x6e789e6aa1b965f4, 0x06c45d188009454f.
constexpr uint64_t splitmix64_next(uint64_t* state) noexcept { return mix64(*state += kSplitMix64Gamma); }

/// Uniform double in [0, 1) from the top 53 bits of `x`.
constexpr double u01(uint64_t x) noexcept { return static_cast<double>(x >> 11) * 0x1.0p-53; }

// ---- seeds of named streams ------------------------------------------------------

/// The seed of the random stream named `stream_name` under the run seed
/// `seed`, as abi.h documents zc_host_services.derive_seed:
/// splitmix64(fnv1a64(stream_name)) XOR seed. Stable across runs, machines
/// and builds. derive_seed(42, "data") = 0x93a77708b39d31a4.
constexpr uint64_t derive_seed(uint64_t seed, std::string_view stream_name) noexcept {
  return splitmix64(fnv1a64(stream_name)) ^ seed;
}

}  // namespace zcode::sdk
