// zcode/core/dist/gradient_reducer.h: the data-parallel gradient reduction of
// one optimizer step, and ZeRO-1's parameter all-gather, over a FlatLayout.
//
// Every rank computes the gradients of its micro-batches (each normalised by
// the target tokens of the whole global step, so the sum over ranks is the
// gradient of the global batch). Two ways to sum them:
//
//   fast (training.deterministic: false): each rank accumulates its own
//     micro-batches in the model, then the ranks' totals are summed bucket
//     by bucket in reverse flat order (bucket_mb each; the order in which a
//     backward pass finishes the gradients), each bucket as a reduce-scatter:
//     every element is reduced once, on one rank, so every rank ends with
//     the same bits. Without ZeRO an all-gather of each bucket follows, and
//     every rank has the whole sum; with ZeRO (zero_stage 1) each rank keeps
//     only its shard (ShardPlan) of it. The buckets can start during the
//     backward pass (on_grads_ready, from the model's zc_fb_options.
//     grads_ready): a bucket starts as soon as all its tensors are final,
//     and Open MPI progresses it whenever the backward calls back. The
//     order of the sum across ranks is MPI's, not the one-process order.
//
//   deterministic (true): after each micro-batch, add_micro() sends shard q
//     (ShardPlan) of that micro-batch's gradient to rank q (an all-to-all),
//     and the owner adds the N pieces in rank order into its fp32
//     accumulator; finish() all-gathers the accumulated shards (not with
//     ZeRO). Micro-batch m of rank r is global micro-batch m·N + r, so the
//     owner's fold is ((d_0 + d_1) + d_2) + ... in global order: the same sum,
//     element by element, as one process with gradient_accumulation × N that
//     runs the same fold (the engine uses this class there too, with N = 1,
//     when deterministic).
//
// The global gradient norm (norm()) is the fold of the kSumBlock blocks'
// partials in flat order (core::grad_norm's definition): with ZeRO each
// rank computes its shard's blocks and one all-gather joins them, so the
// norm has the one-process bits in every layout.
//
// Memory: one flat copy (size() fp32), shared by the gradients and, with
// ZeRO, the parameter all-gather; one shard; deterministic, N shards of
// receive buffer. No allocation after construction except inside MPI's
// non-blocking calls. Not thread-safe (the Communicator's one thread).
#pragma once

#include <zcode/core/dist/communicator.h>
#include <zcode/core/dist/flat_layout.h>

#include <exception>
#include <memory>
#include <vector>

namespace zcode::dist {

class GradientReducer {
 public:
  struct Options {
    double bucket_mb = 25;
    bool deterministic = false;
    bool zero = false;  ///< ZeRO-1: keep only this rank's shard of the summed gradient
  };
  /// `params` must stay valid (the model's list); `layout` and `plan` (its
  /// shards, one per rank) must outlive the reducer. Throws
  /// std::invalid_argument when bucket_mb <= 0 or the plan has another
  /// number of parts than the communicator has ranks.
  GradientReducer(Communicator& comm, const zc_param_list& params, const FlatLayout& layout, const ShardPlan& plan,
                  const Options& opts);
  ~GradientReducer();

  const FlatLayout& layout() const { return layout_; }
  bool deterministic() const { return opts_.deterministic; }
  bool zero() const { return opts_.zero; }
  /// This rank's part of every tensor (ZeRO-1: what its optimizer updates).
  const std::vector<int64_t>& shard_begin() const { return my_begin_; }
  const std::vector<int64_t>& shard_end() const { return my_end_; }

  /// Fast path, per optimizer step: begin_fast() before the last
  /// micro-batch's forward/backward; on_grads_ready() as the model announces
  /// final tensors (optional: every bucket not started by then starts in
  /// finish_fast()); finish_fast() completes the sum (the whole gradient in
  /// every rank's `params`, or with ZeRO its shard).
  void begin_fast();
  /// Never throws (it runs inside the model's backward, across the ABI): a
  /// failure is kept and rethrown by finish_fast().
  void on_grads_ready(size_t first, size_t count) noexcept;
  void finish_fast();

  /// Deterministic path, per optimizer step: begin(); after each of this
  /// rank's micro-batches (the model's gradient holding only that
  /// micro-batch's), add_micro(); then finish() writes the global sum into
  /// `params`' gradients (with ZeRO, this rank's shard of them).
  void begin();
  void add_micro();
  void finish();

  /// The global gradient norm after the sum (a collective with ZeRO).
  double norm();
  /// The squared sums of every kSumBlock block of the summed gradients
  /// (core::grad_square_partials), tensor by tensor in list order, as one
  /// process holding them all computes them: with ZeRO each rank's shard's
  /// partials, all-gathered (a collective), else this rank's own. Valid
  /// until the next call; no allocation.
  const std::vector<double>& gathered_partials();
  /// g ← c·g on the gradients this rank holds summed (all, or its shard).
  void scale(float c);
  /// ZeRO-1 after the optimizer step: every rank's shard of the parameter
  /// values to every rank (an all-gather). A no-op without ZeRO.
  void allgather_params();
  /// ZeRO-1: every rank's shard of the summed, clipped gradients to every
  /// rank, for a callback that reads all of them (the debugger). A no-op
  /// without ZeRO.
  void allgather_grads();

  /// Milliseconds spent in the gradient collectives (the exposed
  /// communication: transfers not hidden behind compute) since the last
  /// call; resets the count. Excludes take_wait_ms's part.
  double take_comm_ms();
  /// Milliseconds this rank waited for the slowest rank of its group before
  /// the reduction (a barrier at its start: load imbalance, not transfer;
  /// Megatron-LM's --barrier-with-L1-time separates the two the same way)
  /// since the last call; resets the count.
  double take_wait_ms();
  /// take_wait_ms's and take_comm_ms's counts so far, without resetting them.
  double wait_ms() const { return wait_ms_; }
  double comm_ms() const { return comm_ms_; }

 private:
  struct Bucket;
  void start_bucket(size_t b);
  void progress();
  void pack_final(size_t tensor);
  void wait_for_ranks();  // the timed barrier of take_wait_ms

  Communicator& comm_;
  const zc_param_list& params_;
  const FlatLayout& layout_;
  const ShardPlan& plan_;
  Options opts_;
  size_t my_lo_ = 0, my_hi_ = 0;            // this rank's flat shard
  std::vector<int64_t> my_begin_, my_end_;  // per tensor, its part of the shard
  std::vector<float> flat_;                 // the packed gradient (and, with ZeRO, the gathered values) [size()]
  std::vector<float> shard_;                // fast: the reduce-scatter's output; deterministic: the accumulator
  std::vector<size_t> counts_;              // the ranks' shard sizes
  std::vector<float> recv_;                 // deterministic: N pieces of this rank's shard
  std::vector<Bucket> buckets_;             // fast: reverse flat order
  std::vector<size_t> tensor_pending_;      // fast: per bucket, tensors not yet final
  std::vector<char> packed_;                // fast: per tensor, packed into flat_ this step
  std::vector<std::vector<size_t>> tensor_buckets_;  // fast: per tensor, the buckets it overlaps
  std::vector<double> partials_, all_partials_;      // norm() with ZeRO
  std::vector<size_t> partial_counts_;
  double comm_ms_ = 0;
  double wait_ms_ = 0;
  std::exception_ptr failed_;  // fast: a failure inside on_grads_ready
};

}  // namespace zcode::dist
