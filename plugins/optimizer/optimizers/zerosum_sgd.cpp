// zerosum_sgd.cpp: Zerosum-SGD (see optimizers.h for the definition and why).
#include "optimizers.h"

#include <algorithm>

namespace zcode::optim {

ZerosumSgd::ZerosumSgd(const sdk::CreateContext& ctx) : Sgd(ctx, "zerosum_sgd", 0.9) {
  check_cuts(ctx, &ZerosumSgd::shard_granularity);
  size_t routers = 0, max_cols = 0;
  for (const ParamSlot& s : slots_) {
    if (!(s.flags & ZC_PARAM_ROUTER)) continue;
    if (s.shape.size() != 2 || s.shape[0] < 1)
      sdk::invalid_argument("zerosum_sgd: router parameter '" + s.name +
                            "' must have shape [n_experts, d_model], found " + std::to_string(s.shape.size()) +
                            " dimensions");
    ++routers;
    max_cols = std::max(max_cols, static_cast<size_t>(s.shape[1]));
  }
  if (routers == 0)
    host_.warn("zerosum_sgd",
               "the model has no parameter flagged as an MoE router: zerosum_sgd is plain SGD-momentum here");
  col_mean_.resize(max_cols);
}

void ZerosumSgd::shard_granularity(const sdk::CreateContext& ctx, std::span<int64_t> out) {
  const zc_param_list params = ctx.model().params();
  for (size_t i = 0; i < out.size() && i < params.count; ++i) {
    out[i] = 1;
    const zc_param& p = params.params[i];
    if ((p.flags & ZC_PARAM_ROUTER) && p.value) {  // centred over its rows: kept whole on one rank
      int64_t n = 1;
      for (int32_t d = 0; d < p.value->ndim; ++d) n *= p.value->shape[d];
      out[i] = std::max<int64_t>(1, n);
    }
  }
}

void ZerosumSgd::step(double lr, uint64_t /*step*/) {
  ++step_;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    if (!(s.flags & ZC_PARAM_ROUTER) || s.n == 0) {  // (a router is never split: shard_granularity)
      update(i, lr, nullptr);
      continue;
    }
    // Mean over the expert axis of d = g + λw, per input column, in double
    // in a fixed order (E is small: a serial pass).
    const int64_t E = s.shape[0], D = s.shape[1];
    const float wd = static_cast<float>(s.weight_decay);
    for (int64_t c = 0; c < D; ++c) col_mean_[c] = 0.0;
    for (int64_t e = 0; e < E; ++e)
      for (int64_t c = 0; c < D; ++c) {
        const float d = wd != 0.0f ? s.g[e * D + c] + wd * s.w[e * D + c] : s.g[e * D + c];
        col_mean_[c] += d;
      }
    for (int64_t c = 0; c < D; ++c) col_mean_[c] /= static_cast<double>(E);
    update(i, lr, col_mean_.data());
  }
}

}  // namespace zcode::optim
