// The C++ GLM-5.2 plugin against the independent PyTorch reference
// (tests/reference/glm52_reference.py, float64, written from the README spec).
//
// For each case: the reference makes random fp32 weights and a batch, and
// computes its loss, metrics, per-token log-probabilities and gradients; this
// test loads the same weights into libzcode_glm52.so through load_state, runs
// forward_backward on the same batch and compares:
//   loss                     |l_cpp − l_ref| <= 1e-5·|l_ref|
//   every parameter gradient max|g_cpp − g_ref| / max|g_ref| <= 1e-4 (per tensor)
// plus the other metrics, forward_logprobs, save_state, and that gradients
// accumulate across calls. Files of a failing case stay in its folder (printed).
#include "fake_host.h"

#include <zcode/abi.h>
#include <zcode/sdk/safetensors.h>

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace st = zcode::sdk::safetensors;
using zcode::testing::FakeHost;

// ---------------------------------------------------------------------------
// Cases: small dims (d 32–64, 2 layers, vocab 300, seq 16–32, batch 2–3).
// ---------------------------------------------------------------------------

constexpr const char* kBase = R"({
  "type": "glm52", "vocab_size": 300, "max_seq_len": 64,
  "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 4, "head_dim": 8, "ffn_hidden": 64,
  "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 32, "moe_shared_experts": 0, "first_dense_layers": 0,
  "capacity_factor": 0.0, "moe_aux_loss_coef": 0.01, "moe_z_loss_coef": 0.001,
  "norm_topk_prob": true, "router_activation": "softmax", "rope_theta": 10000.0, "rotary_fraction": 1.0,
  "norm": "scalenorm", "residual": "deepnorm", "norm_eps": 1e-6, "tie_embeddings": true,
  "dynamic_head_mask": {"enabled": false, "entropy_threshold": 4.0}})";

struct Case {
  const char* name;
  const char* overrides;  // JSON object merged over kBase
  int batch, seq;
  int docs;  // documents per row; > 1 sends doc_ids (cross_document_attention false)
  int seed;
};

const Case kCases[] = {
    {"dense", R"({"first_dense_layers": 2})", 2, 16, 1, 1},
    {"moe_capacity_drops", R"({"capacity_factor": 0.5})", 3, 24, 1, 2},
    {"gqa", R"({"n_kv_heads": 2, "first_dense_layers": 1, "capacity_factor": 1.25})", 2, 16, 1, 3},
    {"gqa_single_kv_head", R"({"n_kv_heads": 1, "first_dense_layers": 2})", 2, 16, 1, 4},
    {"partial_rotary", R"({"rotary_fraction": 0.5, "first_dense_layers": 1})", 2, 16, 1, 5},
    {"document_mask", R"({"first_dense_layers": 1, "capacity_factor": 1.0})", 3, 24, 3, 6},
    {"shared_expert", R"({"moe_shared_experts": 1, "first_dense_layers": 1, "capacity_factor": 1.0})", 2, 16, 1, 7},
    {"prenorm_rmsnorm", R"({"residual": "prenorm", "norm": "rmsnorm", "first_dense_layers": 1})", 2, 16, 1, 8},
    {"sigmoid_router", R"({"router_activation": "sigmoid", "norm_topk_prob": false, "capacity_factor": 1.0})", 2, 16, 1,
     9},
    {"dynamic_head_mask", R"({"dynamic_head_mask": {"enabled": true, "entropy_threshold": 1.5}})", 2, 24, 1, 10},
    {"untied_head", R"({"tie_embeddings": false, "first_dense_layers": 2})", 2, 16, 1, 11},
    {"everything", R"({"d_model": 64, "head_dim": 16, "n_kv_heads": 2, "rotary_fraction": 0.5,
       "moe_shared_experts": 1, "first_dense_layers": 1, "capacity_factor": 0.75, "residual": "prenorm",
       "norm": "rmsnorm", "tie_embeddings": false,
       "dynamic_head_mask": {"enabled": true, "entropy_threshold": 1.5}})",
     3, 32, 3, 12},
};

// gtest prints a case by its name (not its bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

std::string merged_options(const char* overrides) {
  rapidjson::Document base, over;
  base.Parse(kBase);
  over.Parse(overrides);
  if (base.HasParseError() || over.HasParseError() || !over.IsObject()) return "";
  for (auto& m : over.GetObject()) {
    rapidjson::Value v(m.value, base.GetAllocator());
    if (base.HasMember(m.name.GetString())) {
      base[m.name.GetString()] = v;
    } else {
      base.AddMember(rapidjson::Value(m.name, base.GetAllocator()), v, base.GetAllocator());
    }
  }
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  base.Accept(w);
  return sb.GetString();
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Runs argv (no shell), stdout+stderr into `log`. Returns the exit status or -1.
int run(const std::vector<std::string>& argv, const fs::path& log) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    if (!f || dup2(fileno(stdout), 2) < 0) _exit(127);
    setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<double> as_doubles(const st::TensorView& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (t.dtype == "F64") {
    std::memcpy(out.data(), t.data, out.size() * sizeof(double));
  } else if (t.dtype == "F32") {
    for (size_t i = 0; i < out.size(); ++i) {
      float f;
      std::memcpy(&f, t.data + 4 * i, 4);
      out[i] = f;
    }
  } else {
    ADD_FAILURE() << t.name << ": dtype " << t.dtype << " where F32/F64 was expected";
  }
  return out;
}

int64_t numel(const DLTensor& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

std::vector<int64_t> shape_of(const DLTensor& t) { return std::vector<int64_t>(t.shape, t.shape + t.ndim); }

bool is_f32_contiguous(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1 && t.device.device_type == kDLCPU &&
         t.strides == nullptr && t.byte_offset == 0;
}

const float* f32(const DLTensor& t) { return static_cast<const float*>(t.data); }

/// max|a − b| / max|b| (b the reference); when b is all zero, max|a|.
double max_norm_rel(const float* a, const std::vector<double>& b, double scale = 1.0) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - scale * b[i]));
    ref = std::max(ref, std::fabs(scale * b[i]));
  }
  return ref > 0 ? diff / ref : diff;
}

// Reader over a safetensors file for load_state.
struct StateReader {
  const st::Reader* file;
  std::vector<DLTensor> views;
  std::map<std::string, size_t> index;
  zc_state_reader r{};

  explicit StateReader(const st::Reader& f) : file(&f) {
    for (const auto& t : f.tensors()) {
      index[t.name] = views.size();
      views.push_back(t.dltensor());
    }
    r.struct_size = sizeof(zc_state_reader);
    r.ctx = this;
    r.get_tensor = [](void* ctx, const char* name) -> const DLTensor* {
      auto* self = static_cast<StateReader*>(ctx);
      auto it = self->index.find(name);
      return it == self->index.end() ? nullptr : &self->views[it->second];
    };
    r.num_tensors = [](void* ctx) { return static_cast<StateReader*>(ctx)->views.size(); };
    r.tensor_name = [](void* ctx, size_t i) -> const char* {
      auto* self = static_cast<StateReader*>(ctx);
      return i < self->views.size() ? self->file->tensors()[i].name.c_str() : nullptr;
    };
    r.json = "";
    r.json_len = 0;
  }
};

// Writer for save_state: copies into a safetensors Writer.
struct StateWriter {
  st::Writer out;
  std::string json;
  std::string error;
  zc_state_writer w{};
  const zc_host_services* host;

  explicit StateWriter(const zc_host_services* h) : host(h) {
    w.struct_size = sizeof(zc_state_writer);
    w.ctx = this;
    w.put_tensor = [](void* ctx, const char* name, const DLTensor* t) -> zc_status* {
      auto* self = static_cast<StateWriter*>(ctx);
      try {
        self->out.add(name, *t);
      } catch (const std::exception& e) {
        return self->host->status_create(self->host->host_ctx, ZC_ERR_INVALID_ARGUMENT, e.what());
      }
      return nullptr;
    };
    w.put_json = [](void* ctx, const char* json, size_t len) -> zc_status* {
      static_cast<StateWriter*>(ctx)->json.assign(json, len);
      return nullptr;
    };
  }
};

// ---------------------------------------------------------------------------
// The plugin, loaded once per process (plugins are never unloaded).
// ---------------------------------------------------------------------------

struct Plugin {
  FakeHost host{2, 1};
  const zc_model_table* model = nullptr;
  std::string error;

  Plugin() {
    const char* path = ZCODE_GLM52_PLUGIN;
    if (!*path) {
      error = "the glm52 plugin target (zcode_plugin_glm52) was not part of this build";
      return;
    }
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = std::string("dlopen ") + path + ": " + dlerror();
      return;
    }
    auto negotiate = reinterpret_cast<zc_negotiate_fn>(dlsym(lib, ZC_PLUGIN_ENTRY_SYMBOL));
    if (!negotiate) {
      error = std::string(path) + ": no symbol " + ZC_PLUGIN_ENTRY_SYMBOL;
      return;
    }
    uint32_t major = 0, minor = 0;
    const zc_manifest* manifest = nullptr;
    zc_status_code rc =
        negotiate(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, host.services(), &major, &minor, &manifest);
    if (rc != ZC_OK || !manifest || major != ZC_ABI_VERSION_MAJOR || minor > ZC_ABI_VERSION_MINOR) {
      error = "negotiation refused: rc " + std::to_string(rc) + ", plugin ABI " + std::to_string(major) + "." +
              std::to_string(minor);
      return;
    }
    for (uint32_t i = 0; i < manifest->num_components; ++i) {
      const zc_component& c = manifest->components[i];
      if (c.kind == ZC_KIND_MODEL && std::string(c.name) == "glm52")
        model = static_cast<const zc_model_table*>(c.table);
    }
    if (!model) {
      error = "no model component named glm52 in the manifest";
    } else if (model->header.struct_size < offsetof(zc_model_table, info_json)) {
      error = "model table struct_size " + std::to_string(model->header.struct_size) + " lacks forward_logprobs";
      model = nullptr;
    }
  }
};

Plugin& plugin() {
  static Plugin p;
  return p;
}

// ---------------------------------------------------------------------------
// The comparison
// ---------------------------------------------------------------------------

class Glm52VsReference : public ::testing::TestWithParam<Case> {};

TEST_P(Glm52VsReference, LossMetricsAndGradientsMatch) {
  const Case& c = GetParam();
  if (!*ZCODE_GLM52_PLUGIN) GTEST_SKIP() << "the glm52 plugin target (zcode_plugin_glm52) is not part of this build";
  Plugin& pl = plugin();
  ASSERT_TRUE(pl.model) << pl.error;
  const zc_model_table& T = *pl.model;

  const fs::path dir =
      fs::temp_directory_path() / ("zcode_glm52_ref_" + std::string(c.name) + "_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string options = merged_options(c.overrides);
  ASSERT_FALSE(options.empty()) << "bad case JSON";
  write_text(dir / "config.json", options);
  SCOPED_TRACE("case files in " + dir.string());

  // 1. The reference makes the weights and the batch and computes on them.
  std::vector<std::string> argv = {ZCODE_REFERENCE_PYTHON,
                                   ZCODE_REFERENCE_SCRIPT,
                                   "--config",
                                   (dir / "config.json").string(),
                                   "--make-weights",
                                   (dir / "weights.safetensors").string(),
                                   "--make-batch",
                                   (dir / "batch.safetensors").string(),
                                   "--out",
                                   (dir / "reference.safetensors").string(),
                                   "--seed",
                                   std::to_string(c.seed),
                                   "--batch-size",
                                   std::to_string(c.batch),
                                   "--seq-len",
                                   std::to_string(c.seq),
                                   "--docs",
                                   std::to_string(c.docs),
                                   "--normalizer-scale",
                                   "2"};
  if (c.docs <= 1) argv.push_back("--no-doc-ids");
  int rc = run(argv, dir / "reference.log");
  ASSERT_EQ(rc, 0) << "the PyTorch reference failed (" << ZCODE_REFERENCE_PYTHON
                   << " with torch is required: Debian's python3-torch):\n"
                   << read_text(dir / "reference.log");
  const st::Reader W = st::Reader::open((dir / "weights.safetensors").string());
  const st::Reader B = st::Reader::open((dir / "batch.safetensors").string());
  const st::Reader R = st::Reader::open((dir / "reference.safetensors").string());
  std::map<std::string, double> ref;
  for (const auto& [k, v] : R.metadata()) ref[k] = std::strtod(v.c_str(), nullptr);

  // fp32 vs fp64 decide the same routing and head masks only away from ties.
  ASSERT_GT(ref.at("min_topk_gap"), 1e-5) << "router probabilities nearly tied: pick another seed";
  ASSERT_GT(ref.at("min_entropy_margin"), 1e-4) << "an entropy sits on the threshold: pick another seed";

  // 2. The model, with the reference's weights.
  const std::string config_json = std::string(R"({"seed": 1, "data": {"cross_document_attention": )") +
                                  (c.docs > 1 ? "false" : "true") + R"(}, "model": )" + options + "}";
  // The reference's log-probs are its training forward's (with capacity
  // drops): evaluate with training's capacity (eval_capacity_factor, a
  // plugin option the reference does not know; the default is dropless).
  std::string model_options = options;
  {
    rapidjson::Document o;
    o.Parse(options.c_str());
    rapidjson::Value cf(o["capacity_factor"], o.GetAllocator());
    o.AddMember("eval_capacity_factor", cf, o.GetAllocator());
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    o.Accept(w);
    model_options = sb.GetString();
  }
  zc_create_args args{};
  args.struct_size = sizeof args;
  args.host = pl.host.services();
  args.options_json = model_options.c_str();
  args.config_json = config_json.c_str();
  args.run_dir = "";
  args.split = "train";
  void* inst = nullptr;
  ASSERT_EQ(FakeHost::take_message(T.create(&args, &inst)), "");
  ASSERT_NE(inst, nullptr);
  struct Destroy {
    const zc_model_table& t;
    void* i;
    ~Destroy() { t.destroy(i); }
  } destroy{T, inst};

  StateReader sr(W);
  ASSERT_EQ(FakeHost::take_message(T.load_state(inst, &sr.r)), "");
  zc_param_list params{};
  ASSERT_EQ(FakeHost::take_message(T.params(inst, &params)), "");

  // Names and shapes of plugins/model/glm52/README.md, exactly (the reference wrote them from the spec).
  std::set<std::string> cpp_names, ref_names;
  for (size_t i = 0; i < params.count; ++i) cpp_names.insert(params.params[i].name);
  for (const auto& t : W.tensors()) ref_names.insert(t.name);
  for (const auto& n : ref_names) EXPECT_TRUE(cpp_names.count(n)) << "params() lacks README tensor '" << n << "'";
  for (const auto& n : cpp_names) EXPECT_TRUE(ref_names.count(n)) << "params() has '" << n << "', not in the README";
  ASSERT_EQ(cpp_names, ref_names);
  for (size_t i = 0; i < params.count; ++i) {
    const zc_param& p = params.params[i];
    const st::TensorView& w = W.at(p.name);
    ASSERT_TRUE(is_f32_contiguous(*p.value) && is_f32_contiguous(*p.grad)) << p.name << ": not contiguous fp32 CPU";
    ASSERT_EQ(shape_of(*p.value), w.shape) << p.name;
    ASSERT_EQ(shape_of(*p.grad), w.shape) << p.name;
    ASSERT_EQ(std::memcmp(p.value->data, w.data, w.nbytes), 0) << p.name << ": load_state did not load the values";
    const std::string n = p.name;
    const bool no_decay = n.find("norm") != std::string::npos || n.find("rope_log_inv_freq") != std::string::npos;
    EXPECT_EQ(no_decay, (p.flags & ZC_PARAM_NO_DECAY) != 0) << n << ": ZC_PARAM_NO_DECAY";
    if (n != "lm_head.weight") {  // whether the untied head counts as an embedding is not specified
      EXPECT_EQ(n == "embed.weight", (p.flags & ZC_PARAM_EMBEDDING) != 0) << n << ": ZC_PARAM_EMBEDDING";
    }
    EXPECT_EQ(n.ends_with("moe.router"), (p.flags & ZC_PARAM_ROUTER) != 0) << n << ": ZC_PARAM_ROUTER";
    if (n.find(".moe.experts.") != std::string::npos) {
      EXPECT_TRUE(p.flags & ZC_PARAM_EXPERT) << n << ": ZC_PARAM_EXPERT";
    }
  }

  // save_state writes exactly the parameters, unchanged.
  StateWriter sw(pl.host.services());
  ASSERT_EQ(FakeHost::take_message(T.save_state(inst, &sw.w)), "");
  const std::vector<uint8_t> saved = sw.out.serialize();
  const st::Reader S(saved, "save_state");
  ASSERT_EQ(S.tensors().size(), ref_names.size());
  for (const auto& w : W.tensors()) {
    const st::TensorView* s = S.find(w.name);
    ASSERT_TRUE(s) << "save_state lacks '" << w.name << "'";
    EXPECT_EQ(s->dtype, "F32");
    EXPECT_EQ(s->shape, w.shape);
    EXPECT_EQ(std::memcmp(s->data, w.data, w.nbytes), 0) << "save_state changed '" << w.name << "'";
  }

  // 3. The batch.
  const st::TensorView& ids = B.at("input_ids");
  const st::TensorView& tgt = B.at("targets");
  const st::TensorView* docs = B.find("doc_ids");
  ASSERT_EQ(docs != nullptr, c.docs > 1);
  zc_batch batch{};
  batch.struct_size = sizeof batch;
  batch.input_ids = ids.dltensor();
  batch.targets = tgt.dltensor();
  if (docs) batch.doc_ids = docs->dltensor();
  int64_t n_targets = 0;
  for (int64_t i = 0; i < tgt.numel(); ++i) n_targets += reinterpret_cast<const int32_t*>(tgt.data)[i] != -1;
  batch.num_target_tokens = n_targets;
  batch.num_target_bytes = n_targets;
  batch.num_target_chars = n_targets;
  zc_fb_options fb{};
  fb.struct_size = sizeof fb;
  fb.label_mode = ZC_LABELS_TARGETS;
  fb.loss_normalizer = std::strtod(B.metadata().at("loss_normalizer").c_str(), nullptr);
  fb.loss_scale = 1.0;
  ASSERT_EQ(fb.loss_normalizer, 2.0 * static_cast<double>(n_targets));

  std::map<std::string, double> got;
  zc_metrics_sink sink{&got, [](void* ctx, const char* name, double v) {
                         (*static_cast<std::map<std::string, double>*>(ctx))[name] = v;
                       }};

  // 4. Forward and backward.
  ASSERT_EQ(FakeHost::take_message(T.zero_grad(inst)), "");
  ASSERT_EQ(FakeHost::take_message(T.forward_backward(inst, &batch, &fb, &sink)), "");

  st::Writer grads;  // the C++ gradients, kept next to the reference's for inspection
  for (size_t i = 0; i < params.count; ++i) grads.add(params.params[i].name, *params.params[i].grad);
  for (const auto& [k, v] : got) grads.set_metadata(k, std::to_string(v));
  grads.save((dir / "cpp_grads.safetensors").string());

  // 5. Compare. Loss: 1e-5 relative.
  ASSERT_TRUE(got.count("loss")) << "forward_backward put no 'loss' metric";
  EXPECT_LE(std::fabs(got["loss"] - ref["loss"]), 1e-5 * std::fabs(ref["loss"]))
      << "loss: C++ " << got["loss"] << " vs reference " << ref["loss"];
  for (const char* k : {"ce_loss", "aux_loss", "z_loss"}) {
    ASSERT_TRUE(got.count(k)) << "forward_backward put no '" << k << "' metric";
    EXPECT_LE(std::fabs(got[k] - ref[k]), 1e-5 * std::fabs(ref[k]) + 1e-9)
        << k << ": C++ " << got[k] << " vs reference " << ref[k];
  }
  for (const auto& [k, v] : ref) {
    if (k == "loss" || k == "ce_loss" || k == "aux_loss" || k == "z_loss" || k.starts_with("min_")) continue;
    ASSERT_TRUE(got.count(k)) << "forward_backward put no '" << k << "' metric";
    // counts and shares of counts: exact up to the division's rounding
    EXPECT_NEAR(got[k], v, 1e-9) << k;
  }
  if (std::string(c.overrides).find("\"enabled\": true") != std::string::npos) {
    EXPECT_GT(ref["masked_head_fraction"], 0.0) << "threshold masks nothing: the case tests nothing";
    EXPECT_LT(ref["masked_head_fraction"], 1.0) << "threshold masks everything: the case tests nothing";
  }
  if (std::string(c.name).find("drops") != std::string::npos) {
    EXPECT_GT(ref["moe_dropped_fraction"], 0.0) << "no assignment dropped: the case tests nothing";
  }

  // Every gradient: max-norm relative error 1e-4 per tensor.
  std::vector<std::vector<float>> first(params.count);
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < params.count; ++i) {
    const zc_param& p = params.params[i];
    const std::vector<double> g = as_doubles(R.at(p.name));
    ASSERT_EQ(static_cast<int64_t>(g.size()), numel(*p.grad));
    const double err = max_norm_rel(f32(*p.grad), g);
    double gmax = 0;
    for (double x : g) gmax = std::max(gmax, std::fabs(x));
    if (gmax > 0) {
      EXPECT_LE(err, 1e-4) << p.name << ": max|g_cpp − g_ref| / max|g_ref| = " << err << " (max|g_ref| " << gmax << ")";
    } else {
      EXPECT_LE(err, 1e-12) << p.name << ": the reference gradient is 0, C++ has max|g| " << err;
    }
    if (err > worst) worst = err, worst_name = p.name;
    first[i].assign(f32(*p.grad), f32(*p.grad) + numel(*p.grad));
  }
  std::printf("[ figures  ] %s: loss %.9g (reference %.9g, rel err %.2e); worst grad max-norm rel err %.2e (%s)\n",
              c.name, got["loss"], ref["loss"], std::fabs(got["loss"] - ref["loss"]) / std::fabs(ref["loss"]), worst,
              worst_name.c_str());

  // Gradients accumulate: a second call without zero_grad doubles them.
  ASSERT_EQ(FakeHost::take_message(T.forward_backward(inst, &batch, &fb, &sink)), "");
  for (size_t i = 0; i < params.count; ++i) {
    const zc_param& p = params.params[i];
    std::vector<double> twice(first[i].begin(), first[i].end());
    for (double& x : twice) x *= 2;
    EXPECT_LE(max_norm_rel(f32(*p.grad), twice), 1e-6) << p.name << ": second call did not accumulate";
  }
  // zero_grad clears.
  ASSERT_EQ(FakeHost::take_message(T.zero_grad(inst)), "");
  for (size_t i = 0; i < params.count; ++i) {
    const float* g = f32(*params.params[i].grad);
    EXPECT_TRUE(std::all_of(g, g + numel(*params.params[i].grad), [](float x) { return x == 0.0f; }))
        << params.params[i].name << ": zero_grad left non-zero gradients";
  }

  // forward_logprobs: per-token log p(target), 0 at excluded positions.
  if (T.forward_logprobs) {
    std::vector<float> lp(static_cast<size_t>(tgt.numel()), 12345.0f);
    DLTensor out{};
    out.data = lp.data();
    out.device = DLDevice{kDLCPU, 0};
    out.ndim = 2;
    out.dtype = DLDataType{kDLFloat, 32, 1};
    std::vector<int64_t> shape = tgt.shape;
    out.shape = shape.data();
    ASSERT_EQ(FakeHost::take_message(T.forward_logprobs(inst, &batch, &out)), "");
    const double err = max_norm_rel(lp.data(), as_doubles(R.at("logprobs")));
    EXPECT_LE(err, 1e-5) << "forward_logprobs: max|lp_cpp − lp_ref| / max|lp_ref| = " << err;
  } else {
    ADD_FAILURE() << "model table has no forward_logprobs";
  }

  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Cases, Glm52VsReference, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
