// optimizer_bench: parameters updated per second by each optimizer of the
// `optimizers` plugin (through its C table, as the engine calls it) on a
// GLM-5.2-like set of ~50M fp32 parameters, and a STREAM-like triad
// a[i] = b[i] + s·c[i] over arrays far larger than the caches, measured in
// the same run on the same OpenMP pool.
//
// AdamW moves 28 bytes per parameter (reads w, g, m, v; writes w, m, v), so
// its effective bandwidth is 28·params/s; the triad moves 12 bytes per
// element (STREAM's count). The last line is AdamW's bandwidth / the triad's.
//
// Usage: optimizer_bench [--threads N] [--steps N]   (defaults 2 and 8 rounds)
#include <zcode/abi.h>
#include <zcode/core/stage_factory.h>
#include <zcode/sdk/plugin.h>

#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

struct zc_status {
  std::string message;
};

namespace {

zc_host_services g_services{};

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  uint32_t flags;
  std::vector<float> w, g;
  DLTensor wt{}, gt{};
};

class BenchModel : public zcode::sdk::Model {
 public:
  explicit BenchModel(const zcode::sdk::CreateContext&) {}
  BenchModel() {
    auto add = [&](std::string n, std::vector<int64_t> s, uint32_t f) {
      ps_.push_back(Param{std::move(n), std::move(s), f, {}, {}, {}, {}});
    };
    const int64_t d = 512, F = 1024, E = 8, V = 44032;
    add("embed.weight", {V, d}, ZC_PARAM_EMBEDDING);
    for (int l = 0; l < 2; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      add(p + "attn_norm.weight", {d}, ZC_PARAM_NO_DECAY);
      for (const char* w : {"wq", "wk", "wv", "wo"}) add(p + "attn." + w, {d, d}, 0);
      add(p + "ffn_norm.weight", {d}, ZC_PARAM_NO_DECAY);
      add(p + "moe.router", {E, d}, ZC_PARAM_ROUTER);
      for (int e = 0; e < E; ++e) {
        const std::string q = p + "moe.experts." + std::to_string(e) + ".";
        add(q + "w1", {F, d}, ZC_PARAM_EXPERT);
        add(q + "w3", {F, d}, ZC_PARAM_EXPERT);
        add(q + "w2", {d, F}, ZC_PARAM_EXPERT);
      }
    }
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    for (Param& p : ps_) {
      int64_t n = 1;
      for (int64_t s : p.shape) n *= s;
      total_ += static_cast<uint64_t>(n);
      p.w.resize(static_cast<size_t>(n));
      p.g.resize(static_cast<size_t>(n));
      for (auto& x : p.w) x = nd(rng);
      for (auto& x : p.g) x = nd(rng);
      for (auto [t, v] : {std::pair{&p.wt, &p.w}, std::pair{&p.gt, &p.g}}) {
        t->data = v->data();
        t->device = DLDevice{kDLCPU, 0};
        t->ndim = static_cast<int32_t>(p.shape.size());
        t->dtype = DLDataType{kDLFloat, 32, 1};
        t->shape = p.shape.data();
      }
      list_.push_back(zc_param{p.name.c_str(), &p.wt, &p.gt, p.flags, 0});
    }
  }
  uint64_t total() const { return total_; }
  void num_params(uint64_t& t, uint64_t& a) const override { t = a = total_; }
  zc_param_list params() override { return zc_param_list{list_.data(), list_.size()}; }
  void zero_grad() override {}
  void forward_backward(const zc_batch&, const zc_fb_options&, const zcode::sdk::MetricsSink&) override {}
  void forward_logprobs(const zc_batch&, DLTensor&) override {}
  const std::string& info_json() const override { return info_; }
  void* decode_begin(int32_t, int32_t) override { return nullptr; }
  void decode_step(void*, const int32_t*, float*) override {}
  void decode_reorder(void*, const int32_t*) override {}
  void decode_end(void*) override {}
  void forward_logits(const int32_t*, int32_t, float*) override {}

 private:
  std::vector<Param> ps_;
  std::vector<zc_param> list_;
  uint64_t total_ = 0;
  std::string info_ = "{}";
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

/// STREAM-like triad over arrays far larger than the caches.
class Triad {
 public:
  explicit Triad(int threads) : threads_(threads), a_(kN), b_(kN), c_(kN) {
    float* a = a_.data();
    float* b = b_.data();
    float* c = c_.data();
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t i = 0; i < kN; ++i) {  // first touch from the threads that will run the triad
      a[i] = 0.0f;
      b[i] = 1.0f;
      c[i] = 2.0f;
    }
  }
  /// Seconds for one pass.
  double run() {
    float* __restrict a = a_.data();
    const float* __restrict b = b_.data();
    const float* __restrict c = c_.data();
    const float s = 3.0f;
    const double t0 = now_s();
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t i = 0; i < kN; ++i) a[i] = b[i] + s * c[i];
    const double t = now_s() - t0;
    if (a[kN / 2] != 7.0f) std::fprintf(stderr, "triad: wrong result\n");
    return t;
  }
  static constexpr int64_t kN = int64_t{1} << 26;  // 64M floats = 256 MiB per array, 768 MiB in all (> 2x the L3)
  static constexpr double kBytes = 12.0 * kN;      // STREAM's count: read b, c; write a

 private:
  int threads_;
  std::vector<float> a_, b_, c_;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, steps = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: optimizer_bench [--threads N] [--steps N]\n");
      return 2;
    }
  }
  g_services.struct_size = sizeof(g_services);
  g_services.abi_major = ZC_ABI_VERSION_MAJOR;
  g_services.abi_minor = ZC_ABI_VERSION_MINOR;
  g_services.num_threads = threads;
  g_services.device = DLDevice{kDLCPU, 0};
  g_services.log = [](void*, zc_log_level, const char* c, const char* m) { std::fprintf(stderr, "%s: %s\n", c, m); };
  g_services.status_create = [](void*, zc_status_code, const char* m) { return new zc_status{m}; };
  g_services.status_code = [](void*, const zc_status*) -> zc_status_code { return ZC_ERR_INTERNAL; };
  g_services.status_message = [](void*, const zc_status* s) { return s->message.c_str(); };
  g_services.status_release = [](void*, zc_status* s) { delete s; };
  zcode::sdk::detail::g_host = &g_services;

  void* h = dlopen(ZC_OPTIMIZERS_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  auto negotiate = reinterpret_cast<zc_negotiate_fn>(dlsym(h, ZC_PLUGIN_ENTRY_SYMBOL));
  const zc_manifest* man = nullptr;
  uint32_t ma = 0, mi = 0;
  if (!negotiate || negotiate(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, &g_services, &ma, &mi, &man) != ZC_OK) {
    std::fprintf(stderr, "negotiation failed\n");
    return 1;
  }

  BenchModel model;
  const double n = static_cast<double>(model.total());
  std::printf("optimizer_bench: %.1fM fp32 parameters in %zu tensors, %d threads, best of %d rounds\n", n / 1e6,
              model.params().count, threads, steps);

  // Every optimizer instance is created first; then each round runs one
  // triad pass and one step of every optimizer, and each figure is the best
  // over the rounds. Interleaving puts the triad and the optimizers under the
  // same load (the machine is shared), and best-of filters preemptions.
  struct Inst {
    const zc_component* c;
    const zc_optimizer_table* t;
    void* inst = nullptr;
    double best = 1e30;
  };
  std::vector<Inst> opts;
  for (uint32_t i = 0; i < man->num_components; ++i) {
    const zc_component& c = man->components[i];
    Inst in{&c, static_cast<const zc_optimizer_table*>(c.table)};
    const zc_create_args a =
        zcode::stage_args(&g_services, std::strcmp(c.name, "sgd") == 0 ? R"({"momentum":0.9})" : "{}", "{}", "",
                          {.model = zc_stage_ref{&zcode::sdk::detail::ModelThunks<BenchModel>::table, &model}});
    if (zc_status* s = in.t->create(&a, &in.inst)) {
      std::fprintf(stderr, "%s: %s\n", c.name, s->message.c_str());
      return 1;
    }
    if (std::strcmp(c.name, "sophia") == 0) in.t->update_hessian(in.inst, 1024);
    opts.push_back(in);
  }
  Triad triad(threads);
  double triad_best = 1e30;
  for (int r = 0; r <= steps; ++r) {  // round 0 touches the state pages: not timed
    const double tt = triad.run();
    if (r > 0) triad_best = std::min(triad_best, tt);
    for (Inst& in : opts) {
      const double t0 = now_s();
      if (zc_status* st = in.t->step(in.inst, 1e-6, static_cast<uint64_t>(r + 1))) {
        std::fprintf(stderr, "%s: %s\n", in.c->name, st->message.c_str());
        return 1;
      }
      if (r > 0) in.best = std::min(in.best, now_s() - t0);
    }
  }
  double adamw_bw = 0;
  for (Inst& in : opts) {
    std::printf("%-12s step_time_ms %8.2f   params_per_s %.3e\n", in.c->name, in.best * 1e3, n / in.best);
    if (std::strcmp(in.c->name, "adamw") == 0) adamw_bw = 28.0 * n / in.best;
    in.t->destroy(in.inst);
  }
  const double triad_bw = Triad::kBytes / triad_best;
  std::printf("triad        bandwidth %.2f GB/s (a = b + s*c, 12 bytes/element, %.0f MiB arrays)\n", triad_bw / 1e9,
              Triad::kN * 4.0 / (1 << 20));
  std::printf("adamw        effective bandwidth %.2f GB/s (28 bytes/parameter)\n", adamw_bw / 1e9);
  std::printf("adamw_vs_triad_bandwidth_ratio %.3f (target >= 0.5)\n", adamw_bw / triad_bw);
  return 0;
}
