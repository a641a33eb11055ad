// zerosum_sgd.cpp: Zerosum-SGD (see optimizers.h for the definition and why).
#include "optimizers.h"

namespace zcode::optim {

ZerosumSgd::ZerosumSgd(const sdk::CreateContext& ctx) : Sgd(ctx, "zerosum_sgd", 0.9) {
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

void ZerosumSgd::step(double lr, uint64_t /*step*/) {
  ++step_;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    if (!(s.flags & ZC_PARAM_ROUTER)) {
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
