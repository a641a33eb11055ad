// The glm52 plugin through the C ABI only (as the host and the PyTorch
// reference use it): negotiation, create with explicit dims, params() names
// and flags, forward_backward metrics, save_state/load_state by spec names.
#include <zcode/abi.h>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

struct zc_status {
  zc_status_code code;
  std::string message;
};

namespace {

zc_status* status_create(void*, zc_status_code code, const char* msg) { return new zc_status{code, msg}; }
zc_status_code status_code(void*, const zc_status* s) { return s->code; }
const char* status_message(void*, const zc_status* s) { return s->message.c_str(); }
void status_release(void*, zc_status* s) { delete s; }
uint64_t derive_seed(void*, const char* name) { return 1234u ^ std::strlen(name); }
void log_line(void*, zc_log_level, const char*, const char*) {}

zc_host_services make_host() {
  zc_host_services h{};
  h.struct_size = sizeof h;
  h.abi_major = ZC_ABI_VERSION_MAJOR;
  h.abi_minor = ZC_ABI_VERSION_MINOR;
  h.log = log_line;
  h.status_create = status_create;
  h.seed = 1234;
  h.derive_seed = derive_seed;
  h.device = DLDevice{kDLCPU, 0};
  h.num_threads = 2;
  h.status_code = status_code;
  h.status_message = status_message;
  h.status_release = status_release;
  return h;
}

struct Stored {
  std::vector<int64_t> shape;
  std::vector<float> data;
  DLTensor t{};
};

struct Store {
  std::map<std::string, Stored> tensors;
  std::vector<std::string> order;
  std::string json;
};

zc_status* put_tensor(void* ctx, const char* name, const DLTensor* t) {
  Store* s = static_cast<Store*>(ctx);
  Stored& st = s->tensors[name];
  st.shape.assign(t->shape, t->shape + t->ndim);
  size_t n = 1;
  for (int64_t v : st.shape) n *= static_cast<size_t>(v);
  st.data.assign(static_cast<const float*>(t->data), static_cast<const float*>(t->data) + n);
  s->order.push_back(name);
  return nullptr;
}
zc_status* put_json(void* ctx, const char* j, size_t n) {
  static_cast<Store*>(ctx)->json.assign(j, n);
  return nullptr;
}
const DLTensor* get_tensor(void* ctx, const char* name) {
  Store* s = static_cast<Store*>(ctx);
  auto it = s->tensors.find(name);
  if (it == s->tensors.end()) return nullptr;
  Stored& st = it->second;
  st.t = DLTensor{st.data.data(),
                  {kDLCPU, 0},
                  static_cast<int32_t>(st.shape.size()),
                  {kDLFloat, 32, 1},
                  st.shape.data(),
                  nullptr,
                  0};
  return &st.t;
}
size_t num_tensors(void* ctx) { return static_cast<Store*>(ctx)->tensors.size(); }
const char* tensor_name(void* ctx, size_t i) {
  auto it = static_cast<Store*>(ctx)->tensors.begin();
  std::advance(it, static_cast<long>(i));
  return it->first.c_str();
}

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(ZCODE_GLM52_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    auto fn = reinterpret_cast<zc_negotiate_fn>(dlsym(lib_, ZC_PLUGIN_ENTRY_SYMBOL));
    ASSERT_NE(fn, nullptr);
    uint32_t maj = 0, min = 0;
    const zc_manifest* man = nullptr;
    ASSERT_EQ(fn(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, &host_, &maj, &min, &man), ZC_OK);
    ASSERT_EQ(man->num_components, 1u);
    EXPECT_STREQ(man->components[0].name, "glm52");
    table_ = static_cast<const zc_model_table*>(man->components[0].table);
    ASSERT_EQ(table_->header.kind, static_cast<zc_kind>(ZC_KIND_MODEL));
  }
  void* create(const char* options, const char* config = "{}") {
    zc_create_args a{};
    a.struct_size = sizeof a;
    a.host = &host_;
    a.options_json = options;
    a.config_json = config;
    a.run_dir = "";
    void* inst = nullptr;
    zc_status* s = table_->create(&a, &inst);
    if (s) {
      last_error_ = s->message;
      delete s;
      return nullptr;
    }
    return inst;
  }
  std::string call(zc_status* s) {
    if (!s) return "";
    std::string m = s->message;
    delete s;
    return m;
  }
  zc_host_services host_ = make_host();
  void* lib_ = nullptr;  // never unloaded (ABI rule)
  const zc_model_table* table_ = nullptr;
  std::string last_error_;
};

const char* kOpts = R"({"type": "GLM5pt2", "vocab_size": 200, "d_model": 16, "n_layers": 2, "n_heads": 4,
  "n_kv_heads": 2, "head_dim": 4, "ffn_hidden": 24, "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 8,
  "moe_shared_experts": 1, "first_dense_layers": 1, "capacity_factor": 1.25, "max_seq_len": 32,
  "eval_capacity_factor": 1.25})";  // log-probs with training's drops: they must sum to its ce_loss

TEST_F(PluginTest, ParamsCarrySpecNamesShapesAndFlags) {
  void* m = create(kOpts);
  ASSERT_NE(m, nullptr) << last_error_;
  zc_param_list list{};
  ASSERT_EQ(call(table_->params(m, &list)), "");
  std::map<std::string, const zc_param*> by;
  for (size_t i = 0; i < list.count; ++i) by[list.params[i].name] = &list.params[i];
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expect = {
      {"embed.weight", {256, 16}},
      {"layers.0.attn_norm.weight", {1}},
      {"layers.0.attn.wq", {16, 16}},
      {"layers.0.attn.wk", {8, 16}},
      {"layers.0.attn.wv", {8, 16}},
      {"layers.0.attn.wo", {16, 16}},
      {"layers.0.attn.rope_log_inv_freq", {2}},
      {"layers.0.ffn_norm.weight", {1}},
      {"layers.0.ffn.w1", {24, 16}},
      {"layers.0.ffn.w3", {24, 16}},
      {"layers.0.ffn.w2", {16, 24}},
      {"layers.1.moe.router", {4, 16}},
      {"layers.1.moe.experts.3.w1", {8, 16}},
      {"layers.1.moe.experts.3.w3", {8, 16}},
      {"layers.1.moe.experts.3.w2", {16, 8}},
      {"layers.1.moe.shared.0.w2", {16, 8}},
  };
  // 1 embed + layer 0 (7 + 3) + layer 1 (7 + router + 4·3 + 1·3).
  EXPECT_EQ(list.count, 1u + 10u + 7u + 1u + 12u + 3u);
  for (const auto& [name, shape] : expect) {
    ASSERT_TRUE(by.count(name)) << name;
    const DLTensor* v = by[name]->value;
    EXPECT_EQ(std::vector<int64_t>(v->shape, v->shape + v->ndim), shape) << name;
    EXPECT_EQ(v->dtype.code, kDLFloat);
    EXPECT_EQ(by[name]->grad->ndim, v->ndim);
  }
  EXPECT_TRUE(by["layers.0.attn_norm.weight"]->flags & ZC_PARAM_NO_DECAY);
  EXPECT_TRUE(by["layers.0.attn.rope_log_inv_freq"]->flags & ZC_PARAM_NO_DECAY);
  EXPECT_TRUE(by["embed.weight"]->flags & ZC_PARAM_EMBEDDING);
  EXPECT_TRUE(by["layers.1.moe.router"]->flags & ZC_PARAM_ROUTER);
  EXPECT_TRUE(by["layers.1.moe.experts.0.w1"]->flags & ZC_PARAM_EXPERT);
  EXPECT_EQ(by["layers.0.attn.wq"]->flags, 0u);
  // ScaleNorm gain init √d = 4; RoPE init -(2i/R)·ln θ.
  EXPECT_FLOAT_EQ(static_cast<float*>(by["layers.0.attn_norm.weight"]->value->data)[0], 4.0f);
  EXPECT_FLOAT_EQ(static_cast<float*>(by["layers.0.attn.rope_log_inv_freq"]->value->data)[1],
                  static_cast<float>(-0.5 * std::log(10000.0)));
  uint64_t total = 0, active = 0;
  ASSERT_EQ(call(table_->num_params(m, &total, &active)), "");
  uint64_t sum = 0;
  for (size_t i = 0; i < list.count; ++i) {
    uint64_t n = 1;
    for (int j = 0; j < list.params[i].value->ndim; ++j) n *= static_cast<uint64_t>(list.params[i].value->shape[j]);
    sum += n;
  }
  EXPECT_EQ(total, sum);
  EXPECT_EQ(total - active, 2u * 3u * 8u * 16u);  // two idle experts of the MoE layer
  table_->destroy(m);
}

TEST_F(PluginTest, ForwardBackwardMetricsAndStateRoundTrip) {
  void* m = create(kOpts);
  ASSERT_NE(m, nullptr) << last_error_;
  const int B = 2, T = 8;
  std::vector<int32_t> ids(B * T), tg(B * T);
  for (int i = 0; i < B * T; ++i) {
    ids[i] = (i * 37) % 200;
    tg[i] = i % 5 == 0 ? -1 : (i * 11) % 200;
  }
  int64_t shape[2] = {B, T};
  zc_batch batch{};
  batch.struct_size = sizeof batch;
  batch.input_ids = DLTensor{ids.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
  batch.targets = DLTensor{tg.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
  zc_fb_options o{sizeof(zc_fb_options), ZC_LABELS_TARGETS, 12.0, 1.0, 0, nullptr, nullptr};
  std::map<std::string, double> got;
  zc_metrics_sink sink{
      &got, [](void* c, const char* n, double v) { (*static_cast<std::map<std::string, double>*>(c))[n] = v; }};
  ASSERT_EQ(call(table_->forward_backward(m, &batch, &o, &sink)), "");
  for (const char* k : {"loss", "ce_loss", "aux_loss", "z_loss", "moe_load_0", "moe_load_3", "moe_dropped_fraction",
                        "masked_head_fraction", "tokens"})
    EXPECT_TRUE(got.count(k)) << k;
  EXPECT_EQ(got["tokens"], 12.0);
  EXPECT_NEAR(got["loss"], got["ce_loss"] + got["aux_loss"] + got["z_loss"], 1e-12);
  // At init the model is near uniform over 200 ids: ce ≈ ln 200 (12 targets / normaliser 12).
  EXPECT_NEAR(got["ce_loss"], std::log(200.0), 0.3);
  EXPECT_NEAR(got["moe_load_0"] + got["moe_load_1"] + got["moe_load_2"] + got["moe_load_3"], 1.0, 1e-12);

  // log-probs: Σ -logp / 12 equals the ce_loss.
  std::vector<float> lp(B * T);
  DLTensor out{lp.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  ASSERT_EQ(call(table_->forward_logprobs(m, &batch, &out)), "");
  double s = 0;
  for (int i = 0; i < B * T; ++i) s -= lp[i];
  EXPECT_NEAR(s / 12.0, got["ce_loss"], 1e-5);
  EXPECT_EQ(lp[0], 0.0f);

  Store st;
  zc_state_writer w{sizeof(zc_state_writer), 0, &st, put_tensor, put_json, nullptr};
  ASSERT_EQ(call(table_->save_state(m, &w)), "");
  EXPECT_NE(st.json.find("\"architecture\""), std::string::npos);
  EXPECT_EQ(st.order.front(), "embed.weight");

  // A second instance with another seed loads the state and then computes the same loss.
  host_.seed = 99;
  void* m2 = create(kOpts);
  ASSERT_NE(m2, nullptr);
  zc_state_reader r{sizeof(zc_state_reader), 0,      &st, get_tensor, num_tensors, tensor_name, st.json.c_str(),
                    st.json.size(),          nullptr};
  ASSERT_EQ(call(table_->load_state(m2, &r)), "");
  std::vector<float> lp2(B * T);
  DLTensor out2{lp2.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  ASSERT_EQ(call(table_->forward_logprobs(m2, &batch, &out2)), "");
  EXPECT_EQ(lp, lp2);

  // Refusals: a wrong shape, a missing tensor, an unknown tensor, another head layout.
  Store bad = st;
  bad.tensors["layers.0.attn.wq"].shape = {8, 32};
  zc_state_reader rb{sizeof(zc_state_reader), 0, &bad, get_tensor, num_tensors, tensor_name, "", 0, nullptr};
  EXPECT_EQ(call(table_->load_state(m2, &rb)),
            "model state: tensor 'layers.0.attn.wq' has shape [8, 32], expected [16, 16]");
  bad = st;
  bad.tensors.erase("layers.1.moe.router");
  EXPECT_EQ(call(table_->load_state(m2, &rb)),
            "model state: tensor 'layers.1.moe.router' missing (expected float32 [4, 16])");
  bad = st;
  bad.tensors["layers.2.attn.wq"] = bad.tensors["layers.0.attn.wq"];
  EXPECT_NE(call(table_->load_state(m2, &rb)).find("unexpected tensor 'layers.2.attn.wq'"), std::string::npos);
  bad = st;
  std::string j = st.json;
  j.replace(j.find("\"n_heads\":4"), 11, "\"n_heads\":2");
  zc_state_reader rj{
      sizeof(zc_state_reader), 0, &bad, get_tensor, num_tensors, tensor_name, j.c_str(), j.size(), nullptr};
  EXPECT_EQ(call(table_->load_state(m2, &rj)), "model state: n_heads is 2 in the checkpoint but 4 in the config");
  // The failed loads changed nothing.
  ASSERT_EQ(call(table_->forward_logprobs(m2, &batch, &out2)), "");
  EXPECT_EQ(lp, lp2);

  table_->destroy(m);
  table_->destroy(m2);
}

// The float GEMMs' engine (zcode/kernels/gemm.h) is recorded in the model
// state, and load_state follows it: a record is taken (what the next
// save_state then says), a state from before the record existed (no
// "float_gemm") means OpenBLAS, the only engine then, and a bad value is
// refused by name with nothing loaded.
TEST_F(PluginTest, GemmEngineIsRecordedAndFollowed) {
  void* m = create(kOpts);
  ASSERT_NE(m, nullptr) << last_error_;
  auto saved_json = [&] {
    Store st;
    zc_state_writer w{sizeof(zc_state_writer), 0, &st, put_tensor, put_json, nullptr};
    EXPECT_EQ(call(table_->save_state(m, &w)), "");
    return st;
  };
  Store st = saved_json();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const std::string rec_avx = "\"float_gemm\":\"avx512\"", rec_blas = "\"float_gemm\":\"openblas\"";
  const size_t at = st.json.find(avx512 ? rec_avx : rec_blas);
  ASSERT_NE(at, std::string::npos) << "an AVX-512 CPU with OpenBLAS's Haswell picks avx512 here; " << st.json;
  const std::string rec = avx512 ? rec_avx : rec_blas;
  auto load = [&](std::string j) {
    zc_state_reader r{
        sizeof(zc_state_reader), 0, &st, get_tensor, num_tensors, tensor_name, j.c_str(), j.size(), nullptr};
    return call(table_->load_state(m, &r));
  };
  std::string j = st.json;
  EXPECT_EQ(load(j.replace(at, rec.size(), "\"float_gemm\":\"fast\"")),
            "model state: float_gemm is \"fast\", expected \"avx512\" or \"openblas\"");
  j = st.json;
  EXPECT_EQ(load(j.replace(at, rec.size(), "\"float_gemm\":3")),
            "model state: float_gemm is 3, expected \"avx512\" or \"openblas\"");
  EXPECT_NE(saved_json().json.find(rec), std::string::npos) << "a refused state switched the engine";
  // Before the record: OpenBLAS.
  j = st.json;
  ASSERT_EQ(j[at - 1], ',');
  EXPECT_EQ(load(j.erase(at - 1, rec.size() + 1)), "");
  EXPECT_NE(saved_json().json.find(rec_blas), std::string::npos) << saved_json().json;
  // A recorded avx512 is followed where the CPU has it; elsewhere OpenBLAS stays (with a warning).
  j = st.json;
  EXPECT_EQ(load(j.replace(at, rec.size(), rec_avx)), "");
  EXPECT_NE(saved_json().json.find(avx512 ? rec_avx : rec_blas), std::string::npos) << saved_json().json;
  table_->destroy(m);
}

// ABI 1.4: named_activations lists what activations lists (names, order,
// shapes, the same buffers), as tensors; before any forward_backward both
// are empty. Each list is valid until the next call, so the first is copied.
TEST_F(PluginTest, NamedActivationsMatchActivations) {
  ASSERT_TRUE(ZC_TABLE_HAS_SLOT(table_, zc_model_table, named_activations));
  void* m = create(kOpts);
  ASSERT_NE(m, nullptr) << last_error_;
  zc_named_tensor_list named{};
  named.struct_size = sizeof named;
  ASSERT_EQ(call(table_->named_activations(m, &named)), "");
  EXPECT_EQ(named.count, 0u);

  const int B = 2, T = 8;
  std::vector<int32_t> ids(B * T), tg(B * T);
  for (int i = 0; i < B * T; ++i) {
    ids[i] = (i * 37) % 200;
    tg[i] = (i * 11) % 200;
  }
  int64_t shape[2] = {B, T};
  zc_batch batch{};
  batch.struct_size = sizeof batch;
  batch.input_ids = DLTensor{ids.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
  batch.targets = DLTensor{tg.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
  zc_fb_options o{sizeof(zc_fb_options), ZC_LABELS_TARGETS, 16.0, 1.0, 0, nullptr, nullptr};
  zc_metrics_sink sink{nullptr, [](void*, const char*, double) {}};
  ASSERT_EQ(call(table_->forward_backward(m, &batch, &o, &sink)), "");

  struct Seen {
    std::string name;
    std::vector<int64_t> shape;
    const void* data;
  };
  zc_param_list acts{};
  ASSERT_EQ(call(table_->activations(m, &acts)), "");
  std::vector<Seen> old;
  for (size_t i = 0; i < acts.count; ++i) {
    const DLTensor* t = acts.params[i].value;
    old.push_back({acts.params[i].name, std::vector<int64_t>(t->shape, t->shape + t->ndim), t->data});
  }
  ASSERT_FALSE(old.empty());
  EXPECT_EQ(old.front().name, "layers.0.input");
  ASSERT_EQ(call(table_->named_activations(m, &named)), "");
  EXPECT_EQ(named.struct_size, sizeof named);
  ASSERT_EQ(named.count, old.size());
  for (size_t i = 0; i < named.count; ++i) {
    const DLTensor& t = named.tensors[i];
    EXPECT_EQ(named.names[i], old[i].name);
    EXPECT_EQ(std::vector<int64_t>(t.shape, t.shape + t.ndim), old[i].shape) << old[i].name;
    EXPECT_EQ(t.data, old[i].data) << old[i].name;
    EXPECT_EQ(t.device.device_type, kDLCPU);
    EXPECT_EQ(t.dtype.code, kDLFloat);
    EXPECT_EQ(t.dtype.bits, 32);
    ASSERT_EQ(t.ndim, 3);
    EXPECT_EQ(t.shape[0], B);
    EXPECT_EQ(t.shape[1], T);
  }
  table_->destroy(m);
}

TEST_F(PluginTest, CreateErrorsAreOneLine) {
  EXPECT_EQ(create(R"({"d_model": 16})"), nullptr);
  EXPECT_EQ(last_error_, "model: no vocabulary size (no tokenizer, and no model.vocab_size)");
  EXPECT_EQ(create(R"({"vocab_size": 10, "router_activation": "relu"})"), nullptr);
  EXPECT_EQ(last_error_, "model.router_activation: 'relu' (expected softmax or sigmoid)");
  EXPECT_EQ(create(R"({"vocab_size": 10, "moe_top_k": 9, "moe_experts": 8})"), nullptr);
  EXPECT_EQ(last_error_, "model.moe_top_k: 9 (expected 1..moe_experts = 8)");
}

// The model's cross-field rules, which the host's validation also checked
// until issue #18 (a second copy); `zcode-host validate` meets them here,
// through the memory estimate. Same paths and values as the host's wording.
TEST_F(PluginTest, ModelRulesMovedFromTheHost) {
  EXPECT_EQ(create(R"({"vocab_size": 10, "moe_experts": 4, "moe_top_k": 6})"), nullptr);
  EXPECT_EQ(last_error_, "model.moe_top_k: 6 (expected 1..moe_experts = 4)");
  EXPECT_EQ(create(R"({"vocab_size": 10, "moe_top_k": 9})"), nullptr);  // the variant's (nano) 8 experts
  EXPECT_EQ(last_error_, "model.moe_top_k: 9 (expected 1..moe_experts = 8)");
  EXPECT_EQ(create(R"({"vocab_size": 10, "n_heads": 8, "n_kv_heads": 3})"), nullptr);
  EXPECT_EQ(last_error_, "model.n_kv_heads: 3 does not divide n_heads 8");
  EXPECT_EQ(create(R"({"vocab_size": 10, "n_layers": 2, "first_dense_layers": 3})"), nullptr);
  EXPECT_EQ(last_error_, "model.first_dense_layers: 3 exceeds model.n_layers (2)");
}

}  // namespace

namespace {

// Evaluation is dropless by default (eval_capacity_factor 0): a row's
// log-probs are the same whether it is evaluated alone or with others. With a
// capacity factor for evaluation, drops depend on the rows that share the
// call, and the two differ (the check that the first one can fail).
TEST_F(PluginTest, EvalLogprobsDoNotDependOnTheRowsSharingTheCall) {
  const std::string base = R"({"type": "GLM5pt2", "vocab_size": 200, "d_model": 16, "n_layers": 2, "n_heads": 4,
    "n_kv_heads": 2, "head_dim": 4, "ffn_hidden": 24, "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 8,
    "first_dense_layers": 0, "capacity_factor": 0.5, "max_seq_len": 32)";
  const int B = 4, T = 8;
  std::vector<int32_t> ids(B * T), tg(B * T);
  for (int i = 0; i < B * T; ++i) {
    ids[i] = (i * 37 + i / T * 11) % 200;
    tg[i] = (i * 13 + 5) % 200;
  }
  // log-probs of rows [r0, r0 + rows) in one call.
  auto logprobs = [&](void* m, int r0, int rows) {
    int64_t shape[2] = {rows, T};
    zc_batch b{};
    b.struct_size = sizeof b;
    b.input_ids = DLTensor{ids.data() + r0 * T, {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
    b.targets = DLTensor{tg.data() + r0 * T, {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
    std::vector<float> lp(static_cast<size_t>(rows * T));
    DLTensor out{lp.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
    EXPECT_EQ(call(table_->forward_logprobs(m, &b, &out)), "");
    return lp;
  };
  // Largest |all-rows − row-by-row| / max |log p| over the batch.
  auto batch_dependence = [&](const std::string& options) {
    void* m = create(options.c_str());
    EXPECT_NE(m, nullptr) << last_error_;
    if (!m) return 1.0;
    const std::vector<float> all = logprobs(m, 0, B);
    double diff = 0, scale = 0;
    for (int r = 0; r < B; ++r) {
      const std::vector<float> one = logprobs(m, r, 1);
      for (int t = 0; t < T; ++t) {
        diff = std::max(diff, std::fabs(double(all[r * T + t]) - one[t]));
        scale = std::max(scale, std::fabs(double(one[t])));
      }
    }
    table_->destroy(m);
    return diff / scale;
  };
  // Dropless, the two differ only by fp32 rounding in differently blocked
  // GEMMs. Each log-prob is reached through sums of at most n = 200 terms
  // (the log-sum-exp over the vocabulary; d_model 16, ffn 24), and a sum's
  // rounding error is at most n·eps of the sum of magnitudes (Higham, gamma_n):
  // 200·FLT_EPSILON of the largest |log p| bounds it.
  const double bound = 200 * std::numeric_limits<float>::epsilon();
  EXPECT_LE(batch_dependence(base + "}"), bound);
  // With capacity 0.5 for evaluation, drops move the numbers beyond that
  // (8.3e-4 for this fixed seed: a tiny model at init routes almost evenly).
  EXPECT_GT(batch_dependence(base + R"(, "eval_capacity_factor": 0.5})"), 10 * bound);
}

struct ShapeRecord {
  std::vector<std::pair<std::string, std::vector<int64_t>>> params;
  static void put(void* ctx, const char* name, int32_t ndim, const int64_t* shape, uint32_t) {
    static_cast<ShapeRecord*>(ctx)->params.emplace_back(name, std::vector<int64_t>(shape, shape + ndim));
  }
};
}  // namespace

// ABI 1.3: estimate_memory without an instance lists exactly the parameters
// create makes, and its byte counts cover them (4 bytes a float each).
TEST_F(PluginTest, EstimateMemoryListsTheParametersCreateMakes) {
  ASSERT_TRUE(ZC_TABLE_HAS_SLOT(table_, zc_model_table, estimate_memory));
  zc_create_args a{};
  a.struct_size = sizeof a;
  a.host = &host_;
  a.options_json = kOpts;
  a.config_json = R"({"data": {"batch_size": 2}, "evaluation": {"batch_size": 4}})";
  a.run_dir = "";
  ShapeRecord rec;
  zc_param_shape_sink sink{&rec, &ShapeRecord::put};
  zc_memory_estimate est{};
  est.struct_size = sizeof est;
  ASSERT_EQ(call(table_->estimate_memory(&a, &sink, &est)), "");
  void* m = create(kOpts);
  ASSERT_NE(m, nullptr) << last_error_;
  zc_param_list list{};
  ASSERT_EQ(call(table_->params(m, &list)), "");
  ASSERT_EQ(rec.params.size(), list.count);
  uint64_t floats = 0;
  for (size_t i = 0; i < list.count; ++i) {
    EXPECT_EQ(rec.params[i].first, list.params[i].name);
    EXPECT_EQ(rec.params[i].second, std::vector<int64_t>(list.params[i].value->shape,
                                                         list.params[i].value->shape + list.params[i].value->ndim));
    uint64_t n = 1;
    for (int64_t s : rec.params[i].second) n *= static_cast<uint64_t>(s);
    floats += n;
  }
  EXPECT_GE(est.parameter_bytes, 4 * floats);
  EXPECT_EQ(est.gradient_bytes, est.parameter_bytes);
  EXPECT_GT(est.activation_bytes, 0u);
  EXPECT_EQ(est.optimizer_state_bytes, 0u);  // not the model's to fill
  // A bad option fails the estimate as it fails create, and leaves est alone.
  zc_memory_estimate before = est;
  a.options_json = R"({"n_heads": 0})";
  EXPECT_NE(call(table_->estimate_memory(&a, nullptr, &est)), "");
  EXPECT_EQ(std::memcmp(&before, &est, sizeof est), 0);
  table_->destroy(m);
}
