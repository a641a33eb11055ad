// train_step.cpp: see zcode/core/train_step.h.
#include <zcode/core/train_step.h>
#include <zcode/sdk/json.h>

#include <rapidjson/document.h>

#include <zcode/kernels/block_sum.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace zcode::core {
namespace {

int64_t numel(const DLTensor& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

float* grad_data(const zc_param& p) {
  const DLTensor* g = p.grad;
  if (!g || g->device.device_type != kDLCPU || g->dtype.code != kDLFloat || g->dtype.bits != 32 || g->dtype.lanes != 1)
    throw std::invalid_argument(std::string("gradient of '") + (p.name ? p.name : "?") +
                                "' is not a float32 CPU tensor");
  return reinterpret_cast<float*>(static_cast<char*>(g->data) + g->byte_offset);
}

// Σ g² in double with 4 independent accumulators (a fixed order, so the same
// inputs give the same bits; 4 lanes let the loop pipeline): one block's partial.
double sum_squares(const float* g, int64_t n) {
  double a[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) a[k] += static_cast<double>(g[i + k]) * g[i + k];
  for (; i < n; ++i) a[0] += static_cast<double>(g[i]) * g[i];
  return (a[0] + a[1]) + (a[2] + a[3]);
}

void check_ids(const DLTensor& t, const char* what) {
  if (t.ndim != 2 || t.dtype.code != kDLInt || t.dtype.bits != 32 || t.device.device_type != kDLCPU)
    throw std::invalid_argument(std::string("batch.") + what + ": expected an int32 [batch, seq] CPU tensor");
  if (t.strides && !(t.strides[1] == 1 && t.strides[0] == t.shape[1]))
    throw std::invalid_argument(std::string("batch.") + what + ": expected a contiguous tensor");
}

const int32_t* ids(const DLTensor& t) {
  return reinterpret_cast<const int32_t*>(static_cast<const char*>(t.data) + t.byte_offset);
}

// Calls f(partial) for every kSumBlock block of every gradient's range, in order.
template <class F>
void for_each_block(const zc_param_list& params, const int64_t* begin, const int64_t* end, F&& f) {
  for (size_t i = 0; i < params.count; ++i) {
    const float* g = grad_data(params.params[i]);
    const int64_t lo = begin ? begin[i] : 0, hi = end ? end[i] : numel(*params.params[i].grad);
    for (int64_t b = lo; b < hi; b += kernels::kSumBlock)
      f(sum_squares(g + b, std::min(hi, b + kernels::kSumBlock) - b));
  }
}

}  // namespace

void grad_square_partials(const zc_param_list& params, const int64_t* begin, const int64_t* end,
                          std::vector<double>& out) {
  for_each_block(params, begin, end, [&](double p) { out.push_back(p); });
}

size_t grad_square_block_count(const zc_param_list& params) {
  size_t n = 0;
  for (size_t i = 0; i < params.count; ++i)
    n += static_cast<size_t>(kernels::sum_blocks(numel(*params.params[i].grad)));
  return n;
}

double grad_norm(const zc_param_list& params) {
  double total = 0.0;  // the left fold of the blocks' partials
  for_each_block(params, nullptr, nullptr, [&](double p) { total += p; });
  return std::sqrt(total);
}

void scale_grads(const zc_param_list& params, float c, const int64_t* begin, const int64_t* end) {
  for (size_t i = 0; i < params.count; ++i) {
    float* g = grad_data(params.params[i]);
    const int64_t lo = begin ? begin[i] : 0, hi = end ? end[i] : numel(*params.params[i].grad);
    for (int64_t j = lo; j < hi; ++j) g[j] *= c;
  }
}

double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0 || !std::isfinite(norm)) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

double clip_grad_norm(const zc_param_list& params, double max_norm) {
  const double norm = grad_norm(params);
  const double coef = clip_coefficient(norm, max_norm);
  if (coef < 1.0) scale_grads(params, static_cast<float>(coef), nullptr, nullptr);
  return norm;
}

int64_t count_target_tokens(const zc_batch& batch) {
  check_ids(batch.targets, "targets");
  const int32_t* t = ids(batch.targets);
  const int64_t n = numel(batch.targets);
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += t[i] != -1;
  return c;
}

zc_fb_options make_fb_options(int64_t step_target_tokens, double loss_scale, uint32_t label_mode,
                              uint64_t sample_seed) {
  zc_fb_options o{};
  o.struct_size = sizeof(zc_fb_options);
  o.label_mode = label_mode;
  o.loss_normalizer = static_cast<double>(step_target_tokens);
  o.loss_scale = loss_scale;
  o.sample_seed = sample_seed;
  return o;
}

bool hessian_due(uint64_t update, uint64_t interval) {
  return interval != 0 && update >= 1 && (update - 1) % interval == 0;
}

void GradientAccumulator::add(const zc_batch& b) {
  check_ids(b.input_ids, "input_ids");
  check_ids(b.targets, "targets");
  const int64_t rows = b.input_ids.shape[0], cols = b.input_ids.shape[1];
  if (b.targets.shape[0] != rows || b.targets.shape[1] != cols)
    throw std::invalid_argument("batch.targets: shape differs from batch.input_ids");
  const bool has_docs = b.doc_ids.data != nullptr;
  if (has_docs) {
    check_ids(b.doc_ids, "doc_ids");
    if (b.doc_ids.shape[0] != rows || b.doc_ids.shape[1] != cols)
      throw std::invalid_argument("batch.doc_ids: shape differs from batch.input_ids");
  }
  if (count_ == slots_.size()) slots_.emplace_back();
  Slot& s = slots_[count_];
  const size_t n = static_cast<size_t>(rows * cols);
  s.input_ids.assign(ids(b.input_ids), ids(b.input_ids) + n);
  s.targets.assign(ids(b.targets), ids(b.targets) + n);
  if (has_docs) s.doc_ids.assign(ids(b.doc_ids), ids(b.doc_ids) + n);
  s.shape[0] = rows;
  s.shape[1] = cols;
  s.batch = b;  // scalar fields (token, byte and char counts, epoch) as given
  s.batch.struct_size = sizeof(zc_batch);
  auto view = [&](DLTensor& t, std::vector<int32_t>& v) {
    t.data = v.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 2;
    t.dtype = DLDataType{kDLInt, 32, 1};
    t.shape = s.shape;
    t.strides = nullptr;
    t.byte_offset = 0;
  };
  view(s.batch.input_ids, s.input_ids);
  view(s.batch.targets, s.targets);
  if (has_docs) view(s.batch.doc_ids, s.doc_ids);
  else s.batch.doc_ids = DLTensor{};
  const int64_t tokens = count_target_tokens(s.batch);
  s.batch.num_target_tokens = tokens;
  tokens_ += tokens;
  ++count_;
}

zc_status* GradientAccumulator::run(const zc_model_table* model, void* instance, double loss_scale,
                                    const zc_metrics_sink* sink, double* out_loss, uint32_t label_mode,
                                    uint64_t sample_seed) {
  return run(model, instance, loss_scale, sink, out_loss, label_mode, sample_seed, RunOptions{});
}

zc_status* GradientAccumulator::run(const zc_model_table* model, void* instance, double loss_scale,
                                    const zc_metrics_sink* sink, double* out_loss, uint32_t label_mode,
                                    uint64_t sample_seed, const RunOptions& ro) {
  if (count_ == 0) throw std::invalid_argument("gradient accumulation: no micro-batch added");
  const int64_t normalizer = ro.step_target_tokens > 0 ? ro.step_target_tokens : tokens_;
  if (normalizer == 0)
    throw std::invalid_argument("gradient accumulation: the step's micro-batches have no target tokens (all -1)");
  if (normalizer < tokens_)
    throw std::invalid_argument("gradient accumulation: the global step's " + std::to_string(normalizer) +
                                " target tokens are fewer than this process's " + std::to_string(tokens_));
  struct Tee {
    const zc_metrics_sink* next;
    double loss;
  } tee{sink, 0.0};
  zc_metrics_sink mine{&tee, [](void* ctx, const char* name, double v) {
                         auto* t = static_cast<Tee*>(ctx);
                         if (std::strcmp(name, "loss") == 0) t->loss += v;
                         if (t->next && t->next->put) t->next->put(t->next->ctx, name, v);
                       }};
  zc_fb_options opt = make_fb_options(normalizer, loss_scale, label_mode, sample_seed);
  for (size_t i = 0; i < count_; ++i) {
    if (i == 0 || ro.zero_grad_each)
      if (zc_status* s = model->zero_grad(instance)) return s;
    if (i + 1 == count_) {
      opt.grads_ready_ctx = ro.grads_ready_ctx;
      opt.grads_ready = ro.grads_ready;
    }
    if (zc_status* s = model->forward_backward(instance, &slots_[i].batch, &opt, &mine)) return s;
    if (ro.after_each) ro.after_each(i);
  }
  *out_loss = tee.loss;
  return nullptr;
}

NonfiniteGuard::NonfiniteGuard(int max_consecutive, std::function<void(zc_log_level, const std::string&)> log)
    : max_consecutive_(max_consecutive), log_(std::move(log)) {
  if (max_consecutive < 1)
    throw std::invalid_argument("training.max_consecutive_nonfinite: expected an integer >= 1, found " +
                                std::to_string(max_consecutive));
}

NonfiniteGuard::Action NonfiniteGuard::check(uint64_t step, double loss, double norm) {
  if (std::isfinite(loss) && std::isfinite(norm)) {
    consecutive_ = 0;
    return Action::kApply;
  }
  ++consecutive_;
  ++total_;
  const std::string what =
      !std::isfinite(loss) ? "loss " + std::to_string(loss) : "gradient norm " + std::to_string(norm);
  if (consecutive_ >= max_consecutive_) {
    message_ = "step " + std::to_string(step) + ": non-finite " + what + " for " + std::to_string(consecutive_) +
               " consecutive steps (training.max_consecutive_nonfinite = " + std::to_string(max_consecutive_) +
               "); stopping the run (try a lower optimizer.lr or training.clip_grad_norm)";
    if (log_) log_(ZC_LOG_ERROR, message_);
    return Action::kStop;
  }
  message_ = "step " + std::to_string(step) + ": non-finite " + what + "; update skipped (" +
             std::to_string(consecutive_) + " in a row, " + std::to_string(total_) + " in total; the run stops at " +
             std::to_string(max_consecutive_) + " in a row)";
  if (log_) log_(ZC_LOG_WARN, message_);
  return Action::kSkip;
}

std::string NonfiniteGuard::state_json() const {
  zcode::sdk::json::Writer w;
  w.begin_object().key("consecutive").integer(consecutive_).key("total_skipped").integer(total_).end_object();
  return w.str();
}

void NonfiniteGuard::load_state_json(std::string_view json) {
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("consecutive") || !d["consecutive"].IsInt() ||
      d["consecutive"].GetInt() < 0 || !d.HasMember("total_skipped") || !d["total_skipped"].IsUint64())
    throw std::invalid_argument("non-finite guard state: expected {\"consecutive\": int, \"total_skipped\": int}");
  consecutive_ = d["consecutive"].GetInt();
  total_ = d["total_skipped"].GetUint64();
}

}  // namespace zcode::core
