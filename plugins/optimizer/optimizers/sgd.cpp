// sgd.cpp: SGD with momentum (see optimizers.h for the formula and its source).
#include "optimizers.h"

#include <zcode/kernels/parallel.h>

namespace zcode::optim {
namespace {

// One range of one tensor: w, g, b (momentum buffer or nullptr) are [n];
// shift (or nullptr) is subtracted from d elementwise (a row of column means).
void sgd_kernel(float* __restrict w, const float* __restrict g, float* __restrict b, const double* __restrict shift,
                int64_t n, float wd, float lr, float mu, float omd, bool first, bool nesterov) {
  for (int64_t j = 0; j < n; ++j) {
    float d = g[j] + wd * w[j];
    if (shift) d = static_cast<float>(d - shift[j]);
    if (b) {
      const float bj = first ? d : b[j] * mu + omd * d;
      b[j] = bj;
      d = nesterov ? d + mu * bj : bj;
    }
    w[j] -= lr * d;
  }
}

}  // namespace

Sgd::Sgd(const sdk::CreateContext& ctx) : Sgd(ctx, "sgd", 0.0) {}

Sgd::Sgd(const sdk::CreateContext& ctx, const char* name, double default_momentum)
    : OptimizerBase(ctx, name, 0.0, {"momentum", "dampening", "nesterov"}) {
  momentum_ = positive(opts_, "momentum", default_momentum, 0.0, /*inclusive=*/true);
  dampening_ = positive(opts_, "dampening", 0.0, 0.0, true);
  nesterov_ = opts_.get<bool>("nesterov", false);
  if (momentum_ >= 1.0)
    sdk::invalid_argument("optimizer.momentum: expected a number in [0, 1), found " + std::to_string(momentum_));
  if (dampening_ > 1.0)
    sdk::invalid_argument("optimizer.dampening: expected a number in [0, 1], found " + std::to_string(dampening_));
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
  float* w = s.w;
  const float* g = s.g;
  float* b = momentum_ > 0.0 ? buf(buf_[i]) : nullptr;
  if (col_shift) {  // a [rows, cols] router: one kernel call per row, shift = the column means
    const int64_t cols = s.shape.back(), rows = s.n / cols;
    for (int64_t r = 0; r < rows; ++r)
      sgd_kernel(w + r * cols, g + r * cols, b ? b + r * cols : nullptr, col_shift, cols, wd, a, mu, omd, first,
                 nesterov_);
    return;
  }
  kernels::parallel_ranges(s.n, threads_, [&](int64_t lo, int64_t hi) {
    sgd_kernel(w + lo, g + lo, b ? b + lo : nullptr, nullptr, hi - lo, wd, a, mu, omd, first, nesterov_);
  });
}

void Sgd::step(double lr, uint64_t /*step*/) {
  ++step_;
  for (size_t i = 0; i < slots_.size(); ++i) update(i, lr, nullptr);
}

}  // namespace zcode::optim
