// zcode/sdk/stages.h: one ordinary C++ base class per stage kind, and typed
// references to other stages received at create.
//
// A plugin author derives from one of these, implements the pure virtuals,
// and registers the class with ZCODE_PLUGIN (plugin.h). Methods throw
// zcode::sdk::Error on failure; the SDK turns it into a status.
#pragma once

#include <zcode/sdk/buffers.h>
#include <zcode/sdk/host.h>
#include <zcode/sdk/options.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace zcode::sdk {

/// A borrowed reference to the tokenizer stage (valid for the receiver's life).
class TokenizerRef {
 public:
  TokenizerRef() = default;
  TokenizerRef(const zc_host_services* host, zc_stage_ref r)
      : host_(host), t_(static_cast<const zc_tokenizer_table*>(r.table)), inst_(r.instance) {}
  explicit operator bool() const { return t_ != nullptr; }
  const zc_tokenizer_table* table() const { return t_; }
  void* instance() const { return inst_; }

  uint64_t vocab_size() const {
    uint64_t n = 0;
    check(host_, t_->vocab_size(inst_, &n));
    return n;
  }
  /// Appends ids of `text` to `out` (a zc_ids the caller owns).
  void encode(std::string_view text, uint32_t flags, zc_ids* out) const {
    check(host_, t_->encode(inst_, text.data(), text.size(), flags, out));
  }
  void decode(const int32_t* ids, size_t n, zc_bytes* out) const { check(host_, t_->decode(inst_, ids, n, out)); }
  /// The ids of `text` (flags: ZC_ENCODE_*), as a vector.
  std::vector<int32_t> encode(std::string_view text, uint32_t flags = 0) const {
    std::vector<int32_t> ids;
    zc_ids sink = ids_into(ids);
    encode(text, flags, &sink);
    ids.resize(sink.size);
    return ids;
  }
  /// The bytes `ids` decode to (UTF-8 unless the ids split a character).
  std::string decode(std::span<const int32_t> ids) const {
    std::string text;
    zc_bytes out = bytes_into(text);
    decode(ids.data(), ids.size(), &out);
    text.resize(out.size);
    return text;
  }
  int32_t token_to_id(std::string_view tok) const {
    int32_t id = -1;
    check(host_, t_->token_to_id(inst_, tok.data(), tok.size(), &id));
    return id;
  }
  std::string info_json() const {
    const char* j = nullptr;
    check(host_, t_->info_json(inst_, &j));
    return j ? j : "{}";
  }

 private:
  const zc_host_services* host_ = nullptr;
  const zc_tokenizer_table* t_ = nullptr;
  void* inst_ = nullptr;
};

/// A borrowed reference to the model stage.
class ModelRef {
 public:
  ModelRef() = default;
  ModelRef(const zc_host_services* host, zc_stage_ref r)
      : host_(host), t_(static_cast<const zc_model_table*>(r.table)), inst_(r.instance) {}
  explicit operator bool() const { return t_ != nullptr; }
  const zc_model_table* table() const { return t_; }
  void* instance() const { return inst_; }

  zc_param_list params() const {
    zc_param_list l{};
    check(host_, t_->params(inst_, &l));
    return l;
  }
  void forward_logprobs(const zc_batch& b, DLTensor* out) const { check(host_, t_->forward_logprobs(inst_, &b, out)); }
  void forward_backward(const zc_batch& b, const zc_fb_options& o, const zc_metrics_sink* m) const {
    check(host_, t_->forward_backward(inst_, &b, &o, m));
  }
  void zero_grad() const { check(host_, t_->zero_grad(inst_)); }
  /// The model's kept activations (ABI 1.2), or false when the model is older
  /// than 1.2 or returns ZC_ERR_UNSUPPORTED. Other errors throw.
  bool activations(zc_param_list* out) const {
    if (!ZC_TABLE_HAS_SLOT(t_, zc_model_table, activations)) return false;
    zc_status* s = t_->activations(inst_, out);
    if (s) {
      StatusError e(host_, s);  // releases the status
      if (e.code() == ZC_ERR_UNSUPPORTED) return false;
      throw e;
    }
    return true;
  }
  /// The same activations typed as tensors (ABI 1.4), or false when the
  /// model is older than 1.4 or returns ZC_ERR_UNSUPPORTED (a reader then
  /// falls back to activations()). Other errors throw.
  bool named_activations(zc_named_tensor_list* out) const {
    if (!ZC_TABLE_HAS_SLOT(t_, zc_model_table, named_activations)) return false;
    zc_named_tensor_list l{};
    l.struct_size = sizeof l;
    if (zc_status* s = t_->named_activations(inst_, &l)) {
      StatusError e(host_, s);  // releases the status
      if (e.code() == ZC_ERR_UNSUPPORTED) return false;
      throw e;
    }
    *out = l;
    return true;
  }
  std::string info_json() const {
    const char* j = nullptr;
    check(host_, t_->info_json(inst_, &j));
    return j ? j : "{}";
  }

 private:
  const zc_host_services* host_ = nullptr;
  const zc_model_table* t_ = nullptr;
  void* inst_ = nullptr;
};

/// A borrowed reference to a data loader (the evaluator's input).
class DataRef {
 public:
  DataRef(const zc_host_services* host, zc_stage_ref r)
      : host_(host), t_(static_cast<const zc_dataloader_table*>(r.table)), inst_(r.instance) {}
  /// Next batch into *out; false at the end of the split.
  bool next(zc_batch* out) const {
    int32_t has = 0;
    check(host_, t_->next_batch(inst_, out, &has));
    return has != 0;
  }
  void reset() const { check(host_, t_->reset(inst_)); }

 private:
  const zc_host_services* host_;
  const zc_dataloader_table* t_;
  void* inst_;
};

/// Where a model's estimate_memory lists its parameters (ABI 1.3; wraps
/// zc_param_shape_sink, which may be absent: then put() does nothing).
class ParamShapeSink {
 public:
  explicit ParamShapeSink(const zc_param_shape_sink* s) : s_(s) {}
  void put(const std::string& name, const std::vector<int64_t>& shape, uint32_t flags) const {
    if (s_ && s_->put) s_->put(s_->ctx, name.c_str(), static_cast<int32_t>(shape.size()), shape.data(), flags);
  }

 private:
  const zc_param_shape_sink* s_;
};

/// What every stage's constructor receives.
class CreateContext {
 public:
  /// `estimate_only`: the object is built only to count the bytes it would
  /// allocate (an optimizer's estimate_memory, ABI 1.3); it must not allocate
  /// its state, and the model's parameters have NULL data.
  explicit CreateContext(const zc_create_args* a, bool estimate_only = false)
      : args_(a),
        estimate_only_(estimate_only),
        host_(a->host),
        options_(a->options_json, "options"),
        config_(a->config_json, "config") {}
  const Host& host() const { return host_; }
  /// The stage's own options.
  const Options& options() const { return options_; }
  /// The whole resolved config (for shared fields: seed, model.max_seq_len...).
  const Options& config() const { return config_; }
  std::string run_dir() const { return args_->run_dir ? args_->run_dir : ""; }
  std::string split() const { return args_->split ? args_->split : "train"; }
  TokenizerRef tokenizer() const { return TokenizerRef(args_->host, args_->tokenizer); }
  ModelRef model() const { return ModelRef(args_->host, args_->model); }
  /// The instance's compute stream (zc_create_args.stream, ABI 1.4): a
  /// cudaStream_t on CUDA, NULL on the CPU; owned by the host, valid for the
  /// instance's life, and the stream every device call of the instance runs
  /// on (abi.h lists them). NULL too when the caller built the args for an
  /// older minor (struct_size ends before the field).
  void* stream() const { return ZC_STRUCT_HAS_FIELD(args_, zc_create_args, stream) ? args_->stream : nullptr; }
  /// An optimizer's part of the parameters (zc_create_args.shard, ABI 1.5;
  /// ZeRO-1), or NULL: it updates every element.
  const zc_param_shard* shard() const {
    return ZC_STRUCT_HAS_FIELD(args_, zc_create_args, shard) ? args_->shard : nullptr;
  }
  const zc_create_args* raw() const { return args_; }
  bool estimate_only() const { return estimate_only_; }

 private:
  const zc_create_args* args_;
  bool estimate_only_ = false;
  Host host_;
  Options options_;
  Options config_;
};

/// Common base: state is empty unless a stage overrides these.
class Stage {
 public:
  virtual ~Stage() = default;
  virtual void save_state(const StateWriter&) {}
  virtual void load_state(const StateReader&) {}
};

class Tokenizer : public Stage {
 public:
  static constexpr zc_kind kKind = ZC_KIND_TOKENIZER;
  virtual uint64_t vocab_size() const = 0;
  virtual void encode(std::string_view text, uint32_t flags, IdSink& out) = 0;
  virtual void decode(const int32_t* ids, size_t n, ByteSink& out) = 0;
  /// -1 when absent.
  virtual int32_t token_to_id(std::string_view token) const = 0;
  virtual void id_to_token(int32_t id, ByteSink& out) const = 0;
  /// See zc_tokenizer_table.info_json; must stay valid for the instance's life.
  virtual const std::string& info_json() const = 0;
};

class DataLoader : public Stage {
 public:
  static constexpr zc_kind kKind = ZC_KIND_DATALOADER;
  /// Fills `out`; false at the end of a finite split.
  virtual bool next_batch(zc_batch& out) = 0;
  virtual void reset() = 0;
  virtual void stats(const MetricsSink&) {}
  virtual const std::string& provenance_json() const = 0;
  /// zc_dataloader_table.set_data_shard (ABI 1.8): hand out batch `rank` of
  /// every `size` of the stream, the position staying the whole stream's.
  /// Default: unsupported (the host then reads every batch and keeps its share).
  virtual void set_data_shard(uint64_t /*rank*/, uint64_t /*size*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this data loader cannot read a share of the stream (set_data_shard)");
  }
};

class Model : public Stage {
 public:
  static constexpr zc_kind kKind = ZC_KIND_MODEL;
  virtual void num_params(uint64_t& total, uint64_t& active) const = 0;
  virtual zc_param_list params() = 0;
  virtual void zero_grad() = 0;
  virtual void forward_backward(const zc_batch& batch, const zc_fb_options& opt, const MetricsSink& m) = 0;
  /// Tells the host that the gradients of params() [first, first + count)
  /// are final for this forward_backward (zc_fb_options.grads_ready, ABI
  /// 1.5): call it from backward as each layer finishes, on the calling
  /// thread. A no-op when the host does not listen.
  static void grads_ready(const zc_fb_options& opt, size_t first, size_t count) {
    if (ZC_STRUCT_HAS_FIELD(&opt, zc_fb_options, grads_ready) && opt.grads_ready && count)
      opt.grads_ready(opt.grads_ready_ctx, first, count);
  }
  virtual const std::string& info_json() const = 0;
  // The inference slots are optional: a model that only trains keeps the
  // defaults, and each call reports ZC_ERR_UNSUPPORTED naming the slot
  // (evaluation, `generate` and the KV-cache checks then say so).
  /// zc_model_table.forward_logprobs: float32 [batch, seq] target log-probs.
  virtual void forward_logprobs(const zc_batch& /*batch*/, DLTensor& /*out_logprobs*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not implement forward_logprobs");
  }
  /// zc_model_table.decode_begin..decode_end: the KV-cache session. A model
  /// without one keeps these; decode_end is then never called.
  virtual void* decode_begin(int32_t /*batch*/, int32_t /*max_len*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not implement decode_begin (no KV-cache decoding)");
  }
  virtual void decode_step(void* /*session*/, const int32_t* /*tokens*/, float* /*out_logits*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not implement decode_step");
  }
  /// zc_model_table.decode_extend (ABI 1.8): n positions of every sequence
  /// in one call (tokens [batch, n]), the last logits [batch, vocab].
  /// Default: unsupported, and hosts then call decode_step n times.
  virtual void decode_extend(void* /*session*/, int32_t /*n*/, const int32_t* /*tokens*/, float* /*out_logits*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not implement decode_extend");
  }
  virtual void decode_reorder(void* /*session*/, const int32_t* /*src*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not implement decode_reorder");
  }
  virtual void decode_end(void* /*session*/) {}
  /// zc_model_table.decode_slots_begin / decode_slots_step / decode_slot_reset
  /// (ABI 1.6): a KV cache of independent slots for continuous batching; the
  /// session ends with decode_end. The header states the batch-invariance
  /// promise a model keeps. Default: unsupported (serving then says so).
  virtual void* decode_slots_begin(int32_t /*slots*/, int32_t /*max_len*/, int32_t /*max_tokens*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not implement decode_slots_begin (no slot KV cache for serving)");
  }
  virtual void decode_slots_step(void* /*session*/, int32_t /*n*/, const int32_t* /*slot_of*/,
                                 const int32_t* /*tokens*/, const uint8_t* /*want_logits*/, float* /*out_logits*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not implement decode_slots_step");
  }
  virtual void decode_slot_reset(void* /*session*/, int32_t /*slot*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not implement decode_slot_reset");
  }
  /// zc_model_table.forward_logits: float32 [n, vocab_size] for one sequence.
  virtual void forward_logits(const int32_t* /*tokens*/, int32_t /*n*/, float* /*out_logits*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not implement forward_logits");
  }
  /// Evaluation forward (zc_model_table.forward_eval, ABI 1.1): target
  /// log-probs and/or the argmax id per position (either may be NULL).
  /// Default: unsupported, so older models keep compiling.
  virtual void forward_eval(const zc_batch& /*batch*/, DLTensor* /*out_logprobs*/, DLTensor* /*out_argmax*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not implement forward_eval");
  }
  /// The activations the last forward_backward kept (zc_model_table.activations,
  /// ABI 1.2): float32 CPU [batch, seq, width], valid until the next call.
  /// Default: unsupported.
  virtual zc_param_list activations() { throw Error(ZC_ERR_UNSUPPORTED, "this model does not expose its activations"); }
  /// zc_model_table.named_activations (ABI 1.4): the same activations as
  /// activations() (names, order, tensors, lifetime) as a tensor list; the
  /// SDK copies count, names and tensors into the caller's struct and
  /// ignores struct_size here. Default: unsupported (readers fall back to
  /// activations()).
  virtual zc_named_tensor_list named_activations() {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not expose its named activations");
  }
  /// zc_model_table.estimate_memory (ABI 1.3), without an instance: a model
  /// class hides this static with its own, which fills parameter_bytes,
  /// gradient_bytes and activation_bytes of `out` for what its constructor
  /// and the run's batches will allocate, and puts every parameter to
  /// `shapes`. Default: unsupported (the host reports "unknown").
  static void estimate_memory(const CreateContext& /*ctx*/, const ParamShapeSink& /*shapes*/,
                              zc_memory_estimate& /*out*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this model does not estimate its memory");
  }
};

class Optimizer : public Stage {
 public:
  static constexpr zc_kind kKind = ZC_KIND_OPTIMIZER;
  virtual void step(double lr, uint64_t step) = 0;
  virtual uint64_t hessian_interval() const { return 0; }
  virtual void update_hessian(int64_t /*num_tokens*/) {
    throw Error(ZC_ERR_UNSUPPORTED, "this optimizer does not use a Hessian estimate");
  }
  /// zc_optimizer_table.estimate_memory (ABI 1.3): the SDK constructs the
  /// class with CreateContext::estimate_only() true (a model whose params
  /// have NULL data) and returns this: the bytes of state the constructor
  /// would have allocated. Default: unsupported (the host reports "unknown").
  /// A class that implements state_bytes (and builds no state when
  /// estimate_only) sets this true.
  static constexpr bool kEstimatesMemory = false;
  virtual uint64_t state_bytes() const {
    throw Error(ZC_ERR_UNSUPPORTED, "this optimizer does not estimate its memory");
  }
  /// zc_optimizer_table.shard_granularity (ABI 1.5, ZeRO-1): a class that
  /// can keep state for a part of the parameters (CreateContext::shard())
  /// sets kShards and hides this static with one that writes, for every
  /// parameter ctx.model() lists, the multiple of elements at which a part
  /// may start or end inside it (`out` holds 1s on entry). Without kShards
  /// the table has no slot and the host never shards the optimizer.
  static constexpr bool kShards = false;
  static void shard_granularity(const CreateContext& /*ctx*/, std::span<int64_t> /*out*/) {}
};

class Scheduler : public Stage {
 public:
  static constexpr zc_kind kKind = ZC_KIND_SCHEDULER;
  virtual double lr(uint64_t step, double base_lr) const = 0;
};

class Evaluator : public Stage {
 public:
  static constexpr zc_kind kKind = ZC_KIND_EVALUATOR;
  virtual void evaluate(const DataRef& data, const MetricsSink& out) = 0;
};

class Callback : public Stage {
 public:
  static constexpr zc_kind kKind = ZC_KIND_CALLBACK;
  /// Returns ZC_CALLBACK_* flags. Unknown event kinds must be ignored.
  virtual uint32_t on_event(const zc_event& event) = 0;
};

}  // namespace zcode::sdk
