// glm52/plugin.cpp: the `glm52` model component (ABI glue over Model<float>).
#include "config.h"
#include "expert_group.h"
#include "model.h"
#include "schema.h"

#include <zcode/kernels/gemm.h>
#include <zcode/kernels/threads.h>
#include <zcode/sdk/json.h>
#include <zcode/sdk/plugin.h>

#include <rapidjson/document.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using zcode::sdk::Error;

std::string shape_str(const int64_t* s, int n) {
  std::string o = "[";
  for (int i = 0; i < n; ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

/// Checks a borrowed batch tensor: CPU, int32, [B, T], contiguous.
void check_ids(const DLTensor& t, const char* name, int64_t B, int64_t T) {
  if (t.device.device_type != kDLCPU)
    throw Error(ZC_ERR_UNSUPPORTED, std::string("batch.") + name + ": only CPU tensors are supported");
  if (!zcode::sdk::same_dtype(t.dtype, zcode::sdk::kI32) || t.ndim != 2)
    throw Error(ZC_ERR_INVALID_ARGUMENT, std::string("batch.") + name + ": expected int32 [batch, seq]");
  if (B >= 0 && (t.shape[0] != B || t.shape[1] != T))
    throw Error(ZC_ERR_INVALID_ARGUMENT, std::string("batch.") + name + ": shape " + shape_str(t.shape, 2) +
                                             " differs from input_ids " +
                                             shape_str(std::vector<int64_t>{B, T}.data(), 2));
  if (t.strides && (t.strides[1] != 1 || t.strides[0] != t.shape[1]))
    throw Error(ZC_ERR_INVALID_ARGUMENT, std::string("batch.") + name + ": must be contiguous");
}

/// The vocabulary size the tokenizer gives the model (0 without a tokenizer).
int64_t tokenizer_vocab(const zcode::sdk::CreateContext& ctx) {
  zcode::sdk::TokenizerRef tok = ctx.tokenizer();
  if (!tok) return 0;
  rapidjson::Document info;
  const std::string j = tok.info_json();
  info.Parse(j.c_str());
  if (!info.HasParseError() && info.IsObject() && info.HasMember("vocab_size") && info["vocab_size"].IsInt64())
    return info["vocab_size"].GetInt64();
  return static_cast<int64_t>(tok.vocab_size());
}

class Glm52 : public zcode::sdk::Model {
 public:
  explicit Glm52(const zcode::sdk::CreateContext& ctx) : host_(ctx.host()) {
    threads_ = host_.num_threads();
    zcode::kernels::set_num_threads(threads_);
    const zcode::sdk::Options opts(ctx.raw()->options_json, "model");
    cfg_ = glm52::Config::resolve(opts, ctx.config(), tokenizer_vocab(ctx));
    pinned_blocking_ = zcode::sdk::to_json(opts.object("blocking").json());
    // The job's expert group (one rank unless distributed.expert_parallel > 1):
    // this rank's share of the routed experts, exchanged over the host's collectives.
    model_ = std::make_unique<glm52::Model<float>>(cfg_, host_.derive_seed("model/init"),
                                                   glm52::expert_group(zcode::sdk::Collectives(ctx.host().raw())));
    model_->set_tracer(ctx.host().raw());
    const auto& infos = model_->param_infos();
    values_.resize(infos.size());
    grads_.resize(infos.size());
    for (size_t i = 0; i < infos.size(); ++i) {
      int64_t* shape = const_cast<int64_t*>(infos[i].shape.data());
      const int nd = static_cast<int>(infos[i].shape.size());
      values_[i] = zcode::sdk::make_view(model_->params() + infos[i].offset, zcode::sdk::kF32, nd, shape);
      grads_[i] = zcode::sdk::make_view(model_->grads() + infos[i].offset, zcode::sdk::kF32, nd, shape);
      list_.push_back(zc_param{infos[i].name.c_str(), &values_[i], &grads_[i], infos[i].flags, 0});
    }
    info_ = cfg_.to_json();
    uint64_t total = 0, active = 0;
    cfg_.count_params(total, active);
    host_.info("glm52", "Initializing GLM5pt2 (" + cfg_.variant + ") with " + std::to_string(cfg_.moe_experts) +
                            " experts, top_k=" + std::to_string(cfg_.moe_top_k) + ": " + std::to_string(total) +
                            " parameters (" + std::to_string(active) + " active per token), " +
                            std::to_string(threads_) + " threads, OpenBLAS " + zcode::kernels::blas_threading());
    host_.info("glm52", "blocking " + cfg_.blocking.to_json() + " for " + glm52::this_machine().describe() +
                            "; float GEMMs: " + zcode::kernels::gemm_engine_description());
    if (const std::string w = zcode::kernels::blas_core_warning(); !w.empty()) host_.warn("glm52", w);
    if (zcode::kernels::blas_threading() == "pthread" && threads_ > 1)
      host_.warn("glm52",
                 "OpenBLAS is its pthread build: its threads and OpenMP's contend for the cores; "
                 "install libopenblas0-openmp (scripts/install-deps.sh)");
    metric_names_.clear();
    for (int e = 0; e < cfg_.moe_experts; ++e) metric_names_.push_back("moe_load_" + std::to_string(e));
    metrics_.moe_load.reserve(static_cast<size_t>(cfg_.moe_experts));
  }

  /// zc_model_table.estimate_memory (ABI 1.3): what the constructor and the
  /// run's batches allocate. The workspace is sized for the largest batch
  /// the engine feeds: data.batch_size training rows or evaluation.batch_size
  /// evaluation rows (the workspace grows to the larger), of max_seq_len
  /// tokens, on hardware.num_threads threads (attention scratch per thread).
  static void estimate_memory(const zcode::sdk::CreateContext& ctx, const zcode::sdk::ParamShapeSink& shapes,
                              zc_memory_estimate& out) {
    const zcode::sdk::Options opts(ctx.raw()->options_json, "model");
    const glm52::Config cfg = glm52::Config::resolve(opts, ctx.config(), tokenizer_vocab(ctx));
    const int64_t train_rows = ctx.config().object("data").get<int64_t>("batch_size", 8);
    const int64_t eval_rows = ctx.config().object("evaluation").get<int64_t>("batch_size", train_rows);
    const int64_t rows = std::max<int64_t>({train_rows, eval_rows, 1});
    if (rows > INT32_MAX)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data.batch_size: " + std::to_string(rows) + " is too large");
    std::vector<glm52::ParamInfo> infos;
    const auto plan = glm52::Model<float>::memory_plan(cfg, static_cast<int>(rows), cfg.max_seq_len,
                                                       std::max(1, ctx.host().num_threads()), &infos);
    out.parameter_bytes = plan.parameter_bytes;
    out.gradient_bytes = plan.gradient_bytes;
    out.activation_bytes = plan.workspace_bytes;
    for (const glm52::ParamInfo& p : infos) shapes.put(p.name, p.shape, p.flags);
  }

  void num_params(uint64_t& total, uint64_t& active) const override { cfg_.count_params(total, active); }
  zc_param_list params() override { return zc_param_list{list_.data(), list_.size()}; }
  void zero_grad() override {
    zcode::kernels::set_num_threads(threads_);
    model_->zero_grad();
  }

  void forward_backward(const zc_batch& b, const zc_fb_options& o, const zcode::sdk::MetricsSink& sink) override {
    zcode::kernels::set_num_threads(threads_);
    if (o.label_mode != ZC_LABELS_TARGETS && o.label_mode != ZC_LABELS_SAMPLED)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "forward_backward: unknown label_mode " + std::to_string(o.label_mode));
    if (!(o.loss_scale > 0) || !std::isfinite(o.loss_scale))
      throw Error(ZC_ERR_INVALID_ARGUMENT, "forward_backward: options.loss_scale " + std::to_string(o.loss_scale) +
                                               " (expected > 0; 1 in fp32)");
    const glm52::BatchView v = view(b, true);
    glm52::GradsReady ready;
    if (ZC_STRUCT_HAS_FIELD(&o, zc_fb_options, grads_ready)) ready = {o.grads_ready_ctx, o.grads_ready};
    model_->forward_backward(v, o.loss_normalizer, o.loss_scale, o.label_mode == ZC_LABELS_SAMPLED, o.sample_seed,
                             metrics_, ready);
    sink.put("loss", metrics_.loss);
    sink.put("ce_loss", metrics_.ce_loss);
    sink.put("aux_loss", metrics_.aux_loss);
    sink.put("z_loss", metrics_.z_loss);
    for (size_t e = 0; e < metric_names_.size(); ++e) sink.put(metric_names_[e].c_str(), metrics_.moe_load[e]);
    sink.put("moe_dropped_fraction", metrics_.moe_dropped_fraction);
    sink.put("masked_head_fraction", metrics_.masked_head_fraction);
    sink.put("tokens", static_cast<double>(metrics_.tokens));
  }

  void forward_logprobs(const zc_batch& b, DLTensor& out) override {
    zcode::kernels::set_num_threads(threads_);
    const glm52::BatchView v = view(b, true);
    check_bt_output(&out, v, zcode::sdk::kF32, "forward_logprobs: out", "float32");
    model_->forward_logprobs(v, zcode::sdk::data_ptr<float>(out));
  }

  // zc_model_table.forward_eval (ABI 1.1): target log-probs and, when
  // out_argmax is given, the arg-max id per position, from one forward pass.
  void forward_eval(const zc_batch& b, DLTensor* out_logprobs, DLTensor* out_argmax) override {
    zcode::kernels::set_num_threads(threads_);
    const glm52::BatchView v = view(b, true);
    check_bt_output(out_logprobs, v, zcode::sdk::kF32, "forward_eval: out_logprobs", "float32");
    if (out_argmax) check_bt_output(out_argmax, v, zcode::sdk::kI32, "forward_eval: out_argmax", "int32");
    model_->forward_logprobs(v, zcode::sdk::data_ptr<float>(*out_logprobs),
                             out_argmax ? zcode::sdk::data_ptr<int32_t>(*out_argmax) : nullptr);
  }

  const std::string& info_json() const override { return info_; }

  // zc_model_table.activations (ABI 1.2): views of what the last
  // forward_backward kept, [batch, seq, width] each.
  zc_param_list activations() override {
    view_activations();
    act_list_.clear();
    for (size_t i = 0; i < acts_.size(); ++i)
      act_list_.push_back(zc_param{act_names_[i], &act_values_[i], nullptr, 0, 0});
    return zc_param_list{act_list_.data(), act_list_.size()};
  }
  // zc_model_table.named_activations (ABI 1.4): the same views as a tensor list.
  zc_named_tensor_list named_activations() override {
    view_activations();
    zc_named_tensor_list l{};
    l.struct_size = sizeof l;
    l.count = acts_.size();
    l.names = act_names_.data();
    l.tensors = act_values_.data();
    return l;
  }

  void* decode_begin(int32_t batch, int32_t max_len) override {
    zcode::kernels::set_num_threads(threads_);
    return model_->decode_begin(batch, max_len);
  }
  void decode_step(void* s, const int32_t* tokens, float* out) override {
    zcode::kernels::set_num_threads(threads_);
    if (!tokens || !out) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_step: NULL tokens or logits");
    model_->decode_step(static_cast<glm52::Model<float>::DecodeSession*>(s), tokens, out);
  }
  void decode_reorder(void* s, const int32_t* src) override {
    if (!src) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_reorder: NULL src");
    model_->decode_reorder(static_cast<glm52::Model<float>::DecodeSession*>(s), src);
  }
  void decode_end(void* s) override { model_->decode_end(static_cast<glm52::Model<float>::DecodeSession*>(s)); }
  void* decode_slots_begin(int32_t slots, int32_t max_len, int32_t max_tokens) override {
    zcode::kernels::set_num_threads(threads_);
    return model_->decode_slots_begin(slots, max_len, max_tokens);
  }
  void decode_slots_step(void* s, int32_t n, const int32_t* slot_of, const int32_t* tokens, const uint8_t* want_logits,
                         float* out) override {
    zcode::kernels::set_num_threads(threads_);
    model_->decode_slots_step(static_cast<glm52::Model<float>::DecodeSession*>(s), n, slot_of, tokens, want_logits,
                              out);
  }
  void decode_extend(void* s, int32_t n, const int32_t* tokens, float* out) override {
    zcode::kernels::set_num_threads(threads_);
    model_->decode_extend(static_cast<glm52::Model<float>::DecodeSession*>(s), n, tokens, out);
  }
  void decode_slot_reset(void* s, int32_t slot) override {
    model_->decode_slot_reset(static_cast<glm52::Model<float>::DecodeSession*>(s), slot);
  }
  void forward_logits(const int32_t* tokens, int32_t n, float* out) override {
    zcode::kernels::set_num_threads(threads_);
    if (!tokens || !out || n < 1) throw Error(ZC_ERR_INVALID_ARGUMENT, "forward_logits: NULL buffer or n < 1");
    model_->forward_logits(tokens, n, out);
  }

  /// Parameters under the names of README.md, plus the resolved architecture,
  /// the blocking in use (state.json's stages.model.blocking) and the float
  /// GEMMs' engine (stages.model.float_gemm: "avx512" or "openblas"), so that
  /// a resume computes the same bits on this machine whatever today's rules
  /// and ZCODE_GEMM give.
  void save_state(const zcode::sdk::StateWriter& w) override {
    for (size_t i = 0; i < list_.size(); ++i) w.put_tensor(list_[i].name, values_[i]);
    zcode::sdk::json::Writer j;
    j.begin_object().key("architecture").raw(info_);
    j.key("blocking").raw(model_->config().blocking.to_json());
    j.key("float_gemm").string(zcode::kernels::gemm_engine_name(zcode::kernels::gemm_engine())).end_object();
    w.put_json(j.str());
  }

  /// Refuses unknown, missing, mis-shaped or mis-typed tensors and an
  /// architecture that differs in a way shapes cannot show; copies only after
  /// everything checked (a failing call changes nothing).
  void load_state(const zcode::sdk::StateReader& r) override {
    const auto& infos = model_->param_infos();
    for (size_t i = 0; i < r.num_tensors(); ++i) {
      const char* name = r.tensor_name(i);
      if (!name || !model_->find_param(name))
        throw Error(ZC_ERR_DATA, std::string("model state: unexpected tensor '") + (name ? name : "?") +
                                     "' (not a parameter of this architecture; see plugins/model/glm52/README.md)");
    }
    for (const glm52::ParamInfo& p : infos) {
      const DLTensor* t = r.find(p.name);
      const std::string want = shape_str(p.shape.data(), static_cast<int>(p.shape.size()));
      if (!t)
        throw Error(ZC_ERR_NOT_FOUND, "model state: tensor '" + p.name + "' missing (expected float32 " + want + ")");
      if (!zcode::sdk::same_dtype(t->dtype, zcode::sdk::kF32))
        throw Error(ZC_ERR_DATA, "model state: tensor '" + p.name + "' is not float32");
      if (t->device.device_type != kDLCPU)
        throw Error(ZC_ERR_UNSUPPORTED, "model state: tensor '" + p.name + "' is not on the CPU");
      bool same = t->ndim == static_cast<int>(p.shape.size());
      for (int i = 0; same && i < t->ndim; ++i) same = t->shape[i] == p.shape[i];
      if (!same)
        throw Error(ZC_ERR_DATA, "model state: tensor '" + p.name + "' has shape " + shape_str(t->shape, t->ndim) +
                                     ", expected " + want);
      if (t->strides) {
        int64_t expect = 1;
        for (int i = t->ndim - 1; i >= 0; --i) {
          if (t->shape[i] != 1 && t->strides[i] != expect)
            throw Error(ZC_ERR_DATA, "model state: tensor '" + p.name + "' is not contiguous");
          expect *= t->shape[i];
        }
      }
    }
    check_architecture(r.json());
    const glm52::Blocking blocking = recorded_blocking(r.json());
    const std::optional<zcode::kernels::GemmEngine> gemm = recorded_gemm_engine(r.json());
    for (const glm52::ParamInfo& p : infos) {
      const DLTensor* t = r.find(p.name);
      std::memcpy(model_->params() + p.offset, zcode::sdk::data_ptr<char>(*t), sizeof(float) * size_t(p.numel));
    }
    if (!(blocking == model_->config().blocking)) {
      host_.info("glm52", "blocking " + blocking.to_json() + " from the checkpoint (this machine's rules give " +
                              model_->config().blocking.to_json() + ")");
      model_->set_blocking(blocking);
    }
    if (gemm && *gemm != zcode::kernels::gemm_engine()) {
      const std::string was = zcode::kernels::gemm_engine_name(zcode::kernels::gemm_engine());
      const std::string rec = zcode::kernels::gemm_engine_name(*gemm);
      if (zcode::kernels::set_gemm_engine(*gemm, "from the checkpoint"))
        host_.info("glm52", "float GEMMs on " + rec + " from the checkpoint (this process had chosen " + was + ")");
      else
        host_.warn("glm52", "the checkpoint's float GEMMs ran on " + rec +
                                ", which this CPU cannot run (no AVX-512F): " + "training continues on " + was +
                                ", equal to an uninterrupted run to rounding, not to the bit");
    }
  }

 private:
  // An output tensor of the forward entry points: contiguous CPU `type`
  // [batch, seq] matching `v`; `what` names it in the error.
  static void check_bt_output(const DLTensor* t, const glm52::BatchView& v, DLDataType dt, const char* what,
                              const char* type) {
    if (!t || t->device.device_type != kDLCPU || !zcode::sdk::same_dtype(t->dtype, dt) || t->ndim != 2 ||
        t->shape[0] != v.B || t->shape[1] != v.T || (t->strides && (t->strides[1] != 1 || t->strides[0] != v.T)))
      throw Error(ZC_ERR_INVALID_ARGUMENT, std::string(what) + " must be a contiguous CPU " + type + " [" +
                                               std::to_string(v.B) + ", " + std::to_string(v.T) + "] tensor");
  }

  glm52::BatchView view(const zc_batch& b, bool need_targets) const {
    check_ids(b.input_ids, "input_ids", -1, -1);
    const int64_t B = b.input_ids.shape[0], T = b.input_ids.shape[1];
    if (B < 1 || T < 1 || B * T > (int64_t{1} << 31))
      throw Error(ZC_ERR_INVALID_ARGUMENT,
                  "batch.input_ids: shape " + shape_str(b.input_ids.shape, 2) + " out of range");
    glm52::BatchView v;
    v.B = static_cast<int>(B);
    v.T = static_cast<int>(T);
    v.ids = zcode::sdk::data_ptr<int32_t>(b.input_ids);
    if (need_targets) {
      if (!b.targets.data) throw Error(ZC_ERR_INVALID_ARGUMENT, "batch.targets: missing");
      check_ids(b.targets, "targets", B, T);
      v.targets = zcode::sdk::data_ptr<int32_t>(b.targets);
    }
    if (b.doc_ids.data) {
      check_ids(b.doc_ids, "doc_ids", B, T);
      v.doc_ids = zcode::sdk::data_ptr<int32_t>(b.doc_ids);
    }
    return v;
  }

  void check_architecture(std::string_view json) const {
    if (json.empty()) return;
    rapidjson::Document d;
    d.Parse(json.data(), json.size());
    if (d.HasParseError() || !d.IsObject()) throw Error(ZC_ERR_DATA, "model state: state JSON is not an object");
    if (!d.HasMember("architecture") || !d["architecture"].IsObject()) return;
    rapidjson::Document mine;
    mine.Parse(info_.c_str());
    const rapidjson::Value& a = d["architecture"];
    for (const char* key : {"n_heads", "n_kv_heads", "head_dim", "moe_top_k", "norm", "residual", "router_activation",
                            "norm_topk_prob", "tie_embeddings", "vocab_size"}) {
      if (!a.HasMember(key)) continue;
      if (a[key] != mine[key])
        throw Error(ZC_ERR_DATA, std::string("model state: ") + key + " is " + zcode::sdk::to_json(a[key]) +
                                     " in the checkpoint but " + zcode::sdk::to_json(mine[key]) + " in the config");
    }
  }

  // The float GEMMs' engine to resume with: the model state's "float_gemm".
  // A state of ours written before the record existed (2026-12-07 13:00;
  // "architecture" or "blocking" but no "float_gemm") was trained on
  // OpenBLAS's sgemm, the only engine then; a state without any of them (not
  // ours) names none. Anything but a known engine name is refused.
  static std::optional<zcode::kernels::GemmEngine> recorded_gemm_engine(std::string_view json) {
    if (json.empty()) return std::nullopt;
    rapidjson::Document d;
    d.Parse(json.data(), json.size());
    if (d.HasParseError() || !d.IsObject()) return std::nullopt;
    if (!d.HasMember("float_gemm")) {
      if (d.HasMember("architecture") || d.HasMember("blocking")) return zcode::kernels::GemmEngine::kOpenBlas;
      return std::nullopt;
    }
    const rapidjson::Value& v = d["float_gemm"];
    zcode::kernels::GemmEngine e{};
    if (!v.IsString() || !zcode::kernels::parse_gemm_engine(v.GetString(), &e))
      throw Error(ZC_ERR_DATA,
                  "model state: float_gemm is " + zcode::sdk::to_json(v) + ", expected \"avx512\" or \"openblas\"");
    return e;
  }

  // The blocking to resume with: the checkpoint's record (a state of ours
  // written before the record existed, with "architecture" only, was made
  // with Blocking's defaults, the tuned values; a state without either keeps
  // the current blocking), under the fields the config's model.blocking pins.
  // Throws on a bad record.
  glm52::Blocking recorded_blocking(std::string_view json) const {
    glm52::Blocking base = model_->config().blocking;
    if (!json.empty()) {
      auto d = std::make_shared<rapidjson::Document>();
      d->Parse(json.data(), json.size());
      if (!d->HasParseError() && d->IsObject() && d->HasMember("blocking")) {
        const rapidjson::Value& v = (*d)["blocking"];
        if (!v.IsObject()) throw Error(ZC_ERR_DATA, "model state: blocking is not a JSON object");
        base = glm52::apply_blocking_options(zcode::sdk::Options(d, &v, "model state: blocking"), glm52::Blocking{});
      } else if (!d->HasParseError() && d->IsObject() && d->HasMember("architecture")) {
        base = glm52::Blocking{};
      }
    }
    return glm52::apply_blocking_options(zcode::sdk::Options(pinned_blocking_.c_str(), "model.blocking"), base);
  }

  // Refreshes acts_ and its views (names, shapes, tensors) from the model:
  // the one source of both activation slots.
  void view_activations() {
    int B = 0, Tn = 0;
    model_->activations(acts_, B, Tn);
    act_shapes_.resize(acts_.size());
    act_values_.resize(acts_.size());
    act_names_.resize(acts_.size());
    for (size_t i = 0; i < acts_.size(); ++i) {
      act_shapes_[i] = {B, Tn, acts_[i].width};
      act_values_[i] =
          zcode::sdk::make_view(const_cast<float*>(acts_[i].data), zcode::sdk::kF32, 3, act_shapes_[i].data());
      act_names_[i] = acts_[i].name.c_str();
    }
  }

  zcode::sdk::Host host_;
  int threads_ = 1;
  glm52::Config cfg_;
  std::unique_ptr<glm52::Model<float>> model_;
  std::vector<DLTensor> values_, grads_;
  std::vector<zc_param> list_;
  std::vector<glm52::Model<float>::Activation> acts_;
  std::vector<std::array<int64_t, 3>> act_shapes_;
  std::vector<DLTensor> act_values_;
  std::vector<const char*> act_names_;
  std::vector<zc_param> act_list_;
  std::string info_;
  std::string pinned_blocking_;  // the fields model.blocking writes, as JSON ({} = all derived)
  std::vector<std::string> metric_names_;
  glm52::StepMetrics metrics_;
};

}  // namespace

ZCODE_PLUGIN("glm52", "0.1.0", "Apache-2.0", "GLM-5.2 sparse MoE transformer (CPU, fp32)",
             ZCODE_COMPONENT(Glm52, "glm52", "GLM-5.2 sparse MoE transformer: forward, hand-written backward, KV cache",
                             glm52::kOptionsSchema))
