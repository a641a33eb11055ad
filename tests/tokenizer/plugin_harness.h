// plugin_harness.h: loads a built tokenizer plugin with dlopen (as the host
// does: RTLD_NOW | RTLD_LOCAL), with minimal host services, so the tests
// exercise the real ABI table rather than C++ internals.
#pragma once

#include <zcode/abi.h>
#include <zcode/sdk/buffers.h>
#include <zcode/sdk/hash.h>

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

struct zc_status {
  zc_status_code code;
  std::string message;
};

namespace zt {

inline zc_status* status_create(void*, zc_status_code code, const char* msg) {
  return new zc_status{code, msg ? msg : ""};
}
inline zc_status_code status_code(void*, const zc_status* s) { return s->code; }
inline const char* status_message(void*, const zc_status* s) { return s->message.c_str(); }
inline void status_release(void*, zc_status* s) { delete s; }
// Not abi.h's derive_seed: an unmixed FNV-1a from a non-standard basis
// (one digit short of the offset basis), XOR 42. Kept bit-identical so the
// seeds these tests run with do not change.
inline uint64_t derive_seed(void*, const char* name) { return zcode::sdk::fnv1a64(name, 1469598103934665603ull) ^ 42; }
inline void log_line(void*, zc_log_level, const char*, const char*) {}
inline int32_t no_stop(void*) { return 0; }

inline const zc_host_services* host() {
  static zc_host_services h = [] {
    zc_host_services s{};
    s.struct_size = sizeof(zc_host_services);
    s.abi_major = ZC_ABI_VERSION_MAJOR;
    s.abi_minor = ZC_ABI_VERSION_MINOR;
    s.log = &log_line;
    s.status_create = &status_create;
    s.seed = 42;
    s.derive_seed = &derive_seed;
    s.device = DLDevice{kDLCPU, 0};
    s.num_threads = 2;
    s.stop_requested = &no_stop;
    s.status_code = &status_code;
    s.status_message = &status_message;
    s.status_release = &status_release;
    return s;
  }();
  return &h;
}

/// Thrown by the helpers when a plugin call returns a status.
struct CallError : std::runtime_error {
  zc_status_code code;
  CallError(zc_status_code c, const std::string& m) : std::runtime_error(m), code(c) {}
};
inline void check(zc_status* s) {
  if (!s) return;
  CallError e(s->code, s->message);
  delete s;
  throw e;
}

/// The tokenizer table of plugin file `lib` (e.g. "libzcode_bpe.so") in ZCODE_PLUGIN_DIR.
inline const zc_tokenizer_table* load_table(const std::string& lib) {
  std::string path = std::string(ZCODE_PLUGIN_DIR) + "/" + lib;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error("dlopen " + path + ": " + dlerror());
  auto fn = reinterpret_cast<zc_negotiate_fn>(dlsym(h, ZC_PLUGIN_ENTRY_SYMBOL));
  if (!fn) throw std::runtime_error(path + ": no " ZC_PLUGIN_ENTRY_SYMBOL);
  uint32_t maj = 0, min = 0;
  const zc_manifest* m = nullptr;
  if (fn(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, host(), &maj, &min, &m) != ZC_OK)
    throw std::runtime_error("negotiate failed");
  for (uint32_t i = 0; i < m->num_components; ++i)
    if (m->components[i].kind == ZC_KIND_TOKENIZER)
      return static_cast<const zc_tokenizer_table*>(m->components[i].table);
  throw std::runtime_error(path + ": no tokenizer component");
}

/// One tokenizer instance created through the ABI.
class Tok {
 public:
  Tok(const zc_tokenizer_table* t, const std::string& options_json, const std::string& config_json = "{}") : t_(t) {
    zc_create_args a{};
    a.struct_size = sizeof a;
    a.host = host();
    a.options_json = options_json.c_str();
    a.config_json = config_json.c_str();
    a.run_dir = "";
    a.split = "train";
    check(t_->create(&a, &inst_));
  }
  ~Tok() { t_->destroy(inst_); }
  Tok(const Tok&) = delete;
  Tok& operator=(const Tok&) = delete;

  std::vector<int32_t> encode(const std::string& text, uint32_t flags = 0) {
    std::vector<int32_t> v;
    zc_ids ids = zcode::sdk::ids_into(v);
    check(t_->encode(inst_, text.data(), text.size(), flags, &ids));
    v.resize(ids.size);
    return v;
  }
  std::string decode(const std::vector<int32_t>& ids) {
    std::string s;
    zc_bytes b = zcode::sdk::bytes_into(s);
    check(t_->decode(inst_, ids.data(), ids.size(), &b));
    s.resize(b.size);
    return s;
  }
  uint64_t vocab_size() {
    uint64_t n = 0;
    check(t_->vocab_size(inst_, &n));
    return n;
  }
  int32_t token_to_id(const std::string& t) {
    int32_t id = -2;
    check(t_->token_to_id(inst_, t.data(), t.size(), &id));
    return id;
  }
  std::string id_to_token(int32_t id) {
    std::string s;
    zc_bytes b = zcode::sdk::bytes_into(s);
    check(t_->id_to_token(inst_, id, &b));
    s.resize(b.size);
    return s;
  }
  std::string info() {
    const char* j = nullptr;
    check(t_->info_json(inst_, &j));
    return j;
  }

 private:
  const zc_tokenizer_table* t_;
  void* inst_ = nullptr;
};

/// Message of the error `create` returns for these options (or "" on success).
inline std::string create_error(const zc_tokenizer_table* t, const std::string& options,
                                const std::string& config = "{}", zc_status_code* code = nullptr) {
  try {
    Tok tok(t, options, config);
  } catch (const CallError& e) {
    if (code) *code = e.code;
    return e.what();
  }
  return "";
}

inline std::string assets_dir() {
  const char* e = std::getenv("ZCODE_ASSETS_DIR");
  return e ? e : std::string(ZCODE_SOURCE_DIR) + "/assets";
}
inline bool have_file(const std::string& p) { return std::ifstream(p).good(); }

/// JSON string literal (tests build option objects by hand).
inline std::string q(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

#define ZT_REQUIRE_ASSET(path)                                                                    \
  do {                                                                                            \
    if (!::zt::have_file(path))                                                                   \
      GTEST_SKIP() << "tokenizer asset " << (path) << " is missing: run scripts/fetch-assets.sh"; \
  } while (0)

}  // namespace zt
