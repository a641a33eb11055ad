// order.h: deterministic randomness for the data order (permutations, shuffle
// blocks, the val_fraction split). Everything here is a pure function of its
// seed, so an order can be recomputed after a restore instead of stored.
#pragma once

#include <zcode/sdk/hash.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace zcode::data {

/// A SplitMix64 generator (Steele et al. 2014; zcode/sdk/hash.h): state +=
/// golden gamma, output mix64(state). Its output is fixed by the paper, unlike std::
/// distributions, so orders are identical across compilers and machines.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return sdk::splitmix64_next(&state_); }
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
  return sdk::mix64(base ^ sdk::mix64(a + 0x632be59bd9b4e019ull) ^ sdk::mix64(b + 0x8cb92ba72f3d8dd7ull));
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
