// Shared helpers of the glm52 tests: small configs and random batches.
#pragma once

#include "config.h"
#include "model.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace glm52_test {

/// Resolves a Config from JSON model options (+ optional whole config).
inline glm52::Config make_config(const std::string& model_json, const std::string& config_json = "{}") {
  zcode::sdk::Options m(model_json.c_str(), "model"), c(config_json.c_str(), "config");
  return glm52::Config::resolve(m, c, 0);
}

struct Batch {
  int B = 0, T = 0;
  std::vector<int32_t> ids, targets, docs;
  glm52::BatchView view(bool with_docs) const {
    glm52::BatchView v;
    v.B = B;
    v.T = T;
    v.ids = ids.data();
    v.targets = targets.data();
    v.doc_ids = with_docs ? docs.data() : nullptr;
    return v;
  }
};

/// Random ids in [0, V); targets = next id, with about 1 in 7 set to -1;
/// each row holds two documents (split at a random point).
inline Batch random_batch(int B, int T, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Batch b;
  b.B = B;
  b.T = T;
  for (int i = 0; i < B; ++i) {
    const int split = 1 + static_cast<int>(rng() % static_cast<uint64_t>(T > 1 ? T - 1 : 1));
    for (int t = 0; t < T; ++t) {
      b.ids.push_back(static_cast<int32_t>(rng() % V));
      b.targets.push_back(rng() % 7 == 0 ? -1 : static_cast<int32_t>(rng() % V));
      b.docs.push_back(t < split ? 0 : 1);
    }
  }
  return b;
}

}  // namespace glm52_test
