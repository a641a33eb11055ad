// zcode/core/dist/process_groups.h: the process groups of a job and the
// collective service plugins reach them through (zc_collectives, ABI 1.5).
//
// With W ranks and distributed.expert_parallel = K (K divides W), as in
// Megatron-LM and DeepSpeed-MoE, expert parallelism is carved out of data
// parallelism:
//   world        all W ranks
//   data         the ranks that hold the same dense parameters: the world
//   expert       K consecutive ranks {r - r mod K, ..., + K - 1}: they split
//                the experts among them
//   expert_data  the W/K ranks with the same r mod K: they hold the same
//                experts, and reduce those experts' gradients
// K = 1 gives one-rank expert groups and expert_data = the world.
#pragma once

#include <zcode/abi.h>
#include <zcode/core/dist/communicator.h>

#include <memory>

namespace zcode::dist {

class ProcessGroups {
 public:
  /// Splits `world` (a collective: every rank constructs it, with the same
  /// K). Throws std::invalid_argument when K < 1 or K does not divide the
  /// world size. `world` must outlive this object.
  ProcessGroups(Communicator& world, int expert_parallel);
  Communicator& world() const { return world_; }
  int expert_parallel() const { return k_; }
  /// The group `g` (a zc_group value). Throws std::invalid_argument for an
  /// unknown group.
  Communicator& get(zc_group g) const;

 private:
  Communicator& world_;
  int k_;
  std::unique_ptr<Communicator> expert_, expert_data_;
};

/// zc_collectives over a ProcessGroups (abi.h, "Collectives"): checks each
/// tensor (contiguous, CPU, f32/f64/i64; counts that match), maps the call
/// to the group's Communicator, and returns a status naming the call and the
/// rank when it fails. AVG is SUM divided by the group's size after the
/// reduction (float types only). Requests own their Communicator::Request
/// and the counts MPI reads until they complete.
///
/// One thread calls it (the Communicator's). `groups` must outlive it.
class CollectivesService {
 public:
  explicit CollectivesService(const ProcessGroups& groups);
  CollectivesService(const CollectivesService&) = delete;
  CollectivesService& operator=(const CollectivesService&) = delete;
  const zc_collectives* table() const { return &table_; }

  /// The service of a process without a launcher: every group has one rank.
  /// Immortal (plugins may keep the pointer for the life of the process).
  static const zc_collectives* single_process();

 private:
  const ProcessGroups& groups_;
  zc_collectives table_{};
};

}  // namespace zcode::dist
