// tensor_sums.h: sums over whole parameters when each rank holds a part of
// them (ZeRO-1), with the same bits as one process holding them whole.
//
// Parameter i's elements form blocks of block[i] elements, counted from its
// first element (kernels::kSumBlock for LAMB's norms, zcode/kernels/
// block_sum.h; a band of rows for Adafactor's column sums). A rank computes
// width[i] partial sums per block of its part; one allgather over the
// shard's group puts every block's partials, in parameter order, on every
// rank; a sum over a parameter is the left fold of its blocks' partials. One
// process computes the same partials and folds them the same way, so LAMB's
// norms and Adafactor's statistics do not depend on the number of ranks.
#pragma once

#include "param_groups.h"

#include <zcode/kernels/block_sum.h>
#include <zcode/sdk/collectives.h>
#include <zcode/sdk/error.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace zcode::optim {

class TensorSums {
 public:
  TensorSums() = default;
  /// Lays out the blocks of `slots` (this rank's parts: slot i holds
  /// elements [lo[i], lo[i] + slots[i].n) of a parameter of full_n[i]),
  /// `block[i]` elements and `width[i]` partials a block (width 0: the
  /// parameter takes no part), each part starting on a block boundary. With
  /// `comm` set (sharded), a collective over `group`: one allgather of every
  /// rank's first partial and partial count, checked to tile the
  /// parameters. `estimate_only`: sizes only, no buffers.
  void init(const std::vector<ParamSlot>& slots, const std::vector<int64_t>& lo, const std::vector<int64_t>& full_n,
            const std::vector<int64_t>& block, const std::vector<int64_t>& width, const sdk::Collectives* comm,
            zc_group group, bool estimate_only) {
    comm_ = comm;
    group_ = group;
    const size_t n = slots.size();
    first_.assign(n, 0);
    nblocks_.assign(n, 0);
    local_at_.assign(n, 0);
    width_ = width;
    int64_t global = 0, local = 0, my_first = -1;
    for (size_t i = 0; i < n; ++i) {
      first_[i] = global;
      local_at_[i] = local;
      if (width[i] == 0) continue;
      nblocks_[i] = (full_n[i] + block[i] - 1) / block[i];
      if (slots[i].n > 0) {
        if (lo[i] % block[i] != 0)
          throw sdk::Error(ZC_ERR_INVALID_ARGUMENT,
                           "optimizer: the part of '" + slots[i].name + "' starts at element " + std::to_string(lo[i]) +
                               ", not a multiple of its blocks of " + std::to_string(block[i]));
        if (my_first < 0) my_first = global + lo[i] / block[i] * width[i];
        local += (slots[i].n + block[i] - 1) / block[i] * width[i];
      }
      global += nblocks_[i] * width[i];
    }
    if (estimate_only) return;
    local_.assign(static_cast<size_t>(local), 0.0);
    all_.assign(static_cast<size_t>(global), 0.0);
    const int ranks = comm_ ? comm_->size(group_) : 1;
    counts_.assign(static_cast<size_t>(ranks), local);
    if (ranks == 1) {
      if (local != global)
        throw sdk::Error(ZC_ERR_INVALID_ARGUMENT, "optimizer: one rank holds " + std::to_string(local) + " of " +
                                                      std::to_string(global) + " partial sums of the parameters");
      return;
    }
    my_first_ = local ? my_first : -1;
    counted_ = false;  // the ranks' counts are gathered by the first exchange()
  }

  /// This rank's partials of slot i's part: blocks of the part × width[i].
  double* part(size_t i) { return local_.data() + local_at_[i]; }

  /// Gathers every rank's partials (a collective when sharded).
  void exchange() {
    if (comm_ && counts_.size() > 1) {
      if (!counted_) gather_counts();
      comm_->allgather(std::span<const double>(local_), std::span<double>(all_), std::span<const int64_t>(counts_),
                       group_);
    } else {
      all_ = local_;
    }
  }

 private:
  // Every rank's (first partial, count), checked to tile the parameters.
  // Done in the first step, not in create: the host creates the optimizer in
  // a phase where one rank may fail alone, and a collective there would leave
  // the others waiting in it (every rank reaches step() together).
  void gather_counts() {
    const int ranks = static_cast<int>(counts_.size());
    const int64_t local = static_cast<int64_t>(local_.size()), global = static_cast<int64_t>(all_.size());
    const int64_t mine[2] = {my_first_, local};
    std::vector<int64_t> all(static_cast<size_t>(2 * ranks));
    std::vector<int64_t> two(static_cast<size_t>(ranks), 2);
    comm_->allgather(std::span<const int64_t>(mine, 2), std::span<int64_t>(all), std::span<const int64_t>(two), group_);
    int64_t next = 0;
    for (int q = 0; q < ranks; ++q) {
      const int64_t first = all[2 * q], count = all[2 * q + 1];
      if (count > 0 && first != next)
        throw sdk::Error(ZC_ERR_INVALID_ARGUMENT, "optimizer: rank " + std::to_string(q) + "'s part starts at block " +
                                                      std::to_string(first) + ", expected " + std::to_string(next) +
                                                      " (the ranks' parts must follow each other)");
      next += count;
      counts_[static_cast<size_t>(q)] = count;
    }
    if (next != global)
      throw sdk::Error(ZC_ERR_INVALID_ARGUMENT, "optimizer: the ranks' parts cover " + std::to_string(next) + " of " +
                                                    std::to_string(global) + " partial sums of the parameters");
    counted_ = true;
  }

 public:
  /// Σ over the blocks of parameter i of partial k (after exchange): their
  /// left fold, in block order; `from`, `count`: blocks [from, from + count).
  double sum(size_t i, int64_t k) const { return sum(i, k, 0, nblocks_[i]); }
  double sum(size_t i, int64_t k, int64_t from, int64_t count) const {
    return kernels::fold(all_.data() + first_[i] + from * width_[i] + k, count, width_[i]);
  }

 private:
  const sdk::Collectives* comm_ = nullptr;
  zc_group group_ = ZC_GROUP_DATA;
  std::vector<int64_t> first_, nblocks_, local_at_, counts_, width_;
  int64_t my_first_ = -1;
  bool counted_ = false;
  std::vector<double> local_, all_;
};

}  // namespace zcode::optim
