// expert_split.cpp: see zcode/core/dist/expert_split.h.
#include <zcode/core/dist/expert_split.h>
#include <zcode/core/train_step.h>
#include <zcode/sdk/host.h>

#include <zcode/kernels/block_sum.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace zcode::dist {
namespace {

std::string to_bytes(const std::vector<int64_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
}

std::vector<int64_t> from_bytes(const std::string& s) {
  std::vector<int64_t> v(s.size() / sizeof(int64_t));
  if (!v.empty()) std::memcpy(v.data(), s.data(), v.size() * sizeof(int64_t));
  return v;
}

}  // namespace

ExpertSplit::ExpertSplit(const zc_param_list& params) {
  const size_t n = params.count;
  dense_of_.assign(n, -1);
  // Per tensor: numel for a dense tensor, -1 - numel for an expert (so a
  // zero-size expert stays one).
  for (size_t i = 0; i < n; ++i) {
    const zc_param& p = params.params[i];
    const DLTensor* g = p.grad;
    if (!g || g->device.device_type != kDLCPU || g->dtype.code != kDLFloat || g->dtype.bits != 32)
      throw std::invalid_argument(std::string("expert parallelism: gradient of '") + (p.name ? p.name : "?") +
                                  "' is not a float32 CPU tensor");
    const bool expert = (p.flags & ZC_PARAM_EXPERT) != 0;
    desc_.push_back(expert ? -1 - sdk::numel(*g) : sdk::numel(*g));
    if (expert) {
      expert_.push_back(p);
      local_names_.insert(p.name ? p.name : "");
      names_ += std::string(p.name ? p.name : "") + '\n';
    } else {
      dense_of_[i] = static_cast<int64_t>(dense_.size());
      dense_.push_back(p);
    }
  }
  if (expert_.empty())
    throw std::invalid_argument(
        "distributed.expert_parallel > 1: the model lists no expert tensor (ZC_PARAM_EXPERT); expert parallelism "
        "needs a mixture-of-experts model");
  dense_list_ = zc_param_list{dense_.data(), dense_.size()};
  expert_list_ = zc_param_list{expert_.data(), expert_.size()};
}

void ExpertSplit::exchange(Communicator& expert_group) {
  group_ = &expert_group;
  // Every group rank's list and expert names (once, at setup).
  const std::vector<std::string> all_desc = group_->allgather_bytes(to_bytes(desc_));
  const std::vector<std::string> all_names = group_->allgather_bytes(names_);
  const int K = group_->size(), me = group_->rank();
  for (int q = 0; q < K; ++q) {
    if (q == me) continue;
    const std::string& s = all_names[static_cast<size_t>(q)];
    for (size_t a = 0, b; a < s.size(); a = b + 1) {
      b = s.find('\n', a);
      if (b == std::string::npos) b = s.size();
      const std::string name = s.substr(a, b - a);
      // A model that ignores the expert group would hold every expert on
      // every rank: summed nowhere, counted K times in the norm, hidden from
      // its own load_state. Refuse it.
      if (local_names_.count(name))
        throw std::invalid_argument("expert parallelism: expert tensor '" + name + "' is held by rank " +
                                    std::to_string(q) + " and rank " + std::to_string(me) +
                                    " of an expert group (each expert must live on one rank of its group: does the "
                                    "model read ZC_GROUP_EXPERT?)");
      foreign_names_.insert(name);
    }
  }
  // Dense tensors: the same number and sizes on every rank. Segments of
  // expert tensors between them, merged rank by rank.
  std::vector<std::vector<int64_t>> lists(static_cast<size_t>(K));
  for (int q = 0; q < K; ++q) lists[static_cast<size_t>(q)] = from_bytes(all_desc[static_cast<size_t>(q)]);
  auto dense_sizes = [](const std::vector<int64_t>& l) {
    std::vector<int64_t> d;
    for (int64_t v : l)
      if (v >= 0) d.push_back(v);
    return d;
  };
  const std::vector<int64_t> d0 = dense_sizes(lists[0]);
  for (int q = 1; q < K; ++q)
    if (dense_sizes(lists[static_cast<size_t>(q)]) != d0)
      throw std::invalid_argument("expert parallelism: rank " + std::to_string(q) +
                                  " of the expert group lists other dense tensors than rank 0 (every rank must hold "
                                  "the same dense parameters in the same order)");
  partial_counts_.assign(static_cast<size_t>(K), 0);
  std::vector<size_t> cursor(static_cast<size_t>(K), 0);  // position in each rank's list
  std::vector<size_t> first_block(static_cast<size_t>(K), 0);
  for (int q = 0; q < K; ++q) {
    for (int64_t v : lists[static_cast<size_t>(q)])
      if (v < 0) partial_counts_[static_cast<size_t>(q)] += static_cast<size_t>(kernels::sum_blocks(-1 - v));
    if (q > 0) first_block[static_cast<size_t>(q)] = first_block[static_cast<size_t>(q) - 1] + partial_counts_[q - 1];
  }
  std::vector<size_t> block_at = first_block;  // next expert partial of each rank
  for (size_t j = 0; j <= d0.size(); ++j) {
    // The experts before dense tensor j, rank by rank.
    for (int q = 0; q < K; ++q) {
      const auto& l = lists[static_cast<size_t>(q)];
      size_t& c = cursor[static_cast<size_t>(q)];
      for (; c < l.size() && l[c] < 0; ++c) {
        const size_t blocks = static_cast<size_t>(kernels::sum_blocks(-1 - l[c]));
        order_.push_back(-1 - static_cast<int64_t>(expert_block_.size()));
        expert_block_.push_back(block_at[static_cast<size_t>(q)]);
        expert_blocks_n_.push_back(blocks);
        block_at[static_cast<size_t>(q)] += blocks;
      }
      if (j < d0.size()) ++c;  // past dense tensor j
    }
    if (j < d0.size()) order_.push_back(static_cast<int64_t>(j));
  }
  size_t total = 0;
  for (size_t c : partial_counts_) total += c;
  all_.assign(total, 0.0);
  dense_block_.clear();
  dense_blocks_ = 0;
  for (const zc_param& p : dense_) {
    dense_block_.push_back(dense_blocks_);
    dense_blocks_ += static_cast<size_t>(kernels::sum_blocks(sdk::numel(*p.grad)));
  }
}

void ExpertSplit::zero_dense_grads() const {
  for (const zc_param& p : dense_) {
    const DLTensor* g = p.grad;
    std::memset(static_cast<char*>(g->data) + g->byte_offset, 0, sizeof(float) * static_cast<size_t>(sdk::numel(*g)));
  }
}

bool ExpertSplit::matches(const std::unordered_set<std::string>& names, std::string_view tensor) {
  if (names.count(std::string(tensor))) return true;
  // "<param>.<buffer>": try every '.' from the right (a buffer name has no '.').
  for (size_t dot = tensor.rfind('.'); dot != std::string_view::npos && dot > 0; dot = tensor.rfind('.', dot - 1))
    if (names.count(std::string(tensor.substr(0, dot)))) return true;
  return false;
}

bool ExpertSplit::is_local_expert(std::string_view tensor) const { return matches(local_names_, tensor); }
bool ExpertSplit::is_foreign_expert(std::string_view tensor) const { return matches(foreign_names_, tensor); }

double ExpertSplit::norm(const std::vector<double>& dense_partials, const std::vector<double>& expert_partials) {
  if (!group_) throw std::logic_error("ExpertSplit::norm before exchange()");
  if (dense_partials.size() != dense_blocks_ || expert_partials.size() != partial_counts_[group_->rank()])
    throw std::invalid_argument("ExpertSplit::norm: " + std::to_string(dense_partials.size()) + " dense and " +
                                std::to_string(expert_partials.size()) + " expert partials, expected " +
                                std::to_string(dense_blocks_) + " and " +
                                std::to_string(partial_counts_[group_->rank()]));
  group_->allgatherv(expert_partials.data(), all_.data(), partial_counts_, DType::kF64);
  double total = 0.0;  // core::grad_norm's left fold, in the one-process order
  for (int64_t e : order_) {
    if (e >= 0) {
      const size_t first = dense_block_[static_cast<size_t>(e)];
      const size_t end =
          static_cast<size_t>(e) + 1 < dense_block_.size() ? dense_block_[static_cast<size_t>(e) + 1] : dense_blocks_;
      for (size_t b = first; b < end; ++b) total += dense_partials[b];
    } else {
      const size_t slot = static_cast<size_t>(-1 - e);
      for (size_t b = 0; b < expert_blocks_n_[slot]; ++b) total += all_[expert_block_[slot] + b];
    }
  }
  return std::sqrt(total);
}

}  // namespace zcode::dist
