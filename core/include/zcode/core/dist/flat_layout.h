// zcode/core/dist/flat_layout.h: one flat, padded index of a model's
// parameters, the coordinate system of everything that moves gradients or
// optimizer state between ranks (data-parallel buckets and shards today;
// ZeRO-1 ranges and reshardable optimizer checkpoints next).
//
// Every tensor starts at a multiple of the granule (16 fp32 = 64 bytes, one
// cache line), in the model's parameter order; the padding is zero. Shards
// are contiguous granule-aligned ranges of the flat index, so a tensor may
// span two shards (MoE shapes divide by nothing in particular; llm.c's "every
// tensor divisible by the ranks" rule does not hold for them).
#pragma once

#include <zcode/abi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zcode::dist {

class FlatLayout {
 public:
  static constexpr size_t kGranule = 16;  ///< fp32 elements

  struct Entry {
    std::string name;
    size_t offset = 0;  ///< in the flat index, a multiple of kGranule
    size_t numel = 0;
  };

  /// The layout of `params` (fp32 contiguous CPU gradients, as
  /// core::grad_norm requires). Throws std::invalid_argument on any other
  /// gradient, naming the parameter.
  explicit FlatLayout(const zc_param_list& params);

  const std::vector<Entry>& entries() const { return entries_; }
  /// Elements of the flat index (a multiple of kGranule).
  size_t size() const { return size_; }

  /// Copies every gradient of `params` (the list the layout was made from)
  /// to its range of flat[size()]; the padding is left as it is.
  void pack_grads(const zc_param_list& params, float* flat) const;
  /// The reverse of pack_grads.
  void unpack_grads(const float* flat, const zc_param_list& params) const;

 private:
  std::vector<Entry> entries_;
  size_t size_ = 0;
};

/// [begin, end) split into `parts` contiguous ranges whose sizes are
/// multiples of `granule` except the last (which takes the remainder); the
/// first ranges are one granule larger when the granules do not divide
/// evenly. Returns the sizes (they sum to end - begin). parts >= 1.
std::vector<size_t> split_range(size_t begin, size_t end, int parts, size_t granule);

}  // namespace zcode::dist
