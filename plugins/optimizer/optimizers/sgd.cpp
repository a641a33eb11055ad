// sgd.cpp: SGD with momentum (see optimizers.h for the formula and its source).
#include "optimizers.h"
#include "parallel.h"

namespace zcode::optim {

Sgd::Sgd(const sdk::CreateContext& ctx) : Sgd(ctx, "sgd", 0.0) {}

Sgd::Sgd(const sdk::CreateContext& ctx, const char* name, double default_momentum)
    : OptimizerBase(ctx, name, 0.0, {"momentum", "dampening", "nesterov"}) {
  momentum_ = positive(opts_, "momentum", default_momentum, 0.0, /*inclusive=*/true);
  dampening_ = positive(opts_, "dampening", 0.0, 0.0, true);
  nesterov_ = opts_.get<bool>("nesterov", false);
  if (momentum_ >= 1.0) sdk::invalid_argument("optimizer.momentum: expected a number in [0, 1), found " + std::to_string(momentum_));
  if (dampening_ > 1.0) sdk::invalid_argument("optimizer.dampening: expected a number in [0, 1], found " + std::to_string(dampening_));
  if (nesterov_ && (momentum_ <= 0.0 || dampening_ != 0.0))
    sdk::invalid_argument("optimizer.nesterov: true needs momentum > 0 and dampening 0 (as torch.optim.SGD)");
  if (momentum_ > 0.0)
    for (size_t i = 0; i < slots_.size(); ++i) buf_.push_back(add_buffer(i, "momentum_buffer", slots_[i].shape));
}

void Sgd::update(size_t i, double lr, const double* col_shift) {
  const ParamSlot& s = slots_[i];
  const float wd = static_cast<float>(s.weight_decay);
  const float a = static_cast<float>(lr * s.lr_mult);
  const float mu = static_cast<float>(momentum_), omd = static_cast<float>(1.0 - dampening_);
  const bool first = step_ == 1;
  const int64_t cols = s.shape.empty() ? 1 : s.shape.back();
  float* __restrict w = s.w;
  const float* __restrict g = s.g;
  float* __restrict b = momentum_ > 0.0 ? buf(buf_[i]) : nullptr;
  parallel_ranges(s.n, threads_, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      float d = wd != 0.0f ? g[j] + wd * w[j] : g[j];
      if (col_shift) d = static_cast<float>(d - col_shift[j % cols]);
      if (b) {
        const float bj = first ? d : b[j] * mu + omd * d;
        b[j] = bj;
        d = nesterov_ ? d + mu * bj : bj;
      }
      w[j] -= a * d;
    }
  });
}

void Sgd::step(double lr, uint64_t /*step*/) {
  ++step_;
  for (size_t i = 0; i < slots_.size(); ++i) update(i, lr, nullptr);
}

}  // namespace zcode::optim
