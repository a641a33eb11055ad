// glm52/model.h: the GLM-5.2 sparse MoE transformer on the CPU, forward and
// hand-written backward (README.md is the specification).
//
// llm.c style: one parameter buffer, one gradient buffer, one activation
// workspace sized at setup (grown only when a bigger batch arrives, never in
// a steady-state step). Templated on the float type so the same code runs in
// double for gradient checks; the plugin uses float.
#pragma once

#include "config.h"

#include <zcode/kernels/memory.h>
#include <zcode/sdk/trace.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace glm52 {

/// One named parameter: a slice [offset, offset+numel) of the parameter and
/// gradient buffers.
struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel = 0;
  uint32_t flags = 0;  // ZC_PARAM_*
};

/// What forward_backward reports (README.md, "Loss").
struct StepMetrics {
  double loss = 0, ce_loss = 0, aux_loss = 0, z_loss = 0;
  double moe_dropped_fraction = 0, masked_head_fraction = 0;
  std::vector<double> moe_load;  // [E]
  int64_t tokens = 0;            // target tokens of this micro-batch
};

/// Who hears, during backward, that the gradients of parameters [first,
/// first + count) (param_infos() indices) are final for this call
/// (zc_fb_options.grads_ready): nobody by default.
struct GradsReady {
  void* ctx = nullptr;
  void (*fn)(void* ctx, size_t first, size_t count) = nullptr;
  void operator()(size_t first, size_t count) const {
    if (fn && count) fn(ctx, first, count);
  }
};

/// A batch as plain pointers: ids/targets [B, T] int32, doc_ids [B, T] or null.
struct BatchView {
  const int32_t* ids = nullptr;
  const int32_t* targets = nullptr;
  const int32_t* doc_ids = nullptr;
  int B = 0, T = 0;
};

/// The expert-parallel group (README.md, "Expert parallelism"): `size`
/// ranks split the routed experts, rank `rank` holding the `E / size`
/// experts [rank·E/size, (rank+1)·E/size). `alltoallv` is the group's
/// zc_collectives.alltoallv: send_counts[q] elements of `send` (in rank
/// order) go to rank q, recv_counts[q] from rank q land in `recv` in rank
/// order; every rank of the group calls it at the same points with matching
/// counts. size 1 (the default): every expert local, no call made.
struct ExpertGroup {
  enum class Type { kI64, kF32, kF64 };
  int size = 1, rank = 0;
  std::function<void(const void* send, const int64_t* send_counts, void* recv, const int64_t* recv_counts, Type)>
      alltoallv;
};

template <class T>
class Model {
 public:
  /// Builds the parameters and initialises them from `init_seed`
  /// (README.md, "Init"). Throws zcode::sdk::Error on bad dims. With an
  /// expert group of size K > 1 the model holds only its E/K routed experts
  /// (their names and initial values are those of the full model's), and
  /// forward_backward, forward_logprobs and forward_logits are collectives
  /// of the group: every rank calls them together, each on its own batch of
  /// the same shape. Throws when K does not divide moe_experts.
  Model(const Config& cfg, uint64_t init_seed, ExpertGroup experts = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Config& config() const { return cfg_; }
  /// Routed experts this rank holds: [first_expert(), + local_experts()).
  int first_expert() const { return ep_.rank * local_experts(); }
  int local_experts() const { return cfg_.moe_experts / ep_.size; }
  /// Replaces the blocking (the one a checkpoint recorded, on resume): the
  /// workspace is laid out anew by the next entry point, and the last
  /// forward_backward's activations are no longer valid.
  void set_blocking(const Blocking& b);
  /// The host's profiler (zc_tracer, ABI 1.7): the forward and backward
  /// passes put their per-layer phases into it while it records.
  void set_tracer(const zc_host_services* host) { tracer_ = zcode::sdk::Tracer(host); }
  const std::vector<ParamInfo>& param_infos() const { return infos_; }
  const ParamInfo* find_param(const std::string& name) const;
  T* params() { return params_.get(); }
  T* grads() { return grads_.get(); }
  int64_t num_elements() const { return n_elems_; }
  void zero_grad();

  /// Forward and backward on one micro-batch; gradients ACCUMULATE.
  /// loss_normalizer: target tokens of the whole optimizer step (≤ 0: this
  /// batch's). loss_scale multiplies every gradient. sampled: labels drawn from
  /// the model's softmax with sample_seed (Sophia GNB). Throws on bad input.
  /// Metrics go to `m` (reused by the caller: no allocation in steady state).
  /// `ready` hears each tensor's gradient become final: the LM head's
  /// after the head, the final norm's after its backward, each layer's after
  /// its backward, the embedding's last (it may be tied to the head, and
  /// takes the first layer's input gradient).
  void forward_backward(const BatchView& b, double loss_normalizer, double loss_scale, bool sampled,
                        uint64_t sample_seed, StepMetrics& m, const GradsReady& ready = {});
  /// Forward only: out[n] = log p(target_n) (nats; 0 where target is -1),
  /// float32 [B, T]; when `argmax` is given, also the arg-max id of each
  /// position's logits over the real vocab (ties: lowest id), int32 [B, T].
  /// MoE capacity from eval_capacity_factor (default 0: dropless, so the
  /// result does not depend on which rows share the call). Throws on bad input.
  void forward_logprobs(const BatchView& b, float* out, int32_t* argmax = nullptr);
  /// Next-token logits for one sequence, out [n, V], dropless MoE.
  void forward_logits(const int32_t* tokens, int n, float* out);

  struct DecodeSession;
  /// KV-cache decoding (dropless MoE): `batch` sequences of ≤ max_len tokens.
  /// Needs every expert: throws under expert parallelism (as decode_slots_begin).
  DecodeSession* decode_begin(int batch, int max_len);
  /// Appends tokens[batch] and writes logits [batch, V].
  void decode_step(DecodeSession* s, const int32_t* tokens, float* out_logits);
  /// Appends n tokens to every sequence (tokens [batch, n], row-major) and
  /// writes the logits after each one's last [batch, V]: n decode_step
  /// calls' cache and last logits, the same bits (every row goes through the
  /// same packed kernels, whose rows do not depend on each other), with the
  /// positions run as one batch of rows, in chunks of up to kExtendRows rows.
  /// Throws (nothing advanced) past max_len, on a token out of range or a
  /// slot session.
  void decode_extend(DecodeSession* s, int n, const int32_t* tokens, float* out_logits);
  /// Rows of one decode_extend chunk (the session's workspace grows to it on
  /// first use): enough for the packed GEMMs to stream each weight panel over
  /// many rows, small enough that the chunk's activations stay near L2.
  static constexpr int kExtendRows = 256;
  /// New sequence i takes old sequence src[i]'s cache.
  void decode_reorder(DecodeSession* s, const int32_t* src);
  void decode_end(DecodeSession* s);
  /// Slot decoding for continuous batching (zc_model_table.decode_slots_*):
  /// `slots` independent sequences of ≤ max_len tokens, ≤ max_tokens entries
  /// per step. Every linear map and the LM head run on copies packed at
  /// begin (linear_fwd_packed; float: each output one FMA chain whatever
  /// the rows), so a row's bits depend only on its own slot and equal decode_step's on a batch-1 session. T = double
  /// keeps OpenBLAS and makes no such promise.
  ///
  /// Both kinds of session (float) hold a packed copy of the head and of
  /// every linear map of a step (q|k|v, o, the dense GLU, the router, every
  /// expert: about the model's weights less the embedding, rounded up to
  /// 16 rows each) from begin to end: weights changed after begin do not
  /// reach the session.
  DecodeSession* decode_slots_begin(int slots, int max_len, int max_tokens);
  /// Entry i appends tokens[i] to slot slot_of[i]; logits rows for the
  /// entries with want_logits[i] (all when null), in entry order.
  void decode_slots_step(DecodeSession* s, int n, const int32_t* slot_of, const int32_t* tokens,
                         const uint8_t* want_logits, float* out_logits);
  void decode_slot_reset(DecodeSession* s, int slot);

 private:
  void decode_rows(DecodeSession* s, int n, const int32_t* slot_of, const int32_t* tokens, const uint8_t* want_logits,
                   float* out_logits);
  void pack_weights(DecodeSession& s) const;

 public:
  /// What a model of `cfg` allocates (zc_model_table.estimate_memory),
  /// computed without allocating it: the parameter and gradient buffers
  /// (each sizeof(T)·num_elements(), rounded up to kHugePageBytes as
  /// alloc_large does), and the activation workspace that the first
  /// entry point with a [B, Tn] batch on `threads` threads allocates
  /// (Workspace::plan, rounded the same way). `infos` receives the
  /// parameter list when not null.
  struct MemoryPlan {
    size_t parameter_bytes = 0, gradient_bytes = 0, workspace_bytes = 0;
  };
  static MemoryPlan memory_plan(const Config& cfg, int B, int Tn, int threads, std::vector<ParamInfo>* infos = nullptr);

  /// Bytes of activations the backward keeps for a [B, T] batch (the
  /// analytic memory need, README.md "Performance"), and the workspace total.
  size_t activation_bytes(int B, int Tn) const;
  size_t workspace_bytes() const;

  /// One activation the backward keeps: B·T rows of `width` values.
  struct Activation {
    std::string name;  ///< e.g. "layers.0.attn.out"
    const T* data;     ///< [B, T, width], row-major
    int64_t width;
  };
  /// The activations of the last forward_backward, in layer order, with its
  /// batch shape (out cleared and B = T = 0 when none is valid: before the
  /// first forward_backward, or after another call reused the workspace).
  /// Pointers stay valid until the next call on the model.
  void activations(std::vector<Activation>& out, int& B, int& Tn) const;

  struct Workspace;
  struct LayerOffsets;
  struct ExpertExchange;

 private:
  struct ShapeOnly {};
  Model(const Config& cfg, ShapeOnly);  // memory_plan: no buffers
  void build_params();
  void init_params(uint64_t seed);
  void check_batch(const BatchView& b) const;
  Workspace& ensure_workspace(int B, int Tn);
  /// Embedding and blocks (and the final norm, prenorm) into ws; the LM head
  /// is the caller's. capacity_factor: C = ceil(cf·N·k/E) per expert for this
  /// pass; <= 0 is dropless. MoE and head-mask statistics go to m when not null.
  void forward(Workspace& ws, const BatchView& b, double capacity_factor, StepMetrics* m);
  /// Backward of forward, layer by layer in reverse, given ws.gx = ∂L/∂(final
  /// hidden) [B·T, d] from the LM head; gradients accumulate. grad_scale =
  /// loss_scale / (target tokens of the step) scales the MoE aux and z-loss
  /// gradients (the head already applied it to ws.gx).
  void backward(Workspace& ws, const BatchView& b, double grad_scale);
  const T* head_weight() const;
  T* head_grad();

  /// The expert exchange's buffers for N tokens a rank (grown, never in a
  /// steady-state step).
  ExpertExchange& ensure_exchange(int64_t N);

  Config cfg_;
  ExpertGroup ep_;
  std::unique_ptr<ExpertExchange> ex_;  // expert parallelism only
  std::vector<ParamInfo> infos_;
  std::vector<LayerOffsets> layers_;
  std::vector<size_t> layer_first_param_;  // [n_layers + 1]: param_infos() index where layer l's start
  GradsReady ready_;                       // of the forward_backward running
  int64_t off_embed_ = 0, off_head_ = -1, off_norm_f_ = -1;
  int64_t n_elems_ = 0;
  std::unique_ptr<T[], zcode::kernels::LargeDeleter> params_, grads_;  // huge-page backed
  std::unique_ptr<Workspace> ws_;
  int acts_B_ = 0, acts_T_ = 0;  // shape of the last forward_backward; 0 once the workspace is reused
  zcode::sdk::Tracer tracer_;
};

extern template class Model<float>;
extern template class Model<double>;

}  // namespace glm52
