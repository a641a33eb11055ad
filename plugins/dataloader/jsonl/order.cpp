#include "order.h"

#include <cmath>

namespace zcode::data {

void permutation(uint64_t n, uint64_t seed, std::vector<uint32_t>& out) {
  out.resize(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(i);
  Rng rng(seed);
  for (uint64_t i = n; i > 1; --i) {
    uint64_t j = rng.below(i);
    std::swap(out[i - 1], out[j]);
  }
}

bool is_val_document(std::string_view file_name, uint64_t record_index, double val_fraction) {
  if (val_fraction <= 0.0) return false;
  if (val_fraction >= 1.0) return true;
  uint64_t h = sdk::mix64(sdk::fnv1a64(file_name) ^ sdk::mix64(record_index));
  return sdk::u01(h) < val_fraction;
}

}  // namespace zcode::data
