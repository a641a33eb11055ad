// adafactor.cpp: Adafactor (see optimizers.h for the formula and its source).
//
// Row and column statistics are stored as means, not the paper's sums: the
// estimate V̂ = R·C / mean(R) is the same, and means keep the stored values on
// the scale of g² whatever the matrix size. All reductions run in double in a
// fixed order, so results are bitwise reproducible and do not depend on the
// thread count or on the number of ranks a ZeRO-1 shard spreads a tensor
// over: a row's sum in column order; a column's sum as the fold, in row-band
// order, of the bands of `band` rows (each summed in row order); the mean of
// R and Σ U² as folds of per-band (or per-kSumBlock, for vectors) partials.
// A shard cuts a matrix only between bands (shard_granularity), so every
// band's partials come from one rank; two allgathers a step (TensorSums)
// bring them together: (A) column, R and w² partials, (B) Σ U² partials.
#include "optimizers.h"

#include <zcode/kernels/parallel.h>

#include <algorithm>
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

namespace {

// Rows of one band: the column sums' blocks span at least 64 Ki elements.
int64_t band_rows(int64_t rows, int64_t cols, int64_t batch) {
  if (rows < 1 || cols < 1) return 1;  // (an empty matrix: the constructor refuses it)
  int64_t b = std::min(rows, std::max<int64_t>(1, (65536 + cols - 1) / cols));
  if (batch > 1 && rows % b != 0) b = rows;  // bands must not straddle two matrices of the batch
  return b;
}

}  // namespace

Adafactor::Adafactor(const sdk::CreateContext& ctx)
    : OptimizerBase(
          ctx, "adafactor", 0.0,
          {"eps", "eps2", "decay_rate", "clip_threshold", "beta1", "relative_step", "scale_parameter", "warmup_init"}) {
  check_cuts(ctx, &Adafactor::shard_granularity);
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

  std::vector<int64_t> block_a, width_a, width_b;
  int64_t max_batch = 1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const std::vector<int64_t>& sh = slots_[i].shape;
    Factored f;
    if (sh.size() >= 2) {
      f.factored = true;
      f.rows = sh[sh.size() - 2];
      f.cols = sh[sh.size() - 1];
      for (size_t d = 0; d + 2 < sh.size(); ++d) f.batch *= sh[d];
      if (f.rows < 1 || f.cols < 1 || f.batch < 1)
        sdk::invalid_argument("adafactor: parameter '" + slots_[i].name + "' has an empty dimension");
      f.band = band_rows(f.rows, f.cols, f.batch);
      max_batch = std::max(max_batch, f.batch);
      f.q0 = lo_[i] / f.cols;
      f.nq = slots_[i].n / f.cols;
      std::vector<int64_t> row_shape(sh.begin(), sh.end() - 1);
      std::vector<int64_t> col_shape(sh.begin(), sh.end() - 2);
      col_shape.push_back(f.cols);
      f.row = add_part(i, "exp_avg_sq_row", row_shape, f.q0, f.nq);
      f.col = add_whole(i, "exp_avg_sq_col", col_shape);
      if (!estimate_only_ && slots_[i].n > 0) {
        f.row_scale.assign(static_cast<size_t>(f.nq), 0.0f);
        f.col_scale.assign(static_cast<size_t>(f.batch * f.cols), 0.0f);
      }
      block_a.push_back(f.band * f.cols);
      width_a.push_back(f.cols + 2);  // column partials, Σ R of the band's rows, Σ w²
      width_b.push_back(1);           // Σ U²
    } else {
      f.full = add_buffer(i, "exp_avg_sq", sh);
      block_a.push_back(kernels::kSumBlock);
      width_a.push_back(2);  // Σ w², Σ U²
      width_b.push_back(0);
    }
    if (use_beta1_) f.mom = add_buffer(i, "exp_avg", sh);
    f_.push_back(std::move(f));
  }
  mean_r_.assign(static_cast<size_t>(max_batch), 0.0);
  const sdk::Collectives* comm = sharded_ ? &comm_ : nullptr;
  sums_a_.init(slots_, lo_, full_n_, block_a, width_a, comm, groups_, estimate_only_);
  sums_b_.init(slots_, lo_, full_n_, block_a, width_b, comm, groups_, estimate_only_);
}

void Adafactor::shard_granularity(const sdk::CreateContext& ctx, std::span<int64_t> out) {
  const zc_param_list params = ctx.model().params();
  for (size_t i = 0; i < out.size() && i < params.count; ++i) {
    const DLTensor* v = params.params[i].value;
    if (!v || v->ndim < 2) {
      out[i] = kernels::kSumBlock;
      continue;
    }
    int64_t batch = 1;
    for (int32_t d = 0; d + 2 < v->ndim; ++d) batch *= v->shape[d];
    const int64_t rows = v->shape[v->ndim - 2], cols = v->shape[v->ndim - 1];
    out[i] = band_rows(rows, cols, batch) * cols;
  }
}

void Adafactor::step(double lr, uint64_t /*step*/) {
  ++step_;
  const double t = static_cast<double>(step_);
  const double beta2t = 1.0 - std::pow(t, decay_rate_);
  const float eps1 = static_cast<float>(eps1_);
  // (A) This rank's rows of R, and the partials of the column sums, Σ R
  // and Σ w² per band (matrices); v and the Σ w², Σ U² partials (vectors).
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    if (s.n == 0) continue;
    const Factored& f = f_[i];
    const float* w = s.w;
    const float* g = s.g;
    if (f.factored) {
      const int64_t C = f.cols;
      float* __restrict row = buf(f.row);
      kernels::block_partials(
          s.n, f.band * C, C + 2, threads_,
          [&](int64_t b, int64_t e, double* acc) {
            for (int64_t q = b / C; q < e / C; ++q) {  // rows of the band, in order
              const float* gr = g + q * C;
              double a = 0.0;
              for (int64_t c = 0; c < C; ++c) {
                const double x = static_cast<double>(gr[c]) * gr[c] + eps1_;
                a += x;
                acc[c] += x;
              }
              row[q] = static_cast<float>(beta2t * row[q] + (1.0 - beta2t) * (a / static_cast<double>(C)));
              acc[C] += row[q];
            }
            if (scale_parameter_)
              for (int64_t j = b; j < e; ++j) acc[C + 1] += static_cast<double>(w[j]) * w[j];
          },
          sums_a_.part(i));
    } else {
      float* __restrict v = buf(f.full);
      const float b2 = static_cast<float>(beta2t), omb2 = static_cast<float>(1.0 - beta2t);
      kernels::block_partials(
          s.n, kernels::kSumBlock, 2, threads_,
          [&](int64_t b, int64_t e, double* acc) {
            for (int64_t j = b; j < e; ++j) {
              const float vj = b2 * v[j] + omb2 * (g[j] * g[j] + eps1);
              v[j] = vj;
              const float u = g[j] / std::sqrt(vj);
              acc[0] += static_cast<double>(w[j]) * w[j];
              acc[1] += static_cast<double>(u) * u;
            }
          },
          sums_a_.part(i));
    }
  }
  sums_a_.exchange();
  // (B) Column statistics (every rank that holds part of the matrix keeps
  // them whole), the scales, and the Σ U² partials of the matrices.
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    Factored& f = f_[i];
    if (s.n == 0 || !f.factored) continue;
    const int64_t R = f.rows, C = f.cols, bands = R / f.band + (R % f.band != 0);
    float* __restrict col = buf(f.col);
    const float* __restrict row = buf(f.row);
    double* mean_r = mean_r_.data();
    for (int64_t bi = 0; bi < f.batch; ++bi) {
      float* cb = col + bi * C;
      for (int64_t c = 0; c < C; ++c) {
        const double sum = sums_a_.sum(i, c, bi * bands, bands);
        cb[c] = static_cast<float>(beta2t * cb[c] + (1.0 - beta2t) * (sum / static_cast<double>(R)));
        f.col_scale[static_cast<size_t>(bi * C + c)] = static_cast<float>(1.0 / std::sqrt(cb[c]));
      }
      mean_r[bi] = sums_a_.sum(i, C, bi * bands, bands) / static_cast<double>(R);
    }
    for (int64_t k = 0; k < f.nq; ++k) {
      const int64_t q = f.q0 + k;
      f.row_scale[static_cast<size_t>(k)] = static_cast<float>(1.0 / std::sqrt(row[k] / mean_r[q / R]));
    }
    const float* g = s.g;
    const float* rs = f.row_scale.data();
    const float* cs = f.col_scale.data();
    kernels::block_partials(
        s.n, f.band * C, 1, threads_,
        [&](int64_t b, int64_t e, double* acc) {
          for (int64_t k = b / C; k < e / C; ++k) {
            const float* gr = g + k * C;
            const float* csb = cs + ((f.q0 + k) / R) * C;
            double a = 0.0;
            for (int64_t c = 0; c < C; ++c) {
              const float u = gr[c] * rs[k] * csb[c];
              a += static_cast<double>(u) * u;
            }
            acc[0] += a;
          }
        },
        sums_b_.part(i));
  }
  sums_b_.exchange();
  // (C) The update of this rank's part.
  for (size_t i = 0; i < slots_.size(); ++i) {
    const ParamSlot& s = slots_[i];
    if (s.n == 0) continue;
    const Factored& f = f_[i];
    const double n_all = static_cast<double>(full_n_[i]);
    double rho;
    if (relative_step_) {
      const double cap = warmup_init_ ? 1e-6 * t : 1e-2;
      rho = std::min(cap, 1.0 / std::sqrt(t)) * (lr * s.lr_mult / base_lr_);
    } else {
      rho = lr * s.lr_mult;
    }
    double alpha = rho;
    if (scale_parameter_) alpha *= std::max(eps2_, std::sqrt(sums_a_.sum(i, f.factored ? f.cols + 1 : 0) / n_all));
    const double sum_u2 = f.factored ? sums_b_.sum(i, 0) : sums_a_.sum(i, 1);
    const double rms_u = std::sqrt(sum_u2 / n_all);
    const float clip = static_cast<float>(1.0 / std::max(1.0, rms_u / clip_threshold_));
    const float decay = static_cast<float>(1.0 - alpha * s.weight_decay);
    const float a = static_cast<float>(alpha);
    const float b1 = static_cast<float>(beta1_), omb1 = static_cast<float>(1.0 - beta1_);
    float* w = s.w;
    const float* g = s.g;
    float* mom = use_beta1_ ? buf(f.mom) : nullptr;
    if (f.factored) {
      const int64_t R = f.rows, C = f.cols;
      const float* rs = f.row_scale.data();
      const float* cs = f.col_scale.data();
      kernels::parallel_ranges(
          f.nq, threads_,
          [&](int64_t k0, int64_t k1) {
            for (int64_t k = k0; k < k1; ++k)
              adafactor_apply(w + k * C, g + k * C, cs + ((f.q0 + k) / R) * C, rs[k], nullptr,
                              mom ? mom + k * C : nullptr, C, clip, decay, a, b1, omb1);
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
