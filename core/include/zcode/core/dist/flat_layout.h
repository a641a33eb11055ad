// zcode/core/dist/flat_layout.h: one flat, padded index of a model's
// parameters, the coordinate system of everything that moves gradients,
// parameters or optimizer state between ranks: data-parallel buckets, the
// ranks' contiguous shards (ZeRO-1 ranges, the deterministic reduction's
// owners) and the blocks of the global gradient norm.
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
  /// pack_grads of tensor i only.
  void pack_grad(const zc_param_list& params, size_t i, float* flat) const;
  /// The parameter values (pack_values) or gradients (unpack_grads) of the
  /// flat range [begin, end) only: `range` holds end - begin elements, the
  /// range's (padding untouched).
  void pack_values(const zc_param_list& params, float* range, size_t begin, size_t end) const;
  void unpack_values(const float* range, const zc_param_list& params, size_t begin, size_t end) const;
  void unpack_grads(const float* range, const zc_param_list& params, size_t begin, size_t end) const;
  void pack_grads_range(const zc_param_list& params, float* range, size_t begin, size_t end) const;

 private:
  std::vector<Entry> entries_;
  size_t size_ = 0;
};

/// The ranks' contiguous shards of a FlatLayout: rank q owns flat elements
/// [bounds[q], bounds[q+1]). A bound falls on a tensor's start, or inside a
/// tensor at a multiple of its cut multiple (the lcm of the optimizer's
/// shard_granularity and kernels::kSumBlock, so that the gradient norm's
/// blocks and the optimizer's never straddle two ranks), as near as that
/// allows to q·size()/parts. The padding after a tensor goes with it.
struct ShardPlan {
  std::vector<size_t> bounds;  ///< [parts + 1]; bounds[0] = 0, bounds[parts] = size()
  int parts() const { return static_cast<int>(bounds.size()) - 1; }
  size_t begin(int q) const { return bounds[static_cast<size_t>(q)]; }
  size_t end(int q) const { return bounds[static_cast<size_t>(q) + 1]; }
  /// Every rank's shard size, in rank order.
  std::vector<size_t> counts() const;
  /// Rank q's part of tensor i of `layout`: elements [begin, end) of its
  /// row-major order (begin == end when q holds none of it).
  void tensor_range(const FlatLayout& layout, int q, size_t i, int64_t* begin, int64_t* end) const;
};

/// Plans `parts` shards of `layout`; `multiples[i]` (>= 1) is tensor i's
/// optimizer granularity (1 everywhere for a plain data-parallel split).
/// Throws std::invalid_argument when multiples has the wrong size.
ShardPlan plan_shards(const FlatLayout& layout, int parts, const std::vector<int64_t>& multiples);

/// [begin, end) split into `parts` contiguous ranges whose sizes are
/// multiples of `granule` except the last (which takes the remainder); the
/// first ranges are one granule larger when the granules do not divide
/// evenly. Returns the sizes (they sum to end - begin). parts >= 1.
std::vector<size_t> split_range(size_t begin, size_t end, int parts, size_t granule);

}  // namespace zcode::dist
