// order.h: deterministic randomness for the data order (permutations, shuffle
// blocks, the val_fraction split). Everything here is a pure function of its
// seed, so an order can be recomputed after a restore instead of stored.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace zcode::data {

/// SplitMix64 finalizer: a bijective 64-bit mix.
/// Source: Steele, Lea, Flood, "Fast Splittable Pseudorandom Number
/// Generators" (OOPSLA 2014), the `mix64` of SplitMix64 (constants of
/// Stafford's variant 13).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// FNV-1a, 64 bit (Fowler, Noll, Vo; offset basis 14695981039346656037,
/// prime 1099511628211) of `s`, continuing from `h`.
inline uint64_t fnv1a64(std::string_view s, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// A SplitMix64 generator (Steele et al. 2014): state += golden gamma, output
/// mix64(state). Its output is fixed by the paper, unlike std::
/// distributions, so orders are identical across compilers and machines.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ull); }
  /// Uniform integer in [0, n), n >= 1, without modulo bias: Lemire,
  /// "Fast Random Integer Generation in an Interval" (TOMACS 2019), Alg. 5.
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

/// Seed of one sub-stream (an epoch, a shuffle block): mix of the base seed
/// and up to two indices, so sub-streams never share a state.
inline uint64_t sub_seed(uint64_t base, uint64_t a, uint64_t b = 0) {
  return mix64(base ^ mix64(a + 0x632be59bd9b4e019ull) ^ mix64(b + 0x8cb92ba72f3d8dd7ull));
}

/// Writes a uniformly random permutation of [0, n) into `out` (resized to n):
/// Fisher-Yates / Durstenfeld shuffle (Knuth, TAOCP vol. 2, 3.4.2, Alg. P)
/// driven by Rng(seed).
void permutation(uint64_t n, uint64_t seed, std::vector<uint32_t>& out);

/// True when the document `record_index` of the shard named `file_name`
/// belongs to the validation split for `val_fraction` in [0, 1]. Decided by
/// a hash of (file name, index), never by RNG state, so the split is stable
/// across runs, seeds, worker counts and resumes.
bool is_val_document(std::string_view file_name, uint64_t record_index, double val_fraction);

}  // namespace zcode::data
