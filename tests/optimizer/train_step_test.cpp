// train_step_test.cpp: core/train_step: global norm and clipping against a
// hand-computed norm, NaN/Inf injection and the guard's skip/stop counting,
// token counting, Sophia's Hessian cadence, and gradient accumulation equal
// to one big batch.
#include "test_support.h"

#include <zcode/core/train_step.h>

#include <cmath>
#include <limits>

using zcode::core::GradientAccumulator;
using zcode::core::NonfiniteGuard;

namespace {

// A bigram "LM" with analytic gradients: logits[t] = E[input_t] (E: [V, V]),
// loss = Σ_{targets ≠ -1} −log softmax(logits)[target] / loss_normalizer.
// dL/dE[i, :] += (softmax(E[i]) − onehot(target)) / normalizer.
class BigramModel : public ztest::FakeModel {
 public:
  static constexpr int64_t V = 5;
  BigramModel() : FakeModel({{"E", {V, V}, 0}}) { ztest::fill_normal(value(0), 3); }
  explicit BigramModel(const zcode::sdk::CreateContext& c) : FakeModel(c) {}
  void forward_backward(const zc_batch& b, const zc_fb_options& o, const zcode::sdk::MetricsSink& m) override {
    const int32_t* in = zcode::sdk::data_ptr<int32_t>(b.input_ids);
    const int32_t* tg = zcode::sdk::data_ptr<int32_t>(b.targets);
    const int64_t n = zcode::sdk::numel(b.targets);
    double loss = 0;
    for (int64_t t = 0; t < n; ++t) {
      if (tg[t] == -1) continue;
      const float* row = value(0).data() + in[t] * V;
      double mx = row[0], z = 0;
      for (int64_t v = 1; v < V; ++v) mx = std::max<double>(mx, row[v]);
      for (int64_t v = 0; v < V; ++v) z += std::exp(row[v] - mx);
      loss += -(row[tg[t]] - mx - std::log(z)) / o.loss_normalizer;
      for (int64_t v = 0; v < V; ++v)
        grad(0)[in[t] * V + v] += static_cast<float>((std::exp(row[v] - mx) / z - (v == tg[t])) / o.loss_normalizer);
    }
    m.put("loss", loss);
    m.put("tokens", static_cast<double>(n));
  }
};

struct OwnedBatch {
  std::vector<int32_t> in, tg;
  int64_t shape[2];
  zc_batch b{};
  OwnedBatch(int64_t rows, int64_t cols, std::vector<int32_t> i, std::vector<int32_t> t)
      : in(std::move(i)), tg(std::move(t)), shape{rows, cols} {
    b.struct_size = sizeof(b);
    for (auto [dst, src] : {std::pair{&b.input_ids, &in}, std::pair{&b.targets, &tg}}) {
      dst->data = src->data();
      dst->device = DLDevice{kDLCPU, 0};
      dst->ndim = 2;
      dst->dtype = DLDataType{kDLInt, 32, 1};
      dst->shape = shape;
    }
  }
};

}  // namespace

// grads [3, 4] and [12]: norm = √(9 + 16 + 144) = 13.
TEST(TrainStep, ClipGradNormAgainstHandNorm) {
  ztest::FakeModel m({{"a", {2}, 0}, {"b", {1}, 0}});
  auto set = [&] {
    m.grad(0) = {3, 4};
    m.grad(1) = {12};
  };
  set();
  EXPECT_DOUBLE_EQ(zcode::core::grad_norm(m.list()), 13.0);
  EXPECT_DOUBLE_EQ(zcode::core::clip_grad_norm(m.list(), 20.0), 13.0);  // below max: unchanged
  EXPECT_EQ(m.grad(0), (std::vector<float>{3, 4}));
  EXPECT_DOUBLE_EQ(zcode::core::clip_grad_norm(m.list(), 0.0), 13.0);  // 0 = no clipping
  EXPECT_EQ(m.grad(1), (std::vector<float>{12}));
  // max 6.5: scale 6.5/(13 + 1e-6) ≈ 0.5 → [1.5, 2, 6], new norm 6.5
  EXPECT_DOUBLE_EQ(zcode::core::clip_grad_norm(m.list(), 6.5), 13.0);
  EXPECT_NEAR(m.grad(0)[0], 1.5, 1e-6);
  EXPECT_NEAR(m.grad(0)[1], 2.0, 1e-6);
  EXPECT_NEAR(m.grad(1)[0], 6.0, 1e-6);
  EXPECT_NEAR(zcode::core::grad_norm(m.list()), 6.5, 1e-5);
}

TEST(TrainStep, NonFiniteGradientsAreDetectedAndLeftUnclipped) {
  ztest::FakeModel m({{"a", {3}, 0}});
  m.grad(0) = {1, std::numeric_limits<float>::quiet_NaN(), 2};
  EXPECT_TRUE(std::isnan(zcode::core::clip_grad_norm(m.list(), 1.0)));
  EXPECT_EQ(m.grad(0)[0], 1.0f);  // untouched
  EXPECT_EQ(m.grad(0)[2], 2.0f);
  m.grad(0) = {1, -std::numeric_limits<float>::infinity(), 2};
  EXPECT_FALSE(std::isfinite(zcode::core::grad_norm(m.list())));
  // The largest finite floats do not overflow the double sum.
  m.grad(0) = {3.4e38f, 3.4e38f, 3.4e38f};
  EXPECT_TRUE(std::isfinite(zcode::core::grad_norm(m.list())));
}

TEST(TrainStep, GuardSkipsCountsAndStops) {
  std::vector<std::pair<zc_log_level, std::string>> logged;
  NonfiniteGuard g(3, [&](zc_log_level l, const std::string& s) { logged.emplace_back(l, s); });
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(g.check(0, 2.5, 1.0), NonfiniteGuard::Action::kApply);
  EXPECT_EQ(g.check(1, nan, 1.0), NonfiniteGuard::Action::kSkip);
  EXPECT_NE(g.message().find("step 1: non-finite loss nan; update skipped (1 in a row, 1 in total"), std::string::npos)
      << g.message();
  EXPECT_EQ(g.check(2, 2.0, inf), NonfiniteGuard::Action::kSkip);
  EXPECT_NE(g.message().find("step 2: non-finite gradient norm inf"), std::string::npos) << g.message();
  EXPECT_EQ(g.consecutive(), 2);
  EXPECT_EQ(g.check(3, 2.0, 1.0), NonfiniteGuard::Action::kApply);  // resets the run of skips
  EXPECT_EQ(g.consecutive(), 0);
  EXPECT_EQ(g.total_skipped(), 2u);
  EXPECT_EQ(g.check(4, nan, nan), NonfiniteGuard::Action::kSkip);
  EXPECT_EQ(g.check(5, nan, nan), NonfiniteGuard::Action::kSkip);
  EXPECT_EQ(g.check(6, nan, nan), NonfiniteGuard::Action::kStop);
  EXPECT_NE(
      g.message().find("step 6: non-finite loss nan for 3 consecutive steps (training.max_consecutive_nonfinite = 3)"),
      std::string::npos)
      << g.message();
  ASSERT_EQ(logged.size(), 5u);
  EXPECT_EQ(logged[0].first, static_cast<zc_log_level>(ZC_LOG_WARN));
  EXPECT_EQ(logged[4].first, static_cast<zc_log_level>(ZC_LOG_ERROR));
  // State round trip.
  NonfiniteGuard h(3);
  h.load_state_json(g.state_json());
  EXPECT_EQ(h.consecutive(), 3);
  EXPECT_EQ(h.total_skipped(), 5u);
  EXPECT_THROW(h.load_state_json("{\"consecutive\":-1}"), std::invalid_argument);
  EXPECT_THROW(NonfiniteGuard(0), std::invalid_argument);
  NonfiniteGuard five;  // the default stops at the 5th consecutive skip
  for (int i = 0; i < 4; ++i) EXPECT_EQ(five.check(i, nan, 0), NonfiniteGuard::Action::kSkip);
  EXPECT_EQ(five.check(4, nan, 0), NonfiniteGuard::Action::kStop);
}

TEST(TrainStep, NanInjectedIntoAGradientSkipsTheOptimizerUpdate) {
  ztest::FakeModel m({{"w", {4}, 0}});
  std::fill(m.value(0).begin(), m.value(0).end(), 1.0f);
  m.grad(0) = {0.1f, 0.2f, std::numeric_limits<float>::quiet_NaN(), 0.3f};
  ztest::Opt o("adamw", "{}", m);
  NonfiniteGuard g;
  const double norm = zcode::core::clip_grad_norm(m.list(), 1.0);
  if (g.check(0, 1.0, norm) == NonfiniteGuard::Action::kApply) {
    ASSERT_EQ(o.step(1e-3, 1), "");
  }
  EXPECT_EQ(m.value(0), (std::vector<float>{1, 1, 1, 1}));  // no update happened
  EXPECT_EQ(g.total_skipped(), 1u);
}

TEST(TrainStep, CountsTargetTokensAndHessianCadence) {
  OwnedBatch b(2, 3, {1, 2, 3, 4, 0, 0}, {1, -1, 2, -1, -1, 3});
  EXPECT_EQ(zcode::core::count_target_tokens(b.b), 3);
  for (uint64_t u : {1, 11, 21}) EXPECT_TRUE(zcode::core::hessian_due(u, 10)) << u;
  for (uint64_t u : {0, 2, 10, 12}) EXPECT_FALSE(zcode::core::hessian_due(u, 10)) << u;
  EXPECT_FALSE(zcode::core::hessian_due(1, 0));
  EXPECT_TRUE(zcode::core::hessian_due(7, 1));
  const zc_fb_options o = zcode::core::make_fb_options(42, 1.0);
  EXPECT_EQ(o.loss_normalizer, 42.0);
  EXPECT_EQ(o.label_mode, static_cast<uint32_t>(ZC_LABELS_TARGETS));
  EXPECT_EQ(o.struct_size, sizeof(zc_fb_options));
}

// Two micro-batches with different numbers of target tokens (3 and 5)
// accumulate to exactly the gradient and loss of one batch holding both
// (normalised by 8 tokens), which a per-micro-batch mean would not give.
TEST(TrainStep, AccumulationEqualsOneBigBatch) {
  OwnedBatch b1(1, 4, {0, 1, 2, 3}, {1, 2, 3, -1});
  OwnedBatch b2(2, 3, {4, 0, 1, 2, 2, 3}, {0, 1, -1, 3, 4, 0});
  OwnedBatch big(3, 4, {0, 1, 2, 3, 4, 0, 1, 0, 2, 2, 3, 0}, {1, 2, 3, -1, 0, 1, -1, -1, 3, 4, 0, -1});

  BigramModel acc_model, big_model;
  GradientAccumulator acc;
  acc.add(b1.b);
  acc.add(b2.b);
  b1.in[0] = 4;  // the accumulator copied the batch: later changes to the loader's memory do not matter
  EXPECT_EQ(acc.size(), 2u);
  EXPECT_EQ(acc.target_tokens(), 8);
  double loss_acc = -1, loss_big = -1;
  double seen_tokens = 0;
  zc_metrics_sink sink{&seen_tokens, [](void* c, const char* n, double v) {
                         if (std::string(n) == "tokens") *static_cast<double*>(c) += v;
                       }};
  ASSERT_EQ(
      ztest::take(acc.run(&zcode::sdk::detail::ModelThunks<BigramModel>::table, &acc_model, 1.0, &sink, &loss_acc)),
      "");
  EXPECT_EQ(seen_tokens, 10.0);  // metrics pass through: 4 + 6 positions

  GradientAccumulator one;
  one.add(big.b);
  EXPECT_EQ(one.target_tokens(), 8);
  ASSERT_EQ(
      ztest::take(one.run(&zcode::sdk::detail::ModelThunks<BigramModel>::table, &big_model, 1.0, nullptr, &loss_big)),
      "");
  EXPECT_NEAR(loss_acc, loss_big, 1e-12);
  for (size_t i = 0; i < acc_model.grad(0).size(); ++i)
    EXPECT_NEAR(acc_model.grad(0)[i], big_model.grad(0)[i], 1e-7) << i;

  // run() zeroes the grads first: a second run gives the same, not double.
  std::vector<float> g1 = acc_model.grad(0);
  ASSERT_EQ(
      ztest::take(acc.run(&zcode::sdk::detail::ModelThunks<BigramModel>::table, &acc_model, 1.0, nullptr, &loss_acc)),
      "");
  EXPECT_EQ(acc_model.grad(0), g1);

  acc.clear();
  EXPECT_EQ(acc.size(), 0u);
  EXPECT_THROW(acc.run(&zcode::sdk::detail::ModelThunks<BigramModel>::table, &acc_model, 1.0, nullptr, &loss_acc),
               std::invalid_argument);
  OwnedBatch pad(1, 2, {1, 2}, {-1, -1});
  acc.add(pad.b);
  EXPECT_THROW(acc.run(&zcode::sdk::detail::ModelThunks<BigramModel>::table, &acc_model, 1.0, nullptr, &loss_acc),
               std::invalid_argument);
}
