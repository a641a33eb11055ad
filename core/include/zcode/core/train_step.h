// zcode/core/train_step.h: the mechanics of one optimizer step that every
// optimizer shares, for the Engine to call in this order:
//
//   GradientAccumulator acc;                     // once
//   NonfiniteGuard guard(max_consecutive_nonfinite, log);
//   per optimizer step s = 0, 1, ... (updates already done):
//     for each micro-batch: acc.add(loader batch)            (copies it)
//     if (hessian_due(s + 1, optimizer.hessian_interval())):   // Sophia
//       acc.run(model, ..., ZC_LABELS_SAMPLED, seed) ; optimizer.update_hessian(acc.target_tokens())
//     acc.run(model, ...)                     -> loss   (zero_grad + forward_backward each)
//     norm = clip_grad_norm(params, training.clip_grad_norm)  (0 = no clipping)
//     switch (guard.check(s, loss, norm)):
//       kApply: optimizer.step(scheduler.lr(s, base_lr), s + 1)
//       kSkip:  no update (the guard logged it); the schedule still advances
//       kStop:  write a checkpoint, then fail the run with guard.message()
//     acc.clear()
//
// Everything operates on the ABI types (zc_param_list, zc_batch,
// zc_model_table) so that it depends on nothing but abi.h. No function here
// allocates once the accumulator's buffers have grown to the batch shape.
#pragma once

#include <zcode/abi.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace zcode::core {

/// Global L2 norm of all gradients, sqrt(Σ_params Σ_i g_i²), accumulated in
/// double in a fixed order (bitwise reproducible): every tensor's
/// kernels::kSumBlock blocks (zcode/kernels/block_sum.h), each summed with
/// four interleaved accumulators, and the left fold of those block partials
/// in tensor and block order. Gradients must be fp32 contiguous CPU
/// tensors. Returns NaN or +Inf when any gradient element is NaN or ±Inf
/// (squares of finite fp32 values cannot overflow a double sum), so the
/// result is finite exactly when all gradients are.
/// Throws std::invalid_argument on a non-fp32 or non-CPU gradient.
double grad_norm(const zc_param_list& params);

/// Appends to `out` the partials grad_norm folds, for the elements
/// [begin[i], end[i]) of each gradient only (begin, end: NULL for whole
/// tensors; each begin a multiple of kSumBlock). A ZeRO-1 rank's partials
/// are exactly its blocks' of the one-process list, so gathering them in
/// rank order and folding gives grad_norm's bits. No allocation once `out`
/// has the capacity.
void grad_square_partials(const zc_param_list& params, const int64_t* begin, const int64_t* end,
                          std::vector<double>& out);

/// How many partials grad_square_partials appends for whole tensors: Σ_i
/// ceil(numel_i / kSumBlock) (kernels::sum_blocks), the capacity to reserve.
size_t grad_square_block_count(const zc_param_list& params);

/// g ← c·g for the elements [begin[i], end[i]) of each gradient (NULL:
/// whole tensors).
void scale_grads(const zc_param_list& params, float c, const int64_t* begin, const int64_t* end);

/// What clip_grad_norm scales by: min(1, max_norm / (norm + 1e-6)); 1 when
/// max_norm <= 0 (no clipping) or norm is not finite.
double clip_coefficient(double norm, double max_norm);

/// Clips all gradients together to global L2 norm `max_norm`, as
/// torch.nn.utils.clip_grad_norm_ (Pascanu et al. 2013, Algorithm 1):
///   n = grad_norm(params);  c = max_norm / (n + 1e-6);  if c < 1: g ← c·g.
/// Returns n, the norm BEFORE clipping. `max_norm <= 0` disables clipping
/// (n is still returned). A non-finite n leaves the gradients untouched (the
/// non-finite guard skips that update).
double clip_grad_norm(const zc_param_list& params, double max_norm);

/// Target tokens of a micro-batch: the number of entries of `targets`
/// (int32 [batch, seq]) that are not -1.
int64_t count_target_tokens(const zc_batch& batch);

/// zc_fb_options for every micro-batch of one optimizer step:
/// loss_normalizer = target tokens of the whole step (all micro-batches),
/// so Σ_micro (Σ NLL / normalizer) equals the mean over the step's tokens and
/// accumulation equals one big batch.
zc_fb_options make_fb_options(int64_t step_target_tokens, double loss_scale = 1.0,
                              uint32_t label_mode = ZC_LABELS_TARGETS, uint64_t sample_seed = 0);

/// Whether update number `update` (1-based) refreshes Sophia's Hessian
/// estimate first: updates 1, 1+k, 1+2k, ... (Liu et al. 2023, Algorithm 3:
/// "if t mod k = 1"). `interval` 0 means never.
bool hessian_due(uint64_t update, uint64_t interval);

/// Holds the micro-batches of one optimizer step and runs forward/backward
/// over them with the global-token loss normalisation.
///
/// The data loader's batch memory lives only until its next next_batch, and
/// the normaliser needs every micro-batch's token count before the first
/// forward_backward, so add() copies each batch into buffers owned here.
/// clear() keeps the buffers: with a constant batch shape there is no
/// allocation after the first step.
class GradientAccumulator {
 public:
  /// Copies `batch` (int32 input_ids, targets and optional doc_ids,
  /// [batch, seq], contiguous CPU). Throws std::invalid_argument otherwise.
  void add(const zc_batch& batch);
  /// Micro-batches added since the last clear().
  size_t size() const { return count_; }
  /// Σ count_target_tokens over the added micro-batches.
  int64_t target_tokens() const { return tokens_; }
  /// The i-th added micro-batch (pointers into this object; valid until the
  /// next add()/clear()).
  const zc_batch& batch(size_t i) const { return slots_[i].batch; }

  /// zero_grad, then forward_backward on every added micro-batch with
  /// make_fb_options(target_tokens(), loss_scale, label_mode, sample_seed).
  /// Every metric the model puts is passed on to `sink` (may be NULL)
  /// unchanged; the "loss" values are also summed into *out_loss (the step's
  /// loss: each is Σ NLL / step tokens). Returns the model's status (NULL on
  /// success); on failure *out_loss is untouched. Throws
  /// std::invalid_argument when no micro-batch was added or the step has 0
  /// target tokens (the normaliser would be 0).
  zc_status* run(const zc_model_table* model, void* instance, double loss_scale, const zc_metrics_sink* sink,
                 double* out_loss, uint32_t label_mode = ZC_LABELS_TARGETS, uint64_t sample_seed = 0);

  /// How a multi-process step runs the micro-batches (zcode/core/dist/).
  struct RunOptions {
    /// The loss normaliser: the target tokens of the whole global step (all
    /// ranks' micro-batches); 0 = target_tokens() (this process's).
    int64_t step_target_tokens = 0;
    /// zero_grad before every micro-batch (not only the first), so that the
    /// model's gradient holds one micro-batch's after each forward_backward
    /// (the deterministic data-parallel sum, GradientReducer::add_micro).
    bool zero_grad_each = false;
    /// Called with the micro-batch's index after each forward_backward
    /// succeeded (may be empty).
    std::function<void(size_t)> after_each;
    /// zc_fb_options.grads_ready of the LAST micro-batch (the one after
    /// which the gradients are the step's); NULL: none.
    void* grads_ready_ctx = nullptr;
    void (*grads_ready)(void* ctx, size_t first, size_t count) = nullptr;
  };
  /// run() with `ro`; the sum in *out_loss is this process's micro-batches'.
  /// Throws std::invalid_argument as run() does, and when
  /// ro.step_target_tokens is > 0 but below target_tokens().
  zc_status* run(const zc_model_table* model, void* instance, double loss_scale, const zc_metrics_sink* sink,
                 double* out_loss, uint32_t label_mode, uint64_t sample_seed, const RunOptions& ro);

  /// Forgets the added micro-batches (keeps the buffers).
  void clear() {
    count_ = 0;
    tokens_ = 0;
  }

 private:
  struct Slot {
    std::vector<int32_t> input_ids, targets, doc_ids;
    int64_t shape[2] = {0, 0};
    zc_batch batch{};
  };
  std::deque<Slot> slots_;  // deque: growing it keeps earlier slots (and the views into them) in place
  size_t count_ = 0;
  int64_t tokens_ = 0;
};

/// Skips updates whose loss or gradients are not finite, and stops the run
/// after too many in a row.
class NonfiniteGuard {
 public:
  enum class Action { kApply, kSkip, kStop };
  /// `log(level, line)` receives one line per skip (ZC_LOG_WARN) and the stop
  /// (ZC_LOG_ERROR); may be empty. Throws std::invalid_argument when
  /// max_consecutive < 1.
  explicit NonfiniteGuard(int max_consecutive = 5, std::function<void(zc_log_level, const std::string&)> log = {});

  /// Decides for the update after `step` updates (0-based, as the scheduler):
  /// kApply when loss and grad_norm are finite (resets the consecutive count);
  /// otherwise counts it and returns kSkip, or kStop when this makes
  /// max_consecutive skips in a row. message() says which and where.
  Action check(uint64_t step, double loss, double grad_norm);

  const std::string& message() const { return message_; }
  int consecutive() const { return consecutive_; }
  uint64_t total_skipped() const { return total_; }
  int max_consecutive() const { return max_consecutive_; }

  /// {"consecutive": c, "total_skipped": t} for the checkpoint's state.json.
  std::string state_json() const;
  /// Restores state_json(); throws std::invalid_argument on malformed input.
  void load_state_json(std::string_view json);

 private:
  int max_consecutive_;
  std::function<void(zc_log_level, const std::string&)> log_;
  int consecutive_ = 0;
  uint64_t total_ = 0;
  std::string message_;
};

}  // namespace zcode::core
