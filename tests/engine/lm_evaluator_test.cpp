// The lm evaluator plugin (dlopen'ed through its C table) against a fake
// bigram model and a fake data loader: its numbers must equal perplexity,
// bits per byte/char and accuracy computed here by hand from the model's
// forward_logprobs output, and must not depend on evaluation.batch_size.
#include <zcode/core/host_services.h>
#include <zcode/sdk/plugin.h>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace zcode::sdk;
constexpr int kV = 5;

// logits of the next token given the current one (a bigram table).
const float kW[kV][kV] = {
    {2, 1, 0, -1, 0.5f}, {0, 3, 1, 1, 0}, {1, 1, 1, 1, 1.5f}, {-2, 0, 4, 0, 0}, {0.5f, 0.5f, 0, 2, 1}};

bool g_has_eval = true;
int g_next_calls = 0;  // FakeData::next_batch calls (evaluation.max_batches)

double bigram_logp(int prev, int next) {
  double mx = -1e30, s = 0;
  for (int v = 0; v < kV; ++v) mx = std::max(mx, static_cast<double>(kW[prev][v]));
  for (int v = 0; v < kV; ++v) s += std::exp(kW[prev][v] - mx);
  return kW[prev][next] - mx - std::log(s);
}

class FakeModel : public Model {
 public:
  explicit FakeModel(const CreateContext&) {}
  void num_params(uint64_t& t, uint64_t& a) const override { t = a = kV * kV; }
  zc_param_list params() override { return {}; }
  void zero_grad() override {}
  void forward_backward(const zc_batch&, const zc_fb_options&, const MetricsSink&) override {}
  void forward_logprobs(const zc_batch& b, DLTensor& out) override {
    const int64_t n = b.input_ids.shape[0] * b.input_ids.shape[1];
    for (int64_t i = 0; i < n; ++i) {
      const int32_t t = data_ptr<int32_t>(b.targets)[i];
      data_ptr<float>(out)[i] = t < 0 ? 0.f : static_cast<float>(bigram_logp(data_ptr<int32_t>(b.input_ids)[i], t));
    }
  }
  void forward_eval(const zc_batch& b, DLTensor* lp, DLTensor* am) override {
    if (!g_has_eval) throw Error(ZC_ERR_UNSUPPORTED, "no forward_eval");
    if (lp) forward_logprobs(b, *lp);
    if (am) {
      const int64_t n = b.input_ids.shape[0] * b.input_ids.shape[1];
      for (int64_t i = 0; i < n; ++i) {
        const int prev = data_ptr<int32_t>(b.input_ids)[i];
        int best = 0;
        for (int v = 1; v < kV; ++v)
          if (kW[prev][v] > kW[prev][best]) best = v;
        data_ptr<int32_t>(*am)[i] = data_ptr<int32_t>(b.targets)[i] < 0 ? -1 : best;
      }
    }
  }
  const std::string& info_json() const override { return info_; }
  void forward_logits(const int32_t* tokens, int32_t n, float* out) override {
    for (int32_t p = 0; p < n; ++p)
      for (int v = 0; v < kV; ++v) out[p * kV + v] = kW[tokens[p]][v];
  }

 private:
  std::string info_ = "{\"vocab_size\":5}";
};

// Three batches of [4, 6] ids, a few padding targets.
struct FakeData : public DataLoader {
  explicit FakeData(const CreateContext&) {
    uint32_t x = 12345;
    for (int b = 0; b < 3; ++b) {
      std::vector<int32_t> in(24), tg(24);
      for (int i = 0; i < 24; ++i) {
        x = x * 1103515245u + 12345u;
        in[i] = static_cast<int32_t>((x >> 16) % kV);
        x = x * 1103515245u + 12345u;
        tg[i] = (i % 7 == 6) ? -1 : static_cast<int32_t>((x >> 16) % kV);
      }
      inputs.push_back(in);
      targets.push_back(tg);
    }
  }
  bool next_batch(zc_batch& out) override {
    ++g_next_calls;
    if (pos >= inputs.size()) return false;
    out.input_ids = make_view(inputs[pos].data(), kI32, 2, shape);
    out.targets = make_view(targets[pos].data(), kI32, 2, shape);
    out.doc_ids = DLTensor{};
    out.num_target_tokens = 0;
    for (int32_t t : targets[pos]) out.num_target_tokens += t >= 0;
    out.num_target_bytes = 3 * out.num_target_tokens + static_cast<int64_t>(pos);  // arbitrary but known
    out.num_target_chars = 2 * out.num_target_tokens;
    ++pos;
    return true;
  }
  void reset() override { pos = 0; }
  const std::string& provenance_json() const override { return prov; }
  std::vector<std::vector<int32_t>> inputs, targets;
  int64_t shape[2] = {4, 6};
  size_t pos = 0;
  std::string prov = "[]";
};

struct LoadedPlugin {
  const zc_evaluator_table* table = nullptr;
};

const zc_evaluator_table* load_lm(const zc_host_services* host) {
  void* h = dlopen(ZCODE_LM_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  auto neg = reinterpret_cast<zc_negotiate_fn>(dlsym(h, ZC_PLUGIN_ENTRY_SYMBOL));
  uint32_t ma = 0, mi = 0;
  const zc_manifest* m = nullptr;
  if (!neg || neg(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, host, &ma, &mi, &m) != ZC_OK) return nullptr;
  for (uint32_t i = 0; i < m->num_components; ++i)
    if (std::string(m->components[i].name) == "lm")
      return static_cast<const zc_evaluator_table*>(m->components[i].table);
  return nullptr;
}

std::map<std::string, double> run_lm(const zc_host_services* host, int batch_size, const std::string& extra = "") {
  const zc_evaluator_table* lm = load_lm(host);
  EXPECT_NE(lm, nullptr) << dlerror();
  if (!lm) return {};
  zc_create_args a{};
  a.struct_size = sizeof a;
  a.host = host;
  const std::string opts =
      "{\"plugins\":[\"lm\"],\"split\":\"val\",\"batch_size\":" + std::to_string(batch_size) + extra + "}";
  a.options_json = opts.c_str();
  a.config_json = "{}";
  a.run_dir = "";
  void* model = nullptr;
  void* data = nullptr;
  EXPECT_EQ(detail::ModelThunks<FakeModel>::table.create(&a, &model), nullptr);
  EXPECT_EQ(detail::DataLoaderThunks<FakeData>::table.create(&a, &data), nullptr);
  a.model = {&detail::ModelThunks<FakeModel>::table, model};
  void* ev = nullptr;
  zc_status* s = lm->create(&a, &ev);
  EXPECT_EQ(s, nullptr) << zcode::status_message(s);
  std::map<std::string, double> out;
  zc_metrics_sink sink{
      &out, [](void* c, const char* n, double v) { (*static_cast<std::map<std::string, double>*>(c))[n] = v; }};
  s = lm->evaluate(ev, zc_stage_ref{&detail::DataLoaderThunks<FakeData>::table, data}, &sink);
  EXPECT_EQ(s, nullptr) << zcode::status_message(s);
  lm->destroy(ev);
  detail::DataLoaderThunks<FakeData>::table.destroy(data);
  detail::ModelThunks<FakeModel>::table.destroy(model);
  return out;
}

// The reference: per-token log-probs from the model's forward_logprobs,
// summed here, and the formulas of the lm evaluator's documentation.
// `max_batches` > 0: only the first that many batches.
std::map<std::string, double> by_hand(int max_batches = 0) {
  zc_create_args a{};
  CreateContext ctx(&a);
  FakeModel m(ctx);
  FakeData d(ctx);
  double nll = 0, bytes = 0, chars = 0, tokens = 0, correct = 0;
  zc_batch b{};
  for (int used = 0; (max_batches == 0 || used < max_batches) && d.next_batch(b); ++used) {
    std::vector<float> lp(24);
    int64_t sh[2] = {4, 6};
    DLTensor out = make_view(lp.data(), kF32, 2, sh);
    m.forward_logprobs(b, out);
    for (int i = 0; i < 24; ++i) {
      const int32_t t = data_ptr<int32_t>(b.targets)[i];
      if (t < 0) continue;
      nll -= lp[i];
      tokens += 1;
      const int prev = data_ptr<int32_t>(b.input_ids)[i];
      int best = 0;
      for (int v = 1; v < kV; ++v)
        if (kW[prev][v] > kW[prev][best]) best = v;
      correct += best == t;
    }
    bytes += static_cast<double>(b.num_target_bytes);
    chars += static_cast<double>(b.num_target_chars);
  }
  return {{"perplexity", std::exp(nll / tokens)},
          {"bits_per_byte", nll / (std::log(2.0) * bytes)},
          {"bits_per_char", nll / (std::log(2.0) * chars)},
          {"accuracy", correct / tokens},
          {"tokens", tokens},
          {"bytes", bytes}};
}

TEST(LmEvaluator, MatchesHandComputationFromLogprobs) {
  zcode::HostServices host(1, 1);
  detail::g_host = host.raw();
  g_has_eval = true;
  auto got = run_lm(host.raw(), 8);
  auto want = by_hand();
  for (const auto& [k, v] : want) {
    ASSERT_TRUE(got.count(k)) << k;
    EXPECT_NEAR(got[k], v, 1e-9 * std::max(1.0, std::fabs(v))) << k;
  }
  EXPECT_NEAR(got["loss"], std::log(want["perplexity"]), 1e-9);
  EXPECT_GT(want["accuracy"], 0.0);  // the fixture exercises both outcomes
  EXPECT_LT(want["accuracy"], 1.0);
}

TEST(LmEvaluator, BatchSizeDoesNotChangeTheNumbers) {
  zcode::HostServices host(1, 1);
  detail::g_host = host.raw();
  g_has_eval = true;
  auto one = run_lm(host.raw(), 1);
  auto eight = run_lm(host.raw(), 8);
  auto three = run_lm(host.raw(), 3);
  ASSERT_FALSE(one.empty());
  for (const auto& [k, v] : eight) {
    EXPECT_EQ(one[k], v) << k;  // bit-identical: same summation order
    EXPECT_EQ(three[k], v) << k;
  }
}

TEST(LmEvaluator, AccuracyFallsBackToForwardLogits) {
  zcode::HostServices host(1, 1);
  detail::g_host = host.raw();
  g_has_eval = false;  // the model says UNSUPPORTED: accuracy via forward_logits
  auto got = run_lm(host.raw(), 2);
  g_has_eval = true;
  auto want = by_hand();
  ASSERT_TRUE(got.count("accuracy"));
  EXPECT_NEAR(got["accuracy"], want["accuracy"], 1e-12);
  EXPECT_NEAR(got["perplexity"], want["perplexity"], 1e-9 * want["perplexity"]);
}

// evaluation.max_batches: the evaluator asks the loader for exactly that many
// batches and its numbers are those of exactly their tokens; 0 (and a limit
// above the split's size) is the whole split.
TEST(LmEvaluator, MaxBatchesStopsThereAndCountsOnlyThoseTokens) {
  zcode::HostServices host(1, 1);
  detail::g_host = host.raw();
  g_has_eval = true;
  for (int mb : {1, 2}) {
    g_next_calls = 0;
    auto got = run_lm(host.raw(), 8, ",\"max_batches\":" + std::to_string(mb));
    EXPECT_EQ(g_next_calls, mb) << "max_batches " << mb;
    auto want = by_hand(mb);
    for (const auto& [k, v] : want) {
      ASSERT_TRUE(got.count(k)) << k;
      EXPECT_NEAR(got[k], v, 1e-9 * std::max(1.0, std::fabs(v))) << k << " (max_batches " << mb << ")";
    }
  }
  // One batch of [4, 6] with every 7th target padding (positions 6, 13, 20): 21 tokens.
  EXPECT_EQ(by_hand(1)["tokens"], 21.0);
  auto all = by_hand();
  for (int mb : {0, 3, 10}) {
    g_next_calls = 0;
    auto got = run_lm(host.raw(), 8, ",\"max_batches\":" + std::to_string(mb));
    EXPECT_EQ(got["tokens"], all["tokens"]) << mb;
    EXPECT_NEAR(got["perplexity"], all["perplexity"], 1e-9 * all["perplexity"]) << mb;
    EXPECT_EQ(g_next_calls, mb == 3 ? 3 : 4) << mb;  // the whole split ends with a 4th call returning no batch
  }
}

TEST(LmEvaluator, NegativeMaxBatchesIsAClearError) {
  zcode::HostServices host(1, 1);
  detail::g_host = host.raw();
  const zc_evaluator_table* lm = load_lm(host.raw());
  ASSERT_NE(lm, nullptr);
  zc_create_args a{};
  a.struct_size = sizeof a;
  a.host = host.raw();
  a.options_json = "{\"max_batches\":-1}";
  a.config_json = "{}";
  a.run_dir = "";
  void* model = nullptr;
  ASSERT_EQ(detail::ModelThunks<FakeModel>::table.create(&a, &model), nullptr);
  a.model = {&detail::ModelThunks<FakeModel>::table, model};
  void* ev = nullptr;
  zc_status* s = lm->create(&a, &ev);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::string(zcode::status_message(s)), "evaluation.max_batches: expected an integer >= 0, found -1");
  zcode::status_release(s);
  detail::ModelThunks<FakeModel>::table.destroy(model);
}

}  // namespace
