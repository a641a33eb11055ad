// harness.h: a minimal host for testing the jsonl plugin through its C ABI:
// fake host services, a byte-level test tokenizer exposed through the SDK's
// thunks, and a loader wrapper that dlopens the built plugin.
#pragma once

#include <zcode/abi.h>
#include <zcode/sdk/hash.h>
#include <zcode/sdk/plugin.h>

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

struct zc_status {
  zc_status_code code;
  std::string message;
};

namespace zt {

// ---------------------------------------------------------------- host
struct FakeHost {
  zc_host_services s{};
  std::mutex mu;
  std::vector<std::pair<zc_log_level, std::string>> logs;
  std::atomic<int> stop{0};

  explicit FakeHost(uint64_t seed = 1234) {
    s.struct_size = sizeof(s);
    s.abi_major = ZC_ABI_VERSION_MAJOR;
    s.abi_minor = ZC_ABI_VERSION_MINOR;
    s.host_ctx = this;
    s.log = [](void* c, zc_log_level l, const char*, const char* m) {
      auto* h = static_cast<FakeHost*>(c);
      std::lock_guard<std::mutex> lk(h->mu);
      h->logs.emplace_back(l, m);
    };
    s.status_create = [](void*, zc_status_code code, const char* m) { return new zc_status{code, m ? m : ""}; };
    s.seed = seed;
    s.derive_seed = [](void* c, const char* name) {
      return zcode::sdk::derive_seed(static_cast<FakeHost*>(c)->s.seed, name);
    };
    s.device = DLDevice{kDLCPU, 0};
    s.num_threads = 2;
    s.stop_requested = [](void* c) -> int32_t { return static_cast<FakeHost*>(c)->stop.load(); };
    s.status_code = [](void*, const zc_status* st) { return st->code; };
    s.status_message = [](void*, const zc_status* st) { return st->message.c_str(); };
    s.status_release = [](void*, zc_status* st) { delete st; };
  }
  std::vector<std::string> messages(zc_log_level level) {
    std::lock_guard<std::mutex> lk(mu);
    std::vector<std::string> out;
    for (auto& [l, m] : logs)
      if (l == level) out.push_back(m);
    return out;
  }
  bool logged(const std::string& needle) {
    std::lock_guard<std::mutex> lk(mu);
    for (auto& [l, m] : logs)
      if (m.find(needle) != std::string::npos) return true;
    return false;
  }
};

// ---------------------------------------------------------------- tokenizer
/// Byte-level: id = byte + offset (offset 4 by default); specials pad 0,
/// bos 1, eos 2, mask 3. `fail_on`: encode of a text containing it fails.
/// Detects concurrent calls (the ABI forbids them).
struct TokOptions {
  int32_t offset = 4;
  uint64_t vocab = 260;
  std::string fail_on;
  uint64_t gap_from = 0;      // > 0: ids in [gap_from, vocab) are unassigned (decode fails as the real tokenizers do)
  bool declare_gaps = false;  // info_json lists them ("unassigned_ids"); a decode of one is then an internal error
};
inline TokOptions g_tok_options;
inline std::atomic<int> g_tok_concurrent{0};
inline std::atomic<int> g_tok_overlaps{0};

class ByteTokenizer : public zcode::sdk::Tokenizer {
 public:
  explicit ByteTokenizer(const zcode::sdk::CreateContext&) : o_(g_tok_options) {
    info_ = "{\"name\":\"test-bytes\",\"identity\":\"test-bytes-v1-" + std::to_string(o_.offset) +
            "\",\"vocab_size\":" + std::to_string(o_.vocab) +
            ",\"specials\":{\"<pad>\":0,\"<bos>\":1,\"<eos>\":2,\"<mask>\":3},\"pad_id\":0,\"bos_id\":1,\"eos_id\":2" +
            (o_.declare_gaps
                 ? ",\"unassigned_ids\":[[" + std::to_string(o_.gap_from) + "," + std::to_string(o_.vocab) + "]]"
                 : "") +
            "}";
  }
  uint64_t vocab_size() const override { return o_.vocab; }
  void encode(std::string_view text, uint32_t, zcode::sdk::IdSink& out) override {
    if (g_tok_concurrent.fetch_add(1) != 0) g_tok_overlaps++;
    struct Exit {
      ~Exit() { g_tok_concurrent--; }
    } exit_guard;
    if (!o_.fail_on.empty() && text.find(o_.fail_on) != std::string_view::npos)
      throw zcode::sdk::Error(ZC_ERR_DATA, "test tokenizer refuses '" + o_.fail_on + "'");
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]) + o_.offset;
    out.append(ids.data(), ids.size());
  }
  void decode(const int32_t* ids, size_t n, zcode::sdk::ByteSink& out) override {
    static const char* names[] = {"<pad>", "<bos>", "<eos>", "<mask>"};
    for (size_t i = 0; i < n; ++i) {
      int32_t id = ids[i];
      if (id < 0 || static_cast<uint64_t>(id) >= o_.vocab) throw zcode::sdk::Error(ZC_ERR_INVALID_ARGUMENT, "bad id");
      if (o_.gap_from > 0 && static_cast<uint64_t>(id) >= o_.gap_from)
        throw zcode::sdk::Error(o_.declare_gaps ? ZC_ERR_INTERNAL : ZC_ERR_INVALID_ARGUMENT,
                                "decode: id " + std::to_string(id) + " is not assigned to any token");
      if (id < 4) out.append(names[id]);
      else if (id >= o_.offset && id < o_.offset + 256) out.append(std::string(1, static_cast<char>(id - o_.offset)));
    }
  }
  int32_t token_to_id(std::string_view) const override { return -1; }
  void id_to_token(int32_t, zcode::sdk::ByteSink&) const override {}
  const std::string& info_json() const override { return info_; }

 private:
  TokOptions o_;
  std::string info_;
};

/// The ids the test tokenizer gives `text` (independent of the plugin).
inline std::vector<int32_t> tokenize(const std::string& text, int32_t offset = 4) {
  std::vector<int32_t> v;
  for (unsigned char c : text) v.push_back(c + offset);
  return v;
}
/// The packed stream: doc ids then <eos>, empty documents dropped.
inline std::vector<int32_t> stream_of(const std::vector<std::string>& docs, int32_t offset = 4) {
  std::vector<int32_t> v;
  for (const auto& d : docs) {
    if (d.empty()) continue;
    auto t = tokenize(d, offset);
    v.insert(v.end(), t.begin(), t.end());
    v.push_back(2);
  }
  return v;
}

// ---------------------------------------------------------------- plugin
struct Error : std::runtime_error {
  zc_status_code code;
  Error(zc_status_code c, const std::string& m) : std::runtime_error(m), code(c) {}
};

inline void check(zc_status* st) {
  if (!st) return;
  Error e(st->code, st->message);
  delete st;
  throw e;
}

struct Plugin {
  const zc_dataloader_table* table = nullptr;
  const zc_manifest* manifest = nullptr;
  explicit Plugin(FakeHost& host, const char* path = ZT_JSONL_PLUGIN) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    auto fn = reinterpret_cast<zc_negotiate_fn>(dlsym(h, ZC_PLUGIN_ENTRY_SYMBOL));
    uint32_t ma = 0, mi = 0;
    if (fn(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, &host.s, &ma, &mi, &manifest) != ZC_OK)
      throw std::runtime_error("negotiate failed");
    table = static_cast<const zc_dataloader_table*>(manifest->components[0].table);
  }
  /// The first component's table, as another kind (e.g. a tokenizer plugin).
  template <class T>
  const T* as() const {
    return static_cast<const T*>(manifest->components[0].table);
  }
};

struct Batch {
  std::vector<int32_t> input, target, doc;
  bool has_doc = false;
  int64_t tokens = 0, bytes = 0, chars = 0;
  uint64_t epoch = 0;
  int64_t rows = 0, seq = 0;
  bool operator==(const Batch& o) const {
    return input == o.input && target == o.target && doc == o.doc && has_doc == o.has_doc && tokens == o.tokens &&
           bytes == o.bytes && chars == o.chars && epoch == o.epoch;
  }
  /// Row r's window: input[0] then the targets up to the first -1.
  std::vector<int32_t> window(int64_t r) const {
    std::vector<int32_t> w;
    const int32_t* in = &input[r * seq];
    const int32_t* tg = &target[r * seq];
    if (tg[0] == -1 && in[0] == 0) return w;  // a padding row
    w.push_back(in[0]);
    for (int64_t j = 0; j < seq && tg[j] != -1; ++j) w.push_back(tg[j]);
    return w;
  }
};

/// Serialized state: JSON + tensors, in a small binary blob (cross-process).
struct State {
  std::string json;
  std::map<std::string, std::vector<int32_t>> tensors;
  std::string serialize() const {
    std::string s;
    auto put = [&](const void* p, size_t n) { s.append(static_cast<const char*>(p), n); };
    uint64_t n = json.size();
    put(&n, 8);
    s += json;
    n = tensors.size();
    put(&n, 8);
    for (auto& [k, v] : tensors) {
      n = k.size();
      put(&n, 8);
      s += k;
      n = v.size();
      put(&n, 8);
      put(v.data(), v.size() * 4);
    }
    return s;
  }
  static State parse(const std::string& s) {
    State st;
    size_t at = 0;
    auto get = [&](void* p, size_t n) {
      std::memcpy(p, s.data() + at, n);
      at += n;
    };
    uint64_t n = 0;
    get(&n, 8);
    st.json = s.substr(at, n);
    at += n;
    uint64_t count = 0;
    get(&count, 8);
    for (uint64_t i = 0; i < count; ++i) {
      get(&n, 8);
      std::string k = s.substr(at, n);
      at += n;
      get(&n, 8);
      std::vector<int32_t> v(n);
      get(v.data(), n * 4);
      st.tensors[k] = std::move(v);
    }
    return st;
  }
};

class Loader {
 public:
  /// `tokenizer`: another tokenizer stage (e.g. the bpe plugin) or, when
  /// its table is NULL, a ByteTokenizer created here.
  Loader(Plugin& p, FakeHost& host, const std::string& options, const std::string& config,
         const std::string& split = "train", zc_stage_ref tokenizer = {nullptr, nullptr})
      : p_(p), host_(host) {
    zcode::sdk::detail::g_host = &host.s;  // the test tokenizer's thunks report through it
    zc_create_args tok_args{};
    tok_args.struct_size = sizeof tok_args;
    tok_args.host = &host.s;
    tok_args.options_json = "{}";
    tok_args.config_json = "{}";
    if (tokenizer.table) {
      tok_ref_ = tokenizer;
    } else {
      check(zcode::sdk::detail::TokenizerThunks<ByteTokenizer>::table.create(&tok_args, &tok_));
      tok_ref_ = zc_stage_ref{&zcode::sdk::detail::TokenizerThunks<ByteTokenizer>::table, tok_};
    }
    zc_create_args a{};
    a.struct_size = sizeof a;
    a.host = &host.s;
    a.options_json = options.c_str();
    a.config_json = config.c_str();
    a.run_dir = "";
    a.tokenizer = tok_ref_;
    a.split = split.c_str();
    try {
      check(p.table->create(&a, &inst_));
    } catch (...) {
      if (tok_) zcode::sdk::detail::TokenizerThunks<ByteTokenizer>::table.destroy(tok_);
      throw;
    }
  }
  ~Loader() {
    p_.table->destroy(inst_);
    if (tok_) zcode::sdk::detail::TokenizerThunks<ByteTokenizer>::table.destroy(tok_);
  }
  /// zc_dataloader_table.set_data_shard (ABI 1.8).
  void shard(uint64_t rank, uint64_t size) { check(p_.table->set_data_shard(inst_, rank, size)); }
  std::optional<Batch> next() {
    zc_batch b{};
    b.struct_size = sizeof b;
    int32_t has = -1;
    check(p_.table->next_batch(inst_, &b, &has));
    if (!has) return std::nullopt;
    Batch o;
    o.rows = b.input_ids.shape[0];
    o.seq = b.input_ids.shape[1];
    size_t n = static_cast<size_t>(o.rows * o.seq);
    const int32_t* in = static_cast<const int32_t*>(b.input_ids.data);
    const int32_t* tg = static_cast<const int32_t*>(b.targets.data);
    o.input.assign(in, in + n);
    o.target.assign(tg, tg + n);
    if (b.doc_ids.data) {
      o.has_doc = true;
      const int32_t* d = static_cast<const int32_t*>(b.doc_ids.data);
      o.doc.assign(d, d + n);
    }
    o.tokens = b.num_target_tokens;
    o.bytes = b.num_target_bytes;
    o.chars = b.num_target_chars;
    o.epoch = b.epoch;
    return o;
  }
  /// The raw ABI call, without copying the batch (benchmarks).
  bool next_raw(zc_batch& b) {
    b.struct_size = sizeof b;
    int32_t has = 0;
    check(p_.table->next_batch(inst_, &b, &has));
    return has != 0;
  }
  void reset() { check(p_.table->reset(inst_)); }
  std::map<std::string, double> stats() {
    std::map<std::string, double> m;
    zc_metrics_sink s{
        &m, [](void* c, const char* k, double v) { (*static_cast<std::map<std::string, double>*>(c))[k] = v; }};
    check(p_.table->stats(inst_, &s));
    return m;
  }
  std::string provenance() {
    const char* j = nullptr;
    check(p_.table->provenance_json(inst_, &j));
    return j;
  }
  State save() {
    State st;
    zc_state_writer w{};
    w.struct_size = sizeof w;
    w.ctx = &st;
    w.put_tensor = [](void* c, const char* name, const DLTensor* t) -> zc_status* {
      auto* s = static_cast<State*>(c);
      const int32_t* d = static_cast<const int32_t*>(t->data);
      s->tensors[name].assign(d, d + t->shape[0]);
      return nullptr;
    };
    w.put_json = [](void* c, const char* j, size_t n) -> zc_status* {
      static_cast<State*>(c)->json.assign(j, n);
      return nullptr;
    };
    check(p_.table->save_state(inst_, &w));
    return st;
  }
  void load(const State& st) {
    struct Ctx {
      const State* st;
      std::vector<DLTensor> views;
      std::vector<int64_t> shapes;
      std::vector<std::string> names;
    } ctx{&st, {}, {}, {}};
    ctx.shapes.reserve(st.tensors.size());
    for (auto& [k, v] : st.tensors) {
      ctx.names.push_back(k);
      ctx.shapes.push_back(static_cast<int64_t>(v.size()));
    }
    size_t i = 0;
    for (auto& [k, v] : st.tensors) {
      ctx.views.push_back(zcode::sdk::make_view(const_cast<int32_t*>(v.data()), zcode::sdk::kI32, 1, &ctx.shapes[i++]));
    }
    zc_state_reader r{};
    r.struct_size = sizeof r;
    r.ctx = &ctx;
    r.get_tensor = [](void* c, const char* name) -> const DLTensor* {
      auto* x = static_cast<Ctx*>(c);
      for (size_t k = 0; k < x->names.size(); ++k)
        if (x->names[k] == name) return &x->views[k];
      return nullptr;
    };
    r.num_tensors = [](void* c) { return static_cast<Ctx*>(c)->names.size(); };
    r.tensor_name = [](void* c, size_t k) { return static_cast<Ctx*>(c)->names[k].c_str(); };
    r.json = st.json.c_str();
    r.json_len = st.json.size();
    check(p_.table->load_state(inst_, &r));
  }

 private:
  Plugin& p_;
  FakeHost& host_;
  void* tok_ = nullptr;  // owned ByteTokenizer, if any
  zc_stage_ref tok_ref_{};
  void* inst_ = nullptr;
};

// ---------------------------------------------------------------- files
inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
}
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
/// A JSON string literal for `s` (quotes and backslashes escaped; the test
/// texts hold no control characters).
inline std::string jstr(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}
inline std::string jsonl_of(const std::vector<std::string>& docs) {
  std::string s;
  for (const auto& d : docs) s += "{\"text\":" + jstr(d) + "}\n";
  return s;
}

}  // namespace zt
