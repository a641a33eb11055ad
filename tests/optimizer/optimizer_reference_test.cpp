// optimizer_reference_test.cpp (label `reference`): 20 steps of each
// optimizer on the same random tensors and gradients as an independent
// Python implementation, parameters compared after every step to 1e-6:
//   adamw, sgd (momentum, dampening, Nesterov)  -> torch.optim (tests/reference/optim_torch.py)
//   lamb, adafactor, sophia, zerosum_sgd        -> NumPy from the papers (tests/reference/optim_reference.py)
// with weight decay, parameter groups and global clipping
// (zcode::core::clip_grad_norm here, torch.nn.utils.clip_grad_norm_ there).
#include "test_support.h"

#include <zcode/core/train_step.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

namespace fs = std::filesystem;

const char* kPython = "/usr/bin/python3";

bool python_has_torch() {
  static const bool ok = std::system((std::string(kPython) + " -c 'import torch, numpy' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

struct P {
  const char* name;
  std::vector<int64_t> shape;
  uint32_t flags;
  double lr_mult;       // as the test's param_groups give it
  double weight_decay;  // as the rules in param_groups.h give it, decided here by hand
};

struct Case {
  std::string id, optimizer, options;
  double wd;  // optimizer.weight_decay for the decayed tensors
  double clip;
  uint64_t hessian_interval = 0;
  int64_t hessian_tokens = 0;
  double tol = 1e-6;
  double min_moved = 1e-3;  // the run must move some parameter at least this much
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.id; }

// Shapes cover a matrix, a vector, a 3-D tensor (Adafactor's batched factors),
// a router and an embedding. The router group halves its lr and turns decay
// off; embeddings and NO_DECAY tensors get no decay.
std::vector<P> params_for(double wd) {
  return {{"layers.0.attn.wq", {8, 12}, 0, 1.0, wd},
          {"layers.0.attn_norm.weight", {12}, ZC_PARAM_NO_DECAY, 1.0, 0.0},
          {"layers.0.moe.router", {4, 12}, ZC_PARAM_ROUTER, 0.5, 0.0},
          {"layers.0.moe.experts", {2, 3, 5}, ZC_PARAM_EXPERT, 1.0, wd},
          {"embed.weight", {16, 12}, ZC_PARAM_EMBEDDING, 1.0, 0.0}};
}
const char* kGroups = R"("param_groups":[{"pattern":"layers.*.moe.router","lr_mult":0.5,"weight_decay":0}])";

void write_floats(std::ofstream& f, const std::vector<float>& v) {
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

void run_case(const Case& c) {
  if (!python_has_torch()) GTEST_SKIP() << kPython << " with torch and numpy is not available (Debian python3-torch)";
  const int steps = 20;
  const std::vector<P> ps = params_for(c.wd);
  std::vector<ztest::FakeModel::Spec> specs;
  for (const P& p : ps) specs.push_back({p.name, p.shape, p.flags});
  ztest::FakeModel m(specs);
  for (size_t i = 0; i < m.count(); ++i) ztest::fill_normal(m.value(i), 31 * i + 7, 0.5f);

  const std::string opts = "{" + c.options + (c.options.empty() ? "" : ",") +
                           "\"weight_decay\":" + std::to_string(c.wd) + "," + kGroups + "}";
  ztest::Opt o(c.optimizer, opts, m);
  ASSERT_EQ(o.error(), "") << opts;

  const fs::path dir = ZC_OPTIM_WORK_DIR;
  fs::create_directories(dir);
  const fs::path json = dir / (c.id + ".json"), bin = dir / (c.id + ".bin"), out = dir / (c.id + ".out.bin");
  std::ofstream fb(bin, std::ios::binary);
  std::vector<float> init;
  for (size_t i = 0; i < m.count(); ++i) {
    write_floats(fb, m.value(i));
    init.insert(init.end(), m.value(i).begin(), m.value(i).end());
  }

  std::vector<double> lrs;
  std::vector<std::vector<float>> ours;  // params after each step
  for (int s = 0; s < steps; ++s) {
    const double lr = 0.01 * (1.0 + 0.5 * std::sin(0.7 * s));  // varying, like a schedule
    lrs.push_back(lr);
    if (c.hessian_interval && zcode::core::hessian_due(static_cast<uint64_t>(s + 1), c.hessian_interval)) {
      for (size_t i = 0; i < m.count(); ++i) {
        ztest::fill_normal(m.grad(i), 90000 + 100 * s + i, 0.05f);
        write_floats(fb, m.grad(i));
      }
      ASSERT_EQ(o.update_hessian(c.hessian_tokens), "");
    }
    // Gradient scale grows over the run, so clipping is inactive early and active late.
    for (size_t i = 0; i < m.count(); ++i) {
      ztest::fill_normal(m.grad(i), 1000 + 100 * s + i, 0.02f * (1 + s));
      write_floats(fb, m.grad(i));
    }
    if (c.clip > 0) zcode::core::clip_grad_norm(m.list(), c.clip);
    ASSERT_EQ(o.step(lr, static_cast<uint64_t>(s + 1)), "");
    std::vector<float> all;
    for (size_t i = 0; i < m.count(); ++i) all.insert(all.end(), m.value(i).begin(), m.value(i).end());
    ours.push_back(std::move(all));
  }
  fb.close();

  std::ostringstream js;
  js.precision(17);
  std::string options_json = opts;
  js << "{\"optimizer\":\"" << c.optimizer << "\",\"options\":" << options_json << ",\"steps\":" << steps
     << ",\"clip\":" << c.clip << ",\"lrs\":[";
  for (size_t s = 0; s < lrs.size(); ++s) js << (s ? "," : "") << lrs[s];
  js << "],\"params\":[";
  for (size_t i = 0; i < ps.size(); ++i) {
    js << (i ? "," : "") << "{\"name\":\"" << ps[i].name << "\",\"shape\":[";
    for (size_t d = 0; d < ps[i].shape.size(); ++d) js << (d ? "," : "") << ps[i].shape[d];
    js << "],\"lr_mult\":" << ps[i].lr_mult << ",\"weight_decay\":" << ps[i].weight_decay
       << ",\"router\":" << ((ps[i].flags & ZC_PARAM_ROUTER) ? "true" : "false") << "}";
  }
  js << "],\"hessian\":";
  if (c.hessian_interval) js << "{\"interval\":" << c.hessian_interval << ",\"tokens\":" << c.hessian_tokens << "}";
  else js << "null";
  js << "}";
  std::ofstream(json) << js.str();

  const bool torch = c.optimizer == "adamw" || c.optimizer == "sgd";
  const std::string script = torch ? (fs::path(ZC_OPTIM_REFERENCE_SCRIPT).parent_path() / "optim_torch.py").string()
                                   : std::string(ZC_OPTIM_REFERENCE_SCRIPT);
  const std::string cmd =
      std::string(kPython) + " " + script + " " + json.string() + " " + bin.string() + " " + out.string() + " 2>&1";
  fs::remove(out);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  std::ifstream fr(out, std::ios::binary);
  const size_t per_step = ours[0].size();
  std::vector<float> ref(per_step * steps);
  fr.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * sizeof(float)));
  ASSERT_EQ(static_cast<size_t>(fr.gcount()), ref.size() * sizeof(float)) << out << " is short";
  double worst = 0;
  for (int s = 0; s < steps; ++s)
    for (size_t j = 0; j < per_step; ++j) {
      const double d = std::fabs(static_cast<double>(ours[s][j]) - ref[s * per_step + j]);
      worst = std::max(worst, d);
      ASSERT_LE(d, c.tol) << c.id << ": step " << s + 1 << " element " << j << " ours " << ours[s][j] << " reference "
                          << ref[s * per_step + j];
    }
  // Sanity of the comparison itself: the parameters did move.
  double moved = 0;
  for (size_t j = 0; j < per_step; ++j)
    moved = std::max(moved, std::fabs(static_cast<double>(ours.back()[j]) - init[j]));
  EXPECT_GT(moved, c.min_moved) << c.id;
  std::printf("[ %s ] max |ours - reference| over %d steps = %.3g\n", c.id.c_str(), steps, worst);
}

}  // namespace

class Reference : public ::testing::TestWithParam<Case> {};
TEST_P(Reference, MatchesIndependentImplementation) { run_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Optimizers, Reference,
    ::testing::Values(
        Case{"adamw_clip", "adamw", R"("betas":[0.9,0.95],"eps":1e-8)", 0.1, 1.0},
        Case{"adamw_defaults_noclip", "adamw", "", 0.01, 0.0},
        Case{"sgd_momentum_dampening_clip", "sgd", R"("momentum":0.9,"dampening":0.1)", 0.01, 1.0},
        Case{"sgd_nesterov_clip", "sgd", R"("momentum":0.9,"nesterov":true)", 0.01, 1.0},
        Case{"sgd_plain", "sgd", "", 0.01, 0.0},
        Case{"lamb_clip", "lamb", R"("betas":[0.9,0.999],"eps":1e-6)", 0.01, 1.0},
        Case{"adafactor_defaults", "adafactor", "", 0.0, 0.0},
        Case{"adafactor_relative_momentum", "adafactor",
             R"("lr":0.01,"beta1":0.9,"relative_step":true,"scale_parameter":true,"clip_threshold":0.8)", 0.01, 1.0},
        // warmup_init steps are 1e-6·t: the parameters move by ~1e-5 only.
        Case{"adafactor_warmup_init", "adafactor", R"("lr":0.01,"relative_step":true,"warmup_init":true)", 0.01, 0.0, 0,
             0, 1e-6, 1e-6},
        Case{"sophia_clip", "sophia", R"("betas":[0.9,0.99],"rho":0.04,"hessian_update_interval":5)", 0.1, 1.0, 5, 64},
        Case{"zerosum_sgd_clip", "zerosum_sgd", R"("momentum":0.9,"nesterov":true)", 0.01, 1.0}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.id; });
