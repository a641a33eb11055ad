// lamb.cpp: LAMB (see optimizers.h for the formula and its source).
//
// Two passes per tensor so that no buffer for u is needed: pass 1 updates the
// moments and accumulates ‖w‖² and ‖u‖² (deterministic block sums); pass 2
// recomputes u from the new moments and the still-unchanged w and applies it.
#include "optimizers.h"

#include <zcode/kernels/parallel.h>

#include <algorithm>
#include <cmath>

namespace zcode::optim {

Lamb::Lamb(const sdk::CreateContext& ctx)
    : OptimizerBase(ctx, "lamb", 0.01, {"betas", "eps", "max_weight_norm", "bias_correction"}) {
  check_cuts(ctx, &Lamb::shard_granularity);
  read_betas(opts_, beta1_, beta2_);
  eps_ = positive(opts_, "eps", 1e-6);
  max_weight_norm_ = positive(opts_, "max_weight_norm", 10.0);
  bias_correction_ = opts_.get<bool>("bias_correction", true);
  for (size_t i = 0; i < slots_.size(); ++i) {
    m_.push_back(add_buffer(i, "exp_avg", slots_[i].shape));
    v_.push_back(add_buffer(i, "exp_avg_sq", slots_[i].shape));
  }
  norms_.init(slots_, lo_, full_n_, std::vector<int64_t>(slots_.size(), kernels::kSumBlock),
              std::vector<int64_t>(slots_.size(), 2), sharded_ ? &comm_ : nullptr, groups_, estimate_only_);
}

void Lamb::shard_granularity(const sdk::CreateContext& ctx, std::span<int64_t> out) {
  (void)ctx;
  std::fill(out.begin(), out.end(), kernels::kSumBlock);  // the norms' blocks
}

void Lamb::step(double lr, uint64_t /*step*/) {
  ++step_;
  const double t = static_cast<double>(step_);
  const float b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_);
  const float omb1 = static_cast<float>(1.0 - beta1_), omb2 = static_cast<float>(1.0 - beta2_);
  const float inv_bc1 = bias_correction_ ? static_cast<float>(1.0 / (1.0 - std::pow(beta1_, t))) : 1.0f;
  const float inv_bc2 = bias_correction_ ? static_cast<float>(1.0 / (1.0 - std::pow(beta2_, t))) : 1.0f;
  const float eps = static_cast<float>(eps_);
  // Pass 1: the moments, and ‖w‖², ‖u‖² of every block of this rank's parts.
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    if (s.n == 0) continue;
    const float wd = static_cast<float>(s.weight_decay);
    const float* __restrict w = s.w;
    const float* __restrict g = s.g;
    float* __restrict m = buf(m_[i]);
    float* __restrict v = buf(v_[i]);
    kernels::block_partials(
        s.n, kernels::kSumBlock, 2, threads_,
        [&](int64_t b, int64_t e, double* acc) {
          double ww = 0.0, uu = 0.0;
          for (int64_t j = b; j < e; ++j) {
            const float gj = g[j];
            const float mj = m[j] * b1 + omb1 * gj;
            const float vj = v[j] * b2 + omb2 * gj * gj;
            m[j] = mj;
            v[j] = vj;
            const float u = (mj * inv_bc1) / (std::sqrt(vj * inv_bc2) + eps) + wd * w[j];
            ww += static_cast<double>(w[j]) * w[j];
            uu += static_cast<double>(u) * u;
          }
          acc[0] = ww;
          acc[1] = uu;
        },
        norms_.part(i));
  }
  // The norms of the whole tensors (every rank's blocks, when sharded).
  norms_.exchange();
  // Pass 2: recompute u from the new moments and the unchanged w, and apply.
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    if (s.n == 0) continue;
    const float wd = static_cast<float>(s.weight_decay);
    float* __restrict w = s.w;
    const float* __restrict m = buf(m_[i]);
    const float* __restrict v = buf(v_[i]);
    const double w_norm = std::sqrt(norms_.sum(i, 0)), u_norm = std::sqrt(norms_.sum(i, 1));
    const double trust = (w_norm > 0.0 && u_norm > 0.0) ? std::min(w_norm, max_weight_norm_) / u_norm : 1.0;
    const float scale = static_cast<float>(lr * s.lr_mult * trust);
    kernels::parallel_ranges(s.n, threads_, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        const float u = (m[j] * inv_bc1) / (std::sqrt(v[j] * inv_bc2) + eps) + wd * w[j];
        w[j] -= scale * u;
      }
    });
  }
}

}  // namespace zcode::optim
