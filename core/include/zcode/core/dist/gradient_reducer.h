// zcode/core/dist/gradient_reducer.h: the data-parallel gradient reduction of
// one optimizer step, over a FlatLayout.
//
// Every rank computes the gradients of its micro-batches (each normalised by
// the target tokens of the whole global step, so the sum over ranks is the
// gradient of the global batch). Two ways to sum them:
//
//   fast (training.deterministic: false): each rank accumulates its own
//     micro-batches in the model, then allreduce() sums the ranks' totals,
//     bucket by bucket in reverse flat order (bucket_mb each), as a
//     reduce-scatter followed by an all-gather: every element is reduced once,
//     on the rank owning it, so every rank ends with the same bits. The order
//     of the sum across ranks is MPI's, not the one-process order.
//
//   deterministic (true): after each micro-batch, add_micro() sends shard q of
//     that micro-batch's gradient to rank q (an all-to-all), and the owner adds
//     the N pieces in rank order into its fp32 accumulator; finish() all-gathers
//     the accumulated shards. Micro-batch m of rank r is global micro-batch
//     m·N + r, so the owner's fold is ((d_0 + d_1) + d_2) + ... in global
//     order: the same sum, element by element, as one process with
//     gradient_accumulation × N that runs the same fold (the engine uses this
//     class there too, with N = 1, when deterministic).
//
// Memory: one flat gradient copy (size() fp32) plus, deterministic, N shards
// of receive buffer and one accumulator shard. No allocation after
// construction. Not thread-safe (the Communicator's one thread).
#pragma once

#include <zcode/core/dist/communicator.h>
#include <zcode/core/dist/flat_layout.h>

#include <vector>

namespace zcode::dist {

class GradientReducer {
 public:
  /// `params` must stay valid (the model's list). bucket_mb > 0.
  GradientReducer(Communicator& comm, const zc_param_list& params, double bucket_mb, bool deterministic);

  const FlatLayout& layout() const { return layout_; }
  bool deterministic() const { return deterministic_; }

  /// Fast path: the gradients in `params` become their sum over the ranks.
  void allreduce();

  /// Deterministic path, per optimizer step: begin(); after each of this
  /// rank's micro-batches (the model's gradient holding only that
  /// micro-batch's), add_micro(); then finish() writes the global sum into
  /// `params`' gradients.
  void begin();
  void add_micro();
  void finish();

  /// Milliseconds spent in collectives since the last call (for the step
  /// line's comm_ms); resets the count.
  double take_comm_ms();

 private:
  Communicator& comm_;
  const zc_param_list& params_;
  FlatLayout layout_;
  bool deterministic_;
  std::vector<float> flat_;                         // the packed gradient [size()]
  std::vector<std::pair<size_t, size_t>> buckets_;  // [begin, end), reverse flat order
  std::vector<std::vector<size_t>> bucket_counts_;  // per bucket: the ranks' shard sizes
  std::vector<float> shard_;                        // fast: one bucket's shard; deterministic: the accumulator
  std::vector<size_t> counts_;                      // deterministic: the ranks' shards of the whole index
  size_t shard_offset_ = 0;                         // deterministic: this rank's shard start
  std::vector<float> recv_;                         // deterministic: N pieces of this rank's shard
  double comm_ms_ = 0;
};

}  // namespace zcode::dist
