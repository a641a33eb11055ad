// glm52/model.cpp: parameters, workspace and the blocks of the GLM-5.2 model,
// each block's forward next to its backward (README.md is the specification).
#include "model.h"

#include "attention.h"
#include "lm_head.h"

#include <zcode/abi.h>
#include <zcode/kernels/cross_entropy.h>
#include <zcode/kernels/gemm.h>
#include <zcode/kernels/gemm_packed.h>
#include <zcode/kernels/gemm_small_m.h>
#include <zcode/kernels/glu.h>
#include <zcode/kernels/math.h>
#include <zcode/kernels/memory.h>
#include <zcode/kernels/norm.h>
#include <zcode/kernels/rope.h>
#include <zcode/kernels/threads.h>
#include <zcode/sdk/error.h>
#include <zcode/sdk/hash.h>
#include <zcode/sdk/trace.h>

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numbers>
#include <type_traits>

namespace glm52 {

using zcode::kernels::linear_bwd_w;
using zcode::kernels::linear_bwd_x;
using zcode::kernels::linear_fwd;
using zcode::sdk::Error;

namespace {

/// True when a sgemm inside our parallel loops would start threads of its
/// own (OpenBLAS's pthread build on several threads, beside several OpenMP
/// threads): the LM head then takes its unfused path. Held to one thread,
/// OpenBLAS starts none and the fused head runs.
bool blas_threads_inside_our_loops() { return omp_get_max_threads() > 1 && zcode::kernels::blas_spawns_threads(); }

/// logits[rows, V] (row stride V) = h[rows, d] · W[V, d]ᵀ, in vocab slices of
/// `slice` rows of W (Blocking::head_slice: sliced, OpenBLAS's packing buffers
/// stay small).
template <class T>
void head_fwd(int rows, int64_t V, int d, const T* h, const T* W, T* logits, int slice) {
  for (int64_t v0 = 0; v0 < V; v0 += slice) {
    const int n = static_cast<int>(std::min<int64_t>(slice, V - v0));
    zcode::kernels::gemm(false, true, rows, n, d, T(1), h, d, W + v0 * d, d, T(0), logits + v0, static_cast<int>(V));
  }
}

/// Backward of head_fwd given dlogits [rows, V]: dh[rows, d] = dlogits · W
/// (overwritten), dW[V, d] += dlogitsᵀ · h, in the same slices (their
/// order is dh's summation order).
template <class T>
void head_bwd(int rows, int64_t V, int d, const T* dlogits, const T* h, const T* W, T* dh, T* dW, int slice) {
  for (int64_t v0 = 0; v0 < V; v0 += slice) {
    const int n = static_cast<int>(std::min<int64_t>(slice, V - v0));
    zcode::kernels::gemm(false, false, rows, d, n, T(1), dlogits + v0, static_cast<int>(V), W + v0 * d, d,
                         v0 == 0 ? T(0) : T(1), dh, d);
    zcode::kernels::gemm(true, false, n, d, rows, T(1), dlogits + v0, static_cast<int>(V), h, d, T(1), dW + v0 * d, d);
  }
}

/// Normal(0, std) stream from a counter-based RNG (Box-Muller), so that
/// initialisation is fully specified and identical on every machine.
template <class T>
void fill_normal(T* out, int64_t n, double sd, uint64_t seed) {
  const double two_pi = 2.0 * std::numbers::pi;
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = 1.0 - zcode::sdk::u01(zcode::sdk::splitmix64(seed + 2 * static_cast<uint64_t>(i)));
    const double u2 = zcode::sdk::u01(zcode::sdk::splitmix64(seed + 2 * static_cast<uint64_t>(i) + 1));
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<T>(r * std::cos(two_pi * u2) * sd);
    if (i + 1 < n) out[i + 1] = static_cast<T>(r * std::sin(two_pi * u2) * sd);
  }
}

template <class T>
void scaled_copy(T* dst, const T* src, int64_t n, T a) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = a * src[i];
}

}  // namespace

// ---------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------

template <class T>
struct Model<T>::LayerOffsets {
  int64_t attn_norm = 0, wqkv = 0, wo = 0, rope = 0, ffn_norm = 0;
  int64_t w13 = -1, w2 = -1, router = -1;     // dense FFN / MoE router
  std::vector<int64_t> ew13, ew2, sw13, sw2;  // routed and shared experts
};

template <class T>
void Model<T>::build_params() {
  const Config& c = cfg_;
  const int64_t d = c.d_model, hd = c.head_dim, F = c.moe_ffn_hidden;
  const std::vector<int64_t> gain_shape = {c.norm == Norm::kScaleNorm ? 1 : d};
  int64_t off = 0;
  // `follow`: the tensor must sit right after the previous one, so that
  // wq|wk|wv and w1|w3 form one matrix (one GEMM) in the buffer.
  auto add = [&](const std::string& name, std::vector<int64_t> shape, uint32_t flags, bool follow = false) {
    if (!follow) off = (off + 15) / 16 * 16;
    ParamInfo p;
    p.name = name;
    p.shape = std::move(shape);
    p.numel = 1;
    for (int64_t s : p.shape) p.numel *= s;
    p.offset = off;
    p.flags = flags;
    off += p.numel;
    infos_.push_back(std::move(p));
    return infos_.back().offset;
  };
  off_embed_ = add("embed.weight", {c.vocab_padded, d}, ZC_PARAM_EMBEDDING);
  if (!c.tie_embeddings) off_head_ = add("lm_head.weight", {c.vocab_padded, d}, 0);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    layer_first_param_.push_back(infos_.size());
    LayerOffsets lo;
    lo.attn_norm = add(p + "attn_norm.weight", gain_shape, ZC_PARAM_NO_DECAY);
    lo.wqkv = add(p + "attn.wq", {c.n_heads * hd, d}, 0);
    add(p + "attn.wk", {c.n_kv_heads * hd, d}, 0, true);
    add(p + "attn.wv", {c.n_kv_heads * hd, d}, 0, true);
    lo.wo = add(p + "attn.wo", {d, c.n_heads * hd}, 0);
    lo.rope = add(p + "attn.rope_log_inv_freq", {c.rotary_dims() / 2}, ZC_PARAM_NO_DECAY);
    lo.ffn_norm = add(p + "ffn_norm.weight", gain_shape, ZC_PARAM_NO_DECAY);
    if (!c.is_moe(l)) {
      lo.w13 = add(p + "ffn.w1", {c.ffn_hidden, d}, 0);
      add(p + "ffn.w3", {c.ffn_hidden, d}, 0, true);
      lo.w2 = add(p + "ffn.w2", {d, c.ffn_hidden}, 0);
    } else {
      lo.router = add(p + "moe.router", {c.moe_experts, d}, ZC_PARAM_ROUTER);
      // Expert parallelism: this rank's experts only, under their global names.
      const int e0 = ep_.rank * (c.moe_experts / ep_.size);
      for (int e = e0; e < e0 + c.moe_experts / ep_.size; ++e) {
        const std::string q = p + "moe.experts." + std::to_string(e) + ".";
        lo.ew13.push_back(add(q + "w1", {F, d}, ZC_PARAM_EXPERT));
        add(q + "w3", {F, d}, ZC_PARAM_EXPERT, true);
        lo.ew2.push_back(add(q + "w2", {d, F}, ZC_PARAM_EXPERT));
      }
      for (int s = 0; s < c.moe_shared_experts; ++s) {
        const std::string q = p + "moe.shared." + std::to_string(s) + ".";
        lo.sw13.push_back(add(q + "w1", {F, d}, 0));
        add(q + "w3", {F, d}, 0, true);
        lo.sw2.push_back(add(q + "w2", {d, F}, 0));
      }
    }
    layers_.push_back(std::move(lo));
  }
  layer_first_param_.push_back(infos_.size());
  if (c.residual == Residual::kPreNorm) off_norm_f_ = add("norm_f.weight", gain_shape, ZC_PARAM_NO_DECAY);
  n_elems_ = (off + 15) / 16 * 16;
}

template <class T>
void Model<T>::init_params(uint64_t seed) {
  const Config& c = cfg_;
  const double beta = c.beta();
  T* P = params_.get();
  std::memset(static_cast<void*>(P), 0, sizeof(T) * static_cast<size_t>(n_elems_));
  auto ends_with = [](const std::string& s, const char* suf) {
    const size_t n = std::strlen(suf);
    return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
  };
  for (const ParamInfo& p : infos_) {
    T* w = P + p.offset;
    const uint64_t s = zcode::sdk::splitmix64(seed ^ zcode::sdk::fnv1a64(p.name));
    if (ends_with(p.name, "norm.weight") || p.name == "norm_f.weight") {
      const T g = c.norm == Norm::kScaleNorm ? static_cast<T>(std::sqrt(static_cast<double>(c.d_model))) : T(1);
      for (int64_t i = 0; i < p.numel; ++i) w[i] = g;
    } else if (ends_with(p.name, "rope_log_inv_freq")) {
      const int R = c.rotary_dims();
      for (int64_t i = 0; i < p.numel; ++i)
        w[i] = static_cast<T>(-(2.0 * static_cast<double>(i) / R) * std::log(c.rope_theta));
    } else if (p.name == "embed.weight" || p.name == "lm_head.weight" || ends_with(p.name, "moe.router")) {
      fill_normal(w, p.numel, 0.02, s);
    } else {
      const double gain = (ends_with(p.name, "attn.wq") || ends_with(p.name, "attn.wk")) ? 1.0 : beta;
      const double sdev = gain * std::sqrt(2.0 / static_cast<double>(p.shape[0] + p.shape[1]));
      fill_normal(w, p.numel, sdev, s);
    }
  }
}

template <class T>
Model<T>::Model(const Config& cfg, ShapeOnly) : cfg_(cfg) {
  build_params();
}

template <class T>
Model<T>::Model(const Config& cfg, uint64_t init_seed, ExpertGroup experts) : cfg_(cfg), ep_(std::move(experts)) {
  if (ep_.size < 1 || ep_.rank < 0 || ep_.rank >= ep_.size)
    throw Error(ZC_ERR_INVALID_ARGUMENT, "glm52: expert group rank " + std::to_string(ep_.rank) + " of size " +
                                             std::to_string(ep_.size) + " (expected 0 <= rank < size)");
  if (ep_.size > 1) {
    if (cfg_.moe_experts % ep_.size != 0)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "glm52: distributed.expert_parallel = " + std::to_string(ep_.size) +
                                               " does not divide model.moe_experts = " +
                                               std::to_string(cfg_.moe_experts) + " (each rank holds E/K experts)");
    if (!ep_.alltoallv) throw Error(ZC_ERR_INVALID_ARGUMENT, "glm52: an expert group without alltoallv");
  }
  build_params();
  const size_t bytes = sizeof(T) * static_cast<size_t>(n_elems_);
  params_.reset(static_cast<T*>(zcode::kernels::alloc_large(bytes)));
  grads_.reset(static_cast<T*>(zcode::kernels::alloc_large(bytes)));
  if (!params_ || !grads_)
    throw Error(ZC_ERR_OUT_OF_MEMORY,
                "glm52: cannot allocate 2 x " + std::to_string(bytes >> 20) + " MiB of parameters and gradients");
  init_params(init_seed);
  zero_grad();
}

template <class T>
void Model<T>::set_blocking(const Blocking& b) {
  if (b == cfg_.blocking) return;
  cfg_.blocking = b;
  ws_.reset();
  acts_B_ = acts_T_ = 0;
}

template <class T>
const ParamInfo* Model<T>::find_param(const std::string& name) const {
  for (const ParamInfo& p : infos_)
    if (p.name == name) return &p;
  return nullptr;
}

template <class T>
void Model<T>::zero_grad() {
  auto span = tracer_.span(tracer_.level(), "model", "zero_grad");
  T* g = grads_.get();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n_elems_; ++i) g[i] = T(0);
}

template <class T>
const T* Model<T>::head_weight() const {
  return params_.get() + (cfg_.tie_embeddings ? off_embed_ : off_head_);
}
template <class T>
T* Model<T>::head_grad() {
  return grads_.get() + (cfg_.tie_embeddings ? off_embed_ : off_head_);
}

// ---------------------------------------------------------------------------
// Workspace: every activation and scratch buffer, carved from one allocation
// ---------------------------------------------------------------------------

template <class T>
struct Model<T>::Workspace {
  struct Layer {
    T *xa = nullptr, *r1 = nullptr, *xf = nullptr, *r2 = nullptr, *rstd_a = nullptr, *rstd_f = nullptr;
    T *qkv = nullptr, *P = nullptr, *o = nullptr;
    uint8_t* hmask = nullptr;
    T* a13 = nullptr;                               // dense GLU pre-activations [N, 2·ffn_hidden]
    T *z = nullptr, *p = nullptr, *gate = nullptr;  // router logits, probabilities [N, E], gates [N, k]
    int32_t *tk_idx = nullptr, *tk_row = nullptr;   // [N, k]: chosen expert, row in expert order (-1 dropped)
    int32_t* asg_of_row = nullptr;                  // [N·k]: row -> n·k + r
    int32_t *off = nullptr, *cnt_all = nullptr;     // [E+1] row offsets, [E] assignments before capacity
    T *a13e = nullptr, *ye = nullptr;               // routed experts [rows, 2F], [rows, d]
    T* a13s = nullptr;                              // shared experts [S, N, 2F]
    double aux = 0, zsum = 0;                       // this micro-batch's aux_l and Σ lse²
    int64_t dropped = 0;
  };
  int Bcap = 0, Tcap = 0, nthreads = 0;
  bool keep_all = true;  // false: one layer's storage reused by all (inference)
  size_t bytes = 0, kept_bytes = 0;
  std::byte* mem = nullptr;
  std::vector<T*> x;  // layer inputs: [L+1] (keep_all) or [2]
  std::vector<Layer> layer;
  T *hf = nullptr, *rstd_final = nullptr;  // final norm (prenorm)
  T *gx = nullptr, *gy = nullptr, *gz = nullptr, *dqkv = nullptr, *dO = nullptr, *dtheta = nullptr;
  T *gbuf = nullptr, *xe = nullptr, *dye = nullptr, *logits = nullptr, *dz = nullptr, *dgate = nullptr;
  T *dg_rows = nullptr, *inv_freq = nullptr, *attn_scratch = nullptr, *rope_cos = nullptr, *rope_sin = nullptr;
  T* head_scratch = nullptr;  // head_xent_fused's, after the logits chunk
  double* nll = nullptr;
  int32_t *labels = nullptr, *pos = nullptr;
  int64_t logits_rows = 0;

  ~Workspace() { zcode::kernels::free_large(mem); }
  /// Rows per LM-head chunk for N rows: at most logits_rows, spread evenly
  /// over the fewest chunks (2048 rows in chunks of 336 would leave a last
  /// chunk of 32 rows, whose GEMMs run at a fraction of the peak).
  int64_t head_chunk_rows(int64_t N) const {
    const int64_t chunks = (N + logits_rows - 1) / logits_rows;
    return (N + chunks - 1) / chunks;
  }
  T* X(int l) { return keep_all ? x[l] : x[l & 1]; }
  Layer& L(int l) { return layer[keep_all ? l : 0]; }

  /// Lays out every buffer for [B, T] (base == nullptr: sizes only).
  void plan(const Config& c, int B, int Tn, bool keep, int threads, std::byte* base) {
    Bcap = B, Tcap = Tn, keep_all = keep, nthreads = threads;
    size_t off = 0;
    auto take = [&](auto*& p, int64_t n) {
      using U = std::remove_reference_t<decltype(*p)>;
      off = (off + 63) / 64 * 64;
      p = base ? reinterpret_cast<U*>(base + off) : nullptr;
      off += sizeof(U) * static_cast<size_t>(std::max<int64_t>(n, 0));
    };
    const int64_t N = int64_t{B} * Tn, d = c.d_model, H = c.n_heads, hd = c.head_dim, E = c.moe_experts,
                  k = c.moe_top_k, F = c.moe_ffn_hidden, Fd = c.ffn_hidden, S = c.moe_shared_experts;
    const bool pre = c.residual == Residual::kPreNorm;
    const int nl = keep ? c.n_layers : 1;
    x.assign(keep ? c.n_layers + 1 : 2, nullptr);
    layer.assign(nl, Layer{});
    for (T*& p : x) take(p, N * d);
    bool any_dense = false, any_moe = false;
    for (int l = 0; l < c.n_layers; ++l) (c.is_moe(l) ? any_moe : any_dense) = true;
    for (int l = 0; l < nl; ++l) {
      Layer& a = layer[l];
      const bool moe = keep ? c.is_moe(l) : any_moe;
      const bool dense = keep ? !c.is_moe(l) : any_dense;
      if (pre) take(a.xa, N * d);
      take(a.r1, N * d);
      take(a.xf, N * d);
      if (!pre) take(a.r2, N * d);
      take(a.rstd_a, N);
      take(a.rstd_f, N);
      take(a.qkv, N * c.qkv_dim());
      take(a.P, int64_t{B} * H * Tn * Tn);
      take(a.o, N * H * hd);
      take(a.hmask, N * H);
      if (dense) take(a.a13, N * 2 * Fd);
      if (moe) {
        take(a.z, N * E);
        take(a.p, N * E);
        take(a.gate, N * k);
        take(a.tk_idx, N * k);
        take(a.tk_row, N * k);
        take(a.asg_of_row, N * k);
        take(a.off, E + 1);
        take(a.cnt_all, E);
        take(a.a13e, N * k * 2 * F);
        take(a.ye, N * k * d);
        take(a.a13s, S * N * 2 * F);
      }
    }
    if (pre) {
      take(hf, N * d);
      take(rstd_final, N);
    }
    kept_bytes = off;
    // gx: ∂L/∂ of the residual stream, written by the LM head and carried down
    // the layers in place. gz is the blocks' scratch, kept outside the region
    // shared with the logits chunk: its size sets the chunk, and so the order
    // in which the head sums dW.
    take(gx, N * d);
    take(gz, N * d);
    // Scratch of the blocks' forward and backward. None of it is live while
    // the LM head runs (after forward, before backward), so the logits chunk
    // shares its memory: a larger chunk at no extra peak.
    off = (off + 63) / 64 * 64;
    const size_t scratch_begin = off;
    take(gy, N * d);
    take(dqkv, N * c.qkv_dim());
    take(dO, N * H * hd);
    take(dtheta, N * (c.rotary_dims() / 2));
    take(gbuf, std::max({N * Fd * (any_dense ? 1 : 0), N * k * F * (any_moe ? 1 : 0), N * F * (S > 0 ? 1 : 0)}));
    take(xe, any_moe ? N * k * d : 0);
    take(dye, any_moe ? N * k * d : 0);
    take(dz, N * E);
    take(dgate, N * k);
    take(dg_rows, N);
    const int64_t V = std::max<int64_t>(c.vocab_size, 1);
    // Same footprint as a separate logits chunk (Blocking::logits_chunk_elems)
    // plus the scratch; a row of the chunk costs V logits and its share of the
    // fused head's scratch (linear in rows).
    const Blocking& bl = c.blocking;
    const int64_t chunk_elems = bl.logits_chunk_elems + static_cast<int64_t>((off - scratch_begin) / sizeof(T));
    const int64_t per_row = V + head_xent_fused_scratch(16, V, d, bl) / 16;  // linear in multiples of 16 rows
    logits_rows = std::min<int64_t>(std::max<int64_t>(chunk_elems / per_row / 16 * 16, 16), N);
    const size_t scratch_end = off;
    off = scratch_begin;
    take(logits, logits_rows * c.vocab_size);
    take(head_scratch,
         std::max(head_xent_fused_scratch(logits_rows, V, d, bl), head_logprob_fused_scratch(logits_rows, V, d, bl)));
    off = std::max(off, scratch_end);
    take(inv_freq, c.rotary_dims() / 2 + 1);
    take(rope_cos, int64_t{Tn} * (c.rotary_dims() / 2));
    take(rope_sin, int64_t{Tn} * (c.rotary_dims() / 2));
    take(attn_scratch, int64_t{threads} * bl.attn_tile * Tn);
    take(nll, N);
    take(labels, N);
    take(pos, N);
    bytes = (off + 63) / 64 * 64;
  }
};

template <class T>
typename Model<T>::Workspace& Model<T>::ensure_workspace(int B, int Tn) {
  acts_B_ = acts_T_ = 0;  // every entry point reuses the workspace
  const int threads = omp_get_max_threads();
  if (ws_ && B <= ws_->Bcap && Tn <= ws_->Tcap && threads <= ws_->nthreads) return *ws_;
  const int nb = std::max(B, ws_ ? ws_->Bcap : 0), nt = std::max(Tn, ws_ ? ws_->Tcap : 0);
  const int th = std::max(threads, ws_ ? ws_->nthreads : 0);
  ws_.reset();  // release first: peak memory stays one workspace
  auto ws = std::make_unique<Workspace>();
  ws->plan(cfg_, nb, nt, true, th, nullptr);
  ws->mem = static_cast<std::byte*>(zcode::kernels::alloc_large(ws->bytes));
  if (!ws->mem)
    throw Error(ZC_ERR_OUT_OF_MEMORY,
                "glm52: cannot allocate a " + std::to_string(ws->bytes >> 20) + " MiB activation workspace");
  ws->plan(cfg_, nb, nt, true, th, ws->mem);
  ws_ = std::move(ws);
  return *ws_;
}

template <class T>
typename Model<T>::MemoryPlan Model<T>::memory_plan(const Config& cfg, int B, int Tn, int threads,
                                                    std::vector<ParamInfo>* infos) {
  const auto huge = [](size_t n) {
    return (n + zcode::kernels::kHugePageBytes - 1) / zcode::kernels::kHugePageBytes * zcode::kernels::kHugePageBytes;
  };
  const Model shape_only(cfg, ShapeOnly{});
  MemoryPlan m;
  m.parameter_bytes = m.gradient_bytes = huge(sizeof(T) * static_cast<size_t>(shape_only.n_elems_));
  Workspace w;
  w.plan(cfg, B, Tn, true, threads, nullptr);
  m.workspace_bytes = huge(w.bytes);
  if (infos) *infos = shape_only.infos_;
  return m;
}

template <class T>
size_t Model<T>::activation_bytes(int B, int Tn) const {
  Workspace w;
  w.plan(cfg_, B, Tn, true, 1, nullptr);
  return w.kept_bytes;
}
template <class T>
size_t Model<T>::workspace_bytes() const {
  return ws_ ? ws_->bytes : 0;
}

// ---------------------------------------------------------------------------
// Expert parallelism: the buffers of the routed experts' exchange
// ---------------------------------------------------------------------------

/// A rank of an expert group sends each routed row to the rank that owns its
/// expert and gets back that expert's output (README.md, "Expert
/// parallelism"). Rows arrive source-major, then by local expert, so the
/// rows of (source q, local expert j) are one block: the block the source's
/// own forward would have given that expert in one process.
template <class T>
struct Model<T>::ExpertExchange {
  const ExpertGroup* group = nullptr;
  ExpertGroup::Type type = ExpertGroup::Type::kF32;
  int64_t tokens = 0;                           // N the buffers are sized for
  std::vector<int64_t> send_cnt, recv_cnt;      // [E]: rows per (owner, its expert) / (source, my expert)
  std::vector<int64_t> per_rank;                // [K]: E/K each (the counts' own exchange)
  std::vector<int64_t> send_elems, recv_elems;  // [K]: elements to / from each rank
  std::vector<int32_t> off;                     // [E + 1]: received rows, source-major, prefix sums
  std::vector<int32_t> off_src;                 // [E/K + 1]: one source's rows by local expert, from 0
  std::vector<T> x, a13, g, y;                  // received rows [R, d], [R, 2F], [R, F], [R, d]
  std::vector<T> gtmp;                          // one source's gradients of one layer's local experts
};

template <class T>
typename Model<T>::ExpertExchange& Model<T>::ensure_exchange(int64_t N) {
  const Config& c = cfg_;
  if (!ex_) {
    ex_ = std::make_unique<ExpertExchange>();
    ex_->group = &ep_;
    ex_->type = std::is_same_v<T, double> ? ExpertGroup::Type::kF64 : ExpertGroup::Type::kF32;
    const int64_t E = c.moe_experts, K = ep_.size;
    ex_->send_cnt.assign(E, 0);
    ex_->recv_cnt.assign(E, 0);
    ex_->per_rank.assign(K, E / K);
    ex_->send_elems.assign(K, 0);
    ex_->recv_elems.assign(K, 0);
    ex_->off.assign(E + 1, 0);
    ex_->off_src.assign(E / K + 1, 0);
    int64_t span = 0;  // one layer's local experts, as laid out by build_params
    for (const LayerOffsets& lo : layers_)
      if (!lo.ew13.empty()) span = lo.ew2.back() + int64_t{c.d_model} * c.moe_ffn_hidden - lo.ew13.front();
    ex_->gtmp.assign(static_cast<size_t>(span), T(0));
  }
  if (N > ex_->tokens) {
    // Each source sends at most its N·k assignments, so K·N·k rows bound what arrives.
    const int64_t R = int64_t{ep_.size} * N * c.moe_top_k, d = c.d_model, F = c.moe_ffn_hidden;
    ex_->x.assign(static_cast<size_t>(R * d), T(0));
    ex_->a13.assign(static_cast<size_t>(R * 2 * F), T(0));
    ex_->g.assign(static_cast<size_t>(R * F), T(0));
    ex_->y.assign(static_cast<size_t>(R * d), T(0));
    ex_->tokens = N;
  }
  return *ex_;
}

// ---------------------------------------------------------------------------
// Blocks
// ---------------------------------------------------------------------------

namespace {

/// Per-call context shared by the block functions of one model.
template <class T>
struct Ctx {
  const Config& c;
  const T* P;
  T* G;
  typename Model<T>::Workspace& ws;
  int B, Tn;
  int64_t N;
  const int32_t* doc;      // [B, T] or null
  double capacity_factor;  // of this pass: training's, eval_capacity_factor, or 0 (<= 0: dropless)
  double grad_scale;       // loss_scale / Nstep (backward)
  void* session;           // decode session (KV cache) or null
  // The host's profiler (zc_tracer, ABI 1.7): what it records during this
  // call, the direction ("forward", "backward") and the layer of the spans.
  const zcode::sdk::Tracer* tracer = nullptr;
  zc_trace_level trace = ZC_TRACE_OFF;
  const char* dir = "forward";
  int layer = -1;
  typename Model<T>::ExpertExchange* ex = nullptr;  // expert parallelism: the routed experts' exchange
};

/// Forward FLOPs of causal attention over B sequences of Tn tokens: Q·Kᵀ
/// and P·V, 2·Tn·hd each per query and head, half the pairs masked.
inline double attention_flops(const Config& c, int B, int Tn) {
  return 2.0 * B * double(Tn) * Tn * c.n_heads * c.head_dim;
}

/// A span of the host's profiler around one phase (README "Profiling"):
/// category `dir`, args {"layer"} (absent when layer < 0) and, with
/// profiling.profile_shapes, {"tokens": rows of the call, "flops": the
/// phase's floating-point operations, analytic (2 per multiply-add of its
/// GEMMs; elementwise work not counted)}. A branch when nothing is recorded.
zcode::sdk::Tracer::Span phase_span(const zcode::sdk::Tracer& tr, zc_trace_level lv, const char* dir, const char* name,
                                    int layer, int64_t rows, double flops) {
  if (!(lv & ZC_TRACE_SPANS)) return {};
  char args[160];
  const char* sep = layer >= 0 ? "," : "";
  char layer_arg[32] = "";
  if (layer >= 0) std::snprintf(layer_arg, sizeof layer_arg, "\"layer\":%d", layer);
  if (lv & ZC_TRACE_SHAPES)
    std::snprintf(args, sizeof args, "{%s%s\"tokens\":%lld,\"flops\":%.0f}", layer_arg, sep,
                  static_cast<long long>(rows), flops);
  else std::snprintf(args, sizeof args, "{%s}", layer_arg);
  return tr.span(lv, dir, name, args);
}
/// phase_span for the layer, direction and rows of a block call.
template <class T>
zcode::sdk::Tracer::Span phase(const Ctx<T>& k, const char* name, double flops = 0) {
  if (!(k.trace & ZC_TRACE_SPANS)) return {};
  return phase_span(*k.tracer, k.trace, k.dir, name, k.layer, k.N, flops);
}

/// Ends `span` and begins the next phase in it. (Assigning a new phase over
/// an open span would begin the new one before the old one ends, and the
/// host's end() closes the span its thread began last.)
template <class T>
void next_phase(zcode::sdk::Tracer::Span& span, const Ctx<T>& k, const char* name, double flops = 0) {
  span.end();
  span = phase(k, name, flops);
}

/// The decode session's copy of the weight [N, K] at parameter offset `off`,
/// packed at begin (gemm_packed.h), or null (T = double, or no such copy).
template <class T>
const float* session_packed(void* session, int64_t off, int N, int K);

/// y[M, N] = x[M, K]·W[N, K]ᵀ + beta·y (beta 0 or 1; torch.nn.Linear without
/// bias). In a decode step (k.session set) W comes from the session's packed
/// copy (gemm_packed.h: each panel read once per call, one FMA chain per
/// output whatever M, so slot decoding stays batch-invariant); a weight
/// without one (none today: pack_weights covers every map of a step)
/// streams through gemm_small_m.h, batch-invariant too. Training and
/// evaluation keep OpenBLAS's sgemm, and with it their bits.
template <class T>
void fwd_linear(const Ctx<T>& k, int M, int N, int K, const T* x, const T* W, T* y, T beta = T(0)) {
  if constexpr (std::is_same_v<T, float>) {
    if (k.session && (beta == 0.f || beta == 1.f)) {
      if (const float* Wp = session_packed<T>(k.session, W - k.P, N, K))
        zcode::kernels::linear_fwd_packed(M, N, K, x, Wp, y, N, beta == 1.f);
      else zcode::kernels::linear_fwd_small_m(M, N, K, x, W, y, N, beta == 1.f);
      return;
    }
  }
  linear_fwd<T>(M, N, K, x, W, y, beta);
}

// ---- Norm (ScaleNorm / RMSNorm), forward and backward ----------------------
/// y = Norm(x) with the gain at parameter offset `g` (README §3).
template <class T>
void norm_fwd(const Ctx<T>& k, int64_t g, const T* x, T* y, T* rstd) {
  if (k.c.norm == Norm::kScaleNorm)
    zcode::kernels::scalenorm_fwd(x, y, rstd, k.N, k.c.d_model, k.P[g], static_cast<T>(k.c.norm_eps));
  else zcode::kernels::rmsnorm_fwd(x, y, rstd, k.N, k.c.d_model, k.P + g, static_cast<T>(k.c.norm_eps));
}
/// dx (= or +=) ∂L/∂x given dy; the gain gradient accumulates (rows summed in order).
template <class T>
void norm_bwd(const Ctx<T>& k, int64_t g, const T* x, const T* rstd, const T* dy, T* dx, bool accumulate) {
  if (k.c.norm == Norm::kScaleNorm) {
    zcode::kernels::scalenorm_bwd(x, rstd, dy, dx, k.ws.dg_rows, k.N, k.c.d_model, k.P[g], accumulate);
    double s = 0;
    for (int64_t n = 0; n < k.N; ++n) s += static_cast<double>(k.ws.dg_rows[n]);
    k.G[g] += static_cast<T>(s);
  } else {
    zcode::kernels::rmsnorm_bwd(x, rstd, dy, dx, k.G + g, k.N, k.c.d_model, k.P + g, accumulate);
  }
}

// ---- Dense SiLU-GLU FFN (Shazeer 2020), forward and backward ---------------
/// out = W2·(SiLU(W1·x) ⊙ W3·x) + beta·out; a13 [rows, 2F] keeps the
/// pre-activations; g [rows, F] is scratch.
template <class T>
void glu_fwd(const Ctx<T>& k, int64_t w13, int64_t w2, int F, int64_t rows, const T* x, T* a13, T* g, T* out, T beta) {
  const int d = k.c.d_model;
  fwd_linear(k, static_cast<int>(rows), 2 * F, d, x, k.P + w13, a13);
  zcode::kernels::silu_glu_fwd(a13, g, rows, F);
  fwd_linear(k, static_cast<int>(rows), d, F, g, k.P + w2, out, beta);
}
/// Given dout, accumulates dW1, dW3, dW2 (into k.G at w13 and w2, or into
/// dw13 and dw2 when given) and writes (beta 0) or adds (beta 1) dx (dx may
/// alias x). Consumes a13 (overwritten by its gradient); g [rows, F] is
/// scratch.
template <class T>
void glu_bwd(const Ctx<T>& k, int64_t w13, int64_t w2, int F, int64_t rows, const T* x, T* a13, T* g, const T* dout,
             T* dx, T beta, T* dw13 = nullptr, T* dw2 = nullptr) {
  const int d = k.c.d_model, n = static_cast<int>(rows);
  zcode::kernels::silu_glu_fwd(a13, g, rows, F);  // recomputed, not kept
  linear_bwd_w<T>(n, d, F, dout, g, dw2 ? dw2 : k.G + w2);
  linear_bwd_x<T>(n, d, F, dout, k.P + w2, g, T(0));  // g now holds dg
  zcode::kernels::silu_glu_bwd(a13, g, a13, rows, F);
  linear_bwd_w<T>(n, 2 * F, d, a13, x, dw13 ? dw13 : k.G + w13);
  linear_bwd_x<T>(n, 2 * F, d, a13, k.P + w13, dx, beta);
}

// ---- MoE (router, top-k, capacity, experts), forward and backward ---------
/// Runs f(e) for every expert e that has rows (off [E+1]: the rows of expert
/// e are off[e] .. off[e+1]). Experts holding more than `alone_share` times an
/// even share of the rows (share·kept / threads; Blocking::expert_alone_share)
/// run first, one at a time, with every thread inside
/// their GEMMs; the rest run concurrently, one expert per thread, largest
/// first, with single-threaded GEMMs: no fork/join per GEMM, and an expert's
/// weights stay in one core's cache (1.15–1.35× the GEMM rate on 8 experts ×
/// 512 rows, d 256, on the 2-core dev VM). The split depends only on the
/// counts and no sum crosses experts, so no result depends on which thread
/// runs an expert.
template <class F>
void for_each_expert(const int32_t* off, int64_t E, double alone_share, F&& f) {
  const int threads = omp_get_max_threads();
  const int64_t kept = off[E];
  int32_t order[1024];  // E ≤ 1024 (checked by the config)
  int64_t n_small = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t ne = off[e + 1] - off[e];
    if (ne == 0) continue;
    if (threads > 1 && static_cast<double>(ne) * threads > alone_share * static_cast<double>(kept)) f(e);
    else order[n_small++] = static_cast<int32_t>(e);
  }
  // std::sort, not stable_sort: stable_sort allocates. Ties go to the lower index.
  std::sort(order, order + n_small, [&](int32_t a, int32_t b) {
    const int64_t na = off[a + 1] - off[a], nb = off[b + 1] - off[b];
    return na != nb ? na > nb : a < b;
  });
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n_small; ++i) f(order[i]);
}

/// Expert parallelism: tells each owner how many of this rank's rows go to
/// each of its experts (`off` [E+1]: this rank's kept rows by global expert,
/// which are also by owner), and lays out the rows that arrive: k.ex->off,
/// source-major then by local expert; the element counts of both ways.
template <class T>
void ep_plan(const Ctx<T>& k, const int32_t* off) {
  auto& X = *k.ex;
  const ExpertGroup& grp = *X.group;
  const int64_t E = k.c.moe_experts, K = grp.size, El = E / K, d = k.c.d_model;
  for (int64_t e = 0; e < E; ++e) X.send_cnt[e] = off[e + 1] - off[e];
  grp.alltoallv(X.send_cnt.data(), X.per_rank.data(), X.recv_cnt.data(), X.per_rank.data(), ExpertGroup::Type::kI64);
  X.off[0] = 0;
  for (int64_t i = 0; i < E; ++i) X.off[i + 1] = X.off[i] + static_cast<int32_t>(X.recv_cnt[i]);
  for (int64_t q = 0; q < K; ++q) {
    X.send_elems[q] = int64_t{off[(q + 1) * El] - off[q * El]} * d;
    X.recv_elems[q] = int64_t{X.off[(q + 1) * El] - X.off[q * El]} * d;
  }
}

/// Router and dispatch (README §5): p = softmax(z) or σ(z), z = x·Wrᵀ; top-k by
/// p (ties: lower index); gates (renormalised with norm_topk_prob); capacity
/// C = ceil(capacity_factor·N·k/E) filled rank-major then token-major; Switch
/// aux loss statistics (Fedus et al. 2021, eq. 4) and ST-MoE z-loss sums
/// (Zoph et al. 2022, eq. 5). Then one GEMM pair per expert over its own
/// rows; out[n] += Σ_kept g·expert(x_n) + Σ shared(x_n).
template <class T>
void moe_fwd(const Ctx<T>& k, const typename Model<T>::LayerOffsets& lo, typename Model<T>::Workspace::Layer& a,
             const T* x, T* out) {
  const Config& c = k.c;
  const int64_t N = k.N, E = c.moe_experts, K = c.moe_top_k, d = c.d_model;
  const int F = c.moe_ffn_hidden;
  const bool softmax = c.router_activation == Router::kSoftmax;
  auto span = phase(k, "router", 2.0 * double(N) * d * E);
  fwd_linear(k, static_cast<int>(N), static_cast<int>(E), static_cast<int>(d), x, k.P + lo.router, a.z);
  double* lse2 = k.ws.nll;  // scratch until the LM head runs: per-token lse², summed in order
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* z = a.z + n * E;
    T* p = a.p + n * E;
    T mx = z[0];
    for (int64_t e = 1; e < E; ++e) mx = std::max(mx, z[e]);
    double s = 0;
    for (int64_t e = 0; e < E; ++e) s += std::exp(static_cast<double>(z[e] - mx));
    const double lse = static_cast<double>(mx) + std::log(s);
    lse2[n] = lse * lse;
    for (int64_t e = 0; e < E; ++e)
      p[e] = softmax ? static_cast<T>(std::exp(static_cast<double>(z[e]) - lse))
                     : T(1) / (T(1) + static_cast<T>(std::exp(-static_cast<double>(z[e]))));
    int32_t* idx = a.tk_idx + n * K;
    T* gate = a.gate + n * K;
    T sel = 0;
    for (int64_t r = 0; r < K; ++r) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e) {
        bool taken = false;
        for (int64_t q = 0; q < r; ++q) taken |= idx[q] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;  // strict: ties keep the lower index
      }
      idx[r] = static_cast<int32_t>(best);
      sel += p[best];
    }
    for (int64_t r = 0; r < K; ++r) gate[r] = c.norm_topk_prob ? p[idx[r]] / sel : p[idx[r]];
  }
  a.zsum = 0;
  for (int64_t n = 0; n < N; ++n) a.zsum += lse2[n];
  // Capacity, in the spec's priority order (sequential: it is an order).
  int64_t cap = std::numeric_limits<int64_t>::max();
  if (k.capacity_factor > 0)
    cap = static_cast<int64_t>(
        std::ceil(k.capacity_factor * static_cast<double>(N) * static_cast<double>(K) / static_cast<double>(E)));
  int32_t* cnt = a.off + 1;  // kept per expert, then prefix-summed in place
  for (int64_t e = 0; e <= E; ++e) a.off[e] = 0;
  for (int64_t e = 0; e < E; ++e) a.cnt_all[e] = 0;
  for (int64_t r = 0; r < K; ++r)
    for (int64_t n = 0; n < N; ++n) {
      const int32_t e = a.tk_idx[n * K + r];
      ++a.cnt_all[e];
      a.tk_row[n * K + r] = cnt[e] < cap ? cnt[e]++ : -1;  // slot within expert e
    }
  for (int64_t e = 0; e < E; ++e) a.off[e + 1] += a.off[e];
  int64_t kept = a.off[E];
  a.dropped = N * K - kept;
  for (int64_t i = 0; i < N * K; ++i)
    if (a.tk_row[i] >= 0) {
      a.tk_row[i] += a.off[a.tk_idx[i]];
      a.asg_of_row[a.tk_row[i]] = static_cast<int32_t>(i);
    }
  // Switch aux: E·Σ_e f_e·P_e (p normalised per token for sigmoid).
  {
    double pe[1024] = {};  // E ≤ 1024 (checked by the config)
    for (int64_t n = 0; n < N; ++n) {
      const T* p = a.p + n * E;
      double den = 1;
      if (!softmax) {
        den = 0;
        for (int64_t q = 0; q < E; ++q) den += static_cast<double>(p[q]);
      }
      for (int64_t e = 0; e < E; ++e) pe[e] += static_cast<double>(p[e]) / den;
    }
    double aux = 0;
    for (int64_t e = 0; e < E; ++e)
      aux += static_cast<double>(a.cnt_all[e]) / static_cast<double>(N * K) * (pe[e] / static_cast<double>(N));
    a.aux = static_cast<double>(E) * aux;
  }
  span.end();
  // Shared experts: dense GLUs on every token, weight 1.
  if (c.moe_shared_experts > 0) next_phase(span, k, "shared_expert", 6.0 * double(N) * d * F * c.moe_shared_experts);
  for (int s = 0; s < c.moe_shared_experts; ++s)
    glu_fwd(k, lo.sw13[s], lo.sw2[s], F, N, x, a.a13s + s * N * 2 * F, k.ws.gbuf, out, T(1));
  // Routed experts: gather rows, one GEMM pair per expert.
  next_phase(span, k, "experts", 6.0 * double(kept) * d * F);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < kept; ++row)
    std::memcpy(k.ws.xe + row * d, x + (a.asg_of_row[row] / K) * d, sizeof(T) * static_cast<size_t>(d));
  if (k.ex) {
    // Expert parallel: the rows to their experts' owners, each (source, local
    // expert) block through the GEMMs one process would give that source's
    // rows of that expert, the outputs back in the order they left.
    auto& X = *k.ex;
    const int64_t El = E / X.group->size;
    ep_plan(k, a.off);
    X.group->alltoallv(k.ws.xe, X.send_elems.data(), X.x.data(), X.recv_elems.data(), X.type);
    for_each_expert(X.off.data(), E, c.blocking.expert_alone_share, [&](int64_t i) {
      const int64_t j = i % El, r0 = X.off[i], ne = X.off[i + 1] - r0;
      glu_fwd(k, lo.ew13[j], lo.ew2[j], F, ne, X.x.data() + r0 * d, X.a13.data() + r0 * 2 * F, X.g.data() + r0 * F,
              X.y.data() + r0 * d, T(0));
    });
    X.group->alltoallv(X.y.data(), X.recv_elems.data(), a.ye, X.send_elems.data(), X.type);
  } else {
    for_each_expert(a.off, E, c.blocking.expert_alone_share, [&](int64_t e) {
      const int64_t r0 = a.off[e], ne = a.off[e + 1] - r0;
      glu_fwd(k, lo.ew13[e], lo.ew2[e], F, ne, k.ws.xe + r0 * d, a.a13e + r0 * 2 * F, k.ws.gbuf + r0 * F, a.ye + r0 * d,
              T(0));
    });
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* o = out + n * d;
    for (int64_t r = 0; r < K; ++r) {
      const int32_t row = a.tk_row[n * K + r];
      if (row < 0) continue;
      const T g = a.gate[n * K + r];
      const T* y = a.ye + static_cast<int64_t>(row) * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) o[i] += g * y[i];
    }
  }
}

/// Backward of moe_fwd given dout = ∂L/∂out; adds ∂L/∂x to dx. The aux and
/// z-loss gradients enter the router with their coefficients times
/// k.grad_scale (loss_scale / Nstep).
template <class T>
void moe_bwd(const Ctx<T>& k, const typename Model<T>::LayerOffsets& lo, typename Model<T>::Workspace::Layer& a,
             const T* x, const T* dout, T* dx) {
  const Config& c = k.c;
  const int64_t N = k.N, E = c.moe_experts, K = c.moe_top_k, d = c.d_model;
  const int F = c.moe_ffn_hidden;
  const bool softmax = c.router_activation == Router::kSoftmax;
  const int64_t kept = a.off[E];
  T *xe = k.ws.xe, *dye = k.ws.dye, *g = k.ws.gbuf;
  auto span = phase(k, "experts", 12.0 * double(kept) * d * F);
  // Routed experts: dY = g·dout, ∂L/∂g = dout·Y.
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < kept; ++row) {
    const int32_t asg = a.asg_of_row[row];
    const T gt = a.gate[asg];
    const T* dn = dout + (asg / K) * d;
    T* dy = dye + row * d;
    for (int64_t i = 0; i < d; ++i) dy[i] = gt * dn[i];
    std::memcpy(xe + row * d, x + (asg / K) * d, sizeof(T) * static_cast<size_t>(d));
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N * K; ++i) {
    const int32_t row = a.tk_row[i];
    T s = 0;
    if (row >= 0) {
      const T* dn = dout + (i / K) * d;
      const T* y = a.ye + static_cast<int64_t>(row) * d;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < d; ++j) s += dn[j] * y[j];
    }
    k.ws.dgate[i] = s;
  }
  if (k.ex) {
    // Expert parallel: x and ∂L/∂y of every routed row to its expert's owner
    // (the forward's counts, exchanged again), which recomputes the
    // pre-activations (the forward's GEMM on the same rows: the same bits)
    // and runs each source's backward into a zeroed buffer, added to the
    // gradient in source order: one process with the sources as
    // consecutive micro-batches sums in that order. ∂L/∂x goes back.
    auto& X = *k.ex;
    const int64_t K = X.group->size, El = E / K;
    ep_plan(k, a.off);
    X.group->alltoallv(xe, X.send_elems.data(), X.x.data(), X.recv_elems.data(), X.type);
    X.group->alltoallv(dye, X.send_elems.data(), X.y.data(), X.recv_elems.data(), X.type);
    const int64_t g0 = lo.ew13.front(), gn = static_cast<int64_t>(X.gtmp.size());
    for (int64_t q = 0; q < K; ++q) {
      const int32_t* o = X.off.data() + q * El;
      for (int64_t j = 0; j <= El; ++j) X.off_src[j] = o[j] - o[0];
      std::fill(X.gtmp.begin(), X.gtmp.end(), T(0));
      T *xq = X.x.data() + int64_t{o[0]} * d, *aq = X.a13.data() + int64_t{o[0]} * 2 * F;
      T *gq = X.g.data() + int64_t{o[0]} * F, *dq = X.y.data() + int64_t{o[0]} * d;
      for_each_expert(X.off_src.data(), El, c.blocking.expert_alone_share, [&](int64_t j) {
        const int64_t r0 = X.off_src[j], ne = X.off_src[j + 1] - r0;
        fwd_linear(k, static_cast<int>(ne), 2 * F, static_cast<int>(d), xq + r0 * d, k.P + lo.ew13[j], aq + r0 * 2 * F);
        glu_bwd(k, lo.ew13[j], lo.ew2[j], F, ne, xq + r0 * d, aq + r0 * 2 * F, gq + r0 * F, dq + r0 * d, xq + r0 * d,
                T(0), X.gtmp.data() + (lo.ew13[j] - g0),
                X.gtmp.data() + (lo.ew2[j] - g0));  // the received x becomes ∂L/∂x
      });
      T* G = k.G + g0;
      const T* t = X.gtmp.data();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < gn; ++i) G[i] += t[i];
    }
    X.group->alltoallv(X.x.data(), X.recv_elems.data(), xe, X.send_elems.data(), X.type);
  } else {
    for_each_expert(a.off, E, c.blocking.expert_alone_share, [&](int64_t e) {
      const int64_t r0 = a.off[e], ne = a.off[e + 1] - r0;
      glu_bwd(k, lo.ew13[e], lo.ew2[e], F, ne, xe + r0 * d, a.a13e + r0 * 2 * F, g + r0 * F, dye + r0 * d, xe + r0 * d,
              T(0));  // xe becomes ∂L/∂xe
    });
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* o = dx + n * d;
    for (int64_t r = 0; r < K; ++r) {
      const int32_t row = a.tk_row[n * K + r];
      if (row < 0) continue;
      const T* y = xe + static_cast<int64_t>(row) * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) o[i] += y[i];
    }
  }
  span.end();
  if (c.moe_shared_experts > 0) next_phase(span, k, "shared_expert", 12.0 * double(N) * d * F * c.moe_shared_experts);
  for (int s = 0; s < c.moe_shared_experts; ++s)
    glu_bwd(k, lo.sw13[s], lo.sw2[s], F, N, x, a.a13s + s * N * 2 * F, k.ws.gbuf, dout, dx, T(1));
  // Router: gates -> p -> z, plus the aux and z-loss gradients.
  next_phase(span, k, "router", 4.0 * double(N) * d * E);
  const double aux_scale = c.moe_aux_loss_coef * static_cast<double>(E) * k.grad_scale;
  const double z_scale = c.moe_z_loss_coef * 2.0 * k.grad_scale;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* p = a.p + n * E;
    const T* z = a.z + n * E;
    const int32_t* idx = a.tk_idx + n * K;
    const T* dg = k.ws.dgate + n * K;
    T* dz = k.ws.dz + n * E;  // holds dp first
    double dp[1024];          // E ≤ 1024 (checked at create)
    for (int64_t e = 0; e < E; ++e) dp[e] = 0;
    if (c.norm_topk_prob) {  // g_r = p_r / s, s = Σ_sel p
      double s = 0, gp = 0;
      for (int64_t r = 0; r < K; ++r) {
        s += static_cast<double>(p[idx[r]]);
        gp += static_cast<double>(dg[r]) * static_cast<double>(p[idx[r]]);
      }
      for (int64_t r = 0; r < K; ++r) dp[idx[r]] += static_cast<double>(dg[r]) / s - gp / (s * s);
    } else {
      for (int64_t r = 0; r < K; ++r) dp[idx[r]] += static_cast<double>(dg[r]);
    }
    if (aux_scale != 0) {
      const double inv_nk = 1.0 / static_cast<double>(N * K);
      if (softmax) {
        for (int64_t e = 0; e < E; ++e) dp[e] += aux_scale * a.cnt_all[e] * inv_nk;
      } else {  // p̂ = p / Σp
        double sp = 0, dot = 0;
        for (int64_t e = 0; e < E; ++e) sp += static_cast<double>(p[e]);
        for (int64_t e = 0; e < E; ++e) dot += aux_scale * a.cnt_all[e] * inv_nk * static_cast<double>(p[e]) / sp;
        for (int64_t e = 0; e < E; ++e) dp[e] += (aux_scale * a.cnt_all[e] * inv_nk - dot) / sp;
      }
    }
    double mx = static_cast<double>(z[0]);
    for (int64_t e = 1; e < E; ++e) mx = std::max(mx, static_cast<double>(z[e]));
    double se = 0;
    for (int64_t e = 0; e < E; ++e) se += std::exp(static_cast<double>(z[e]) - mx);
    const double lse = mx + std::log(se);
    double pdp = 0;
    if (softmax)
      for (int64_t e = 0; e < E; ++e) pdp += static_cast<double>(p[e]) * dp[e];
    for (int64_t e = 0; e < E; ++e) {
      const double pe = static_cast<double>(p[e]);
      double v = softmax ? pe * (dp[e] - pdp) : dp[e] * pe * (1.0 - pe);
      v += z_scale * lse * std::exp(static_cast<double>(z[e]) - lse);
      dz[e] = static_cast<T>(v);
    }
  }
  linear_bwd_w<T>(static_cast<int>(N), static_cast<int>(E), static_cast<int>(d), k.ws.dz, x, k.G + lo.router);
  linear_bwd_x<T>(static_cast<int>(N), static_cast<int>(E), static_cast<int>(d), k.ws.dz, k.P + lo.router, dx, T(1));
}

/// inv_freq = exp(rope_log_inv_freq) of one layer into the workspace, and
/// the cos/sin tables of positions pos0 .. pos0 + n_pos - 1.
template <class T>
const T* inv_freq(const Ctx<T>& k, int64_t rope, int n_pos, int pos0) {
  const int h2 = k.c.rotary_dims() / 2;
  for (int i = 0; i < h2; ++i) k.ws.inv_freq[i] = std::exp(k.P[rope + i]);
  zcode::kernels::rope_table(k.ws.inv_freq, n_pos, pos0, k.c.rotary_dims(), k.ws.rope_cos, k.ws.rope_sin);
  return k.ws.inv_freq;
}

// ---- RoPE with learned frequencies (README §4), forward and backward ------
/// RoPE in place on the q and k heads of qkv [N, qkv_dim], with the layer's
/// frequencies (parameter offset `rope`); row n sits at table row ws.pos[n] of
/// the positions pos0 .. pos0 + n_pos - 1.
template <class T>
void rope_fwd(const Ctx<T>& k, int64_t rope, T* qkv, int n_pos, int pos0) {
  const Config& c = k.c;
  inv_freq(k, rope, n_pos, pos0);
  zcode::kernels::rope_fwd(qkv, k.N, c.qkv_dim(), c.n_heads + c.n_kv_heads, c.head_dim, c.rotary_dims(), k.ws.rope_cos,
                           k.ws.rope_sin, k.ws.pos);
}
/// Backward of rope_fwd over positions 0 .. T-1, given qkv, its output:
/// ws.dqkv, ∂L/∂qkv after RoPE on entry, becomes ∂L/∂qkv before it (in
/// place). θ_{n,i} = pos_n·f_i with f = exp(rope_log_inv_freq), so that
/// gradient accumulates f_i·Σ_n pos_n·∂L/∂θ_{n,i} (rows summed in order).
template <class T>
void rope_bwd(const Ctx<T>& k, int64_t rope, const T* qkv) {
  const Config& c = k.c;
  const int h2 = c.rotary_dims() / 2;
  if (h2 == 0) return;
  const T* inv = inv_freq(k, rope, k.Tn, 0);
  zcode::kernels::rope_bwd(k.ws.dqkv, qkv, k.N, c.qkv_dim(), c.n_heads + c.n_kv_heads, c.head_dim, c.rotary_dims(),
                           k.ws.rope_cos, k.ws.rope_sin, k.ws.pos, k.ws.dtheta);
  for (int i = 0; i < h2; ++i) {
    double s = 0;
    for (int64_t n = 0; n < k.N; ++n)
      s += static_cast<double>(k.ws.pos[n]) * static_cast<double>(k.ws.dtheta[n * h2 + i]);
    k.G[rope + i] += static_cast<T>(static_cast<double>(inv[i]) * s);
  }
}

// ---- Layer halves (the forwards shared with KV-cache decoding), each with its backward
/// Attention input: a.qkv [N, qkv_dim] = xa·W_qkvᵀ with xa = x (deepnorm) or
/// AttnNorm(x) (prenorm, into a.xa). RoPE and attention follow per caller.
template <class T>
void qkv_fwd(const Ctx<T>& k, const typename Model<T>::LayerOffsets& lo, typename Model<T>::Workspace::Layer& a,
             const T* x) {
  const Config& c = k.c;
  const T* xa = x;
  if (c.residual != Residual::kDeepNorm) {
    auto span = phase(k, "norm");
    norm_fwd(k, lo.attn_norm, x, a.xa, a.rstd_a);
    xa = a.xa;
  }
  auto span = phase(k, "qkv_proj", 2.0 * double(k.N) * c.d_model * c.qkv_dim());
  fwd_linear(k, static_cast<int>(k.N), static_cast<int>(c.qkv_dim()), c.d_model, xa, k.P + lo.wqkv, a.qkv);
}
/// Backward of qkv_fwd given ws.dqkv = ∂L/∂qkv [N, qkv_dim] (before RoPE):
/// accumulates the gradients of W_qkv (and of the attention norm's gain,
/// prenorm) and adds ∂L/∂x to dx [N, d]. ws.gy is scratch (prenorm).
template <class T>
void qkv_bwd(const Ctx<T>& k, const typename Model<T>::LayerOffsets& lo, typename Model<T>::Workspace::Layer& a,
             const T* x, T* dx) {
  const Config& c = k.c;
  const int n = static_cast<int>(k.N), qd = c.qkv_dim(), d = c.d_model;
  const bool deep = c.residual == Residual::kDeepNorm;
  auto span = phase(k, "qkv_proj", 4.0 * n * d * qd);
  linear_bwd_w<T>(n, qd, d, k.ws.dqkv, deep ? x : a.xa, k.G + lo.wqkv);
  if (deep) {
    linear_bwd_x<T>(n, qd, d, k.ws.dqkv, k.P + lo.wqkv, dx, T(1));
  } else {
    linear_bwd_x<T>(n, qd, d, k.ws.dqkv, k.P + lo.wqkv, k.ws.gy, T(0));
    span.end();
    auto norm = phase(k, "norm");
    norm_bwd(k, lo.attn_norm, x, a.rstd_a, k.ws.gy, dx, true);
  }
}

/// From the attention heads' output a.o to the layer output xn [N, d]
/// (Wang et al. 2022, DeepNet, Fig. 2 for deepnorm):
///   deepnorm: r1 = α·x + o·W_oᵀ; xf = AttnNorm(r1); r2 = α·xf + FFN(xf); xn = FfnNorm(r2)
///   prenorm:  r1 = x + o·W_oᵀ;   xf = FfnNorm(r1);  xn = r1 + FFN(xf)
/// FFN is the MoE block on MoE layers, the dense GLU otherwise.
template <class T>
void post_attention_fwd(const Ctx<T>& k, const typename Model<T>::LayerOffsets& lo,
                        typename Model<T>::Workspace::Layer& a, const T* x, T* xn, bool moe) {
  const Config& c = k.c;
  const int64_t N = k.N, d = c.d_model;
  const bool deep = c.residual == Residual::kDeepNorm;
  const T alpha = static_cast<T>(c.alpha());
  auto span = phase(k, "out_proj", 2.0 * double(N) * d * c.n_heads * c.head_dim);
  scaled_copy(a.r1, x, N * d, deep ? alpha : T(1));
  fwd_linear(k, static_cast<int>(N), static_cast<int>(d), c.n_heads * c.head_dim, a.o, k.P + lo.wo, a.r1, T(1));
  next_phase(span, k, "norm");
  norm_fwd(k, deep ? lo.attn_norm : lo.ffn_norm, a.r1, a.xf, deep ? a.rstd_a : a.rstd_f);
  T* r2 = deep ? a.r2 : xn;
  scaled_copy(r2, deep ? a.xf : a.r1, N * d, deep ? alpha : T(1));
  span.end();
  if (moe) {
    moe_fwd(k, lo, a, a.xf, r2);
  } else {
    next_phase(span, k, "ffn", 6.0 * double(N) * d * c.ffn_hidden);
    glu_fwd(k, lo.w13, lo.w2, c.ffn_hidden, N, a.xf, a.a13, k.ws.gbuf, r2, T(1));
  }
  if (deep) {
    next_phase(span, k, "norm");
    norm_fwd(k, lo.ffn_norm, a.r2, xn, a.rstd_f);
  }
}
/// Backward of post_attention_fwd, in place on the residual stream's
/// gradient: dres [N, d] holds ∂L/∂xn on entry and, on return, the share of
/// ∂L/∂x that flows through the residual (α·∂L/∂r1 deepnorm, ∂L/∂r1
/// prenorm; qkv_bwd adds the rest). Writes ws.dO = ∂L/∂o [N, H·hd] and
/// accumulates the gradients of W_o, the norms and the FFN. ws.gy and ws.gz
/// are scratch.
template <class T>
void post_attention_bwd(const Ctx<T>& k, const typename Model<T>::LayerOffsets& lo,
                        typename Model<T>::Workspace::Layer& a, T* dres, bool moe) {
  const Config& c = k.c;
  const int64_t N = k.N, d = c.d_model;
  const bool deep = c.residual == Residual::kDeepNorm;
  const T alpha = static_cast<T>(c.alpha());
  T *gy = k.ws.gy, *gz = k.ws.gz;
  const T* dr1;  // ∂L/∂r1
  zcode::sdk::Tracer::Span span;
  const double ffn_flops = 12.0 * double(N) * d * c.ffn_hidden;
  if (deep) {
    next_phase(span, k, "norm");
    norm_bwd(k, lo.ffn_norm, a.r2, a.rstd_f, dres, gy, false);  // gy = ∂L/∂r2
    scaled_copy(gz, gy, N * d, alpha);                          // gz = ∂L/∂xf (residual part)
    span.end();
    if (moe) {
      moe_bwd(k, lo, a, a.xf, gy, gz);
    } else {
      next_phase(span, k, "ffn", ffn_flops);
      glu_bwd(k, lo.w13, lo.w2, c.ffn_hidden, N, a.xf, a.a13, k.ws.gbuf, gy, gz, T(1));
    }
    next_phase(span, k, "norm");
    norm_bwd(k, lo.attn_norm, a.r1, a.rstd_a, gz, gy, false);  // gy = ∂L/∂r1
    scaled_copy(dres, gy, N * d, alpha);                       // through r1 = α·x + …
    dr1 = gy;
  } else {
    // dres = ∂L/∂xn: the FFN output's gradient and the residual part of ∂L/∂r1.
    if (moe) {
      std::memset(static_cast<void*>(gz), 0, sizeof(T) * size_t(N * d));
      moe_bwd(k, lo, a, a.xf, dres, gz);
    } else {
      next_phase(span, k, "ffn", ffn_flops);
      glu_bwd(k, lo.w13, lo.w2, c.ffn_hidden, N, a.xf, a.a13, k.ws.gbuf, dres, gz, T(0));
    }
    next_phase(span, k, "norm");
    norm_bwd(k, lo.ffn_norm, a.r1, a.rstd_f, gz, dres, true);  // dres = ∂L/∂r1, also ∂L/∂x through r1 = x + …
    dr1 = dres;
  }
  const int n = static_cast<int>(N), dm = c.d_model, ho = c.n_heads * c.head_dim;
  next_phase(span, k, "out_proj", 4.0 * n * dm * ho);
  linear_bwd_w<T>(n, dm, ho, dr1, a.o, k.G + lo.wo);
  linear_bwd_x<T>(n, dm, ho, dr1, k.P + lo.wo, k.ws.dO, T(0));
}

}  // namespace

// ---------------------------------------------------------------------------
// Decode session (KV cache)
// ---------------------------------------------------------------------------

template <class T>
struct Model<T>::DecodeSession {
  int batch = 0, max_len = 0, pos = 0;
  std::vector<T> kc, vc;  // [L, batch, max_len, Hkv·hd], keys after RoPE
  std::unique_ptr<Workspace> ws;
  std::vector<T> prow;  // [threads, max_len]
  std::vector<T> tmp;
  int threads = 0;
  // Slot decoding (decode_slots_begin): batch = slots, each with its own length.
  bool slots = false;
  int max_tokens = 0;
  std::vector<int32_t> len;           // [slots] tokens in each slot's cache
  std::vector<int32_t> pos_of;        // [max_tokens] position of each entry of a step
  std::vector<int32_t> row_of;        // decode_step: entry i is cache row i
  std::vector<T> rope_cos, rope_sin;  // [max_tokens, rotary/2] one table row per entry
  std::vector<T> hrows;               // [max_tokens, d] final hidden rows that want logits
  // float: the LM head and every linear map of a step packed into panels once
  // per session (gemm_packed.h), so a step streams them without OpenBLAS's
  // per-call packing; empty for double. packed_at: (parameter offset, N, K,
  // offset in packed), sorted by parameter offset.
  struct Packed {
    int64_t off;
    int N, K;
    int64_t at;
  };
  std::vector<Packed> packed_at;
  std::vector<float> packed;
  // decode_extend: the rows its chunks hold (the workspace, pos_of, the RoPE
  // tables and hrows are sized for them once grown), and each chunk's entries.
  int extend_rows = 0;
  std::vector<int32_t> ext_slot, ext_tok;
  std::vector<uint8_t> ext_want;
};

namespace {
template <class T>
const float* session_packed(void* session, int64_t off, int N, int K) {
  if constexpr (!std::is_same_v<T, float>) {
    return nullptr;
  } else {
    const auto& idx = static_cast<typename Model<T>::DecodeSession*>(session)->packed_at;
    auto it = std::lower_bound(idx.begin(), idx.end(), off, [](const auto& p, int64_t o) { return p.off < o; });
    if (it == idx.end() || it->off != off || it->N != N || it->K != K) return nullptr;
    return static_cast<typename Model<T>::DecodeSession*>(session)->packed.data() + it->at;
  }
}
}  // namespace

// ---------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------

template <class T>
void Model<T>::forward(Workspace& ws, const BatchView& b, double capacity_factor, StepMetrics* m) {
  const Config& c = cfg_;
  Ctx<T> k{c,
           params_.get(),
           grads_.get(),
           ws,
           b.B,
           b.T,
           int64_t{b.B} * b.T,
           c.cross_document_attention ? nullptr : b.doc_ids,
           capacity_factor,
           0.0,
           nullptr,
           &tracer_,
           tracer_.level(),
           "forward"};
  if (ep_.size > 1) k.ex = &ensure_exchange(k.N);
  const int64_t N = k.N, d = c.d_model;
  const bool deep = c.residual == Residual::kDeepNorm;
  {  // Embedding: h = embed.weight[ids], and the positions.
    auto span = phase(k, "embedding");
    for (int64_t n = 0; n < N; ++n) ws.pos[n] = static_cast<int32_t>(n % b.T);
    T* x0 = ws.X(0);
    const T* E = params_.get() + off_embed_;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) std::memcpy(x0 + n * d, E + int64_t{b.ids[n]} * d, sizeof(T) * size_t(d));
  }
  int64_t masked = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerOffsets& lo = layers_[l];
    typename Workspace::Layer& a = ws.L(l);
    T* x = ws.X(l);
    T* xn = ws.X(l + 1);
    k.layer = l;
    // Attention sub-block: deepnorm r1 = α·x + Attn(x); prenorm r1 = x + Attn(AttnNorm(x)).
    qkv_fwd(k, lo, a, x);
    {
      auto span = phase(k, "rope");
      rope_fwd(k, lo.rope, a.qkv, b.T, 0);
      next_phase(span, k, "attention", attention_flops(c, b.B, b.T));
      masked += attention_fwd(a.qkv, a.P, a.o, a.hmask, b.B, b.T, c.n_heads, c.n_kv_heads, c.head_dim, k.doc,
                              c.dynamic_head_mask, static_cast<T>(c.entropy_threshold), c.blocking.attn_tile);
    }
    post_attention_fwd(k, lo, a, x, xn, c.is_moe(l));
    if (c.is_moe(l)) {
      if (m) {
        m->aux_loss += a.aux * static_cast<double>(N);  // scaled by coef/Nstep by the caller
        m->z_loss += a.zsum;
        m->moe_dropped_fraction += static_cast<double>(a.dropped);
        const double kept = static_cast<double>(a.off[c.moe_experts]);
        for (int e = 0; e < c.moe_experts; ++e) m->moe_load[e] += kept > 0 ? (a.off[e + 1] - a.off[e]) / kept : 0.0;
      }
    }
  }
  k.layer = -1;
  if (!deep) {
    auto span = phase(k, "norm");
    norm_fwd(k, off_norm_f_, ws.X(c.n_layers), ws.hf, ws.rstd_final);
  }
  if (m) m->masked_head_fraction = static_cast<double>(masked);
}

// ---------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------

template <class T>
void Model<T>::backward(Workspace& ws, const BatchView& b, double grad_scale) {
  const Config& c = cfg_;
  Ctx<T> k{c,
           params_.get(),
           grads_.get(),
           ws,
           b.B,
           b.T,
           int64_t{b.B} * b.T,
           c.cross_document_attention ? nullptr : b.doc_ids,
           c.capacity_factor,
           grad_scale,
           nullptr,
           &tracer_,
           tracer_.level(),
           "backward"};
  if (ep_.size > 1) k.ex = &ensure_exchange(k.N);
  const int64_t N = k.N, d = c.d_model;
  const bool deep = c.residual == Residual::kDeepNorm;
  // ws.gx holds ∂L/∂(final hidden) on entry (written by the LM head), then
  // ∂L/∂(input of layer l) after layer l's backward.
  if (!deep) {
    auto span = phase(k, "norm");
    std::memcpy(ws.gy, ws.gx, sizeof(T) * size_t(N * d));
    norm_bwd(k, off_norm_f_, ws.X(c.n_layers), ws.rstd_final, ws.gy, ws.gx, false);
    ready_(layer_first_param_.back(), infos_.size() - layer_first_param_.back());  // norm_f.weight
  }
  for (int l = c.n_layers - 1; l >= 0; --l) {
    const LayerOffsets& lo = layers_[l];
    typename Workspace::Layer& a = ws.L(l);
    k.layer = l;
    post_attention_bwd(k, lo, a, ws.gx, c.is_moe(l));
    {
      auto span = phase(k, "attention", 2 * attention_flops(c, b.B, b.T));
      attention_bwd(a.qkv, a.P, a.hmask, ws.dO, ws.dqkv, b.B, b.T, c.n_heads, c.n_kv_heads, c.head_dim, ws.attn_scratch,
                    c.blocking.attn_tile);
      next_phase(span, k, "rope");
      rope_bwd(k, lo.rope, a.qkv);
    }
    qkv_bwd(k, lo, a, ws.X(l), ws.gx);
    ready_(layer_first_param_[static_cast<size_t>(l)],
           layer_first_param_[static_cast<size_t>(l) + 1] - layer_first_param_[static_cast<size_t>(l)]);
  }
  k.layer = -1;
  {  // Embedding: embed.grad[ids[n]] += ∂L/∂h0[n]; column blocks in parallel, rows in order.
    auto span = phase(k, "embedding");
    T* GE = grads_.get() + off_embed_;
    const T* gx = ws.gx;
    const int64_t cols = c.blocking.embed_grad_cols;
    const int64_t blocks = (d + cols - 1) / cols;
#pragma omp parallel for schedule(static)
    for (int64_t bk = 0; bk < blocks; ++bk) {
      const int64_t i0 = bk * cols, i1 = std::min(d, i0 + cols);
      for (int64_t n = 0; n < N; ++n) {
        T* dst = GE + int64_t{b.ids[n]} * d;
        const T* src = gx + n * d;
        for (int64_t i = i0; i < i1; ++i) dst[i] += src[i];
      }
    }
  }
  ready_(0, 1);  // embed.weight
}

// ---------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------

template <class T>
void Model<T>::check_batch(const BatchView& b) const {
  const Config& c = cfg_;
  if (b.B < 1 || b.T < 1)
    throw Error(ZC_ERR_INVALID_ARGUMENT, "batch: shape [" + std::to_string(b.B) + ", " + std::to_string(b.T) +
                                             "] (expected [batch >= 1, seq >= 1])");
  if (b.T > c.max_seq_len)
    throw Error(ZC_ERR_INVALID_ARGUMENT,
                "batch: seq " + std::to_string(b.T) + " exceeds model.max_seq_len " + std::to_string(c.max_seq_len));
  if (!c.cross_document_attention && !b.doc_ids)
    throw Error(ZC_ERR_INVALID_ARGUMENT,
                "batch.doc_ids: missing, but data.cross_document_attention is false (document masking needs them)");
  const int64_t N = int64_t{b.B} * b.T;
  for (int64_t n = 0; n < N; ++n) {
    if (b.ids[n] < 0 || b.ids[n] >= c.vocab_size)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "batch.input_ids[" + std::to_string(n / b.T) + "][" +
                                               std::to_string(n % b.T) + "]: token id " + std::to_string(b.ids[n]) +
                                               " out of range [0, " + std::to_string(c.vocab_size) + ")");
    if (b.targets && (b.targets[n] < -1 || b.targets[n] >= c.vocab_size))
      throw Error(ZC_ERR_INVALID_ARGUMENT, "batch.targets[" + std::to_string(n / b.T) + "][" + std::to_string(n % b.T) +
                                               "]: " + std::to_string(b.targets[n]) + " (expected -1 or an id in [0, " +
                                               std::to_string(c.vocab_size) + "))");
  }
}

template <class T>
void Model<T>::forward_backward(const BatchView& b, double loss_normalizer, double loss_scale, bool sampled,
                                uint64_t sample_seed, StepMetrics& m, const GradsReady& ready) {
  // The checks, and the workspace (allocated and first touched on the first
  // call, or when the shape grows).
  auto setup = tracer_.span(tracer_.level(), "model", "setup");
  check_batch(b);
  if (!b.targets) throw Error(ZC_ERR_INVALID_ARGUMENT, "batch.targets: missing");
  const Config& c = cfg_;
  Workspace& ws = ensure_workspace(b.B, b.T);
  const int64_t N = int64_t{b.B} * b.T, d = c.d_model, V = c.vocab_size;
  m.loss = m.ce_loss = m.aux_loss = m.z_loss = m.moe_dropped_fraction = m.masked_head_fraction = 0;
  m.tokens = 0;
  m.moe_load.assign(static_cast<size_t>(std::max(c.moe_experts, 0)), 0.0);
  for (int64_t n = 0; n < N; ++n) m.tokens += b.targets[n] >= 0 ? 1 : 0;
  const double nstep = loss_normalizer > 0 ? loss_normalizer : static_cast<double>(std::max<int64_t>(m.tokens, 1));
  const double grad_scale = loss_scale / nstep;
  setup.end();

  forward(ws, b, c.capacity_factor, &m);

  // LM head + softmax cross-entropy, fused and chunked over rows: logits of a
  // chunk become their own gradient in place, then feed both backward GEMMs.
  const T* W = head_weight();
  T* GW = head_grad();
  const T* hf = c.residual == Residual::kDeepNorm ? ws.X(c.n_layers) : ws.hf;
  std::memcpy(ws.labels, b.targets, sizeof(int32_t) * size_t(N));
  const int64_t chunk = ws.head_chunk_rows(N);
  // One span: the head's forward GEMM, the loss and both backward GEMMs run
  // chunk by chunk, so they have no separate times (README "Profiling").
  const zc_trace_level lv = tracer_.level();
  auto head_span =
      phase_span(tracer_, lv, "forward_backward", "lm_head_loss", -1, N, 6.0 * double(N) * double(V) * double(d));
  if (sampled || blas_threads_inside_our_loops()) {
    // The unfused path: for sampled labels (drawn from each full softmax
    // row), and with OpenBLAS's pthread build on several threads, whose
    // sgemm would start its own threads inside our parallel loops.
    for (int64_t r0 = 0; r0 < N; r0 += chunk) {
      const int rows = static_cast<int>(std::min<int64_t>(chunk, N - r0));
      if (skip_unlabelled_chunk(rows, static_cast<int>(d), ws.labels + r0, ws.nll + r0, ws.gx + r0 * d)) continue;
      head_fwd<T>(rows, V, static_cast<int>(d), hf + r0 * d, W, ws.logits, cfg_.blocking.head_slice);
      zcode::kernels::LabelSampling smp{sampled, sample_seed, r0};
      zcode::kernels::softmax_xent(ws.logits, rows, V, V, ws.labels + r0, ws.nll + r0, static_cast<T>(grad_scale), true,
                                   smp);
      head_bwd<T>(rows, V, static_cast<int>(d), ws.logits, hf + r0 * d, W, ws.gx + r0 * d, GW, c.blocking.head_slice);
    }
  } else {
    head_xent_fused<T>(N, chunk, V, static_cast<int>(d), hf, W, ws.labels, static_cast<T>(grad_scale), ws.logits,
                       ws.head_scratch, ws.nll, ws.gx, GW, c.blocking);
  }
  double ce = 0;
  for (int64_t n = 0; n < N; ++n) ce += ws.nll[n];
  m.ce_loss = ce / nstep;
  head_span.end();

  if (lv & ZC_TRACE_MEMORY)
    tracer_.counter(lv, "glm52_memory", [&](zcode::sdk::json::Writer& w) {
      const double mib = 1024.0 * 1024.0;
      w.key("parameters_mib").fixed(double(n_elems_) * sizeof(T) / mib, 3);
      w.key("gradients_mib").fixed(double(n_elems_) * sizeof(T) / mib, 3);
      w.key("workspace_mib").fixed(double(workspace_bytes()) / mib, 3);
    });
  ready_ = ready;
  if (!c.tie_embeddings) ready_(1, 1);  // lm_head.weight: the head wrote all of it
  backward(ws, b, grad_scale);
  ready_ = GradsReady{};

  int n_moe = 0;
  for (int l = 0; l < c.n_layers; ++l) n_moe += c.is_moe(l) ? 1 : 0;
  m.aux_loss = c.moe_aux_loss_coef * m.aux_loss / nstep;
  m.z_loss = c.moe_z_loss_coef * m.z_loss / nstep;
  m.loss = m.ce_loss + m.aux_loss + m.z_loss;
  m.moe_dropped_fraction = n_moe ? m.moe_dropped_fraction / (double(n_moe) * N * c.moe_top_k) : 0.0;
  for (double& v : m.moe_load) v = n_moe ? v / n_moe : 0.0;
  m.masked_head_fraction /= static_cast<double>(N * c.n_heads * c.n_layers);
  acts_B_ = b.B;
  acts_T_ = b.T;
}

template <class T>
void Model<T>::activations(std::vector<Activation>& out, int& B, int& Tn) const {
  out.clear();
  B = acts_B_;
  Tn = acts_T_;
  if (!ws_ || B == 0) return;
  const Config& c = cfg_;
  Workspace& ws = *ws_;
  const int64_t d = c.d_model;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const typename Workspace::Layer& a = ws.L(l);
    out.push_back({p + "input", ws.X(l), d});
    out.push_back({p + "attn.qkv", a.qkv, c.qkv_dim()});  // after RoPE
    out.push_back({p + "attn.out", a.o, int64_t{c.n_heads} * c.head_dim});
    out.push_back({p + "attn.residual", a.r1, d});
    out.push_back({p + "ffn.input", a.xf, d});
    if (c.is_moe(l)) out.push_back({p + "moe.router_logits", a.z, c.moe_experts});
  }
  out.push_back({"final_hidden", c.residual == Residual::kDeepNorm ? ws.X(c.n_layers) : ws.hf, d});
}

template <class T>
void Model<T>::forward_logprobs(const BatchView& b, float* out, int32_t* argmax) {
  check_batch(b);
  if (!b.targets) throw Error(ZC_ERR_INVALID_ARGUMENT, "batch.targets: missing");
  const Config& c = cfg_;
  Workspace& ws = ensure_workspace(b.B, b.T);
  const int64_t N = int64_t{b.B} * b.T, d = c.d_model, V = c.vocab_size;
  // Capacity drops depend on which tokens share the forward call, so by
  // default evaluation is dropless: a token's log-probability then does not
  // depend on evaluation.batch_size (eval_capacity_factor, as DeepSpeed-MoE).
  forward(ws, b, c.eval_capacity_factor, nullptr);
  const T* hf = c.residual == Residual::kDeepNorm ? ws.X(c.n_layers) : ws.hf;
  std::memcpy(ws.labels, b.targets, sizeof(int32_t) * size_t(N));
  const int64_t chunk = ws.head_chunk_rows(N);
  if (!blas_threads_inside_our_loops() && V < (int64_t{1} << 24)) {
    // Fused over vocab slices like the training head (lm_head.h): the same
    // nll bits as forward_backward's for the same weights.
    head_logprob_fused<T>(N, chunk, V, static_cast<int>(d), hf, head_weight(), ws.labels, ws.head_scratch, ws.nll,
                          argmax, c.blocking);
    for (int64_t n = 0; n < N; ++n) out[n] = b.targets[n] >= 0 ? static_cast<float>(-ws.nll[n]) : 0.0f;
    return;
  }
  // The unfused path: with OpenBLAS's pthread build on several threads (see
  // forward_backward).
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int rows = static_cast<int>(std::min<int64_t>(chunk, N - r0));
    head_fwd<T>(rows, V, static_cast<int>(d), hf + r0 * d, head_weight(), ws.logits, cfg_.blocking.head_slice);
    if (argmax) {  // before softmax_xent, which overwrites the logits; ties: lowest id
      for (int r = 0; r < rows; ++r) {
        const T* row = ws.logits + int64_t{r} * V;
        int64_t best = 0;
        for (int64_t v = 1; v < V; ++v)
          if (row[v] > row[best]) best = v;
        argmax[r0 + r] = static_cast<int32_t>(best);
      }
    }
    zcode::kernels::softmax_xent(ws.logits, rows, V, V, ws.labels + r0, ws.nll + r0, T(0), false);
  }
  for (int64_t n = 0; n < N; ++n) out[n] = b.targets[n] >= 0 ? static_cast<float>(-ws.nll[n]) : 0.0f;
}

template <class T>
void Model<T>::forward_logits(const int32_t* tokens, int n, float* out) {
  BatchView b;
  b.ids = tokens;
  b.B = 1;
  b.T = n;
  std::vector<int32_t> doc;
  if (!cfg_.cross_document_attention) {  // one sequence is one document
    doc.assign(static_cast<size_t>(std::max(n, 0)), 0);
    b.doc_ids = doc.data();
  }
  check_batch(b);
  Workspace& ws = ensure_workspace(1, n);
  const int64_t d = cfg_.d_model, V = cfg_.vocab_size;
  forward(ws, b, 0.0, nullptr);  // dropless
  const T* hf = cfg_.residual == Residual::kDeepNorm ? ws.X(cfg_.n_layers) : ws.hf;
  const int64_t chunk = ws.head_chunk_rows(n);
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int rows = static_cast<int>(std::min<int64_t>(chunk, n - r0));
    head_fwd<T>(rows, V, static_cast<int>(d), hf + r0 * d, head_weight(), ws.logits, cfg_.blocking.head_slice);
    for (int64_t i = 0; i < rows * V; ++i) out[r0 * V + i] = static_cast<float>(ws.logits[i]);
  }
}

// ---------------------------------------------------------------------------
// KV-cache decoding
// ---------------------------------------------------------------------------

template <class T>
void Model<T>::pack_weights(DecodeSession& s) const {
  if constexpr (std::is_same_v<T, float>) {
    const Config& c = cfg_;
    const int d = static_cast<int>(c.d_model);
    // The head and every linear map of a decode step, as fwd_linear meets it: (offset, N, K).
    auto& idx = s.packed_at;
    idx.clear();
    int64_t total = 0;
    auto add = [&](int64_t off, int64_t N, int64_t K) {
      idx.push_back({off, static_cast<int>(N), static_cast<int>(K), total});
      total += zcode::kernels::packed_w_elems(static_cast<int>(N), static_cast<int>(K));
    };
    add(head_weight() - params_.get(), c.vocab_size, d);
    const int64_t F = c.moe_ffn_hidden;
    for (int l = 0; l < c.n_layers; ++l) {
      const LayerOffsets& lo = layers_[static_cast<size_t>(l)];
      add(lo.wqkv, c.qkv_dim(), d);
      add(lo.wo, d, int64_t{c.n_heads} * c.head_dim);
      if (!c.is_moe(l)) {
        add(lo.w13, 2 * int64_t{c.ffn_hidden}, d);
        add(lo.w2, d, c.ffn_hidden);
        continue;
      }
      add(lo.router, c.moe_experts, d);
      for (size_t e = 0; e < lo.ew13.size(); ++e) {
        add(lo.ew13[e], 2 * F, d);
        add(lo.ew2[e], d, F);
      }
      for (size_t e = 0; e < lo.sw13.size(); ++e) {
        add(lo.sw13[e], 2 * F, d);
        add(lo.sw2[e], d, F);
      }
    }
    std::sort(idx.begin(), idx.end(), [](const auto& a, const auto& b) { return a.off < b.off; });
    s.packed.resize(static_cast<size_t>(total));
    for (const auto& p : idx) zcode::kernels::pack_w_panels(p.N, p.K, params_.get() + p.off, s.packed.data() + p.at);
  }
}

template <class T>
typename Model<T>::DecodeSession* Model<T>::decode_begin(int batch, int max_len) {
  const Config& c = cfg_;
  if (ep_.size > 1)
    throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_begin: this model holds " + std::to_string(local_experts()) + " of " +
                                             std::to_string(c.moe_experts) +
                                             " experts (expert parallel); decode from the checkpoint in one process");
  if (batch < 1 || max_len < 1 || max_len > c.max_seq_len)
    throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_begin: batch " + std::to_string(batch) + ", max_len " +
                                             std::to_string(max_len) + " (expected >= 1 and max_len <= max_seq_len " +
                                             std::to_string(c.max_seq_len) + ")");
  auto s = std::make_unique<DecodeSession>();
  s->batch = batch;
  s->max_len = max_len;
  const size_t per = size_t(c.n_layers) * batch * max_len * c.n_kv_heads * c.head_dim;
  s->kc.assign(per, T(0));
  s->vc.assign(per, T(0));
  s->pos_of.assign(size_t(batch), 0);
  s->row_of.resize(size_t(batch));
  for (int i = 0; i < batch; ++i) s->row_of[size_t(i)] = i;
  const size_t h2 = std::max<size_t>(size_t(c.rotary_dims() / 2), 1);
  s->rope_cos.assign(size_t(batch) * h2, T(0));
  s->rope_sin.assign(size_t(batch) * h2, T(0));
  s->threads = omp_get_max_threads();
  s->prow.assign(size_t(s->threads) * max_len, T(0));
  s->ws = std::make_unique<Workspace>();
  s->ws->plan(c, batch, 1, false, s->threads, nullptr);
  s->ws->mem = static_cast<std::byte*>(zcode::kernels::alloc_large(s->ws->bytes));
  if (!s->ws->mem) throw Error(ZC_ERR_OUT_OF_MEMORY, "decode_begin: out of memory");
  s->ws->plan(c, batch, 1, false, s->threads, s->ws->mem);
  pack_weights(*s);
  return s.release();
}

// The forward of one decode call, shared by decode_step and decode_slots_step:
// entry i appends tokens[i] to cache row slot_of[i] at position s->pos_of[i]
// (validated by the caller). Every entry's key and value are written before
// any attends, so a slot's later entries see its earlier ones. Every linear
// map and the head run on the session's packed copies (fwd_linear): a row's
// bits do not depend on the others (slot decoding's batch invariance).
template <class T>
void Model<T>::decode_rows(DecodeSession* s, int n, const int32_t* slot_of, const int32_t* tokens,
                           const uint8_t* want_logits, float* out_logits) {
  const Config& c = cfg_;
  if (omp_get_max_threads() > s->threads) {
    s->threads = omp_get_max_threads();
    s->prow.assign(size_t(s->threads) * s->max_len, T(0));
  }
  Workspace& ws = *s->ws;
  Ctx<T> k{c, params_.get(), grads_.get(), ws, n, 1, n, nullptr, 0.0, 0.0, s};  // dropless
  const int64_t N = n, d = c.d_model, H = c.n_heads, Hkv = c.n_kv_heads, hd = c.head_dim, qd = c.qkv_dim();
  const int64_t kvw = Hkv * hd;
  const int h2 = c.rotary_dims() / 2;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  for (int64_t i = 0; i < N; ++i) ws.pos[i] = static_cast<int32_t>(i);  // entry i uses table row i
  {
    T* x0 = ws.X(0);
    const T* E = params_.get() + off_embed_;
    for (int64_t i = 0; i < N; ++i) std::memcpy(x0 + i * d, E + int64_t{tokens[i]} * d, sizeof(T) * size_t(d));
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerOffsets& lo = layers_[l];
    typename Workspace::Layer& a = ws.L(l);
    T* x = ws.X(l);
    T* xn = ws.X(l + 1);
    qkv_fwd(k, lo, a, x);
    if (h2 > 0) {
      // The table row of entry i is rope_table's row for position pos_of[i]:
      // the same expression, so the same bits as decode_step's table.
      for (int i = 0; i < h2; ++i) ws.inv_freq[i] = std::exp(params_[lo.rope + i]);
      zcode::kernels::rope_table_at(ws.inv_freq, static_cast<int>(N), s->pos_of.data(), c.rotary_dims(),
                                    s->rope_cos.data(), s->rope_sin.data());
      zcode::kernels::rope_fwd(a.qkv, N, qd, static_cast<int>(H + Hkv), static_cast<int>(hd), c.rotary_dims(),
                               s->rope_cos.data(), s->rope_sin.data(), ws.pos);
    }
    T* kc = s->kc.data() + size_t(l) * s->batch * s->max_len * kvw;
    T* vc = s->vc.data() + size_t(l) * s->batch * s->max_len * kvw;
    for (int64_t i = 0; i < N; ++i) {  // every entry's key and value first: later entries of a slot attend to them
      const int64_t at = int64_t{slot_of[i]} * s->max_len + s->pos_of[size_t(i)];
      std::memcpy(kc + at * kvw, a.qkv + i * qd + H * hd, sizeof(T) * size_t(kvw));
      std::memcpy(vc + at * kvw, a.qkv + i * qd + (H + Hkv) * hd, sizeof(T) * size_t(kvw));
    }
    const int group = static_cast<int>(H / Hkv);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < N; ++i)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / group;
        const int64_t base = int64_t{slot_of[i]} * s->max_len * kvw + g * hd;
        T* prow = s->prow.data() + size_t(omp_get_thread_num()) * s->max_len;
        attend_row(a.qkv + i * qd + h * hd, kc + base, vc + base, kvw, s->pos_of[size_t(i)] + 1,
                   static_cast<const int32_t*>(nullptr), 0, static_cast<int>(hd), scale, c.dynamic_head_mask,
                   static_cast<T>(c.entropy_threshold), prow, a.o + i * H * hd + h * hd);
      }
    post_attention_fwd(k, lo, a, x, xn, c.is_moe(l));
  }
  const T* hf = ws.X(c.n_layers);
  if (c.residual != Residual::kDeepNorm) {
    norm_fwd(k, off_norm_f_, ws.X(c.n_layers), ws.L(0).r1, ws.L(0).rstd_a);
    hf = ws.L(0).r1;
  }
  const int64_t V = c.vocab_size;
  int64_t rows = N;
  if (want_logits) {  // only the rows asked for, gathered
    rows = 0;
    for (int64_t i = 0; i < N; ++i)
      if (want_logits[i]) std::memcpy(s->hrows.data() + rows++ * d, hf + i * d, sizeof(T) * size_t(d));
    hf = s->hrows.data();
  }
  if (rows == 0) return;
  if (!out_logits) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode: NULL out_logits with rows wanted");
  if constexpr (std::is_same_v<T, float>) {
    // The head is most of a step's FLOPs (bench/decode): its packed panels, straight
    // into the caller's logits (fwd_linear's path, with the caller's row stride V).
    const int64_t head = head_weight() - params_.get();
    zcode::kernels::linear_fwd_packed(static_cast<int>(rows), static_cast<int>(V), static_cast<int>(d), hf,
                                      session_packed<T>(s, head, static_cast<int>(V), static_cast<int>(d)), out_logits,
                                      static_cast<long>(V));
    return;
  }
  const int64_t chunk = ws.head_chunk_rows(rows);
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int rr = static_cast<int>(std::min<int64_t>(chunk, rows - r0));
    head_fwd<T>(rr, V, static_cast<int>(d), hf + r0 * d, head_weight(), ws.logits, cfg_.blocking.head_slice);
    for (int64_t i = 0; i < rr * V; ++i) out_logits[r0 * V + i] = static_cast<float>(ws.logits[i]);
  }
}

template <class T>
void Model<T>::decode_step(DecodeSession* s, const int32_t* tokens, float* out_logits) {
  const Config& c = cfg_;
  if (!s) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_step: no session");
  if (s->slots) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_step: not for a slot session (use decode_slots_step)");
  if (s->pos >= s->max_len)
    throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_step: session is full (max_len " + std::to_string(s->max_len) + ")");
  for (int i = 0; i < s->batch; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_step: tokens[" + std::to_string(i) +
                                               "] = " + std::to_string(tokens[i]) + " out of range [0, " +
                                               std::to_string(c.vocab_size) + ")");
  // Every sequence at the same position, sequence i in cache row i.
  std::fill(s->pos_of.begin(), s->pos_of.begin() + s->batch, s->pos);
  decode_rows(s, s->batch, s->row_of.data(), tokens, nullptr, out_logits);
  ++s->pos;
}

template <class T>
void Model<T>::decode_extend(DecodeSession* s, int n, const int32_t* tokens, float* out_logits) {
  const Config& c = cfg_;
  if (!s) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_extend: no session");
  if (s->slots) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_extend: not for a slot session (use decode_slots_step)");
  if (n < 1 || !tokens || !out_logits)
    throw Error(ZC_ERR_INVALID_ARGUMENT,
                "decode_extend: n = " + std::to_string(n) + " (expected >= 1) or NULL tokens / out_logits");
  if (int64_t{s->pos} + n > s->max_len)
    throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_extend: " + std::to_string(n) + " tokens after " +
                                             std::to_string(s->pos) + " pass the session's max_len " +
                                             std::to_string(s->max_len));
  const int B = s->batch;
  for (int64_t i = 0; i < int64_t{B} * n; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_extend: tokens[" + std::to_string(i / n) + "][" +
                                               std::to_string(i % n) + "] = " + std::to_string(tokens[i]) +
                                               " out of range [0, " + std::to_string(c.vocab_size) + ")");
  // Positions per chunk: every sequence's, as many as fit kExtendRows rows.
  const int per = std::max(1, std::min(n, kExtendRows / B));
  const int rows = per * B;
  if (rows > s->extend_rows) {  // grown once per session, before any position is written
    if (rows > s->batch) {      // (decode_begin sized these for `batch` rows)
      const size_t h2 = std::max<size_t>(size_t(c.rotary_dims() / 2), 1);
      auto ws = std::make_unique<Workspace>();
      ws->plan(c, rows, 1, false, s->threads, nullptr);
      ws->mem = static_cast<std::byte*>(zcode::kernels::alloc_large(ws->bytes));
      if (!ws->mem) throw Error(ZC_ERR_OUT_OF_MEMORY, "decode_extend: out of memory");
      ws->plan(c, rows, 1, false, s->threads, ws->mem);
      s->ws = std::move(ws);
      s->pos_of.assign(size_t(rows), 0);
      s->rope_cos.assign(size_t(rows) * h2, T(0));
      s->rope_sin.assign(size_t(rows) * h2, T(0));
    }
    s->hrows.assign(size_t(rows) * size_t(c.d_model), T(0));
    s->ext_slot.assign(size_t(rows), 0);
    s->ext_tok.assign(size_t(rows), 0);
    s->ext_want.assign(size_t(rows), 0);
    s->extend_rows = rows;
  }
  for (int t0 = 0; t0 < n; t0 += per) {
    const int m = std::min(per, n - t0);
    // Position-major entries, so that the last position's rows (the logits
    // wanted) come out in sequence order.
    for (int t = 0; t < m; ++t)
      for (int i = 0; i < B; ++i) {
        const size_t e = size_t(t) * B + i;
        s->ext_slot[e] = i;
        s->ext_tok[e] = tokens[size_t(i) * n + t0 + t];
        s->pos_of[e] = s->pos + t;
        s->ext_want[e] = t0 + t == n - 1;
      }
    decode_rows(s, m * B, s->ext_slot.data(), s->ext_tok.data(), s->ext_want.data(), out_logits);
    s->pos += m;
  }
}

template <class T>
void Model<T>::decode_reorder(DecodeSession* s, const int32_t* src) {
  if (!s) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_reorder: no session");
  if (s->slots) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_reorder: not for a slot session (decode_slots_begin)");
  for (int i = 0; i < s->batch; ++i)
    if (src[i] < 0 || src[i] >= s->batch)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_reorder: src[" + std::to_string(i) +
                                               "] = " + std::to_string(src[i]) + " (expected 0.." +
                                               std::to_string(s->batch - 1) + ")");
  const size_t seq = size_t(s->max_len) * cfg_.n_kv_heads * cfg_.head_dim;
  const size_t layer = seq * s->batch;
  s->tmp.resize(layer);
  for (std::vector<T>* cache : {&s->kc, &s->vc})
    for (int l = 0; l < cfg_.n_layers; ++l) {
      T* base = cache->data() + l * layer;
      for (int i = 0; i < s->batch; ++i) std::memcpy(s->tmp.data() + i * seq, base + src[i] * seq, sizeof(T) * seq);
      std::memcpy(base, s->tmp.data(), sizeof(T) * layer);
    }
}

template <class T>
typename Model<T>::DecodeSession* Model<T>::decode_slots_begin(int slots, int max_len, int max_tokens) {
  const Config& c = cfg_;
  if (ep_.size > 1)
    throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_slots_begin: this model holds " + std::to_string(local_experts()) +
                                             " of " + std::to_string(c.moe_experts) +
                                             " experts (expert parallel); decode from the checkpoint in one process");
  if (slots < 1 || max_len < 1 || max_len > c.max_seq_len || max_tokens < 1)
    throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_slots_begin: slots " + std::to_string(slots) + ", max_len " +
                                             std::to_string(max_len) + ", max_tokens " + std::to_string(max_tokens) +
                                             " (expected >= 1, and max_len <= max_seq_len " +
                                             std::to_string(c.max_seq_len) + ")");
  auto s = std::make_unique<DecodeSession>();
  s->slots = true;
  s->batch = slots;
  s->max_len = max_len;
  s->max_tokens = max_tokens;
  const size_t per = size_t(c.n_layers) * slots * max_len * c.n_kv_heads * c.head_dim;
  s->kc.assign(per, T(0));
  s->vc.assign(per, T(0));
  s->len.assign(size_t(slots), 0);
  s->pos_of.assign(size_t(max_tokens), 0);
  const size_t h2 = size_t(c.rotary_dims() / 2);
  s->rope_cos.assign(size_t(max_tokens) * std::max<size_t>(h2, 1), T(0));
  s->rope_sin.assign(size_t(max_tokens) * std::max<size_t>(h2, 1), T(0));
  s->hrows.assign(size_t(max_tokens) * size_t(c.d_model), T(0));
  s->threads = omp_get_max_threads();
  s->prow.assign(size_t(s->threads) * max_len, T(0));
  s->ws = std::make_unique<Workspace>();
  s->ws->plan(c, max_tokens, 1, false, s->threads, nullptr);
  s->ws->mem = static_cast<std::byte*>(zcode::kernels::alloc_large(s->ws->bytes));
  if (!s->ws->mem) throw Error(ZC_ERR_OUT_OF_MEMORY, "decode_slots_begin: out of memory");
  s->ws->plan(c, max_tokens, 1, false, s->threads, s->ws->mem);
  pack_weights(*s);
  return s.release();
}

template <class T>
void Model<T>::decode_slots_step(DecodeSession* s, int n, const int32_t* slot_of, const int32_t* tokens,
                                 const uint8_t* want_logits, float* out_logits) {
  const Config& c = cfg_;
  if (!s || !s->slots) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_slots_step: not a slot session");
  if (n < 1 || n > s->max_tokens)
    throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_slots_step: n = " + std::to_string(n) + " entries (expected 1.." +
                                             std::to_string(s->max_tokens) + ", the session's max_tokens)");
  if (!slot_of || !tokens) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_slots_step: NULL slot_of or tokens");
  // Validate everything before any slot advances: positions come from the
  // lengths as they stand, plus the entries of the same slot before this one.
  for (int i = 0; i < n; ++i) {
    const int32_t sl = slot_of[i];
    if (sl < 0 || sl >= s->batch)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_slots_step: slot_of[" + std::to_string(i) +
                                               "] = " + std::to_string(sl) + " (expected 0.." +
                                               std::to_string(s->batch - 1) + ")");
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_slots_step: tokens[" + std::to_string(i) +
                                               "] = " + std::to_string(tokens[i]) + " out of range [0, " +
                                               std::to_string(c.vocab_size) + ")");
  }
  for (int i = 0; i < n; ++i) s->pos_of[size_t(i)] = s->len[size_t(slot_of[i])]++;
  for (int i = 0; i < n; ++i) {
    if (s->pos_of[size_t(i)] < s->max_len) continue;
    for (int j = 0; j < n; ++j) --s->len[size_t(slot_of[j])];  // undo: no slot has advanced
    throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_slots_step: slot " + std::to_string(slot_of[i]) +
                                             " is full (max_len " + std::to_string(s->max_len) + ")");
  }
  decode_rows(s, n, slot_of, tokens, want_logits, out_logits);
}

template <class T>
void Model<T>::decode_slot_reset(DecodeSession* s, int slot) {
  if (!s || !s->slots) throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_slot_reset: not a slot session");
  if (slot < 0 || slot >= s->batch)
    throw Error(ZC_ERR_INVALID_ARGUMENT, "decode_slot_reset: slot " + std::to_string(slot) + " (expected 0.." +
                                             std::to_string(s->batch - 1) + ")");
  s->len[size_t(slot)] = 0;  // the old keys stay until overwritten: attention never reads past the length
}

template <class T>
void Model<T>::decode_end(DecodeSession* s) {
  delete s;
}

template <class T>
Model<T>::~Model() = default;

template class Model<float>;
template class Model<double>;

}  // namespace glm52
