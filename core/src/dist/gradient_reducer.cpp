// gradient_reducer.cpp: see zcode/core/dist/gradient_reducer.h.
#include <zcode/core/dist/gradient_reducer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

namespace zcode::dist {
namespace {

struct CommTimer {
  double& total;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~CommTimer() { total += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); }
};

}  // namespace

GradientReducer::GradientReducer(Communicator& comm, const zc_param_list& params, double bucket_mb, bool deterministic)
    : comm_(comm), params_(params), layout_(params), deterministic_(deterministic), flat_(layout_.size(), 0.0f) {
  if (!(bucket_mb > 0)) throw std::invalid_argument("distributed.bucket_mb: expected a number > 0");
  const int n = comm_.size();
  const size_t g = FlatLayout::kGranule;
  if (deterministic_) {
    counts_ = split_range(0, layout_.size(), n, g);
    for (int q = 0; q < comm_.rank(); ++q) shard_offset_ += counts_[static_cast<size_t>(q)];
    shard_.assign(counts_[static_cast<size_t>(comm_.rank())], 0.0f);
    recv_.assign(static_cast<size_t>(n) * shard_.size(), 0.0f);
    return;
  }
  // Buckets of bucket_mb (a multiple of n granules), from the end of the
  // index: the order in which a backward pass finishes the gradients.
  const size_t unit = g * static_cast<size_t>(n);
  size_t per = static_cast<size_t>(std::llround(bucket_mb * 1024.0 * 1024.0 / sizeof(float)));
  per = std::max(unit, per / unit * unit);
  size_t largest = 0;
  for (size_t end = layout_.size(); end > 0;) {
    const size_t begin = end > per ? end - per : 0;
    buckets_.emplace_back(begin, end);
    bucket_counts_.push_back(split_range(begin, end, n, g));
    largest = std::max(largest, bucket_counts_.back()[static_cast<size_t>(comm_.rank())]);
    end = begin;
  }
  shard_.assign(largest, 0.0f);
}

void GradientReducer::allreduce() {
  layout_.pack_grads(params_, flat_.data());
  {
    CommTimer t{comm_ms_};
    for (size_t b = 0; b < buckets_.size(); ++b) {
      float* base = flat_.data() + buckets_[b].first;
      comm_.reduce_scatter(base, shard_.data(), bucket_counts_[b], DType::kF32, ReduceOp::kSum);
      comm_.allgatherv(shard_.data(), base, bucket_counts_[b], DType::kF32);
    }
  }
  layout_.unpack_grads(flat_.data(), params_);
}

void GradientReducer::begin() { std::fill(shard_.begin(), shard_.end(), 0.0f); }

void GradientReducer::add_micro() {
  layout_.pack_grads(params_, flat_.data());
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
  {
    CommTimer t{comm_ms_};
    comm_.allgatherv(shard_.data(), flat_.data(), counts_, DType::kF32);
  }
  layout_.unpack_grads(flat_.data(), params_);
}

double GradientReducer::take_comm_ms() {
  const double v = comm_ms_;
  comm_ms_ = 0;
  return v;
}

}  // namespace zcode::dist
