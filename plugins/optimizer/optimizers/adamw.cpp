// adamw.cpp: AdamW (see optimizers.h for the formula and its source).
#include "optimizers.h"

#include <zcode/kernels/parallel.h>

#include <cmath>

namespace zcode::optim {
namespace {

// One contiguous range of one tensor: w, g, m, v are [n].
void adamw_kernel(float* __restrict w, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t n,
                  float b1, float b2, float omb1, float omb2, float decay, float step_size, float bc2_sqrt, float eps) {
  for (int64_t j = 0; j < n; ++j) {
    const float gj = g[j];
    const float mj = m[j] * b1 + omb1 * gj;
    const float vj = v[j] * b2 + omb2 * gj * gj;
    m[j] = mj;
    v[j] = vj;
    w[j] = w[j] * decay - step_size * (mj / (std::sqrt(vj) / bc2_sqrt + eps));
  }
}

}  // namespace

AdamW::AdamW(const sdk::CreateContext& ctx)
    : OptimizerBase(ctx, "adamw", 0.01 /* torch.optim.AdamW */, {"betas", "eps"}) {
  read_betas(opts_, beta1_, beta2_);
  eps_ = positive(opts_, "eps", 1e-8);
  for (size_t i = 0; i < slots_.size(); ++i) {
    m_.push_back(add_buffer(i, "exp_avg", slots_[i].shape));
    v_.push_back(add_buffer(i, "exp_avg_sq", slots_[i].shape));
  }
}

void AdamW::step(double lr, uint64_t /*step*/) {
  ++step_;
  const double t = static_cast<double>(step_);
  const float b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_);
  const float omb1 = static_cast<float>(1.0 - beta1_), omb2 = static_cast<float>(1.0 - beta2_);
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2_, t)));
  const float eps = static_cast<float>(eps_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    const double plr = lr * s.lr_mult;
    const float decay = static_cast<float>(1.0 - plr * s.weight_decay);
    const float step_size = static_cast<float>(plr / (1.0 - std::pow(beta1_, t)));
    float* w = s.w;
    const float* g = s.g;
    float* m = buf(m_[i]);
    float* v = buf(v_[i]);
    kernels::parallel_ranges(s.n, threads_, [&](int64_t b, int64_t e) {
      adamw_kernel(w + b, g + b, m + b, v + b, e - b, b1, b2, omb1, omb2, decay, step_size, bc2_sqrt, eps);
    });
  }
}

}  // namespace zcode::optim
