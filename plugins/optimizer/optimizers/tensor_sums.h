// tensor_sums.h: sums over whole parameters when each rank holds a part of
// them (ZeRO-1), with the same bits as one process holding them whole.
//
// Parameter i's elements form blocks of block[i] elements, counted from its
// first element (kernels::kSumBlock for LAMB's norms, zcode/kernels/
// block_sum.h; a band of rows for Adafactor's column sums). A rank computes
// width[i] partial sums per block of its part; one allgather over the
// shard's group puts every block's partials, in parameter order, on every
// rank; a sum over a parameter is the left fold of its blocks' partials.
// Each parameter's group is its own (zc_param_shard.groups, ABI 1.9: under
// expert parallelism the experts' parts are split over EXPERT_DATA, the
// dense ones over DATA), and each group's parameters are laid out apart. One
// process computes the same partials and folds them the same way, so LAMB's
// norms and Adafactor's statistics do not depend on the number of ranks.
#pragma once

#include "param_groups.h"

#include <zcode/kernels/block_sum.h>
#include <zcode/sdk/collectives.h>
#include <zcode/sdk/error.h>

#include <algorithm>
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
  /// parameter takes no part), each part starting on a block boundary.
  /// Parameter i's sums run over the ranks of `groups[i]` (zc_param_shard's
  /// groups, ABI 1.9): the parameters of one group are laid out on their
  /// own, in slot order. With `comm` set (sharded), a collective over each
  /// group: one allgather of every rank's first partial and partial count,
  /// checked to tile the group's parameters. `estimate_only`: sizes only,
  /// no buffers.
  void init(const std::vector<ParamSlot>& slots, const std::vector<int64_t>& lo, const std::vector<int64_t>& full_n,
            const std::vector<int64_t>& block, const std::vector<int64_t>& width, const sdk::Collectives* comm,
            const std::vector<zc_group>& groups, bool estimate_only) {
    comm_ = comm;
    const size_t n = slots.size();
    first_.assign(n, 0);
    nblocks_.assign(n, 0);
    local_at_.assign(n, 0);
    group_of_.assign(n, 0);
    width_ = width;
    // The groups in increasing zc_group order: every rank exchanges them in
    // the same order (abi.h, zc_param_shard).
    std::vector<zc_group> ids(groups.begin(), groups.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    groups_.assign(ids.size(), Group{});
    std::vector<int64_t> global(ids.size(), 0), local(ids.size(), 0), my_first(ids.size(), -1);
    for (size_t i = 0; i < n; ++i) {
      const size_t g = static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), groups[i]) - ids.begin());
      group_of_[i] = g;
      first_[i] = global[g];
      local_at_[i] = local[g];
      if (width[i] == 0) continue;
      nblocks_[i] = (full_n[i] + block[i] - 1) / block[i];
      if (slots[i].n > 0) {
        if (lo[i] % block[i] != 0)
          throw sdk::Error(ZC_ERR_INVALID_ARGUMENT,
                           "optimizer: the part of '" + slots[i].name + "' starts at element " + std::to_string(lo[i]) +
                               ", not a multiple of its blocks of " + std::to_string(block[i]));
        if (my_first[g] < 0) my_first[g] = global[g] + lo[i] / block[i] * width[i];
        local[g] += (slots[i].n + block[i] - 1) / block[i] * width[i];
      }
      global[g] += nblocks_[i] * width[i];
    }
    if (estimate_only) return;
    for (size_t g = 0; g < ids.size(); ++g) {
      Group& gr = groups_[g];
      gr.id = ids[g];
      gr.local.assign(static_cast<size_t>(local[g]), 0.0);
      gr.all.assign(static_cast<size_t>(global[g]), 0.0);
      const int ranks = comm_ ? comm_->size(gr.id) : 1;
      gr.counts.assign(static_cast<size_t>(ranks), local[g]);
      if (ranks == 1) {
        if (local[g] != global[g])
          throw sdk::Error(ZC_ERR_INVALID_ARGUMENT, "optimizer: one rank holds " + std::to_string(local[g]) + " of " +
                                                        std::to_string(global[g]) + " partial sums of the parameters");
        continue;
      }
      gr.my_first = local[g] ? my_first[g] : -1;
      gr.counted = false;  // the ranks' counts are gathered by the first exchange()
    }
  }

  /// This rank's partials of slot i's part: blocks of the part × width[i].
  double* part(size_t i) { return groups_[group_of_[i]].local.data() + local_at_[i]; }

  /// Gathers every rank's partials (a collective over each group when
  /// sharded, in increasing zc_group order; a group with no partials is
  /// skipped, alike on all of its ranks since they hold the same tensors).
  void exchange() {
    for (Group& g : groups_) {
      if (comm_ && g.counts.size() > 1 && !g.all.empty()) {
        if (!g.counted) gather_counts(g);
        comm_->allgather(std::span<const double>(g.local), std::span<double>(g.all), std::span<const int64_t>(g.counts),
                         g.id);
      } else {
        g.all = g.local;
      }
    }
  }

 private:
  struct Group {
    zc_group id = ZC_GROUP_DATA;
    std::vector<double> local, all;
    std::vector<int64_t> counts;  // per rank of the group, its partials
    int64_t my_first = -1;
    bool counted = false;
  };

  // Every rank's (first partial, count) in group `g`, checked to tile its
  // parameters. Done in the first step, not in create: the host creates the
  // optimizer in a phase where one rank may fail alone, and a collective
  // there would leave the others waiting in it (every rank reaches step()
  // together).
  void gather_counts(Group& g) {
    const int ranks = static_cast<int>(g.counts.size());
    const int64_t local = static_cast<int64_t>(g.local.size()), global = static_cast<int64_t>(g.all.size());
    const int64_t mine[2] = {g.my_first, local};
    std::vector<int64_t> all(static_cast<size_t>(2 * ranks));
    std::vector<int64_t> two(static_cast<size_t>(ranks), 2);
    comm_->allgather(std::span<const int64_t>(mine, 2), std::span<int64_t>(all), std::span<const int64_t>(two), g.id);
    int64_t next = 0;
    for (int q = 0; q < ranks; ++q) {
      const int64_t first = all[2 * q], count = all[2 * q + 1];
      if (count > 0 && first != next)
        throw sdk::Error(ZC_ERR_INVALID_ARGUMENT, "optimizer: rank " + std::to_string(q) + "'s part starts at block " +
                                                      std::to_string(first) + ", expected " + std::to_string(next) +
                                                      " (the ranks' parts must follow each other)");
      next += count;
      g.counts[static_cast<size_t>(q)] = count;
    }
    if (next != global)
      throw sdk::Error(ZC_ERR_INVALID_ARGUMENT, "optimizer: the ranks' parts cover " + std::to_string(next) + " of " +
                                                    std::to_string(global) + " partial sums of the parameters");
    g.counted = true;
  }

 public:
  /// Σ over the blocks of parameter i of partial k (after exchange): their
  /// left fold, in block order; `from`, `count`: blocks [from, from + count).
  double sum(size_t i, int64_t k) const { return sum(i, k, 0, nblocks_[i]); }
  double sum(size_t i, int64_t k, int64_t from, int64_t count) const {
    return kernels::fold(groups_[group_of_[i]].all.data() + first_[i] + from * width_[i] + k, count, width_[i]);
  }

 private:
  const sdk::Collectives* comm_ = nullptr;
  std::vector<Group> groups_;
  std::vector<size_t> group_of_;  // per slot, its index in groups_
  std::vector<int64_t> first_, nblocks_, local_at_, width_;
};

}  // namespace zcode::optim
