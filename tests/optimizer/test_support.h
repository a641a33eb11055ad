// test_support.h: a minimal host for the optimizer tests: fake host services,
// a fake model exposing named fp32 parameters through the SDK's model table,
// an in-memory state store, and a loader that dlopens a built plugin and
// creates a component through its C table. No dependency on the real model.
#pragma once

#include <zcode/abi.h>
#include <zcode/sdk/plugin.h>

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

// The ABI leaves zc_status opaque; the host (this test) defines it.
struct zc_status {
  zc_status_code code;
  std::string message;
};

namespace ztest {

inline std::vector<std::string>& log_lines() {
  static std::vector<std::string> lines;
  return lines;
}

inline const zc_host_services* host() {
  static zc_host_services h = [] {
    zc_host_services s{};
    s.struct_size = sizeof(zc_host_services);
    s.abi_major = ZC_ABI_VERSION_MAJOR;
    s.abi_minor = ZC_ABI_VERSION_MINOR;
    s.log = [](void*, zc_log_level, const char* c, const char* m) { log_lines().push_back(std::string(c) + ": " + m); };
    s.status_create = [](void*, zc_status_code code, const char* msg) { return new zc_status{code, msg}; };
    s.alloc = [](void*, size_t bytes, size_t align, DLDevice) -> void* {
      return std::aligned_alloc(align, (bytes + align - 1) / align * align);
    };
    s.free = [](void*, void* p, DLDevice) { std::free(p); };
    s.seed = 1234;
    s.derive_seed = [](void*, const char*) -> uint64_t { return 99; };
    s.device = DLDevice{kDLCPU, 0};
    s.num_threads = 2;
    s.stop_requested = [](void*) -> int32_t { return 0; };
    s.status_code = [](void*, const zc_status* st) { return st->code; };
    s.status_message = [](void*, const zc_status* st) { return st->message.c_str(); };
    s.status_release = [](void*, zc_status* st) { delete st; };
    return s;
  }();
  return &h;
}

/// Takes ownership of a status; "" when NULL, else its message.
inline std::string take(zc_status* s) {
  if (!s) return "";
  std::string m = s->message.empty() ? "(empty message)" : s->message;
  delete s;
  return m;
}

/// A model that only has parameters: name, shape, flags; values and grads
/// are plain vectors the test fills.
class FakeModel : public zcode::sdk::Model {
 public:
  struct Spec {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t flags = 0;
  };
  explicit FakeModel(std::vector<Spec> specs) : specs_(std::move(specs)) {
    for (const Spec& s : specs_) {
      int64_t n = 1;
      for (int64_t d : s.shape) n *= d;
      values_.emplace_back(static_cast<size_t>(n), 0.0f);
      grads_.emplace_back(static_cast<size_t>(n), 0.0f);
    }
    for (size_t i = 0; i < specs_.size(); ++i) {
      vt_.push_back(view(values_[i], i));
      gt_.push_back(view(grads_[i], i));
    }
    for (size_t i = 0; i < specs_.size(); ++i)
      params_.push_back(zc_param{specs_[i].name.c_str(), &vt_[i], &gt_[i], specs_[i].flags, 0});
  }
  explicit FakeModel(const zcode::sdk::CreateContext&) { throw std::logic_error("not created through the table"); }

  std::vector<float>& value(size_t i) { return values_[i]; }
  std::vector<float>& grad(size_t i) { return grads_[i]; }
  size_t count() const { return specs_.size(); }
  const Spec& spec(size_t i) const { return specs_[i]; }
  zc_stage_ref ref() { return zc_stage_ref{&zcode::sdk::detail::ModelThunks<FakeModel>::table, this}; }
  zc_param_list list() const { return zc_param_list{params_.data(), params_.size()}; }

  void num_params(uint64_t& t, uint64_t& a) const override {
    t = 0;
    for (const auto& v : values_) t += v.size();
    a = t;
  }
  zc_param_list params() override { return list(); }
  void zero_grad() override {
    for (auto& g : grads_) std::fill(g.begin(), g.end(), 0.0f);
  }
  void forward_backward(const zc_batch&, const zc_fb_options&, const zcode::sdk::MetricsSink&) override {
    unsupported();
  }
  const std::string& info_json() const override { return info_; }

 private:
  [[noreturn]] static void unsupported() { throw zcode::sdk::Error(ZC_ERR_UNSUPPORTED, "fake model"); }
  DLTensor view(std::vector<float>& v, size_t i) {
    DLTensor t{};
    t.data = v.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int32_t>(specs_[i].shape.size());
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = specs_[i].shape.data();
    return t;
  }
  std::vector<Spec> specs_;
  std::vector<std::vector<float>> values_, grads_;
  std::vector<DLTensor> vt_, gt_;
  std::vector<zc_param> params_;
  std::string info_ = "{}";
};

/// Fills with N(0, scale²) from a fixed seed.
inline void fill_normal(std::vector<float>& v, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  for (float& x : v) x = d(rng);
}

/// In-memory state: what save_state wrote, readable by load_state.
struct MemoryState {
  struct T {
    std::vector<int64_t> shape;
    std::vector<char> bytes;
    DLDataType dtype;
    DLTensor view;
  };
  std::map<std::string, T> tensors;
  std::vector<std::string> names;
  std::string json;

  zc_state_writer writer() {
    zc_state_writer w{};
    w.struct_size = sizeof(w);
    w.ctx = this;
    w.put_tensor = [](void* c, const char* name, const DLTensor* t) -> zc_status* {
      auto* self = static_cast<MemoryState*>(c);
      T& e = self->tensors[name];
      e.shape.assign(t->shape, t->shape + t->ndim);
      e.dtype = t->dtype;
      const size_t n = zcode::sdk::nbytes(*t);
      const char* src = static_cast<const char*>(t->data) + t->byte_offset;
      e.bytes.assign(src, src + n);
      self->names.push_back(name);
      return nullptr;
    };
    w.put_json = [](void* c, const char* j, size_t n) -> zc_status* {
      static_cast<MemoryState*>(c)->json.assign(j, n);
      return nullptr;
    };
    return w;
  }
  zc_state_reader reader() {
    for (auto& [k, e] : tensors) {
      e.view = DLTensor{};
      e.view.data = e.bytes.data();
      e.view.device = DLDevice{kDLCPU, 0};
      e.view.ndim = static_cast<int32_t>(e.shape.size());
      e.view.dtype = e.dtype;
      e.view.shape = e.shape.data();
    }
    zc_state_reader r{};
    r.struct_size = sizeof(r);
    r.ctx = this;
    r.get_tensor = [](void* c, const char* name) -> const DLTensor* {
      auto* self = static_cast<MemoryState*>(c);
      auto it = self->tensors.find(name);
      return it == self->tensors.end() ? nullptr : &it->second.view;
    };
    r.num_tensors = [](void* c) { return static_cast<MemoryState*>(c)->tensors.size(); };
    r.tensor_name = [](void* c, size_t i) {
      auto* self = static_cast<MemoryState*>(c);
      auto it = self->tensors.begin();
      std::advance(it, static_cast<long>(i));
      return it->first.c_str();
    };
    r.json = json.c_str();
    r.json_len = json.size();
    return r;
  }
};

/// A dlopened plugin and its manifest.
class Plugin {
 public:
  explicit Plugin(const char* path) {
    zcode::sdk::detail::g_host = host();  // the fake model's thunks report through it
    handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    auto fn = reinterpret_cast<zc_negotiate_fn>(dlsym(handle_, ZC_PLUGIN_ENTRY_SYMBOL));
    if (!fn) throw std::runtime_error("no negotiation symbol");
    uint32_t ma = 0, mi = 0;
    if (fn(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, host(), &ma, &mi, &manifest_) != ZC_OK)
      throw std::runtime_error("negotiation refused");
  }
  const zc_manifest& manifest() const { return *manifest_; }
  const zc_component* find(const std::string& name) const {
    for (uint32_t i = 0; i < manifest_->num_components; ++i)
      if (name == manifest_->components[i].name) return &manifest_->components[i];
    return nullptr;
  }

 private:
  void* handle_ = nullptr;  // never closed (ABI loading rule)
  const zc_manifest* manifest_ = nullptr;
};

inline Plugin& optimizers() {
  static Plugin p(ZC_OPTIMIZERS_PLUGIN);
  return p;
}

/// An optimizer instance created through the C table.
class Opt {
 public:
  /// `shard`: a ZeRO-1 part (zc_create_args.shard), NULL for all of it.
  Opt(const std::string& name, const std::string& options_json, FakeModel& model, const std::string& config_json = "{}",
      const zc_param_shard* shard = nullptr) {
    const zc_component* c = optimizers().find(name);
    if (!c) throw std::runtime_error("no component " + name);
    t_ = static_cast<const zc_optimizer_table*>(c->table);
    zc_create_args a{};
    a.struct_size = sizeof(a);
    a.host = host();
    a.options_json = options_json.c_str();
    a.config_json = config_json.c_str();
    a.run_dir = "";
    a.model = model.ref();
    a.split = "train";
    a.shard = shard;
    error_ = take(t_->create(&a, &inst_));
  }
  ~Opt() { t_->destroy(inst_); }
  Opt(const Opt&) = delete;
  Opt& operator=(const Opt&) = delete;
  /// "" when create succeeded, else the status message.
  const std::string& error() const { return error_; }
  std::string step(double lr, uint64_t s) { return take(t_->step(inst_, lr, s)); }
  std::string update_hessian(int64_t n) { return take(t_->update_hessian(inst_, n)); }
  uint64_t hessian_interval() {
    uint64_t k = 0;
    EXPECT_EQ(take(t_->hessian_interval(inst_, &k)), "");
    return k;
  }
  std::string save(MemoryState& m) {
    zc_state_writer w = m.writer();
    return take(t_->save_state(inst_, &w));
  }
  std::string load(MemoryState& m) {
    zc_state_reader r = m.reader();
    return take(t_->load_state(inst_, &r));
  }

 private:
  const zc_optimizer_table* t_ = nullptr;
  void* inst_ = nullptr;
  std::string error_;
};

}  // namespace ztest
