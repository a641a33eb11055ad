// zcode/core/dist/expert_split.h: the engine's side of expert parallelism
// (distributed.expert_parallel = K > 1): which of a rank's parameters are
// its experts, where they sit in the one-process parameter order, and the
// global gradient norm in that order.
//
// A model under expert parallelism (glm52: plugins/model/glm52/README.md)
// lists on each rank its dense tensors (the same on every rank, in the same
// order) and its own experts (flag ZC_PARAM_EXPERT) under their global
// names, in the one-process order; between two dense tensors the experts of
// expert-group rank q come before those of rank q + 1 (abi.h, "Expert
// parallelism"). So the one-process list is the ranks' lists merged at the
// dense tensors, and this class rebuilds it once, at setup, from every
// group rank's (flag, size) list.
//
// What moves where (engine.cpp):
//   dense tensors   summed over the whole world (the data-parallel group)
//   expert tensors  summed over EXPERT_DATA, the W/K ranks that hold the
//                   same experts (nothing to sum when W = K)
//   gradient norm   the one-process fold of core::grad_norm's block
//                   partials: each reducer gives its tensors' partials
//                   (with ZeRO-1 gathered from its group's shards), one
//                   allgatherv over the expert group brings the experts'
//                   partials of every group rank, and each rank folds the
//                   dense and expert partials in the one-process order.
//   ZeRO-1          the dense tensors split among the world, each expert
//                   among its EXPERT_DATA ranks (two flat layouts; the
//                   engine's plan_shards).
// Checkpoints hold every expert under its global name: is_local_expert /
// is_foreign_expert tell a stage's tensors apart by that name (a parameter's
// name, or the name followed by "." and a buffer, as optimizers save
// "<param>.<buffer>").
//
// Not thread-safe (the Communicator's one thread). No allocation in norm().
#pragma once

#include <zcode/abi.h>
#include <zcode/core/dist/communicator.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace zcode::dist {

class ExpertSplit {
 public:
  /// Splits `params` (the model's list; its tensors must stay valid) into
  /// dense and expert tensors, on this rank alone (no collective: the
  /// engine lays out and shards both lists before the optimizer exists).
  /// Throws std::invalid_argument when a gradient is not fp32 CPU or the
  /// rank holds no expert tensor.
  explicit ExpertSplit(const zc_param_list& params);
  /// Exchanges every expert-group rank's list over `expert_group` (a
  /// collective on that group, which must outlive this object). Throws
  /// std::invalid_argument when two ranks hold the same expert or the
  /// ranks' dense tensors differ in number or size (naming the first
  /// difference).
  void exchange(Communicator& expert_group);

  /// The dense tensors / this rank's expert tensors, in the model's order.
  const zc_param_list& dense() const { return dense_list_; }
  const zc_param_list& experts() const { return expert_list_; }
  /// Index in dense() of the model's tensor i, or -1 when it is an expert.
  int64_t dense_index(size_t i) const { return dense_of_[i]; }
  size_t num_tensors() const { return dense_of_.size(); }

  /// Every gradient of dense() set to 0 (between micro-batches of the
  /// deterministic path, which folds the dense gradients per micro-batch
  /// while the model keeps adding the experts').
  void zero_dense_grads() const;

  /// True when `tensor` is a name of, or a buffer ("<name>.<buffer>") of,
  /// one of this rank's experts / an expert of another group rank.
  bool is_local_expert(std::string_view tensor) const;
  bool is_foreign_expert(std::string_view tensor) const;

  /// The one-process global gradient norm of the summed gradients (a
  /// collective on the expert group; every group rank calls it) from the
  /// squared-sum partials (core::grad_square_partials, kSumBlock blocks) of
  /// every block of dense() and of this rank's experts(), each in list
  /// order: the reducers' gathered_partials(), which a ZeRO-1 reducer
  /// gathers from the ranks' shards. Throws std::invalid_argument when the
  /// counts are not those lists' block counts, std::logic_error before
  /// exchange().
  double norm(const std::vector<double>& dense_partials, const std::vector<double>& expert_partials);

 private:
  static bool matches(const std::unordered_set<std::string>& names, std::string_view tensor);

  Communicator* group_ = nullptr;  // set by exchange()
  std::vector<int64_t> desc_;      // per tensor: numel (dense) or -1 - numel (expert)
  std::string names_;              // this rank's expert names, '\n'-separated
  std::vector<zc_param> dense_, expert_;
  zc_param_list dense_list_{}, expert_list_{};
  std::vector<int64_t> dense_of_;
  std::unordered_set<std::string> local_names_, foreign_names_;
  // The one-process order: per entry, a dense index (>= 0) or -(1 + slot)
  // for the expert tensor of the group's concatenated expert partials that
  // starts at expert_block_[slot] with expert_blocks_n_[slot] blocks.
  std::vector<int64_t> order_;
  std::vector<size_t> expert_block_, expert_blocks_n_;
  std::vector<size_t> partial_counts_;  // per group rank, its experts' block partials
  std::vector<double> all_;             // every group rank's expert partials
  std::vector<size_t> dense_block_;     // per dense tensor, its first partial among the dense ones
  size_t dense_blocks_ = 0;
};

}  // namespace zcode::dist
