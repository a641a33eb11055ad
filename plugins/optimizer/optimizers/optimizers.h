// optimizers.h: the six optimizer components of the `optimizers` plugin.
// One .cpp per optimizer holds its update kernel; plugin.cpp registers them.
//
// Conventions for all: parameters and gradients are fp32 [numel] (any shape,
// contiguous, CPU); `lr` is the scheduler's learning rate for this step times
// the parameter's group lr_mult; `t` is the number of updates including this
// one (1 on the first step), counted by the optimizer and saved with its
// state; gradients are read, never written. Scalars are computed in double
// and applied in fp32, like torch.optim.
#pragma once

#include "optimizer_base.h"
#include "tensor_sums.h"

namespace zcode::optim {

/// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter 2019,
/// Algorithm 2), in torch.optim.AdamW's exact order:
///   w ← w·(1 − lr·λ)
///   m ← β1·m + (1−β1)·g            v ← β2·v + (1−β2)·g²
///   w ← w − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + ε)
/// Options: betas [0.9, 0.999], eps 1e-8, weight_decay (λ) 0.01.
/// State: `<p>.exp_avg` (m), `<p>.exp_avg_sq` (v).
class AdamW final : public OptimizerBase {
 public:
  explicit AdamW(const sdk::CreateContext& ctx);
  void step(double lr, uint64_t step) override;

 private:
  double beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8;
  std::vector<size_t> m_, v_;
};

/// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning",
/// Algorithm 2), per parameter tensor ("layer"):
///   m ← β1·m + (1−β1)·g            v ← β2·v + (1−β2)·g²
///   m̂ = m/(1−β1^t), v̂ = v/(1−β2^t) (bias_correction: true; else m̂=m, v̂=v)
///   u = m̂ / (√v̂ + ε) + λ·w
///   w ← w − lr · φ(‖w‖)/‖u‖ · u,    φ(z) = min(max(z, 0), max_weight_norm)
/// with the trust ratio φ(‖w‖)/‖u‖ taken as 1 when ‖w‖ = 0 or ‖u‖ = 0.
/// Options: betas [0.9, 0.999], eps 1e-6, weight_decay 0.01, max_weight_norm
/// (γ_u of φ) 10, bias_correction true. State: `<p>.exp_avg`, `<p>.exp_avg_sq`.
class Lamb final : public OptimizerBase {
 public:
  explicit Lamb(const sdk::CreateContext& ctx);
  void step(double lr, uint64_t step) override;
  /// ZeRO-1 parts start and end on the norms' blocks (kernels::kSumBlock).
  static void shard_granularity(const sdk::CreateContext& ctx, std::span<int64_t> out);

 private:
  double beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-6, max_weight_norm_ = 10.0;
  bool bias_correction_ = true;
  std::vector<size_t> m_, v_;
  TensorSums norms_;  // ‖w‖², ‖u‖² per block, gathered over the shard's ranks
};

/// Adafactor (Shazeer & Stern 2018, Algorithms 4 (matrices) and 5 (vectors),
/// with update clipping, Section 6, and relative step sizes, Section 7):
///   β̂2_t = 1 − t^c (decay_rate c = −0.8)
///   tensors with ndim ≥ 2, viewed as [..., n, m] (each leading index its own matrix):
///     R ← β̂2·R + (1−β̂2)·mean_cols(g² + ε1)   [..., n]   (`<p>.exp_avg_sq_row`)
///     C ← β̂2·C + (1−β̂2)·mean_rows(g² + ε1)   [..., m]   (`<p>.exp_avg_sq_col`)
///     V̂_ij = R_i·C_j / mean(R)   (= the paper's R_i·C_j / 1ᵀR with R, C as sums)
///   tensors with ndim ≤ 1: V ← β̂2·V + (1−β̂2)·(g² + ε1)  (`<p>.exp_avg_sq`)
///   U = g / √V̂;  Û = U / max(1, RMS(U)/d)  (d = clip_threshold, RMS over the tensor)
///   α = ρ·(scale_parameter ? max(ε2, RMS(w before the step)) : 1)
///       ρ = lr                                     when relative_step is false
///       ρ = min(10⁻², 1/√t)·lr/optimizer.lr         when relative_step is true
///           (min(10⁻⁶·t, 1/√t) with warmup_init); the factor lr/optimizer.lr is
///           the scheduler's shape, so a constant scheduler gives the paper exactly
///   w ← w − α·λ·w  (decoupled weight decay, λ = weight_decay)
///   beta1 null:  w ← w − α·Û
///   beta1 = β1:  M ← β1·M + (1−β1)·Û (`<p>.exp_avg`),  w ← w − α·M
/// Options: eps [ε1 1e-30, ε2 1e-3], decay_rate −0.8, clip_threshold 1,
/// beta1 null, relative_step false, scale_parameter false, warmup_init false,
/// weight_decay 0.
class Adafactor final : public OptimizerBase {
 public:
  explicit Adafactor(const sdk::CreateContext& ctx);
  void step(double lr, uint64_t step) override;
  /// ZeRO-1 parts of a matrix start and end between bands of rows (the
  /// column sums' blocks: at least 64 Ki elements); vectors on kSumBlock.
  static void shard_granularity(const sdk::CreateContext& ctx, std::span<int64_t> out);

 private:
  struct Factored {
    bool factored = false;
    int64_t batch = 1, rows = 1, cols = 1;  // [batch, rows, cols] view of the tensor
    int64_t band = 1;                       // rows a column-sum block spans
    int64_t q0 = 0, nq = 0;                 // this rank's rows [q0, q0 + nq) of the batch·rows
    size_t row = 0, col = 0, full = 0, mom = 0;
    std::vector<float> row_scale, col_scale;  // [nq], [batch·cols] (allocated at create)
  };
  double eps1_ = 1e-30, eps2_ = 1e-3, decay_rate_ = -0.8, clip_threshold_ = 1.0, beta1_ = 0.0;
  bool use_beta1_ = false, relative_step_ = false, scale_parameter_ = false, warmup_init_ = false;
  double base_lr_ = 1e-3;
  std::vector<Factored> f_;
  TensorSums sums_a_, sums_b_;  // (A) column, R and w² partials; (B) Σ U² partials
  std::vector<double> mean_r_;  // scratch [max batch]
};

/// Sophia-G (Liu et al. 2023, "Sophia: A Scalable Stochastic Second-order
/// Optimizer for Language Model Pre-training", Algorithm 3 with the
/// Gauss-Newton-Bartlett estimator of Algorithm 2):
///   every step:  m ← β1·m + (1−β1)·g
///                w ← w − lr·λ·w
///                w ← w − lr·clip(m / max(γ·h, ε), 1),  clip(z, 1) = max(min(z, 1), −1)
///   every k = hessian_update_interval steps the host runs forward_backward
///   with labels sampled from the model (ZC_LABELS_SAMPLED, loss averaged over
///   the B sampled target tokens) and calls update_hessian(B):
///                h ← β2·h + (1−β2)·B·ĝ⊙ĝ      (ĝ = the grads at that moment)
/// `rho` is the paper's γ (named rho as in the authors' code and the guide's
/// config, `rho: 0.04`). Options: betas [0.965, 0.99], rho 0.04, eps 1e-12,
/// weight_decay 0.1, hessian_update_interval 10.
/// State: `<p>.exp_avg` (m), `<p>.hessian` (h); JSON hessian_updates.
class Sophia final : public OptimizerBase {
 public:
  explicit Sophia(const sdk::CreateContext& ctx);
  void step(double lr, uint64_t step) override;
  uint64_t hessian_interval() const override { return k_; }
  void update_hessian(int64_t num_tokens) override;

 private:
  void write_json_fields(rapidjson::Writer<rapidjson::StringBuffer>& w) const override;
  void check_json_fields(const rapidjson::Document& d) const override;
  void read_json_fields(const rapidjson::Document& d) override;
  double beta1_ = 0.965, beta2_ = 0.99, rho_ = 0.04, eps_ = 1e-12;
  uint64_t k_ = 10, hessian_updates_ = 0;
  std::vector<size_t> m_, h_;
};

/// SGD exactly as torch.optim.SGD (Sutskever et al. 2013 momentum form):
///   d = g + λ·w                          (coupled L2 weight decay)
///   b ← d on the first step, else b ← μ·b + (1−τ)·d   (momentum μ, dampening τ)
///   d ← d + μ·b (nesterov) or d ← b;     w ← w − lr·d
/// With momentum 0 there is no buffer and d is applied directly.
/// Options: momentum 0, dampening 0, nesterov false, weight_decay 0.
/// State: `<p>.momentum_buffer` (only when momentum > 0).
class Sgd : public OptimizerBase {
 public:
  explicit Sgd(const sdk::CreateContext& ctx);
  void step(double lr, uint64_t step) override;

 protected:
  Sgd(const sdk::CreateContext& ctx, const char* name, double default_momentum);
  /// One SGD update of slot `i`; `col_shift` (or nullptr) is subtracted from
  /// d per column of a [rows, cols] tensor before the momentum (Zerosum-SGD).
  void update(size_t i, double lr, const double* col_shift);
  double momentum_ = 0.0, dampening_ = 0.0;
  bool nesterov_ = false;
  std::vector<size_t> buf_;  // buffer index per slot (unused when momentum_ == 0)
};

/// Zerosum-SGD: SGD with momentum (exactly Sgd above, default momentum 0.9)
/// where the update direction of every MoE router weight (ZC_PARAM_ROUTER,
/// [n_experts, d_model]) is centred over the expert axis before it enters the
/// momentum:
///   d = g + λ·w;   d[e, j] ← d[e, j] − (1/E)·Σ_e' d[e', j]
/// so Σ_e d[e, :] = 0, and since the momentum buffer and the update are
/// linear combinations of such d, every step's change satisfies
/// Σ_e Δw[e, :] = 0. Why: softmax router probabilities are invariant to adding
/// the same vector to every expert's row (the logit shift x·c is common to all
/// experts), so the gradient carries no information along that direction, and
/// noise and weight decay along it only make the router's logits drift; the
/// centring removes that drift and leaves the routing distribution's dynamics
/// unchanged. Non-router parameters get plain SGD-momentum.
class ZerosumSgd final : public Sgd {
 public:
  explicit ZerosumSgd(const sdk::CreateContext& ctx);
  void step(double lr, uint64_t step) override;
  /// ZeRO-1: a router is never split (its centring needs all its rows).
  static void shard_granularity(const sdk::CreateContext& ctx, std::span<int64_t> out);

 private:
  std::vector<double> col_mean_;  // scratch [max d_model]
};

}  // namespace zcode::optim
