// optimizer_test.cpp: the six optimizers through their C tables: hand-derived
// single-step values, parameter groups, Zerosum-SGD's zero-sum property,
// bit-identical resume, and one-line errors.
#include "test_support.h"

#include <rapidjson/document.h>

#include <cmath>
#include <cstring>

using ztest::FakeModel;
using ztest::MemoryState;
using ztest::Opt;

namespace {

FakeModel one(std::vector<int64_t> shape, float w, float g, uint32_t flags = 0) {
  FakeModel m({{"p", std::move(shape), flags}});
  std::fill(m.value(0).begin(), m.value(0).end(), w);
  std::fill(m.grad(0).begin(), m.grad(0).end(), g);
  return m;
}

}  // namespace

TEST(Optimizers, ManifestListsSixComponentsWithValidSchemas) {
  const zc_manifest& m = ztest::optimizers().manifest();
  ASSERT_EQ(m.num_components, 6u);
  for (const char* name : {"adamw", "lamb", "adafactor", "sophia", "sgd", "zerosum_sgd"}) {
    const zc_component* c = ztest::optimizers().find(name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ(c->kind, static_cast<zc_kind>(ZC_KIND_OPTIMIZER));
    rapidjson::Document d;
    d.Parse(c->options_schema_json);
    ASSERT_FALSE(d.HasParseError()) << name << ": schema is not JSON";
    ASSERT_TRUE(d.IsObject());
    EXPECT_FALSE(d["additionalProperties"].GetBool()) << name;
    for (const char* k : {"name", "lr", "weight_decay", "param_groups", "decay_embeddings"})
      EXPECT_TRUE(d["properties"].HasMember(k)) << name << " lacks " << k;
  }
}

// AdamW, two steps by hand (w0 = 1, lr 0.1, λ 0.01, β (0.9, 0.999), ε 1e-8):
// step 1, g = 0.5: m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25
//   w = 1·(1 − 0.001) − 0.1·0.5/(0.5 + 1e-8) = 0.999 − 0.099999998 = 0.899000002
// step 2, g = −0.5: m = 0.045 − 0.05 = −0.005, v = 0.00024975 + 0.00025 = 0.00049975
//   m̂ = −0.005/0.19 = −0.02631579, v̂ = 0.00049975/0.001999 = 0.25
//   w = 0.899000002·0.999 + 0.1·0.02631579/0.5 = 0.898101002 + 0.005263158 = 0.903364160
TEST(Optimizers, AdamWTwoStepsByHand) {
  FakeModel m = one({3}, 1.0f, 0.5f);
  Opt o("adamw", R"({"weight_decay":0.01})", m);
  ASSERT_EQ(o.error(), "");
  ASSERT_EQ(o.step(0.1, 1), "");
  for (float w : m.value(0)) EXPECT_NEAR(w, 0.899000002, 1e-6);
  std::fill(m.grad(0).begin(), m.grad(0).end(), -0.5f);
  ASSERT_EQ(o.step(0.1, 2), "");
  for (float w : m.value(0)) EXPECT_NEAR(w, 0.903364160, 1e-6);
}

// LAMB, one step (bias-corrected, so m̂ = g, v̂ = g², r = g/(|g| + 1e-6)):
//   w = [3, 4] (‖w‖ = 5), g = [1, −1], λ = 0:   u = r ≈ [1, −1], ‖u‖ = √2,
//     trust = 5/√2 = 3.5355339, w = [3 − 0.35355339, 4 + 0.35355339]
//   λ = 0.1: u = [1.3, −0.6], ‖u‖ = √2.05 = 1.4317821, trust = 3.4921515,
//     w = [3 − 0.1·3.4921515·1.3, 4 + 0.1·3.4921515·0.6] = [2.5460203, 4.2095291]
//   w = [30, 40] (‖w‖ = 50, φ clamps to 10): trust = 10/√2, w = [30 − 0.70710678, 40 + 0.70710678]
//   w = [0, 0]: trust = 1, w = [−0.1, 0.1]
TEST(Optimizers, LambTrustRatioByHand) {
  struct Case {
    float w0, w1;
    double wd;
    double e0, e1;
  };
  for (const Case& c : {Case{3, 4, 0.0, 3 - 0.35355339, 4 + 0.35355339}, Case{3, 4, 0.1, 2.5460203, 4.2095291},
                        Case{30, 40, 0.0, 30 - 0.70710678, 40 + 0.70710678}, Case{0, 0, 0.0, -0.1, 0.1}}) {
    FakeModel m({{"p", {2}, 0}});
    m.value(0) = {c.w0, c.w1};
    m.grad(0) = {1.0f, -1.0f};
    Opt o("lamb", R"({"weight_decay":)" + std::to_string(c.wd) + "}", m);
    ASSERT_EQ(o.error(), "");
    ASSERT_EQ(o.step(0.1, 1), "");
    EXPECT_NEAR(m.value(0)[0], c.e0, 2e-5) << c.w0 << " wd " << c.wd;
    EXPECT_NEAR(m.value(0)[1], c.e1, 2e-5) << c.w0 << " wd " << c.wd;
  }
}

// Adafactor at t = 1 (β̂2 = 1 − 1^−0.8 = 0, so the statistics are g² + ε1):
// matrix g = [[1, 2], [3, 4]]: R = row means of g² = [2.5, 12.5], C = col means = [5, 10],
//   mean(R) = 7.5, V̂ = R_i·C_j/7.5 = [[5/3, 10/3], [25/3, 50/3]],
//   U² = g²/V̂ = [0.6, 1.2, 1.08, 0.96], RMS(U) = √0.96 < 1 (no clipping),
//   U = [0.7745967, 1.0954451, 1.0392305, 0.9797959], w = 1 − 0.1·U.
// vector g = [3, 4]: V = [9, 16], U = [1, 1]; clip_threshold 0.5 halves it.
TEST(Optimizers, AdafactorFirstStepByHand) {
  {
    FakeModel m({{"p", {2, 2}, 0}});
    std::fill(m.value(0).begin(), m.value(0).end(), 1.0f);
    m.grad(0) = {1, 2, 3, 4};
    Opt o("adafactor", "{}", m);
    ASSERT_EQ(o.error(), "");
    ASSERT_EQ(o.step(0.1, 1), "");
    const double u[4] = {0.7745967, 1.0954451, 1.0392305, 0.9797959};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(m.value(0)[i], 1.0 - 0.1 * u[i], 1e-6) << i;
  }
  {
    FakeModel m({{"p", {2}, 0}});
    m.value(0) = {1, 1};
    m.grad(0) = {3, 4};
    Opt o("adafactor", R"({"clip_threshold":0.5})", m);
    ASSERT_EQ(o.step(0.1, 1), "");
    EXPECT_NEAR(m.value(0)[0], 0.95, 1e-6);
    EXPECT_NEAR(m.value(0)[1], 0.95, 1e-6);
  }
  {  // scale_parameter: α = 0.1·RMS([3, 4]) = 0.1·√12.5 = 0.35355339
    FakeModel m({{"p", {2}, 0}});
    m.value(0) = {3, 4};
    m.grad(0) = {3, 4};
    Opt o("adafactor", R"({"scale_parameter":true})", m);
    ASSERT_EQ(o.step(0.1, 1), "");
    EXPECT_NEAR(m.value(0)[0], 3 - 0.35355339, 1e-6);
    EXPECT_NEAR(m.value(0)[1], 4 - 0.35355339, 1e-6);
  }
  {  // relative_step: ρ_1 = min(1e-2, 1/√1) = 0.01, and lr/optimizer.lr = 1
    FakeModel m({{"p", {2}, 0}});
    m.value(0) = {1, 1};
    m.grad(0) = {3, 4};
    Opt o("adafactor", R"({"relative_step":true,"lr":0.1})", m);
    ASSERT_EQ(o.step(0.1, 1), "");
    EXPECT_NEAR(m.value(0)[0], 0.99, 1e-7);
  }
}

// Sophia (β = (0.9, 0.99), γ = rho = 0.04, λ = 0, lr = 0.1), w0 = 1, g = 0.5, m = 0.05:
//   no Hessian yet (h = 0): m/max(0, 1e-12) clips to 1, w = 1 − 0.1 = 0.9
//   update_hessian(B = 10) with ĝ = 5: h = 0.01·10·25 = 2.5, γh = 0.1,
//     ratio = 0.05/0.1 = 0.5, w = 1 − 0.05 = 0.95;   g = −0.5: w = 1.05
//   with λ = 0.1: w = 1·(1 − 0.01) − 0.05 = 0.94
TEST(Optimizers, SophiaClippedNewtonStepByHand) {
  for (auto [g, wd, expect, hess] : {std::tuple{0.5f, 0.0, 0.9, false}, std::tuple{0.5f, 0.0, 0.95, true},
                                     std::tuple{-0.5f, 0.0, 1.05, true}, std::tuple{0.5f, 0.1, 0.94, true}}) {
    FakeModel m = one({4}, 1.0f, 5.0f);
    Opt o("sophia", R"({"betas":[0.9,0.99],"weight_decay":)" + std::to_string(wd) + "}", m);
    ASSERT_EQ(o.error(), "");
    EXPECT_EQ(o.hessian_interval(), 10u);
    if (hess) {
      ASSERT_EQ(o.update_hessian(10), "");
    }
    std::fill(m.grad(0).begin(), m.grad(0).end(), g);
    ASSERT_EQ(o.step(0.1, 1), "");
    for (float w : m.value(0)) EXPECT_NEAR(w, expect, 1e-6) << g << " " << wd << " " << hess;
  }
  FakeModel m = one({4}, 1.0f, 1.0f);
  Opt o("sophia", "{}", m);
  EXPECT_NE(o.update_hessian(0).find("B > 0"), std::string::npos);
  Opt a("adamw", "{}", m);
  EXPECT_EQ(a.hessian_interval(), 0u);
}

// Parameter groups with SGD (momentum 0: w ← w − lr·lr_mult·(g + λ·w)), w = 1, g = 0.5, lr = 0.1, λ = 0.01:
//   plain matrix:                1 − 0.1·(0.5 + 0.01) = 0.949
//   embedding (decay off):       1 − 0.1·0.5 = 0.95
//   norm gain (NO_DECAY):        0.95, even when a group sets weight_decay 0.1
//   router, group lr_mult 0.5, weight_decay 0: 1 − 0.05·0.5 = 0.975
//   embedding, decay_embeddings: 0.949;  embedding, group weight_decay 0.1: 1 − 0.1·0.6 = 0.94
TEST(Optimizers, ParamGroupsAndDecayFlags) {
  auto run = [](const std::string& opts) {
    FakeModel m({{"embed.weight", {2, 2}, ZC_PARAM_EMBEDDING},
                 {"layers.0.attn.wq", {2, 2}, 0},
                 {"layers.0.attn_norm.weight", {1}, ZC_PARAM_NO_DECAY},
                 {"layers.0.moe.router", {2, 2}, ZC_PARAM_ROUTER}});
    for (size_t i = 0; i < m.count(); ++i) {
      std::fill(m.value(i).begin(), m.value(i).end(), 1.0f);
      std::fill(m.grad(i).begin(), m.grad(i).end(), 0.5f);
    }
    Opt o("sgd", opts, m);
    EXPECT_EQ(o.error(), "");
    EXPECT_EQ(o.step(0.1, 1), "");
    std::vector<float> out;
    for (size_t i = 0; i < m.count(); ++i) out.push_back(m.value(i)[0]);
    return out;
  };
  const std::string groups = R"("param_groups":[{"pattern":"layers.*.moe.router","lr_mult":0.5,"weight_decay":0.0})";
  auto a = run(R"({"weight_decay":0.01,)" + groups + "]}");
  EXPECT_NEAR(a[0], 0.95, 1e-7);
  EXPECT_NEAR(a[1], 0.949, 1e-7);
  EXPECT_NEAR(a[2], 0.95, 1e-7);
  EXPECT_NEAR(a[3], 0.975, 1e-7);
  auto b = run(R"({"weight_decay":0.01,"decay_embeddings":true,)" + groups + "]}");
  EXPECT_NEAR(b[0], 0.949, 1e-7);
  auto c = run(R"({"weight_decay":0.01,)" + groups +
               R"(,{"pattern":"embed.*","weight_decay":0.1},{"pattern":"*norm*","weight_decay":0.1}]})");
  EXPECT_NEAR(c[0], 0.94, 1e-7);
  EXPECT_NEAR(c[2], 0.95, 1e-7);
}

TEST(Optimizers, OneLineErrorsNameTheOption) {
  FakeModel m({{"layers.0.attn.wq", {2, 2}, 0}});
  struct Case {
    const char* name;
    const char* opts;
    const char* expect;
  };
  for (const Case& c : {
           Case{"adamw", R"({"momentum":0.9})", "optimizer.momentum: unknown option for adamw (allowed:"},
           Case{"adamw", R"({"betas":[0.9]})", "optimizer.betas: expected 2 numbers, found 1"},
           Case{"adamw", R"({"betas":[0.9, 1.5]})", "optimizer.betas[1]: expected a number in [0, 1)"},
           Case{"adamw", R"({"eps":"x"})", "optimizer.eps: expected a number, found string"},
           Case{"sgd", R"({"param_groups":[{"pattern":"layer.*"}]})",
                "optimizer.param_groups[0].pattern: 'layer.*' matches no parameter"},
           Case{"sgd", R"({"param_groups":[{"pattern":"*","lr":2}]})", "optimizer.param_groups[0].lr: unknown key"},
           Case{"sgd", R"({"nesterov":true})", "optimizer.nesterov: true needs momentum > 0"},
           Case{"adafactor", R"({"betas":[0.9,0.99]})", "optimizer.betas: unknown option for adafactor"},
           Case{"adafactor", R"({"warmup_init":true})", "optimizer.warmup_init: true needs relative_step: true"},
           // optimizer.eps is a number config-wide (the host's schema), so Adafactor's ε2 has its own key.
           Case{"adafactor", R"({"eps":[1e-30,1e-3]})", "optimizer.eps: expected a number, found array"},
           Case{"adafactor", R"({"eps2":-1})", "optimizer.eps2: expected a number >= 0"},
           Case{"sophia", R"({"hessian_update_interval":0})",
                "optimizer.hessian_update_interval: expected an integer >= 1"},
       }) {
    Opt o(c.name, c.opts, m);
    EXPECT_NE(o.error().find(c.expect), std::string::npos) << c.name << " " << c.opts << " -> " << o.error();
    EXPECT_EQ(o.error().find('\n'), std::string::npos);
  }
}

// Zerosum-SGD: after every step Σ_e Δw[e, :] = 0 for the router (to fp32
// rounding), the router update equals SGD-momentum on the expert-centred
// direction, and a non-router parameter follows plain SGD-momentum (both
// recomputed here in double from torch.optim.SGD's definition).
TEST(Optimizers, ZerosumSgdCentresRouterUpdates) {
  const int64_t E = 4, D = 8;
  FakeModel m({{"layers.0.moe.router", {E, D}, ZC_PARAM_ROUTER}, {"layers.0.attn.wq", {3, 5}, 0}});
  ztest::fill_normal(m.value(0), 1);
  ztest::fill_normal(m.value(1), 2);
  const double lr = 0.05, mu = 0.9, wd = 0.01;
  Opt o("zerosum_sgd", R"({"momentum":0.9,"weight_decay":0.01})", m);
  ASSERT_EQ(o.error(), "");
  std::vector<double> w0(m.value(0).begin(), m.value(0).end()), w1(m.value(1).begin(), m.value(1).end());
  std::vector<double> b0(w0.size()), b1(w1.size());
  for (int step = 1; step <= 4; ++step) {
    ztest::fill_normal(m.grad(0), 100 + step);
    ztest::fill_normal(m.grad(1), 200 + step);
    for (float& g : m.grad(0)) g += 3.0f;  // a common shift: exactly what the centring removes
    std::vector<float> before(m.value(0));
    // Expected router: d = g + λw, centred per column, then momentum.
    std::vector<double> d(w0.size());
    for (int64_t i = 0; i < E * D; ++i) d[i] = m.grad(0)[i] + wd * w0[i];
    for (int64_t c = 0; c < D; ++c) {
      double mean = 0;
      for (int64_t e = 0; e < E; ++e) mean += d[e * D + c];
      mean /= E;
      for (int64_t e = 0; e < E; ++e) d[e * D + c] -= mean;
    }
    for (size_t i = 0; i < d.size(); ++i) {
      b0[i] = step == 1 ? d[i] : mu * b0[i] + d[i];
      w0[i] -= lr * b0[i];
    }
    for (size_t i = 0; i < w1.size(); ++i) {
      const double di = m.grad(1)[i] + wd * w1[i];
      b1[i] = step == 1 ? di : mu * b1[i] + di;
      w1[i] -= lr * b1[i];
    }
    ASSERT_EQ(o.step(lr, step), "");
    for (int64_t c = 0; c < D; ++c) {
      double sum = 0, mag = 0;
      for (int64_t e = 0; e < E; ++e) {
        const double dw = static_cast<double>(m.value(0)[e * D + c]) - before[e * D + c];
        sum += dw;
        mag += std::fabs(dw);
      }
      EXPECT_LT(std::fabs(sum), 1e-6 * std::max(1.0, mag) + 4e-7) << "step " << step << " column " << c;
    }
    for (size_t i = 0; i < w0.size(); ++i) EXPECT_NEAR(m.value(0)[i], w0[i], 1e-5) << "router " << i;
    for (size_t i = 0; i < w1.size(); ++i) EXPECT_NEAR(m.value(1)[i], w1[i], 1e-5) << "wq " << i;
  }
}

// 10 steps in one instance == 5 steps, save, a new instance loads, 5 more:
// bit-identical parameters, for every optimizer.
class Resume : public ::testing::TestWithParam<const char*> {};

TEST_P(Resume, BitIdenticalAfterSaveAndLoad) {
  const std::string name = GetParam();
  const std::string opts = name == "sophia"      ? R"({"hessian_update_interval":3})"
                           : name == "sgd"       ? R"({"momentum":0.9,"nesterov":true,"weight_decay":0.01})"
                           : name == "adafactor" ? R"({"beta1":0.9,"scale_parameter":true,"weight_decay":0.01})"
                                                 : "{}";
  auto make = [] {
    return FakeModel({{"embed.weight", {64, 40}, ZC_PARAM_EMBEDDING},
                      {"layers.0.moe.router", {4, 40}, ZC_PARAM_ROUTER},
                      {"layers.0.moe.experts", {3, 24, 40}, ZC_PARAM_EXPERT},
                      {"layers.0.attn_norm.weight", {40}, ZC_PARAM_NO_DECAY},
                      {"big", {300, 200}, 0}});  // above the parallel cut-off
  };
  auto init = [](FakeModel& m) {
    for (size_t i = 0; i < m.count(); ++i) ztest::fill_normal(m.value(i), 10 + i, 0.1f);
  };
  auto do_step = [&](FakeModel& m, Opt& o, int s) {
    if (name == "sophia" && (s - 1) % 3 == 0) {
      for (size_t i = 0; i < m.count(); ++i) ztest::fill_normal(m.grad(i), 5000 + 10 * s + i);
      ASSERT_EQ(o.update_hessian(128), "");
    }
    for (size_t i = 0; i < m.count(); ++i) ztest::fill_normal(m.grad(i), 1000 + 10 * s + i);
    ASSERT_EQ(o.step(1e-2 / s, s), "");
  };
  FakeModel a = make(), b = make();
  init(a);
  init(b);
  Opt oa(name, opts, a);
  ASSERT_EQ(oa.error(), "");
  for (int s = 1; s <= 10; ++s) do_step(a, oa, s);

  MemoryState st;
  {
    Opt ob(name, opts, b);
    for (int s = 1; s <= 5; ++s) do_step(b, ob, s);
    ASSERT_EQ(ob.save(st), "");
  }
  EXPECT_NE(st.json.find("\"step\":5"), std::string::npos) << st.json;
  Opt oc(name, opts, b);
  ASSERT_EQ(oc.load(st), "");
  for (int s = 6; s <= 10; ++s) do_step(b, oc, s);
  for (size_t i = 0; i < a.count(); ++i)
    EXPECT_EQ(std::memcmp(a.value(i).data(), b.value(i).data(), a.value(i).size() * sizeof(float)), 0)
        << name << ": " << a.spec(i).name << " differs after resume";
}

INSTANTIATE_TEST_SUITE_P(AllOptimizers, Resume,
                         ::testing::Values("adamw", "lamb", "adafactor", "sophia", "sgd", "zerosum_sgd"));

TEST(Optimizers, StateNamesAndRefusals) {
  FakeModel m({{"layers.0.attn.wq", {2, 3}, 0}, {"layers.0.attn_norm.weight", {1}, ZC_PARAM_NO_DECAY}});
  MemoryState st;
  {
    Opt o("adamw", "{}", m);
    ASSERT_EQ(o.step(0.1, 1), "");
    ASSERT_EQ(o.save(st), "");
  }
  EXPECT_EQ(st.tensors.count("layers.0.attn.wq.exp_avg"), 1u);
  EXPECT_EQ(st.tensors.count("layers.0.attn.wq.exp_avg_sq"), 1u);
  EXPECT_EQ(st.tensors.count("layers.0.attn_norm.weight.exp_avg"), 1u);
  EXPECT_EQ(st.tensors.at("layers.0.attn.wq.exp_avg").shape, (std::vector<int64_t>{2, 3}));

  Opt sgd("sgd", R"({"momentum":0.9})", m);
  EXPECT_NE(sgd.load(st).find("saved by optimizer 'adamw', cannot load into 'sgd'"), std::string::npos);

  {  // Adafactor's factored names and shapes
    MemoryState fs;
    Opt f("adafactor", "{}", m);
    ASSERT_EQ(f.save(fs), "");
    EXPECT_EQ(fs.tensors.at("layers.0.attn.wq.exp_avg_sq_row").shape, (std::vector<int64_t>{2}));
    EXPECT_EQ(fs.tensors.at("layers.0.attn.wq.exp_avg_sq_col").shape, (std::vector<int64_t>{3}));
    EXPECT_EQ(fs.tensors.at("layers.0.attn_norm.weight.exp_avg_sq").shape, (std::vector<int64_t>{1}));
  }

  // A failing load changes nothing: a truncated tensor is refused and the
  // instance continues exactly like a fresh one.
  MemoryState bad = st;
  bad.tensors.at("layers.0.attn.wq.exp_avg_sq").bytes.resize(8);
  bad.tensors.at("layers.0.attn.wq.exp_avg_sq").shape = {2};
  FakeModel m1({{"layers.0.attn.wq", {2, 3}, 0}, {"layers.0.attn_norm.weight", {1}, ZC_PARAM_NO_DECAY}});
  FakeModel m2({{"layers.0.attn.wq", {2, 3}, 0}, {"layers.0.attn_norm.weight", {1}, ZC_PARAM_NO_DECAY}});
  for (FakeModel* mm : {&m1, &m2})
    for (size_t i = 0; i < 2; ++i) {
      ztest::fill_normal(mm->value(i), 7 + i);
      ztest::fill_normal(mm->grad(i), 9 + i);
    }
  Opt o1("adamw", "{}", m1), o2("adamw", "{}", m2);
  EXPECT_NE(o1.load(bad).find("layers.0.attn.wq.exp_avg_sq"), std::string::npos);
  ASSERT_EQ(o1.step(0.1, 1), "");
  ASSERT_EQ(o2.step(0.1, 1), "");
  EXPECT_EQ(m1.value(0), m2.value(0));

  MemoryState extra = st;
  extra.tensors["layers.9.x.exp_avg"] = extra.tensors.at("layers.0.attn.wq.exp_avg");
  Opt o3("adamw", "{}", m1);
  EXPECT_NE(o3.load(extra).find("unexpected tensor 'layers.9.x.exp_avg'"), std::string::npos);
}

TEST(Optimizers, RefusesNonFp32AndCudaParameters) {
  FakeModel m({{"w", {2}, 0}});
  // Rewrite the value's dtype through the table's pointer (the model owns it).
  zc_param_list l = m.list();
  l.params[0].value->dtype = DLDataType{kDLFloat, 16, 1};
  Opt a("adamw", "{}", m);
  EXPECT_NE(a.error().find("optimizer: parameter 'w' is not float32"), std::string::npos) << a.error();
  l.params[0].value->dtype = DLDataType{kDLFloat, 32, 1};
  l.params[0].value->device = DLDevice{kDLCUDA, 0};
  Opt b("adamw", "{}", m);
  EXPECT_NE(b.error().find("not implemented yet"), std::string::npos) << b.error();
}

// ABI 1.3: estimate_memory gives, without creating an instance, the bytes of
// the state that create allocates: counted here as every tensor save_state
// writes (the optimizer's whole state), for each of the six optimizers.
TEST(Optimizers, EstimateMemoryEqualsTheStateCreateAllocates) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"adamw", "{}"},     {"lamb", "{}"},       {"adafactor", R"({"beta1": 0.9})"},
      {"adafactor", "{}"}, {"sophia", "{}"},     {"sgd", R"({"momentum": 0.9})"},
      {"sgd", "{}"},       {"zerosum_sgd", "{}"}};
  for (const auto& [name, opts] : cases) {
    FakeModel m({{"w", {6, 4}, 0}, {"router", {4, 6}, ZC_PARAM_ROUTER}, {"b", {4}, ZC_PARAM_NO_DECAY}});
    Opt o(name, opts, m);
    ASSERT_EQ(o.error(), "") << name;
    MemoryState st;
    ASSERT_EQ(o.save(st), "") << name;
    uint64_t saved = 0;
    for (const auto& [k, t] : st.tensors) saved += t.bytes.size();
    const zc_component* c = ztest::optimizers().find(name);
    const auto* table = static_cast<const zc_optimizer_table*>(c->table);
    ASSERT_TRUE(ZC_TABLE_HAS_SLOT(table, zc_optimizer_table, estimate_memory)) << name;
    zc_create_args a{};
    a.struct_size = sizeof a;
    a.host = ztest::host();
    a.options_json = opts.c_str();
    a.config_json = "{}";
    a.run_dir = "";
    a.model = m.ref();
    zc_memory_estimate est{};
    est.struct_size = sizeof est;
    ASSERT_EQ(ztest::take(table->estimate_memory(&a, &est)), "") << name;
    EXPECT_EQ(est.optimizer_state_bytes, saved) << name << " " << opts;
    EXPECT_EQ(est.parameter_bytes, 0u);
  }
}

// A ZeRO-1 shard (zc_param_shard) that gives one process every element, with
// each parameter in its own group (ABI 1.9 `groups`, as under expert
// parallelism: dense tensors over DATA, experts over EXPERT_DATA): LAMB's
// norms and Adafactor's statistics are laid out per group, and the steps
// have the unsharded optimizer's bits. A host of ABI 1.5 to 1.8 passes the
// struct without `groups` (32 bytes): accepted, one group for all. A
// shorter struct or a group that is not a zc_group is refused by name.
TEST(Optimizers, ShardWithPerTensorGroupsStepsLikeUnsharded) {
  const std::vector<FakeModel::Spec> specs = {{"embed.weight", {8, 6}, ZC_PARAM_EMBEDDING},
                                              {"layers.0.moe.experts.0.w1", {6, 4}, ZC_PARAM_EXPERT},
                                              {"layers.0.attn.wq", {6, 6}, 0},
                                              {"layers.0.moe.experts.1.w1", {6, 4}, ZC_PARAM_EXPERT},
                                              {"norm.weight", {6}, ZC_PARAM_NO_DECAY}};
  auto fill = [](FakeModel& m, int step) {
    for (size_t i = 0; i < m.count(); ++i)
      for (size_t j = 0; j < m.value(i).size(); ++j) {
        if (step == 0) m.value(i)[j] = 0.1f * std::sin(1.0f + 0.37f * float(i * 31 + j));
        m.grad(i)[j] = 0.01f * std::cos(0.5f + 0.11f * float(step * 97 + i * 13 + j));
      }
  };
  std::vector<int64_t> begin(specs.size(), 0), end;
  for (const auto& sp : specs) {
    int64_t n = 1;
    for (int64_t d : sp.shape) n *= d;
    end.push_back(n);
  }
  const std::vector<uint32_t> groups = {ZC_GROUP_DATA, ZC_GROUP_EXPERT_DATA, ZC_GROUP_DATA, ZC_GROUP_EXPERT_DATA,
                                        ZC_GROUP_DATA};
  for (const char* name : {"lamb", "adafactor", "adamw"}) {
    SCOPED_TRACE(name);
    FakeModel plain(specs), grouped(specs), old_host(specs);
    const zc_param_shard with_groups{sizeof(zc_param_shard), ZC_GROUP_DATA, specs.size(),
                                     begin.data(),           end.data(),    groups.data()};
    zc_param_shard no_groups = with_groups;
    no_groups.struct_size = offsetof(zc_param_shard, groups);  // an ABI 1.5-1.8 host's struct
    Opt a(name, "{}", plain), b(name, "{}", grouped, "{}", &with_groups), c(name, "{}", old_host, "{}", &no_groups);
    ASSERT_EQ(a.error(), "");
    ASSERT_EQ(b.error(), "");
    ASSERT_EQ(c.error(), "");
    for (int step = 0; step < 3; ++step) {
      for (FakeModel* m : {&plain, &grouped, &old_host}) fill(*m, step);
      ASSERT_EQ(a.step(1e-2, step + 1), "");
      ASSERT_EQ(b.step(1e-2, step + 1), "");
      ASSERT_EQ(c.step(1e-2, step + 1), "");
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(std::memcmp(plain.value(i).data(), grouped.value(i).data(), plain.value(i).size() * 4), 0)
          << specs[i].name;
      EXPECT_EQ(std::memcmp(plain.value(i).data(), old_host.value(i).data(), plain.value(i).size() * 4), 0)
          << specs[i].name;
    }
    // The update moved every parameter (the comparison is not of untouched values).
    EXPECT_NE(plain.value(2)[0], 0.1f * std::sin(1.0f + 0.37f * float(2 * 31)));
  }
  FakeModel m(specs);
  zc_param_shard shorter{sizeof(zc_param_shard), ZC_GROUP_DATA, specs.size(), begin.data(), end.data(), nullptr};
  shorter.struct_size = 24;
  EXPECT_EQ(Opt("adamw", "{}", m, "{}", &shorter).error(),
            "optimizer: the host's zc_param_shard is 24 bytes, shorter than ABI 1.5's 32");
  std::vector<uint32_t> bad = groups;
  bad[3] = 7;
  const zc_param_shard wrong{sizeof(zc_param_shard), ZC_GROUP_DATA, specs.size(), begin.data(), end.data(), bad.data()};
  EXPECT_EQ(Opt("adamw", "{}", m, "{}", &wrong).error(),
            "optimizer: the shard of 'layers.0.moe.experts.1.w1' names group 7, not a zc_group");
}
