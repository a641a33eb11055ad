// glm52/expert_group.h: the model's expert group (model.h, ExpertGroup) over
// the host's collectives (zc_collectives, ABI 1.5): ZC_GROUP_EXPERT's rank,
// size and alltoallv, through the SDK's typed wrapper. What the plugin hands
// the model, and what the expert-parallel tests build.
#pragma once

#include "model.h"

#include <zcode/sdk/collectives.h>

#include <numeric>
#include <span>

namespace glm52 {

/// The expert group of `c` (copied: the wrapper is cheap and outlives no
/// one; the host's table must outlive the model). A failed collective throws
/// zcode::sdk::Error with the host's message.
inline ExpertGroup expert_group(const zcode::sdk::Collectives& c) {
  ExpertGroup g;
  g.size = c.size(ZC_GROUP_EXPERT);
  g.rank = c.rank(ZC_GROUP_EXPERT);
  g.alltoallv = [c, k = static_cast<size_t>(g.size)](const void* send, const int64_t* sc, void* recv, const int64_t* rc,
                                                     ExpertGroup::Type t) {
    const size_t ns = static_cast<size_t>(std::accumulate(sc, sc + k, int64_t{0}));
    const size_t nr = static_cast<size_t>(std::accumulate(rc, rc + k, int64_t{0}));
    const std::span<const int64_t> scs(sc, k), rcs(rc, k);
    auto go = [&](auto* type) {
      using U = std::remove_pointer_t<decltype(type)>;
      c.alltoallv(std::span<const U>(static_cast<const U*>(send), ns), scs, std::span<U>(static_cast<U*>(recv), nr),
                  rcs, ZC_GROUP_EXPERT);
    };
    switch (t) {
      case ExpertGroup::Type::kI64: go(static_cast<int64_t*>(nullptr)); break;
      case ExpertGroup::Type::kF32: go(static_cast<float*>(nullptr)); break;
      case ExpertGroup::Type::kF64: go(static_cast<double*>(nullptr)); break;
    }
  };
  return g;
}

}  // namespace glm52
