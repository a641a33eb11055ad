// sophia.cpp: Sophia-G (see optimizers.h for the formula and its source).
#include "optimizers.h"

#include <zcode/kernels/parallel.h>

#include <algorithm>
#include <cmath>

namespace zcode::optim {
namespace {

// One range of one tensor: w, g, m, h are [n].
void sophia_kernel(float* __restrict w, const float* __restrict g, float* __restrict m, const float* __restrict h,
                   int64_t n, float b1, float omb1, float gamma, float eps, float decay, float lr) {
  for (int64_t j = 0; j < n; ++j) {
    const float mj = b1 * m[j] + omb1 * g[j];
    m[j] = mj;
    const float ratio = std::clamp(mj / std::max(gamma * h[j], eps), -1.0f, 1.0f);
    w[j] = w[j] * decay - lr * ratio;
  }
}

void hessian_kernel(float* __restrict h, const float* __restrict g, int64_t n, float b2, float scale) {
  for (int64_t j = 0; j < n; ++j) h[j] = b2 * h[j] + scale * (g[j] * g[j]);
}

}  // namespace

Sophia::Sophia(const sdk::CreateContext& ctx)
    : OptimizerBase(ctx, "sophia", 0.1 /* the authors' SophiaG default */,
                    {"betas", "rho", "eps", "hessian_update_interval"}) {
  beta1_ = 0.965;
  beta2_ = 0.99;
  read_betas(opts_, beta1_, beta2_);
  rho_ = positive(opts_, "rho", 0.04);
  eps_ = positive(opts_, "eps", 1e-12);
  const int64_t k = opts_.get<int64_t>("hessian_update_interval", 10);
  if (k < 1)
    sdk::invalid_argument("optimizer.hessian_update_interval: expected an integer >= 1, found " + std::to_string(k));
  k_ = static_cast<uint64_t>(k);
  for (size_t i = 0; i < slots_.size(); ++i) {
    m_.push_back(add_buffer(i, "exp_avg", slots_[i].shape));
    h_.push_back(add_buffer(i, "hessian", slots_[i].shape));
  }
}

void Sophia::update_hessian(int64_t num_tokens) {
  if (num_tokens <= 0)
    sdk::invalid_argument("sophia: update_hessian needs the number of sampled target tokens B > 0, got " +
                          std::to_string(num_tokens));
  const float b2 = static_cast<float>(beta2_);
  const float scale = static_cast<float>((1.0 - beta2_) * static_cast<double>(num_tokens));
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    const float* g = s.g;
    float* h = buf(h_[i]);
    kernels::parallel_ranges(s.n, threads_,
                             [&](int64_t b, int64_t e) { hessian_kernel(h + b, g + b, e - b, b2, scale); });
  }
  ++hessian_updates_;
}

void Sophia::step(double lr, uint64_t /*step*/) {
  ++step_;
  const float b1 = static_cast<float>(beta1_), omb1 = static_cast<float>(1.0 - beta1_);
  const float gamma = static_cast<float>(rho_), eps = static_cast<float>(eps_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    const double plr = lr * s.lr_mult;
    const float decay = static_cast<float>(1.0 - plr * s.weight_decay);
    const float a = static_cast<float>(plr);
    float* w = s.w;
    const float* g = s.g;
    float* m = buf(m_[i]);
    const float* h = buf(h_[i]);
    kernels::parallel_ranges(s.n, threads_, [&](int64_t b, int64_t e) {
      sophia_kernel(w + b, g + b, m + b, h + b, e - b, b1, omb1, gamma, eps, decay, a);
    });
  }
}

void Sophia::write_json_fields(rapidjson::Writer<rapidjson::StringBuffer>& w) const {
  w.Key("hessian_updates");
  w.Uint64(hessian_updates_);
}
void Sophia::check_json_fields(const rapidjson::Document& d) const {
  if (!d.HasMember("hessian_updates") || !d["hessian_updates"].IsUint64())
    throw sdk::Error(ZC_ERR_DATA, "optimizer state: missing or invalid \"hessian_updates\" (sophia)");
}
void Sophia::read_json_fields(const rapidjson::Document& d) { hessian_updates_ = d["hessian_updates"].GetUint64(); }

}  // namespace zcode::optim
