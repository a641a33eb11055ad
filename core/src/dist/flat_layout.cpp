// flat_layout.cpp: see zcode/core/dist/flat_layout.h.
#include <zcode/core/dist/flat_layout.h>

#include <cstring>
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

void FlatLayout::unpack_grads(const float* flat, const zc_param_list& params) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    std::memcpy(grad_data(params.params[i]), flat + entries_[i].offset, entries_[i].numel * sizeof(float));
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
