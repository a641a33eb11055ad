// The bundled callbacks through their C tables (dlopen'ed plugin), driven by
// hand-made events; expected values derived by hand in the comments.
#include <zcode/core/host_services.h>
#include <zcode/core/stage_factory.h>
#include <zcode/sdk/plugin.h>

#include <gtest/gtest.h>

#include "event_writer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

// A model with three parameters in two groups, for the debugger:
//   layers.0.attn.wq: value [3, 4],  grad [0, 0]      (group layers.0.attn)
//   layers.0.attn.wk: value [0],     grad [12]        (group layers.0.attn)
//   embed.weight:     value [1,1,1,1], grad [1, -1, 0, 0] (group embed)
// Group norms by hand: layers.0.attn grad sqrt(144) = 12, value sqrt(9+16) = 5;
// embed grad sqrt(2), value 2.
struct DebugModel : zcode::sdk::Model {
  explicit DebugModel(const zcode::sdk::CreateContext&) {
    using zcode::sdk::kF32;
    using zcode::sdk::make_view;
    v[0] = make_view(wq, kF32, 1, s2);
    g[0] = make_view(gq, kF32, 1, s2);
    v[1] = make_view(wk, kF32, 1, s1);
    g[1] = make_view(gk, kF32, 1, s1);
    v[2] = make_view(em, kF32, 1, s4);
    g[2] = make_view(ge, kF32, 1, s4);
    const char* names[3] = {"layers.0.attn.wq", "layers.0.attn.wk", "embed.weight"};
    for (int i = 0; i < 3; ++i) p[i] = zc_param{names[i], &v[i], &g[i], 0, 0};
  }
  void num_params(uint64_t& t, uint64_t& a) const override { t = a = 7; }
  zc_param_list params() override { return {p, 3}; }
  void zero_grad() override {}
  void forward_backward(const zc_batch&, const zc_fb_options&, const zcode::sdk::MetricsSink&) override {}
  const std::string& info_json() const override { return info; }
  // One activation "layers.0.attn.out" [1, 2, 2] = {1, -1, 3, 5}: mean 2,
  // population std sqrt(((1-2)² + (-1-2)² + (3-2)² + (5-2)²) / 4) = sqrt(5),
  // max |x| 5.
  zc_param_list activations() override {
    act_v = zcode::sdk::make_view(act, zcode::sdk::kF32, 3, act_shape);
    act_p = zc_param{"layers.0.attn.out", &act_v, nullptr, 0, 0};
    return {&act_p, 1};
  }
  float act[4] = {1, -1, 3, 5};
  int64_t act_shape[3] = {1, 2, 2};
  DLTensor act_v{};
  zc_param act_p{};
  float wq[2] = {3, 4}, gq[2] = {0, 0}, wk[1] = {0}, gk[1] = {12}, em[4] = {1, 1, 1, 1}, ge[4] = {1, -1, 0, 0};
  int64_t s1[1] = {1}, s2[1] = {2}, s4[1] = {4};
  DLTensor v[3], g[3];
  zc_param p[3];
  std::string info = "{}";
};

struct Callbacks : ::testing::Test {
  zcode::HostServices host{1, 1};
  const zc_manifest* manifest = nullptr;
  fs::path dir;
  void SetUp() override {
    void* h = dlopen(ZCODE_CALLBACKS_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    auto neg = reinterpret_cast<zc_negotiate_fn>(dlsym(h, ZC_PLUGIN_ENTRY_SYMBOL));
    uint32_t a = 0, b = 0;
    ASSERT_EQ(neg(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, host.raw(), &a, &b, &manifest), ZC_OK);
    dir = fs::temp_directory_path() / ("zcode_cb_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  // A DebugModel instance created through `t` (the SDK's table, or a copy
  // posing as an older ABI), and a STEP_END event that names it.
  void* create_model(const zc_model_table& t) {
    zcode::sdk::detail::g_host = host.raw();
    const zc_create_args a = zcode::stage_args(host.raw(), nullptr, nullptr, nullptr);
    void* model = nullptr;
    zc_status* cs = t.create(&a, &model);
    EXPECT_EQ(cs, nullptr) << zcode::status_message(cs);
    return model;
  }
  static zc_event step_end(const zc_model_table* t, void* model, uint64_t step) {
    zc_event e{};
    e.struct_size = sizeof e;
    e.kind = ZC_EVENT_STEP_END;
    e.metrics_json = "{}";
    e.model = {t, model};
    e.step = step;
    return e;
  }

  const zc_callback_table* table(const std::string& name) {
    for (uint32_t i = 0; i < manifest->num_components; ++i)
      if (manifest->components[i].name == name)
        return static_cast<const zc_callback_table*>(manifest->components[i].table);
    return nullptr;
  }
  // The create call as the host makes it (zcode::stage_args); the status is
  // the caller's to read.
  zc_status* try_create(const std::string& name, const std::string& opts, const std::string& config, void** inst) {
    const std::string rd = dir.string();
    const zc_create_args a = zcode::stage_args(host.raw(), opts.c_str(), config.c_str(), rd.c_str());
    *inst = nullptr;
    return table(name)->create(&a, inst);
  }
  void* create(const std::string& name, const std::string& opts, const std::string& config) {
    void* inst = nullptr;
    zc_status* s = try_create(name, opts, config, &inst);
    EXPECT_EQ(s, nullptr) << zcode::status_message(s);
    const zcode::StatusPtr owned(s);
    return inst;
  }
  uint32_t send(const std::string& name, void* inst, zc_event_kind kind, uint64_t step, const std::string& json) {
    zc_event e{};
    e.struct_size = sizeof e;
    e.kind = kind;
    e.step = step;
    e.max_steps = 100;
    e.metrics_json = json.c_str();
    uint32_t flags = 0;
    zc_status* s = table(name)->on_event(inst, &e, &flags);
    EXPECT_EQ(s, nullptr) << zcode::status_message(s);
    const zcode::StatusPtr owned(s);
    return flags;
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

TEST_F(Callbacks, CheckpointCadence) {
  void* c = create("checkpoint", R"({"type":"checkpoint","every":3})", "{}");
  for (uint64_t s = 1; s <= 7; ++s)
    EXPECT_EQ(send("checkpoint", c, ZC_EVENT_STEP_END, s, "{}"),
              (s % 3 == 0) ? static_cast<uint32_t>(ZC_CALLBACK_REQUEST_CHECKPOINT) : 0u)
        << s;
  table("checkpoint")->destroy(c);
  // Without `every`: training.save_every.
  void* d = create("checkpoint", R"({"type":"checkpoint"})", R"({"training":{"save_every":2}})");
  EXPECT_EQ(send("checkpoint", d, ZC_EVENT_STEP_END, 2, "{}"), ZC_CALLBACK_REQUEST_CHECKPOINT);
  EXPECT_EQ(send("checkpoint", d, ZC_EVENT_STEP_END, 3, "{}"), 0u);
  EXPECT_EQ(send("checkpoint", d, 99, 4, "{}"), 0u);  // unknown event kinds are ignored
  table("checkpoint")->destroy(d);
}

// The shared cadence comes from the resolved config, never from a default of
// the callback's own: a config_json without it is refused, naming the field.
TEST_F(Callbacks, CadenceFallsBackToTheResolvedConfigOnly) {
  auto refusal = [&](const std::string& name, const std::string& config) -> std::string {
    void* inst = nullptr;
    zc_status* s = try_create(name, R"({"type":")" + name + "\"}", config, &inst);
    if (!s) {
      table(name)->destroy(inst);
      return "";
    }
    const zcode::StatusPtr owned(s);
    return zcode::status_message(s);
  };
  EXPECT_EQ(refusal("console", "{}"), "config.training.log_every: missing required option");
  EXPECT_EQ(refusal("metrics_json", "{}"), "config.training.log_every: missing required option");
  EXPECT_EQ(refusal("checkpoint", "{}"), "config.training.save_every: missing required option");
  EXPECT_EQ(refusal("console", R"({"training":{"log_every":0}})"),
            "training.log_every: expected an integer >= 1, found 0");
  EXPECT_EQ(refusal("console", R"({"training":{"log_every":5}})"), "");
}

TEST_F(Callbacks, EarlyStoppingPatienceAndState) {
  // patience 2, min_delta 0.01: 3.0 (best), 2.5 (best), 2.495 (not better by
  // > 0.01: 1 bad), 2.6 (2 bad -> stop).
  void* e = create("early_stopping", R"({"type":"early_stopping","patience":2,"min_delta":0.01})", "{}");
  EXPECT_EQ(send("early_stopping", e, ZC_EVENT_EVAL_END, 1, R"({"loss":3.0})"), 0u);
  EXPECT_EQ(send("early_stopping", e, ZC_EVENT_EVAL_END, 2, R"({"loss":2.5})"), 0u);
  EXPECT_EQ(send("early_stopping", e, ZC_EVENT_EVAL_END, 3, R"({"loss":2.495})"), 0u);
  // Save after 1 bad evaluation, restore into a fresh instance: it stops on the next bad one.
  std::string json;
  zc_state_writer w{sizeof(zc_state_writer),
                    0,
                    &json,
                    nullptr,
                    [](void* c, const char* j, size_t n) -> zc_status* {
                      static_cast<std::string*>(c)->assign(j, n);
                      return nullptr;
                    },
                    nullptr};
  ASSERT_EQ(table("early_stopping")->save_state(e, &w), nullptr);
  EXPECT_EQ(send("early_stopping", e, ZC_EVENT_EVAL_END, 4, R"({"loss":2.6})"), ZC_CALLBACK_REQUEST_STOP);
  void* f = create("early_stopping", R"({"type":"early_stopping","patience":2,"min_delta":0.01})", "{}");
  zc_state_reader r{sizeof(zc_state_reader),
                    0,
                    nullptr,
                    [](void*, const char*) -> const DLTensor* { return nullptr; },
                    [](void*) -> size_t { return 0; },
                    [](void*, size_t) -> const char* { return nullptr; },
                    json.c_str(),
                    json.size(),
                    nullptr};
  ASSERT_EQ(table("early_stopping")->load_state(f, &r), nullptr);
  EXPECT_EQ(send("early_stopping", f, ZC_EVENT_EVAL_END, 4, R"({"loss":2.6})"), ZC_CALLBACK_REQUEST_STOP);
  table("early_stopping")->destroy(e);
  table("early_stopping")->destroy(f);
}

TEST_F(Callbacks, MetricsJsonKeepsFinalBestAndHistory) {
  void* m = create("metrics_json", R"({"type":"metrics_json","every":2})", "{}");
  send("metrics_json", m, ZC_EVENT_STEP_END, 1, R"({"loss":5.0})");  // step 1 is always kept
  send("metrics_json", m, ZC_EVENT_STEP_END, 2, R"({"loss":4.0})");
  send("metrics_json", m, ZC_EVENT_STEP_END, 3, R"({"loss":3.5})");  // skipped (every 2)
  send("metrics_json", m, ZC_EVENT_EVAL_END, 3, R"({"loss":3.9,"perplexity":49.4})");
  send("metrics_json", m, ZC_EVENT_STEP_END, 4, R"({"loss":3.0})");
  send("metrics_json", m, ZC_EVENT_EVAL_END, 4, R"({"loss":4.1})");
  send("metrics_json", m, ZC_EVENT_TEARDOWN, 4, "{}");
  rapidjson::Document d;
  d.Parse(slurp(dir / "metrics.json").c_str());
  ASSERT_TRUE(d.IsObject()) << slurp(dir / "metrics.json");
  EXPECT_EQ(d["history"]["train"].Size(), 3u);  // steps 1, 2, 4
  EXPECT_EQ(d["history"]["val"].Size(), 2u);
  EXPECT_EQ(d["final"]["train"]["loss"].GetDouble(), 3.0);
  EXPECT_EQ(d["final"]["val"]["loss"].GetDouble(), 4.1);
  EXPECT_EQ(d["best"]["val_loss"].GetDouble(), 3.9);
  EXPECT_EQ(d["best"]["step"].GetUint64(), 3u);
  table("metrics_json")->destroy(m);
}

// metrics_jsonl: one line per log step (every 2 and the first: steps 1, 2
// and 4 of these; send() says max_steps 100) and per evaluation, each
// {"event", "step", "max_steps", the metrics in order}; the expected lines
// are written out by hand.
TEST_F(Callbacks, MetricsJsonlStreamsLogStepsAndEvaluations) {
  void* m = create("metrics_jsonl", R"({"type":"metrics_jsonl","every":2})", "{}");
  send("metrics_jsonl", m, ZC_EVENT_SETUP, 0, R"({"run_dir":"x","resumed_step":0})");
  send("metrics_jsonl", m, ZC_EVENT_STEP_END, 1, R"({"loss":5.0,"lr":0.001})");
  send("metrics_jsonl", m, ZC_EVENT_STEP_END, 2, R"({"loss":4.25})");
  send("metrics_jsonl", m, ZC_EVENT_STEP_END, 3, R"({"loss":3.5})");  // not a log step
  send("metrics_jsonl", m, ZC_EVENT_EVAL_END, 3, R"({"loss":3.9,"perplexity":49.4})");
  // Flushed as it goes: readable before teardown.
  EXPECT_EQ(slurp(dir / "logs/metrics.jsonl"),
            "{\"event\":\"step\",\"step\":1,\"max_steps\":100,\"loss\":5.0,\"lr\":0.001}\n"
            "{\"event\":\"step\",\"step\":2,\"max_steps\":100,\"loss\":4.25}\n"
            "{\"event\":\"eval\",\"step\":3,\"max_steps\":100,\"loss\":3.9,\"perplexity\":49.4}\n");
  send("metrics_jsonl", m, ZC_EVENT_STEP_END, 4, R"({"loss":3.0})");
  send("metrics_jsonl", m, ZC_EVENT_TEARDOWN, 4, "{}");
  table("metrics_jsonl")->destroy(m);
  const std::string all = slurp(dir / "logs/metrics.jsonl");
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 4) << all;

  // A resume from step 2 keeps the records of steps <= 2 (a torn last line
  // goes too) and continues; a fresh run (resumed_step 0) starts empty.
  std::ofstream(dir / "logs/metrics.jsonl", std::ios::app) << "{\"event\":\"step\",\"st";
  void* r = create("metrics_jsonl", R"({"type":"metrics_jsonl","every":2})", "{}");
  send("metrics_jsonl", r, ZC_EVENT_SETUP, 2, R"({"run_dir":"x","resumed_step":2})");
  EXPECT_EQ(slurp(dir / "logs/metrics.jsonl"),
            "{\"event\":\"step\",\"step\":1,\"max_steps\":100,\"loss\":5.0,\"lr\":0.001}\n"
            "{\"event\":\"step\",\"step\":2,\"max_steps\":100,\"loss\":4.25}\n");
  send("metrics_jsonl", r, ZC_EVENT_STEP_END, 4, R"({"loss":2.5})");
  const std::string resumed = slurp(dir / "logs/metrics.jsonl");
  EXPECT_EQ(resumed.substr(resumed.rfind("{\"event")),
            "{\"event\":\"step\",\"step\":4,\"max_steps\":100,\"loss\":2.5}\n");
  table("metrics_jsonl")->destroy(r);
  void* f = create("metrics_jsonl", R"({"type":"metrics_jsonl"})", R"({"training":{"log_every":10}})");
  send("metrics_jsonl", f, ZC_EVENT_SETUP, 0, R"({"run_dir":"x","resumed_step":0})");
  EXPECT_EQ(slurp(dir / "logs/metrics.jsonl"), "");
  table("metrics_jsonl")->destroy(f);
}

// training.eval_at_start: the step-0 evaluation is history, never best (even
// when it is the lowest loss), and the console names it "Step 0/N".
TEST_F(Callbacks, StepZeroEvaluationIsHistoryButNotBest) {
  // Without `every`: training.log_every of the resolved config (the host fills it).
  void* m = create("metrics_json", R"({"type":"metrics_json"})", R"({"training":{"log_every":10}})");
  send("metrics_json", m, ZC_EVENT_EVAL_END, 0, R"({"loss":1.5,"perplexity":4.4817})");
  send("metrics_json", m, ZC_EVENT_STEP_END, 1, R"({"loss":5.0})");
  send("metrics_json", m, ZC_EVENT_EVAL_END, 1, R"({"loss":2.0})");
  send("metrics_json", m, ZC_EVENT_TEARDOWN, 1, "{}");
  rapidjson::Document d;
  d.Parse(slurp(dir / "metrics.json").c_str());
  ASSERT_TRUE(d.IsObject()) << slurp(dir / "metrics.json");
  ASSERT_EQ(d["history"]["val"].Size(), 2u);
  EXPECT_EQ(d["history"]["val"][0]["step"].GetUint64(), 0u);
  EXPECT_EQ(d["history"]["val"][0]["loss"].GetDouble(), 1.5);
  EXPECT_EQ(d["best"]["val_loss"].GetDouble(), 2.0);
  EXPECT_EQ(d["best"]["step"].GetUint64(), 1u);
  table("metrics_json")->destroy(m);
  // early_stopping with patience 1: a step-0 loss of 1.5 would make step 1's
  // 2.0 a non-improvement and stop; step 0 is not counted, so it does not.
  void* e = create("early_stopping", R"({"type":"early_stopping","patience":1})", "{}");
  EXPECT_EQ(send("early_stopping", e, ZC_EVENT_EVAL_END, 0, R"({"loss":1.5})"), 0u);
  EXPECT_EQ(send("early_stopping", e, ZC_EVENT_EVAL_END, 1, R"({"loss":2.0})"), 0u);
  EXPECT_EQ(send("early_stopping", e, ZC_EVENT_EVAL_END, 2, R"({"loss":2.1})"), ZC_CALLBACK_REQUEST_STOP);
  table("early_stopping")->destroy(e);
}

TEST_F(Callbacks, ModelCardRendersACustomTemplate) {
  const fs::path tpl = dir / "card.mustache";
  std::ofstream(tpl)
      << "{{experiment_name}}|{{params_total}}|{{#provenance}}{{path}}:{{records}}:{{license}};{{/provenance}}|"
         "{{cpu_core_hours}}|{{energy_kwh}}|{{co2_kg}}|{{#eval_metrics}}{{key}}={{value}},{{/eval_metrics}}";
  void* c =
      create("model_card", R"({"type":"model_card"})", R"({"model_card":{"template":")" + tpl.string() + R"("}})");
  // 3600 s on 2 threads = 2 core-hours; 2 × 10 W × PUE 1 / 1000 = 0.02 kWh;
  // 0.02 × 0.475 = 0.0095 kg CO2e.
  send("model_card", c, ZC_EVENT_TEARDOWN, 10,
       R"({"experiment_name":"demo","params_total":1234,"wall_time_s":3600,"num_threads":2,)"
       R"("provenance":[{"path":"a.jsonl","sha256":"ab","records":7,"skipped":1,"license":"CC0"}],)"
       R"("final_val":{"perplexity":12.5}})");
  EXPECT_EQ(slurp(dir / "model_card.md"), "demo|1234|a.jsonl:7:CC0;|2.0000|0.020000|0.009500|perplexity=12.5,");
  table("model_card")->destroy(c);
  // A missing template is a clear create error.
  zc_create_args a{};
  a.struct_size = sizeof a;
  a.host = host.raw();
  a.options_json = "{}";
  a.config_json = R"({"model_card":{"template":"/nonexistent.mustache"}})";
  a.run_dir = "";
  void* inst = nullptr;
  zc_status* s = table("model_card")->create(&a, &inst);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::string(zcode::status_message(s)), "model_card.template: file '/nonexistent.mustache' not found");
  zcode::status_release(s);
}

TEST_F(Callbacks, ModelCardTemplateNestingAndSizeAreBounded) {
  auto create_error = [&](const std::string& text) {
    const fs::path tpl = dir / "card.mustache";
    { std::ofstream(tpl, std::ios::binary) << text; }
    const std::string cfg = R"({"model_card":{"template":")" + tpl.string() + R"("}})";
    zc_create_args a{};
    a.struct_size = sizeof a;
    a.host = host.raw();
    a.options_json = "{}";
    a.config_json = cfg.c_str();
    a.run_dir = "";
    void* inst = nullptr;
    zc_status* s = table("model_card")->create(&a, &inst);
    if (!s) {
      table("model_card")->destroy(inst);
      return std::string();
    }
    std::string m = zcode::status_message(s);
    zcode::status_release(s);
    return m;
  };
  auto nested = [](size_t n, const std::string& open = "{{", const std::string& close = "}}") {
    std::string t;
    for (size_t i = 0; i < n; ++i) t += open + (i % 2 ? "^" : "#") + "a" + close + "\n";
    for (size_t i = 0; i < n; ++i) t += open + "/a" + close + "\n";
    return t;
  };
  const std::string where = "model_card.template: " + (dir / "card.mustache").string();
  EXPECT_EQ(create_error(nested(64)), "");
  // The 65th section tag is on line 65.
  EXPECT_EQ(create_error(nested(65)), where + ":65: sections nested deeper than 64 levels");
  EXPECT_EQ(create_error(nested(50000)), where + ":65: sections nested deeper than 64 levels");
  // Set-delimiter tags do not hide the sections: line 1 changes them, so the 65th is on line 66.
  EXPECT_EQ(create_error("{{=<% %>=}}\n" + nested(50000, "<%", "%>")),
            where + ":66: sections nested deeper than 64 levels");
  EXPECT_EQ(create_error(std::string((1 << 20) + 1, 'x')),
            where + ": 1048577 bytes, more than the 1048576-byte limit of a template");
}

TEST_F(Callbacks, DebuggerWritesGroupNormsAndHistograms) {
  void* model = create_model(zcode::sdk::detail::ModelThunks<DebugModel>::table);
  ASSERT_NE(model, nullptr);
  void* d = create("debugger", R"({"type":"debugger","every":2,"bins":14})", "{}");
  uint32_t flags = 0;
  for (uint64_t s = 1; s <= 4; ++s) {
    zc_event e = step_end(&zcode::sdk::detail::ModelThunks<DebugModel>::table, model, s);
    zc_status* st = table("debugger")->on_event(d, &e, &flags);
    ASSERT_EQ(st, nullptr) << "code " << zcode::status_code(st) << ": [" << zcode::status_message(st) << "]";
  }
  std::istringstream lines(slurp(dir / "logs/debug.jsonl"));
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    rapidjson::Document j;
    j.Parse(line.c_str());
    ASSERT_TRUE(j.IsObject()) << line;
    EXPECT_EQ(j["step"].GetUint64(), static_cast<uint64_t>(2 * ++n));
    EXPECT_DOUBLE_EQ(j["grad_norm"]["layers.0.attn"].GetDouble(), 12.0);
    EXPECT_DOUBLE_EQ(j["param_norm"]["layers.0.attn"].GetDouble(), 5.0);
    EXPECT_NEAR(j["grad_norm"]["embed"].GetDouble(), std::sqrt(2.0), 1e-8);
    EXPECT_DOUBLE_EQ(j["param_norm"]["embed"].GetDouble(), 2.0);
    // 14 bins over log10|x| in [-12, 2): one bin per decade. Grads: 12 ->
    // decade [1, 2) (bin 13), 1 and -1 -> [0, 1) (bin 12), three exact zeros.
    const auto& gh = j["grad_hist"]["counts"];
    ASSERT_EQ(gh.Size(), 14u);
    EXPECT_EQ(gh[13].GetUint64(), 1u);
    EXPECT_EQ(gh[12].GetUint64(), 2u);
    EXPECT_EQ(j["grad_hist"]["zeros"].GetUint64(), 4u);
    ASSERT_TRUE(j["activations"].IsObject()) << line;
    const auto& a = j["activations"]["layers.0.attn.out"];
    ASSERT_TRUE(a.IsObject()) << line;
    EXPECT_EQ(a["shape"].Size(), 3u);
    EXPECT_EQ(a["shape"][2].GetInt64(), 2);
    EXPECT_DOUBLE_EQ(a["mean"].GetDouble(), 2.0);
    EXPECT_NEAR(a["std"].GetDouble(), std::sqrt(5.0), 1e-8);
    EXPECT_DOUBLE_EQ(a["max_abs"].GetDouble(), 5.0);
    // 1, -1 and 3 fall in decade [0, 1) (bin 12), 5 too: all four there.
    EXPECT_EQ(a["hist"]["counts"][12].GetUint64(), 4u);
  }
  EXPECT_EQ(n, 2);
  table("debugger")->destroy(d);
  zcode::sdk::detail::ModelThunks<DebugModel>::table.destroy(model);
}

}  // namespace

namespace {

// A model table from before ABI 1.2 (struct_size ends before `activations`):
// the debugger writes "activations": null and still writes the rest.
TEST_F(Callbacks, DebuggerWritesNullActivationsForAnAbi11Model) {
  zc_model_table old = zcode::sdk::detail::ModelThunks<DebugModel>::table;
  old.header.struct_size = static_cast<uint32_t>(offsetof(zc_model_table, activations));
  void* model = create_model(old);
  ASSERT_NE(model, nullptr);
  void* d = create("debugger", R"({"type":"debugger","every":1})", "{}");
  zc_event e = step_end(&old, model, 1);
  uint32_t flags = 0;
  ASSERT_EQ(table("debugger")->on_event(d, &e, &flags), nullptr);
  rapidjson::Document j;
  j.Parse(slurp(dir / "logs/debug.jsonl").c_str());
  ASSERT_TRUE(j.IsObject());
  EXPECT_TRUE(j["activations"].IsNull());
  EXPECT_DOUBLE_EQ(j["grad_norm"]["layers.0.attn"].GetDouble(), 12.0);
  table("debugger")->destroy(d);
  old.destroy(model);
}

}  // namespace

// ---- tensorboard: the record format and the callback ------------------------

namespace {

namespace tb = zcode::tensorboard;

// CRC-32C written here bit by bit from its definition (reflected polynomial
// 0x82F63B78, initial value and final xor 0xFFFFFFFF), independent of the
// Boost.CRC call the writer makes.
uint32_t crc32c_bitwise(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}
uint32_t masked_bitwise(const std::string& s) {
  const uint32_t c = crc32c_bitwise(s);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
std::string le(uint64_t v, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return out;
}

// RFC 3720 appendix B.4's CRC-32C examples (32-byte buffers) and the
// customary check value of "123456789".
TEST(TensorBoardRecord, Crc32cMatchesThePublishedVectors) {
  std::string zeros(32, '\0'), ones(32, '\xFF'), inc, dec;
  for (int i = 0; i < 32; ++i) {
    inc.push_back(static_cast<char>(i));
    dec.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(tb::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(tb::crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(tb::crc32c(inc.data(), inc.size()), 0x46DD794Eu);
  EXPECT_EQ(tb::crc32c(dec.data(), dec.size()), 0x113FDB5Cu);
  EXPECT_EQ(tb::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c_bitwise("123456789"), 0xE3069283u);  // the test's own CRC agrees
  // Masked: ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xa282ead8 mod 2^32,
  // worked by hand: 0x0001C60D | 0x25060000 = 0x2507C60D; + 0xA282EAD8 = 0xC78AB0E5.
  EXPECT_EQ(tb::masked_crc32c("123456789", 9), 0xC78AB0E5u);
}

// One Event assembled by hand from the protobuf encoding rules
// (developers.google.com/protocol-buffers/docs/encoding): key = field << 3 | wire type.
TEST(TensorBoardRecord, OneEventRecordByteForByte) {
  tb::Event e;
  e.set_wall_time(1.5);
  e.set_step(3);
  tb::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag("loss");
  v->set_simple_value(2.0f);
  // Value: tag (1, LEN) "loss"; simple_value (2, I32) 2.0f = 0x40000000 LE.
  const std::string value = std::string("\x0A\x04loss", 6) + std::string("\x15\x00\x00\x00\x40", 5);
  // Summary: value (1, LEN).
  const std::string summary = std::string("\x0A") + static_cast<char>(value.size()) + value;
  // Event: wall_time (1, I64) 1.5 = 0x3FF8000000000000 LE; step (2, VARINT) 3;
  // summary (5, LEN).
  const std::string event = std::string("\x09\x00\x00\x00\x00\x00\x00\xF8\x3F", 9) + std::string("\x10\x03", 2) +
                            std::string("\x2A") + static_cast<char>(summary.size()) + summary;
  ASSERT_EQ(event.size(), 26u);
  ASSERT_EQ(e.SerializeAsString(), event);
  // Record: length (u64 LE), masked CRC of those 8 bytes, data, masked CRC of data.
  const std::string len = le(event.size(), 8);
  const std::string record = len + le(masked_bitwise(len), 4) + event + le(masked_bitwise(event), 4);
  EXPECT_EQ(tb::frame_record(event), record);
}

// Records of a file, checked and decoded.
std::vector<tb::Event> read_events(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string b = ss.str();
  std::vector<tb::Event> out;
  size_t i = 0;
  while (i < b.size()) {
    EXPECT_LE(i + 12, b.size());
    uint64_t n = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | static_cast<unsigned char>(b[i + static_cast<size_t>(k)]);
    EXPECT_EQ(b.substr(i + 8, 4), le(masked_bitwise(b.substr(i, 8)), 4));
    const std::string data = b.substr(i + 12, n);
    EXPECT_EQ(b.substr(i + 12 + n, 4), le(masked_bitwise(data), 4));
    tb::Event e;
    EXPECT_TRUE(e.ParseFromString(data));
    out.push_back(e);
    i += 16 + n;
  }
  return out;
}

struct TensorBoardCallback : Callbacks {
  void SetUp() override {
    Callbacks::SetUp();
    void* h = dlopen(ZCODE_TENSORBOARD_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    auto neg = reinterpret_cast<zc_negotiate_fn>(dlsym(h, ZC_PLUGIN_ENTRY_SYMBOL));
    uint32_t a = 0, b = 0;
    ASSERT_EQ(neg(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, host.raw(), &a, &b, &manifest), ZC_OK);
  }
  fs::path event_file() const {
    for (const auto& f : fs::directory_iterator(dir / "logs/tensorboard"))
      if (f.path().filename().string().starts_with("events.out.tfevents.")) return f.path();
    return {};
  }
};

const tb::HistogramProto* histo(const tb::Event& e, const std::string& tag) {
  for (const auto& v : e.summary().value())
    if (v.tag() == tag && v.has_histo()) return &v.histo();
  return nullptr;
}

// DebugModel's values by hand (2 buckets: width (max - min) / 2, value v in
// bucket ceil((v - min) / width) - 1, clamped to [0, 1]):
//   params/layers.0.attn {3, 4, 0}: min 0, max 4, width 2: 3 -> 1, 4 -> 1, 0 -> 0;
//     limits {2, 4}, counts {1, 2}, sum 7, sum of squares 25.
//   grads/layers.0.attn {0, 0, 12}: width 6: {2, 1}, limits {6, 12}, sum 12, squares 144.
//   params/embed {1, 1, 1, 1}: min = max = 1: all in bucket 0, limits {1, 1}.
//   grads/embed {1, -1, 0, 0}: width 1: 1 -> 1, -1 -> 0, 0 -> 0: {3, 1}, limits {0, 1}, sum 0, squares 2.
//   activations/layers.0.attn.out {1, -1, 3, 5}: width 3: {2, 2}, limits {2, 5}, sum 8, squares 36.
TEST_F(TensorBoardCallback, ScalarsHistogramsAndTheResumeMark) {
  void* model = create_model(zcode::sdk::detail::ModelThunks<DebugModel>::table);
  ASSERT_NE(model, nullptr);
  void* c = create("tensorboard", R"({"type":"tensorboard","every":5,"histogram_every":10,"bins":2})", "{}");
  send("tensorboard", c, ZC_EVENT_SETUP, 0, R"({"resumed_step":5})");
  send("tensorboard", c, ZC_EVENT_STEP_END, 6, R"({"loss":3.5})");  // not a log step (every 5): nothing
  for (uint64_t s = 7; s <= 10; ++s) {
    zc_event e = step_end(&zcode::sdk::detail::ModelThunks<DebugModel>::table, model, s);
    e.max_steps = 100;
    const std::string m = R"({"loss":2.5,"lr":0.001,"note":"x","moe_load_0":0.25})";
    e.metrics_json = m.c_str();
    uint32_t flags = 0;
    ASSERT_EQ(table("tensorboard")->on_event(c, &e, &flags), nullptr);
  }
  send("tensorboard", c, ZC_EVENT_EVAL_END, 10, R"({"loss":2.75,"bits_per_byte":1.25})");
  send("tensorboard", c, ZC_EVENT_TEARDOWN, 10, "{}");
  table("tensorboard")->destroy(c);
  zcode::sdk::detail::ModelThunks<DebugModel>::table.destroy(model);

  const fs::path f = event_file();
  ASSERT_FALSE(f.empty());
  const auto events = read_events(f);
  ASSERT_EQ(events.size(), 5u);  // version, session START, step-10 scalars, step-10 histograms, eval
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[1].step(), 6);
  EXPECT_EQ(events[1].session_log().status(), tb::SessionLog::START);
  const tb::Event& sc = events[2];
  EXPECT_EQ(sc.step(), 10);
  ASSERT_EQ(sc.summary().value_size(), 3);  // numbers only ("note" is a string)
  EXPECT_EQ(sc.summary().value(0).tag(), "train/loss");
  EXPECT_EQ(sc.summary().value(0).simple_value(), 2.5f);
  EXPECT_EQ(sc.summary().value(1).tag(), "train/lr");
  EXPECT_EQ(sc.summary().value(1).simple_value(), 0.001f);
  EXPECT_EQ(sc.summary().value(2).tag(), "train/moe_load_0");
  const tb::Event& hi = events[3];
  EXPECT_EQ(hi.step(), 10);
  auto expect_histo = [&](const std::string& tag, double mn, double mx, std::vector<double> limits,
                          std::vector<double> counts, double sum, double sq) {
    const tb::HistogramProto* h = histo(hi, tag);
    ASSERT_NE(h, nullptr) << tag;
    EXPECT_EQ(h->min(), mn) << tag;
    EXPECT_EQ(h->max(), mx) << tag;
    EXPECT_EQ(h->num(), std::accumulate(counts.begin(), counts.end(), 0.0)) << tag;
    EXPECT_EQ(std::vector<double>(h->bucket_limit().begin(), h->bucket_limit().end()), limits) << tag;
    EXPECT_EQ(std::vector<double>(h->bucket().begin(), h->bucket().end()), counts) << tag;
    EXPECT_EQ(h->sum(), sum) << tag;
    EXPECT_EQ(h->sum_squares(), sq) << tag;
  };
  expect_histo("params/layers.0.attn", 0, 4, {2, 4}, {1, 2}, 7, 25);
  expect_histo("grads/layers.0.attn", 0, 12, {6, 12}, {2, 1}, 12, 144);
  expect_histo("params/embed", 1, 1, {1, 1}, {4, 0}, 4, 4);
  expect_histo("grads/embed", -1, 1, {0, 1}, {3, 1}, 0, 2);
  expect_histo("activations/layers.0.attn.out", -1, 5, {2, 5}, {2, 2}, 8, 36);
  EXPECT_EQ(hi.summary().value_size(), 5);
  const tb::Event& ev = events[4];
  ASSERT_EQ(ev.summary().value_size(), 2);
  EXPECT_EQ(ev.summary().value(0).tag(), "eval/loss");
  EXPECT_EQ(ev.summary().value(0).simple_value(), 2.75f);
  EXPECT_EQ(ev.summary().value(1).tag(), "eval/bits_per_byte");
}

TEST_F(TensorBoardCallback, BadOptionsAreRefusedByName) {
  void* inst = nullptr;
  zc_status* s =
      try_create("tensorboard", R"({"type":"tensorboard","bins":0})", R"({"training":{"log_every":1}})", &inst);
  ASSERT_NE(s, nullptr);
  const zcode::StatusPtr owned(s);
  EXPECT_EQ(std::string(zcode::status_message(s)), "callbacks.tensorboard.bins: expected 1..1000, found 0");
}

}  // namespace
