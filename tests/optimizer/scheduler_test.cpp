// scheduler_test.cpp: every schedule's value at step 0, at the warmup
// boundary, inside the decay, at the last step (T − 1) and after it (T, and
// far beyond), computed by hand below; plus the one-line errors.
//
// The convention under test (schedulers.cpp): warmup lr = base·(step+1)/W for
// step < W; then p = (step − W)/(T − W) clamped to [0, 1] and
// lr = base·(r + (1 − r)·f(p)).
#include "test_support.h"

#include <cmath>
#include <numbers>

namespace {

ztest::Plugin& schedulers() {
  static ztest::Plugin p(ZC_SCHEDULERS_PLUGIN);
  return p;
}

class Sched {
 public:
  Sched(const std::string& type, const std::string& opts, const std::string& config) {
    const zc_component* c = schedulers().find(type);
    if (!c) throw std::runtime_error("no scheduler " + type);
    t_ = static_cast<const zc_scheduler_table*>(c->table);
    zc_create_args a{};
    a.struct_size = sizeof(a);
    a.host = ztest::host();
    a.options_json = opts.c_str();
    a.config_json = config.c_str();
    a.run_dir = "";
    error_ = ztest::take(t_->create(&a, &inst_));
  }
  ~Sched() { t_->destroy(inst_); }
  const std::string& error() const { return error_; }
  double lr(uint64_t step, double base) {
    double out = -1;
    EXPECT_EQ(ztest::take(t_->lr(inst_, step, base, &out)), "");
    return out;
  }

 private:
  const zc_scheduler_table* t_ = nullptr;
  void* inst_ = nullptr;
  std::string error_;
};

const std::string kT100 = R"({"training":{"max_steps":100}})";
constexpr double kBase = 2.0;

struct Row {
  uint64_t step;
  double lr;
  const char* why;
};

void check(const std::string& type, const std::string& opts, const std::vector<Row>& rows,
           const std::string& config = kT100) {
  Sched s(type, opts, config);
  ASSERT_EQ(s.error(), "") << type;
  for (const Row& r : rows)
    EXPECT_NEAR(s.lr(r.step, kBase), r.lr, 1e-9) << type << " " << opts << " step " << r.step << ": " << r.why;
}

}  // namespace

TEST(Schedulers, ManifestHasSixSchedules) {
  ASSERT_EQ(schedulers().manifest().num_components, 6u);
  for (const char* n : {"constant", "linear_with_warmup", "cosine_with_warmup", "polynomial", "wsd", "inverse_sqrt"})
    EXPECT_NE(schedulers().find(n), nullptr) << n;
}

TEST(Schedulers, Constant) {
  check("constant", "{}", {{0, 2.0, "no warmup: base"}, {99, 2.0, "last"}, {100, 2.0, "after"}});
  check("constant", R"({"warmup_steps":10})",
        {{0, 0.2, "2·1/10"},
         {4, 1.0, "2·5/10"},
         {9, 2.0, "2·10/10: warmup ends at base"},
         {10, 2.0, "base"},
         {99, 2.0, "last"},
         {100, 2.0, "after"},
         {100000, 2.0, "far after"}});
}

TEST(Schedulers, LinearWithWarmup) {
  check("linear_with_warmup", R"({"warmup_steps":10})",
        {{0, 0.2, "2·1/10"},
         {9, 2.0, "2·10/10"},
         {10, 2.0, "p = 0"},
         {55, 1.0, "p = 45/90 = 0.5: 2·0.5"},
         {99, 2.0 / 90, "last: p = 89/90, 2·(1/90) = 0.0222…"},
         {100, 0.0, "p = 1"},
         {150, 0.0, "clamped"}});
  check("linear_with_warmup", R"({"warmup_steps":10,"min_lr_ratio":0.1})",
        {{0, 0.2, "warmup ignores the floor"}, {99, 0.22, "2·(0.1 + 0.9/90) = 2·0.11"}, {100, 0.2, "2·0.1"}});
  check("linear_with_warmup", "{}", {{0, 2.0, "no warmup: p = 0"}, {50, 1.0, "p = 0.5"}, {99, 0.02, "2·(1/100)"}});
}

TEST(Schedulers, CosineWithWarmup) {
  // last step: f = (1 + cos(π·89/90))/2 = (1 − cos(π/90))/2 = (1 − 0.9993908270)/2 = 0.0003045865
  const double f_last = (1.0 - std::cos(std::numbers::pi / 90.0)) / 2.0;
  check("cosine_with_warmup", R"({"warmup_steps":10,"min_lr_ratio":0.1})",
        {{0, 0.2, "2·1/10"},
         {9, 2.0, "warmup top"},
         {10, 2.0, "p = 0, f = 1"},
         {55, 1.1, "p = 0.5, f = 0.5: 2·(0.1 + 0.45)"},
         {99, 2.0 * (0.1 + 0.9 * f_last), "≈ 0.2005483"},
         {100, 0.2, "p = 1: 2·0.1"},
         {5000, 0.2, "clamped"}});
  EXPECT_NEAR(2.0 * (0.1 + 0.9 * f_last), 0.2005482557, 1e-9);  // the hand value of the formula above
}

TEST(Schedulers, Polynomial) {
  check("polynomial", R"({"warmup_steps":10,"power":2})",
        {{0, 0.2, "2·1/10"},
         {10, 2.0, "p = 0"},
         {55, 0.5, "(1 − 0.5)² = 0.25: 2·0.25"},
         {99, 2.0 / 8100, "(1/90)²·2 = 0.000246913…"},
         {100, 0.0, "p = 1"}});
  check("polynomial", R"({"warmup_steps":10})", {{55, 1.0, "power 1 is linear"}});
}

TEST(Schedulers, Wsd) {
  // W 10, S 60, D 30: warmup 0..9, stable 10..69, decay 70..99 with p = (step − 70)/30.
  const std::string o = R"({"warmup_steps":10,"stable_steps":60,"decay_steps":30,"decay_shape":)";
  check("wsd", o + R"("linear"})",
        {{0, 0.2, "2·1/10"},
         {9, 2.0, "warmup top"},
         {10, 2.0, "stable"},
         {69, 2.0, "last stable"},
         {70, 2.0, "decay p = 0"},
         {85, 1.0, "p = 0.5: 2·0.5"},
         {99, 2.0 / 30, "p = 29/30: 2·(1/30)"},
         {100, 0.0, "p = 1"},
         {1000, 0.0, "after"}});
  check("wsd", o + R"("1-sqrt"})",
        {{85, 2.0 * (1.0 - std::sqrt(0.5)), "2·(1 − 0.7071068) = 0.5857864"},
         {99, 2.0 * (1.0 - std::sqrt(29.0 / 30.0)), "2·(1 − 0.9831921) = 0.0336158"},
         {100, 0.0, "p = 1"}});
  check("wsd", o + R"("cosine"})", {{85, 1.0, "(1 + cos(π/2))/2 = 0.5"}, {100, 0.0, "p = 1"}});
  // Defaults: D = ⌊(100 − 10)/10⌋ = 9, S = 90 − 9 = 81: decay over steps 91..99, 1-sqrt shape.
  check("wsd", R"({"warmup_steps":10})",
        {{90, 2.0, "stable"},
         {91, 2.0, "p = 0"},
         {99, 2.0 * (1.0 - std::sqrt(8.0 / 9.0)), "p = 8/9"},
         {100, 0.0, "p = 1"}});
  // Only stable given: D = 100 − 10 − 80 = 10 (decay 90..99).
  check("wsd", R"({"warmup_steps":10,"stable_steps":80,"decay_shape":"linear","min_lr_ratio":0.5})",
        {{95, 2.0 * (0.5 + 0.5 * 0.5), "p = 5/10: 2·0.75"}, {100, 1.0, "floor 2·0.5"}});
}

TEST(Schedulers, InverseSqrt) {
  check("inverse_sqrt", R"({"warmup_steps":4})",
        {{0, 0.5, "2·1/4"},
         {3, 2.0, "2·4/4 = 2·√(4/4)"},
         {4, 2.0 * std::sqrt(0.8), "2·√(4/5) = 1.7888544"},
         {15, 1.0, "2·√(4/16)"},
         {99, 0.4, "2·√(4/100)"},
         {100, 2.0 * std::sqrt(4.0 / 101.0), "after: keeps decaying"}});
  check("inverse_sqrt", "{}", {{0, 2.0, "W = 0 acts as W = 1: 2/√1"}, {3, 1.0, "2/√4"}});
}

TEST(Schedulers, ErrorsAndWarnings) {
  struct Case {
    const char* type;
    const char* opts;
    std::string config;
    const char* expect;
  };
  for (const Case& c : {
           Case{"cosine_with_warmup", "{}", "{}",
                "training.max_steps: missing; scheduler 'cosine_with_warmup' decays over it"},
           Case{"linear_with_warmup", R"({"warmup_steps":200})", kT100,
                "scheduler.warmup_steps: 200 exceeds training.max_steps = 100"},
           Case{"constant", R"({"min_lr_ratio":0.1})", kT100, "scheduler.min_lr_ratio: unknown option for constant"},
           Case{"wsd", R"({"decay_shape":"exp"})", kT100,
                "scheduler.decay_shape: expected linear, cosine or 1-sqrt, found \"exp\""},
           Case{"wsd", R"({"stable_steps":100})", kT100, "scheduler.stable_steps: 100 leaves no step to decay"},
           Case{"polynomial", R"({"power":0})", kT100, "scheduler.power: expected a number > 0"},
           Case{"cosine_with_warmup", R"({"min_lr_ratio":1.5})", kT100,
                "scheduler.min_lr_ratio: expected a number in [0, 1]"},
       }) {
    Sched s(c.type, c.opts, c.config);
    EXPECT_NE(s.error().find(c.expect), std::string::npos) << c.type << " " << c.opts << " -> " << s.error();
  }
  // The guide's own example (2000 + 180000 + 20000 > 200000) runs, with a warning.
  ztest::log_lines().clear();
  Sched s("wsd", R"({"warmup_steps":2000,"stable_steps":180000,"decay_steps":20000})",
          R"({"training":{"max_steps":200000}})");
  EXPECT_EQ(s.error(), "");
  ASSERT_EQ(ztest::log_lines().size(), 1u);
  EXPECT_NE(ztest::log_lines()[0].find("202000 exceeds training.max_steps = 200000"), std::string::npos);
  EXPECT_NEAR(s.lr(199999, 1.0), 1.0 - std::sqrt(17999.0 / 20000.0), 1e-12);
}
