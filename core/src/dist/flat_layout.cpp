// flat_layout.cpp: see zcode/core/dist/flat_layout.h.
#include <zcode/core/dist/flat_layout.h>

#include <zcode/kernels/block_sum.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace zcode::dist {
namespace {

size_t numel(const DLTensor& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return static_cast<size_t>(n);
}

float* grad_data(const zc_param& p) {
  const DLTensor* g = p.grad;
  if (!g || g->device.device_type != kDLCPU || g->dtype.code != kDLFloat || g->dtype.bits != 32 || g->dtype.lanes != 1)
    throw std::invalid_argument(std::string("gradient of '") + (p.name ? p.name : "?") +
                                "' is not a float32 CPU tensor (the data-parallel reduction needs one)");
  if (g->strides) {
    int64_t want = 1;
    for (int32_t i = g->ndim - 1; i >= 0; --i) {
      if (g->shape[i] != 1 && g->strides[i] != want)
        throw std::invalid_argument(std::string("gradient of '") + (p.name ? p.name : "?") + "' is not contiguous");
      want *= g->shape[i];
    }
  }
  return reinterpret_cast<float*>(static_cast<char*>(g->data) + g->byte_offset);
}

}  // namespace

FlatLayout::FlatLayout(const zc_param_list& params) {
  entries_.reserve(params.count);
  for (size_t i = 0; i < params.count; ++i) {
    const zc_param& p = params.params[i];
    grad_data(p);  // checks the type
    Entry e;
    e.name = p.name ? p.name : "";
    e.offset = size_;
    e.numel = numel(*p.grad);
    size_ = (size_ + e.numel + kGranule - 1) / kGranule * kGranule;
    entries_.push_back(std::move(e));
  }
}

void FlatLayout::pack_grads(const zc_param_list& params, float* flat) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    std::memcpy(flat + entries_[i].offset, grad_data(params.params[i]), entries_[i].numel * sizeof(float));
}

void FlatLayout::pack_grad(const zc_param_list& params, size_t i, float* flat) const {
  std::memcpy(flat + entries_[i].offset, grad_data(params.params[i]), entries_[i].numel * sizeof(float));
}

void FlatLayout::unpack_grads(const float* flat, const zc_param_list& params) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    std::memcpy(grad_data(params.params[i]), flat + entries_[i].offset, entries_[i].numel * sizeof(float));
}

void FlatLayout::pack_values(const zc_param_list& params, float* range, size_t begin, size_t end) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const size_t lo = std::max(begin, e.offset), hi = std::min(end, e.offset + e.numel);
    if (lo >= hi) continue;
    const DLTensor* v = params.params[i].value;
    const float* src = reinterpret_cast<const float*>(static_cast<const char*>(v->data) + v->byte_offset);
    std::memcpy(range + (lo - begin), src + (lo - e.offset), (hi - lo) * sizeof(float));
  }
}

void FlatLayout::unpack_values(const float* range, const zc_param_list& params, size_t begin, size_t end) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const size_t lo = std::max(begin, e.offset), hi = std::min(end, e.offset + e.numel);
    if (lo >= hi) continue;
    const DLTensor* v = params.params[i].value;
    float* dst = reinterpret_cast<float*>(static_cast<char*>(v->data) + v->byte_offset);
    std::memcpy(dst + (lo - e.offset), range + (lo - begin), (hi - lo) * sizeof(float));
  }
}

void FlatLayout::unpack_grads(const float* range, const zc_param_list& params, size_t begin, size_t end) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const size_t lo = std::max(begin, e.offset), hi = std::min(end, e.offset + e.numel);
    if (lo >= hi) continue;
    std::memcpy(grad_data(params.params[i]) + (lo - e.offset), range + (lo - begin), (hi - lo) * sizeof(float));
  }
}

void FlatLayout::pack_grads_range(const zc_param_list& params, float* range, size_t begin, size_t end) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const size_t lo = std::max(begin, e.offset), hi = std::min(end, e.offset + e.numel);
    if (lo >= hi) continue;
    std::memcpy(range + (lo - begin), grad_data(params.params[i]) + (lo - e.offset), (hi - lo) * sizeof(float));
  }
}

std::vector<size_t> ShardPlan::counts() const {
  std::vector<size_t> c(static_cast<size_t>(parts()));
  for (int q = 0; q < parts(); ++q) c[static_cast<size_t>(q)] = end(q) - begin(q);
  return c;
}

void ShardPlan::tensor_range(const FlatLayout& layout, int q, size_t i, int64_t* b, int64_t* e) const {
  const FlatLayout::Entry& t = layout.entries()[i];
  const size_t lo = std::max(begin(q), t.offset), hi = std::min(end(q), t.offset + t.numel);
  *b = *e = 0;
  if (lo < hi) {
    *b = static_cast<int64_t>(lo - t.offset);
    *e = static_cast<int64_t>(hi - t.offset);
  }
}

ShardPlan plan_shards(const FlatLayout& layout, int parts, const std::vector<int64_t>& multiples) {
  const auto& ent = layout.entries();
  if (parts < 1) throw std::invalid_argument("plan_shards: parts < 1");
  if (multiples.size() != ent.size())
    throw std::invalid_argument("plan_shards: " + std::to_string(multiples.size()) + " granularities for " +
                                std::to_string(ent.size()) + " tensors");
  // The cut multiple of each tensor: lcm(optimizer's, norm block); a tensor
  // no larger than it is never cut inside.
  std::vector<size_t> step(ent.size());
  for (size_t i = 0; i < ent.size(); ++i) {
    // (A multiple past the tensor's size means "never cut": clamp it, so the lcm cannot overflow.)
    const auto m = static_cast<size_t>(std::clamp<int64_t>(multiples[i], 1, static_cast<int64_t>(ent[i].numel) + 1));
    step[i] = std::lcm(m, static_cast<size_t>(kernels::kSumBlock));
  }
  ShardPlan plan;
  plan.bounds.assign(static_cast<size_t>(parts) + 1, 0);
  plan.bounds.back() = layout.size();
  size_t t = 0;  // tensor the search is in (targets grow with q)
  for (int q = 1; q < parts; ++q) {
    const size_t target = layout.size() * static_cast<size_t>(q) / static_cast<size_t>(parts);
    while (t + 1 < ent.size() && ent[t + 1].offset <= target) ++t;
    // Allowed cuts around the target: inside tensor t at multiples of its
    // step, its start, and the next tensor's start (or the end).
    const size_t start = ent.empty() ? 0 : ent[t].offset;
    const size_t next = t + 1 < ent.size() ? ent[t + 1].offset : layout.size();
    size_t below = start, above = next;
    if (!ent.empty() && target > start && ent[t].numel > 0) {
      const size_t kmax = (ent[t].numel - 1) / step[t];  // the last cut inside the tensor
      const size_t k = std::min((target - start) / step[t], kmax);
      below = start + k * step[t];
      if (k < kmax) above = start + (k + 1) * step[t];
    }
    size_t cut = target - below <= above - target ? below : above;
    cut = std::max(cut, plan.bounds[static_cast<size_t>(q) - 1]);
    plan.bounds[static_cast<size_t>(q)] = cut;
  }
  return plan;
}

std::vector<size_t> split_range(size_t begin, size_t end, int parts, size_t granule) {
  if (parts < 1 || granule < 1 || end < begin) throw std::invalid_argument("split_range: invalid arguments");
  const size_t n = end - begin, g = (n + granule - 1) / granule;
  const size_t per = g / static_cast<size_t>(parts), extra = g % static_cast<size_t>(parts);
  std::vector<size_t> out(static_cast<size_t>(parts));
  size_t left = n;
  for (size_t q = 0; q < out.size(); ++q) {
    const size_t want = (per + (q < extra ? 1 : 0)) * granule;
    out[q] = want < left ? want : left;
    left -= out[q];
  }
  return out;
}

}  // namespace zcode::dist
