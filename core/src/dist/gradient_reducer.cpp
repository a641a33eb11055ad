// gradient_reducer.cpp: see zcode/core/dist/gradient_reducer.h.
#include <zcode/core/dist/gradient_reducer.h>
#include <zcode/core/train_step.h>

#include <zcode/kernels/block_sum.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace zcode::dist {
namespace {

struct CommTimer {
  double& total;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~CommTimer() { total += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); }
};

}  // namespace

// One bucket of the fast path: flat [begin, end), reduce-scattered with
// `counts` into shard_ at `out` (this rank's piece, `mine` elements), then
// (without ZeRO) all-gathered back into flat_.
struct GradientReducer::Bucket {
  size_t begin = 0, end = 0;
  std::vector<size_t> counts;
  size_t out = 0, mine = 0;
  std::unique_ptr<Request> rs, ag;
  bool started = false;
};

GradientReducer::GradientReducer(Communicator& comm, const zc_param_list& params, const FlatLayout& layout,
                                 const ShardPlan& plan, const Options& opts)
    : comm_(comm), params_(params), layout_(layout), plan_(plan), opts_(opts), flat_(layout.size(), 0.0f) {
  if (!(opts_.bucket_mb > 0)) throw std::invalid_argument("distributed.bucket_mb: expected a number > 0");
  const int n = comm_.size(), me = comm_.rank();
  if (plan_.parts() != n)
    throw std::invalid_argument("gradient reduction: a shard plan of " + std::to_string(plan_.parts()) + " parts for " +
                                std::to_string(n) + " ranks");
  my_lo_ = plan_.begin(me);
  my_hi_ = plan_.end(me);
  counts_ = plan_.counts();
  const size_t tensors = layout_.entries().size();
  my_begin_.resize(tensors);
  my_end_.resize(tensors);
  for (size_t i = 0; i < tensors; ++i) plan_.tensor_range(layout_, me, i, &my_begin_[i], &my_end_[i]);
  if (opts_.zero) {
    // The norm's partials: every rank's blocks, in rank (= flat) order.
    partial_counts_.assign(static_cast<size_t>(n), 0);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < tensors; ++i) {
        int64_t b = 0, e = 0;
        plan_.tensor_range(layout_, q, i, &b, &e);
        partial_counts_[static_cast<size_t>(q)] += static_cast<size_t>(kernels::sum_blocks(e - b));
      }
    size_t total = 0;
    for (size_t c : partial_counts_) total += c;
    partials_.reserve(partial_counts_[static_cast<size_t>(me)]);
    all_partials_.assign(total, 0.0);
  } else {
    all_partials_.reserve(core::grad_square_block_count(params_));
  }
  if (opts_.deterministic) {
    shard_.assign(my_hi_ - my_lo_, 0.0f);
    recv_.assign(static_cast<size_t>(n) * shard_.size(), 0.0f);
    return;
  }
  // Buckets of bucket_mb (a multiple of n granules), from the end of the
  // index: the order in which a backward pass finishes the gradients.
  const size_t g = FlatLayout::kGranule, unit = g * static_cast<size_t>(n);
  size_t per = static_cast<size_t>(std::llround(opts_.bucket_mb * 1024.0 * 1024.0 / sizeof(float)));
  per = std::max(unit, per / unit * unit);
  size_t out = 0;
  for (size_t end = layout_.size(); end > 0;) {
    Bucket b;
    b.begin = end > per ? end - per : 0;
    b.end = end;
    if (opts_.zero) {
      // Each rank receives the part of the bucket inside its shard.
      b.counts.resize(static_cast<size_t>(n));
      for (int q = 0; q < n; ++q) {
        const size_t lo = std::max(b.begin, plan_.begin(q)), hi = std::min(b.end, plan_.end(q));
        b.counts[static_cast<size_t>(q)] = hi > lo ? hi - lo : 0;
      }
      b.mine = b.counts[static_cast<size_t>(me)];
      b.out = b.mine ? std::max(b.begin, my_lo_) - my_lo_ : 0;
    } else {
      b.counts = split_range(b.begin, b.end, n, g);  // every rank reduces an equal piece of every bucket
      b.mine = b.counts[static_cast<size_t>(me)];
      b.out = out;
      out += b.mine;
    }
    end = b.begin;
    buckets_.push_back(std::move(b));
  }
  shard_.assign(opts_.zero ? my_hi_ - my_lo_ : out, 0.0f);
  // Which buckets each tensor overlaps (a tensor may straddle two).
  tensor_buckets_.resize(tensors);
  tensor_pending_.assign(buckets_.size(), 0);
  packed_.assign(tensors, 0);
  for (size_t i = 0; i < tensors; ++i) {
    const auto& e = layout_.entries()[i];
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (e.numel > 0 && buckets_[b].begin < e.offset + e.numel && e.offset < buckets_[b].end)
        tensor_buckets_[i].push_back(b);
  }
}

GradientReducer::~GradientReducer() = default;

// ---- fast path ----------------------------------------------------------------

void GradientReducer::begin_fast() {
  std::fill(tensor_pending_.begin(), tensor_pending_.end(), 0);
  std::fill(packed_.begin(), packed_.end(), 0);
  for (const auto& tb : tensor_buckets_)
    for (size_t b : tb) ++tensor_pending_[b];
  for (Bucket& b : buckets_) b.started = false;
}

void GradientReducer::start_bucket(size_t b) {
  Bucket& k = buckets_[b];
  CommTimer t{comm_ms_};
  k.rs = comm_.ireduce_scatter(flat_.data() + k.begin, shard_.data() + k.out, k.counts, DType::kF32, ReduceOp::kSum);
  k.started = true;
}

void GradientReducer::progress() {
  // Open MPI advances a non-blocking collective only inside MPI calls.
  for (Bucket& k : buckets_)
    if (k.started && k.rs) k.rs->test();
}

void GradientReducer::pack_final(size_t i) {
  if (packed_[i]) return;  // announced twice: the model broke the contract, but count it once
  packed_[i] = 1;
  layout_.pack_grad(params_, i, flat_.data());
  for (size_t b : tensor_buckets_[i]) --tensor_pending_[b];
}

void GradientReducer::on_grads_ready(size_t first, size_t count) noexcept {
  // Called from inside the model's backward, across the plugin ABI: nothing
  // may be thrown from here. A failure is kept for finish_fast.
  if (failed_) return;
  try {
    const size_t tensors = layout_.entries().size();
    for (size_t i = first; i < first + count && i < tensors; ++i) pack_final(i);
    // Buckets start as they become ready. Every rank's model announces the
    // same tensors in the same order (the same code on the same layout), so
    // every rank starts the same collectives in the same order.
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (tensor_pending_[b] == 0 && !buckets_[b].started) start_bucket(b);
    progress();
  } catch (...) {
    failed_ = std::current_exception();
  }
}

void GradientReducer::finish_fast() {
  if (failed_) std::rethrow_exception(std::exchange(failed_, nullptr));
  // Tensors never announced are final now. The buckets the backward did
  // not start are reduced here with blocking calls (Open MPI's blocking
  // collectives are its tuned ones; the non-blocking ones only pay off while
  // there is backward left to overlap), in bucket order, after the started
  // ones complete: the same calls in the same order on every rank.
  for (size_t i = 0; i < packed_.size(); ++i) pack_final(i);
  wait_for_ranks();
  CommTimer t{comm_ms_};
  for (Bucket& k : buckets_) {
    if (k.rs) {
      k.rs->wait();
      k.rs.reset();
    }
  }
  for (Bucket& k : buckets_) {
    if (!k.started)
      comm_.reduce_scatter(flat_.data() + k.begin, shard_.data() + k.out, k.counts, DType::kF32, ReduceOp::kSum);
    if (!opts_.zero) comm_.allgatherv(shard_.data() + k.out, flat_.data() + k.begin, k.counts, DType::kF32);
  }
  if (opts_.zero) {
    layout_.unpack_grads(shard_.data(), params_, my_lo_, my_hi_);
    return;
  }
  layout_.unpack_grads(flat_.data(), params_);
}

// ---- deterministic path ---------------------------------------------------------

void GradientReducer::begin() { std::fill(shard_.begin(), shard_.end(), 0.0f); }

void GradientReducer::add_micro() {
  layout_.pack_grads(params_, flat_.data());
  wait_for_ranks();
  {
    CommTimer t{comm_ms_};
    comm_.alltoall_ranges(flat_.data(), recv_.data(), counts_, DType::kF32);
  }
  // Rank order: global micro-batch m·N + q for q = 0..N-1.
  const size_t c = shard_.size();
  float* acc = shard_.data();
  for (int q = 0; q < comm_.size(); ++q) {
    const float* piece = recv_.data() + static_cast<size_t>(q) * c;
    for (size_t i = 0; i < c; ++i) acc[i] += piece[i];
  }
}

void GradientReducer::finish() {
  if (opts_.zero) {
    layout_.unpack_grads(shard_.data(), params_, my_lo_, my_hi_);
    return;
  }
  {
    CommTimer t{comm_ms_};
    comm_.allgatherv(shard_.data(), flat_.data(), counts_, DType::kF32);
  }
  layout_.unpack_grads(flat_.data(), params_);
}

// ---- after the sum -------------------------------------------------------------

const std::vector<double>& GradientReducer::gathered_partials() {
  if (!opts_.zero) {
    all_partials_.clear();
    core::grad_square_partials(params_, nullptr, nullptr, all_partials_);
    return all_partials_;
  }
  partials_.clear();
  core::grad_square_partials(params_, my_begin_.data(), my_end_.data(), partials_);
  {
    CommTimer t{comm_ms_};
    comm_.allgatherv(partials_.data(), all_partials_.data(), partial_counts_, DType::kF64);
  }
  return all_partials_;
}
double GradientReducer::norm() {
  if (!opts_.zero) return core::grad_norm(params_);
  const std::vector<double>& p = gathered_partials();
  return std::sqrt(kernels::fold(p.data(), static_cast<int64_t>(p.size())));
}

void GradientReducer::scale(float c) {
  if (opts_.zero) core::scale_grads(params_, c, my_begin_.data(), my_end_.data());
  else core::scale_grads(params_, c, nullptr, nullptr);
}

void GradientReducer::allgather_grads() {
  if (!opts_.zero) return;
  float* mine = flat_.data() + my_lo_;
  layout_.pack_grads_range(params_, mine, my_lo_, my_hi_);
  {
    CommTimer t{comm_ms_};
    comm_.allgatherv(mine, flat_.data(), counts_, DType::kF32);
  }
  layout_.unpack_grads(flat_.data(), params_);
}

void GradientReducer::allgather_params() {
  if (!opts_.zero) return;
  float* mine = flat_.data() + my_lo_;
  layout_.pack_values(params_, mine, my_lo_, my_hi_);
  {
    CommTimer t{comm_ms_};
    comm_.allgatherv(mine, flat_.data(), counts_, DType::kF32);
  }
  layout_.unpack_values(flat_.data(), params_, 0, layout_.size());
}

double GradientReducer::take_comm_ms() {
  const double v = comm_ms_;
  comm_ms_ = 0;
  return v;
}

void GradientReducer::wait_for_ranks() {
  // Every rank calls it at the same point of every reduction (unconditional,
  // like every collective here): the time in it is waiting for the last
  // rank to arrive, so the collectives after it time the transfer alone. A
  // barrier costs microseconds on shared memory, against steps of a second.
  CommTimer t{wait_ms_};
  comm_.barrier();
}

double GradientReducer::take_wait_ms() {
  const double v = wait_ms_;
  wait_ms_ = 0;
  return v;
}

}  // namespace zcode::dist
