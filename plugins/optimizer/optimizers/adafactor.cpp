// adafactor.cpp: Adafactor (see optimizers.h for the formula and its source).
//
// Row and column statistics are stored as means, not the paper's sums: the
// estimate V̂ = R·C / mean(R) is the same, and means keep the stored values on
// the scale of g² whatever the matrix size. All reductions run in double in a
// fixed order (per row, per column, fixed blocks) so results are bitwise
// reproducible.
#include "optimizers.h"

#include <zcode/kernels/parallel.h>

#include <cmath>

namespace zcode::optim {
namespace {

// Applies w ← w·decay − α·(Û or M), Û = u·clip, for one range where
// u = g·row_scale·col_scale[j] (factored row) or g/√v (v non-null).
// mom (or nullptr) is the first moment M.
void adafactor_apply(float* __restrict w, const float* __restrict g, const float* __restrict col_scale, float row_scale,
                     const float* __restrict v, float* __restrict mom, int64_t n, float clip, float decay, float alpha,
                     float b1, float omb1) {
  for (int64_t j = 0; j < n; ++j) {
    const float u = (v ? g[j] / std::sqrt(v[j]) : g[j] * row_scale * col_scale[j]) * clip;
    float step = u;
    if (mom) {
      step = b1 * mom[j] + omb1 * u;
      mom[j] = step;
    }
    w[j] = w[j] * decay - alpha * step;
  }
}

}  // namespace

Adafactor::Adafactor(const sdk::CreateContext& ctx)
    : OptimizerBase(
          ctx, "adafactor", 0.0,
          {"eps", "eps2", "decay_rate", "clip_threshold", "beta1", "relative_step", "scale_parameter", "warmup_init"}) {
  // `eps` is the config-wide optimizer.eps (a number, default 1e-8 from the
  // guide's OptimizerConfig), used as ε1; the paper's ε1 is 1e-30.
  eps1_ = opts_.get<double>("eps", 1e-30);
  eps2_ = opts_.get<double>("eps2", 1e-3);
  if (!(eps1_ >= 0))
    sdk::invalid_argument("optimizer.eps: expected a number >= 0 (Adafactor's eps1, added to g^2), found " +
                          std::to_string(eps1_));
  if (!(eps2_ >= 0))
    sdk::invalid_argument("optimizer.eps2: expected a number >= 0 (Adafactor's floor of RMS(w)), found " +
                          std::to_string(eps2_));
  decay_rate_ = opts_.get<double>("decay_rate", -0.8);
  if (!(decay_rate_ < 0.0 && decay_rate_ >= -1.0))
    sdk::invalid_argument("optimizer.decay_rate: expected a number in [-1, 0) (beta2_t = 1 - t^decay_rate), found " +
                          std::to_string(decay_rate_));
  clip_threshold_ = positive(opts_, "clip_threshold", 1.0);
  use_beta1_ = opts_.has("beta1") && !opts_.json()["beta1"].IsNull();
  if (use_beta1_) {
    beta1_ = opts_.get<double>("beta1", 0.0);
    if (!(beta1_ >= 0.0 && beta1_ < 1.0))
      sdk::invalid_argument("optimizer.beta1: expected null or a number in [0, 1), found " + std::to_string(beta1_));
  }
  relative_step_ = opts_.get<bool>("relative_step", false);
  scale_parameter_ = opts_.get<bool>("scale_parameter", false);
  warmup_init_ = opts_.get<bool>("warmup_init", false);
  if (warmup_init_ && !relative_step_)
    sdk::invalid_argument("optimizer.warmup_init: true needs relative_step: true (it shapes the relative step size)");
  base_lr_ = positive(opts_, "lr", 1e-3);

  int64_t max_rows = 0, max_cols = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const std::vector<int64_t>& sh = slots_[i].shape;
    Factored f;
    if (sh.size() >= 2) {
      f.factored = true;
      f.rows = sh[sh.size() - 2];
      f.cols = sh[sh.size() - 1];
      for (size_t d = 0; d + 2 < sh.size(); ++d) f.batch *= sh[d];
      std::vector<int64_t> row_shape(sh.begin(), sh.end() - 1);
      std::vector<int64_t> col_shape(sh.begin(), sh.end() - 2);
      col_shape.push_back(f.cols);
      f.row = add_buffer(i, "exp_avg_sq_row", row_shape);
      f.col = add_buffer(i, "exp_avg_sq_col", col_shape);
      max_rows = std::max(max_rows, f.batch * f.rows);
      max_cols = std::max(max_cols, f.batch * f.cols);
    } else {
      f.full = add_buffer(i, "exp_avg_sq", sh);
    }
    if (use_beta1_) f.mom = add_buffer(i, "exp_avg", sh);
    f_.push_back(f);
  }
  row_scale_.resize(static_cast<size_t>(max_rows));
  col_scale_.resize(static_cast<size_t>(max_cols));
  col_acc_.resize(static_cast<size_t>(max_cols));
}

void Adafactor::step(double lr, uint64_t /*step*/) {
  ++step_;
  const double t = static_cast<double>(step_);
  const double beta2t = 1.0 - std::pow(t, decay_rate_);
  const float eps1 = static_cast<float>(eps1_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    const Factored& f = f_[i];
    float* w = s.w;
    const float* g = s.g;

    double rho;
    if (relative_step_) {
      const double cap = warmup_init_ ? 1e-6 * t : 1e-2;
      rho = std::min(cap, 1.0 / std::sqrt(t)) * (lr * s.lr_mult / base_lr_);
    } else {
      rho = lr * s.lr_mult;
    }
    double alpha = rho;
    if (scale_parameter_) {
      const auto ss = kernels::parallel_sum<1>(s.n, threads_, [&](int64_t b, int64_t e, double* acc) {
        double a = 0.0;
        for (int64_t j = b; j < e; ++j) a += static_cast<double>(w[j]) * w[j];
        acc[0] += a;
      });
      alpha *= std::max(eps2_, std::sqrt(ss[0] / static_cast<double>(s.n)));
    }

    // Second-moment update and the sum of U² for update clipping.
    double sum_u2 = 0.0;
    if (f.factored) {
      const int64_t R = f.rows, C = f.cols;
      float* __restrict row = buf(f.row);
      float* __restrict col = buf(f.col);
      for (int64_t bi = 0; bi < f.batch; ++bi) {
        const float* gb = g + bi * R * C;
        float* rb = row + bi * R;
        float* cb = col + bi * C;
        kernels::parallel_ranges(
            R, threads_,
            [&](int64_t r0, int64_t r1) {
              for (int64_t r = r0; r < r1; ++r) {
                double a = 0.0;
                for (int64_t c = 0; c < C; ++c) a += static_cast<double>(gb[r * C + c]) * gb[r * C + c] + eps1_;
                rb[r] = static_cast<float>(beta2t * rb[r] + (1.0 - beta2t) * (a / static_cast<double>(C)));
              }
            },
            C);
        double* acc = col_acc_.data();
        kernels::parallel_ranges(
            C, threads_,
            [&](int64_t c0, int64_t c1) {
              for (int64_t c = c0; c < c1; ++c) acc[c] = 0.0;
              for (int64_t r = 0; r < R; ++r)
                for (int64_t c = c0; c < c1; ++c) acc[c] += static_cast<double>(gb[r * C + c]) * gb[r * C + c] + eps1_;
              for (int64_t c = c0; c < c1; ++c)
                cb[c] = static_cast<float>(beta2t * cb[c] + (1.0 - beta2t) * (acc[c] / static_cast<double>(R)));
            },
            R);
        double mean_r = 0.0;
        for (int64_t r = 0; r < R; ++r) mean_r += rb[r];
        mean_r /= static_cast<double>(R);
        for (int64_t r = 0; r < R; ++r) row_scale_[bi * R + r] = static_cast<float>(1.0 / std::sqrt(rb[r] / mean_r));
        for (int64_t c = 0; c < C; ++c) col_scale_[bi * C + c] = static_cast<float>(1.0 / std::sqrt(cb[c]));
      }
      const float* rs = row_scale_.data();
      const float* cs = col_scale_.data();
      sum_u2 = kernels::parallel_sum<1>(
          f.batch * R, threads_,
          [&](int64_t q0, int64_t q1, double* acc) {
            double a = 0.0;
            for (int64_t q = q0; q < q1; ++q) {
              const float* gr = g + q * C;
              const float* csb = cs + (q / R) * C;
              for (int64_t c = 0; c < C; ++c) {
                const float u = gr[c] * rs[q] * csb[c];
                a += static_cast<double>(u) * u;
              }
            }
            acc[0] += a;
          },
          C)[0];
    } else {
      float* __restrict v = buf(f.full);
      const float b2 = static_cast<float>(beta2t), omb2 = static_cast<float>(1.0 - beta2t);
      sum_u2 = kernels::parallel_sum<1>(s.n, threads_, [&](int64_t b, int64_t e, double* acc) {
        double a = 0.0;
        for (int64_t j = b; j < e; ++j) {
          const float vj = b2 * v[j] + omb2 * (g[j] * g[j] + eps1);
          v[j] = vj;
          const float u = g[j] / std::sqrt(vj);
          a += static_cast<double>(u) * u;
        }
        acc[0] += a;
      })[0];
    }
    const double rms_u = std::sqrt(sum_u2 / static_cast<double>(s.n));
    const float clip = static_cast<float>(1.0 / std::max(1.0, rms_u / clip_threshold_));
    const float decay = static_cast<float>(1.0 - alpha * s.weight_decay);
    const float a = static_cast<float>(alpha);
    const float b1 = static_cast<float>(beta1_), omb1 = static_cast<float>(1.0 - beta1_);
    float* mom = use_beta1_ ? buf(f.mom) : nullptr;
    if (f.factored) {
      const int64_t R = f.rows, C = f.cols;
      const float* rs = row_scale_.data();
      const float* cs = col_scale_.data();
      kernels::parallel_ranges(
          f.batch * R, threads_,
          [&](int64_t q0, int64_t q1) {
            for (int64_t q = q0; q < q1; ++q)
              adafactor_apply(w + q * C, g + q * C, cs + (q / R) * C, rs[q], nullptr, mom ? mom + q * C : nullptr, C,
                              clip, decay, a, b1, omb1);
          },
          C);
    } else {
      const float* v = buf(f.full);
      kernels::parallel_ranges(s.n, threads_, [&](int64_t b, int64_t e) {
        adafactor_apply(w + b, g + b, nullptr, 1.0f, v + b, mom ? mom + b : nullptr, e - b, clip, decay, a, b1, omb1);
      });
    }
  }
}

}  // namespace zcode::optim
