// schedulers.cpp: the `schedulers` plugin: constant, linear_with_warmup,
// cosine_with_warmup, polynomial, wsd and inverse_sqrt.
//
// ONE step convention for all (README "Schedulers"): lr(step) is the rate of
// the update that follows `step` updates already done (step 0 = the first
// update), and
//   warmup   (step < W):  lr = base·(step + 1)/W        so step 0 is base/W, not 0,
//                                                      and step W−1 reaches base
//   decay    (step ≥ W):  p = (step − W)/(T − W) clamped to [0, 1], T = training.max_steps
//                         lr = base·(r + (1 − r)·f(p)), r = min_lr_ratio
// so the decay starts at base on step W, the last update (step T−1) gets
// f((T−1−W)/(T−W)) > 0, and min_lr = base·r is reached at step T, i.e. just
// after training. W = warmup_steps (0: no warmup).
#include <zcode/sdk/plugin.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace {
using zcode::sdk::invalid_argument;
using zcode::sdk::Options;

/// Shared parsing: allowed keys, warmup_steps, training.max_steps, min_lr_ratio.
class ScheduleBase : public zcode::sdk::Scheduler {
 public:
  double lr(uint64_t step, double base_lr) const final {
    if (!(base_lr >= 0.0) || !std::isfinite(base_lr))
      invalid_argument("scheduler: base lr (optimizer.lr) must be a finite number >= 0, got " +
                       std::to_string(base_lr));
    if (step < warmup_) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_);
    return base_lr * factor(step);
  }

 protected:
  ScheduleBase(const zcode::sdk::CreateContext& ctx, const char* type, std::initializer_list<const char*> own,
               bool needs_max_steps)
      : o_(ctx.raw()->options_json, "scheduler"), type_(type) {
    const rapidjson::Value& v = o_.json();
    for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
      const std::string k(it->name.GetString(), it->name.GetStringLength());
      if (k == "type" || k == "warmup_steps") continue;
      if (std::find_if(own.begin(), own.end(), [&](const char* c) { return k == c; }) != own.end()) continue;
      std::string allowed = "type, warmup_steps";
      for (const char* c : own) allowed += std::string(", ") + c;
      invalid_argument("scheduler." + k + ": unknown option for " + type_ + " (allowed: " + allowed + ")");
    }
    warmup_ = o_.get<uint64_t>("warmup_steps", 0);
    const Options training = ctx.config().object("training");
    if (training.has("max_steps")) {
      const int64_t t = training.get<int64_t>("max_steps", 0);
      if (t < 1) invalid_argument("training.max_steps: expected an integer >= 1, found " + std::to_string(t));
      max_steps_ = static_cast<uint64_t>(t);
    } else if (needs_max_steps) {
      invalid_argument("training.max_steps: missing; scheduler '" + type_ + "' decays over it");
    }
    if (needs_max_steps && warmup_ > max_steps_)
      invalid_argument("scheduler.warmup_steps: " + std::to_string(warmup_) +
                       " exceeds training.max_steps = " + std::to_string(max_steps_));
    min_lr_ratio_ = o_.get<double>("min_lr_ratio", 0.0);
    if (!(min_lr_ratio_ >= 0.0 && min_lr_ratio_ <= 1.0))
      invalid_argument("scheduler.min_lr_ratio: expected a number in [0, 1], found " + std::to_string(min_lr_ratio_));
  }

  /// lr / base for step >= warmup_.
  virtual double factor(uint64_t step) const = 0;

  /// Decay progress over [from, from + len): (step − from)/len clamped to [0, 1].
  static double progress(uint64_t step, uint64_t from, uint64_t len) {
    if (step < from) return 0.0;
    if (len == 0) return 1.0;
    return std::min(1.0, static_cast<double>(step - from) / static_cast<double>(len));
  }
  double with_floor(double f) const { return min_lr_ratio_ + (1.0 - min_lr_ratio_) * f; }

  Options o_;
  std::string type_;
  uint64_t warmup_ = 0, max_steps_ = 0;
  double min_lr_ratio_ = 0.0;
};

/// constant: base after the optional warmup.
class Constant final : public ScheduleBase {
 public:
  explicit Constant(const zcode::sdk::CreateContext& c) : ScheduleBase(c, "constant", {}, false) {}
  double factor(uint64_t) const override { return 1.0; }
};

/// linear_with_warmup: f(p) = 1 − p.
class LinearWithWarmup final : public ScheduleBase {
 public:
  explicit LinearWithWarmup(const zcode::sdk::CreateContext& c)
      : ScheduleBase(c, "linear_with_warmup", {"min_lr_ratio"}, true) {}
  double factor(uint64_t s) const override { return with_floor(1.0 - progress(s, warmup_, max_steps_ - warmup_)); }
};

/// cosine_with_warmup (SGDR, Loshchilov & Hutter 2017, eq. 5, one cycle):
/// f(p) = (1 + cos(π·p))/2.
class CosineWithWarmup final : public ScheduleBase {
 public:
  explicit CosineWithWarmup(const zcode::sdk::CreateContext& c)
      : ScheduleBase(c, "cosine_with_warmup", {"min_lr_ratio"}, true) {}
  double factor(uint64_t s) const override {
    return with_floor(0.5 * (1.0 + std::cos(std::numbers::pi * progress(s, warmup_, max_steps_ - warmup_))));
  }
};

/// polynomial: f(p) = (1 − p)^power (power 1 = linear).
class Polynomial final : public ScheduleBase {
 public:
  explicit Polynomial(const zcode::sdk::CreateContext& c)
      : ScheduleBase(c, "polynomial", {"min_lr_ratio", "power"}, true) {
    power_ = o_.get<double>("power", 1.0);
    if (!(power_ > 0.0) || !std::isfinite(power_))
      invalid_argument("scheduler.power: expected a number > 0, found " + std::to_string(power_));
  }
  double factor(uint64_t s) const override {
    return with_floor(std::pow(1.0 - progress(s, warmup_, max_steps_ - warmup_), power_));
  }

 private:
  double power_ = 1.0;
};

/// wsd, warmup-stable-decay (Hu et al. 2024, MiniCPM, eq. 1; the 1-sqrt shape
/// from Hägele et al. 2024): warmup W, then base for S steps, then decay over
/// D steps with p = (step − W − S)/D and f(p) = 1 − p (linear),
/// (1 + cos πp)/2 (cosine) or 1 − √p (1-sqrt, default); min lr afterwards.
/// W, S, D are consecutive durations. Absent decay_steps and stable_steps:
/// D = ⌊(T − W)/10⌋ (at least 1), S = T − W − D; one absent: it fills T − W − other.
class Wsd final : public ScheduleBase {
 public:
  explicit Wsd(const zcode::sdk::CreateContext& c)
      : ScheduleBase(c, "wsd", {"stable_steps", "decay_steps", "min_lr_ratio", "decay_shape"}, true) {
    const std::string shape = o_.get<std::string>("decay_shape", "1-sqrt");
    if (shape == "linear") shape_ = 0;
    else if (shape == "cosine") shape_ = 1;
    else if (shape == "1-sqrt") shape_ = 2;
    else invalid_argument("scheduler.decay_shape: expected linear, cosine or 1-sqrt, found \"" + shape + "\"");
    const uint64_t room = max_steps_ - warmup_;
    const bool has_s = o_.has("stable_steps"), has_d = o_.has("decay_steps");
    if (has_d) {
      const int64_t d = o_.get<int64_t>("decay_steps", 0);
      if (d < 1) invalid_argument("scheduler.decay_steps: expected an integer >= 1, found " + std::to_string(d));
      decay_ = static_cast<uint64_t>(d);
    }
    if (has_s) {
      const int64_t s = o_.get<int64_t>("stable_steps", 0);
      if (s < 0) invalid_argument("scheduler.stable_steps: expected an integer >= 0, found " + std::to_string(s));
      stable_ = static_cast<uint64_t>(s);
    }
    if (!has_s && !has_d) {
      decay_ = std::max<uint64_t>(1, room / 10);
      if (decay_ > room) invalid_argument("scheduler: wsd needs training.max_steps > warmup_steps to decay");
      stable_ = room - decay_;
    } else if (!has_s) {
      if (decay_ > room)
        invalid_argument("scheduler.decay_steps: " + std::to_string(decay_) +
                         " exceeds training.max_steps − warmup_steps = " + std::to_string(room));
      stable_ = room - decay_;
    } else if (!has_d) {
      if (stable_ >= room)
        invalid_argument("scheduler.stable_steps: " + std::to_string(stable_) +
                         " leaves no step to decay in training.max_steps − warmup_steps = " + std::to_string(room));
      decay_ = room - stable_;
    } else if (warmup_ + stable_ + decay_ > max_steps_) {
      c.host().warn("scheduler",
                    "wsd: warmup_steps + stable_steps + decay_steps = " + std::to_string(warmup_ + stable_ + decay_) +
                        " exceeds training.max_steps = " + std::to_string(max_steps_) +
                        "; training ends before the decay finishes");
    }
  }
  double factor(uint64_t s) const override {
    if (s < warmup_ + stable_) return 1.0;
    const double p = progress(s, warmup_ + stable_, decay_);
    const double f = shape_ == 0   ? 1.0 - p
                     : shape_ == 1 ? 0.5 * (1.0 + std::cos(std::numbers::pi * p))
                                   : 1.0 - std::sqrt(p);
    return with_floor(f);
  }

 private:
  uint64_t stable_ = 0, decay_ = 0;
  int shape_ = 2;
};

/// inverse_sqrt (Vaswani et al. 2017, Section 5.3, with base in place of
/// d_model^−0.5): warmup, then lr = base·√(W/(step + 1)), continuous at
/// step W−1; W = 0 behaves as W = 1 (lr = base/√(step + 1)).
class InverseSqrt final : public ScheduleBase {
 public:
  explicit InverseSqrt(const zcode::sdk::CreateContext& c) : ScheduleBase(c, "inverse_sqrt", {}, false) {}
  double factor(uint64_t s) const override {
    const double w = static_cast<double>(std::max<uint64_t>(warmup_, 1));
    return std::sqrt(w / static_cast<double>(s + 1));
  }
};

#define ZC_SCHED_SCHEMA(OWN)                                                                                                                 \
  R"({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},)"                                                 \
  R"("warmup_steps":{"type":"integer","minimum":0,"default":0,"description":"lr = base*(step+1)/warmup_steps for step < warmup_steps"})" OWN \
  "}}"
#define ZC_SCHED_MIN \
  R"(,"min_lr_ratio":{"type":"number","minimum":0,"maximum":1,"default":0,"description":"final lr / base lr"})"

constexpr const char* kConstantSchema = ZC_SCHED_SCHEMA("");
constexpr const char* kDecaySchema = ZC_SCHED_SCHEMA(ZC_SCHED_MIN);
constexpr const char* kPolynomialSchema =
    ZC_SCHED_SCHEMA(ZC_SCHED_MIN R"(,"power":{"type":"number","exclusiveMinimum":0,"default":1.0})");
constexpr const char* kWsdSchema = ZC_SCHED_SCHEMA(
    ZC_SCHED_MIN R"(,"stable_steps":{"type":"integer","minimum":0},"decay_steps":{"type":"integer","minimum":1},)"
                 R"("decay_shape":{"type":"string","enum":["linear","cosine","1-sqrt"],"default":"1-sqrt"})");

}  // namespace

ZCODE_PLUGIN("schedulers", "1.0.0", "Apache-2.0", "Learning-rate schedules (one step convention: see README)",
             ZCODE_COMPONENT(Constant, "constant", "Constant lr after an optional linear warmup", kConstantSchema),
             ZCODE_COMPONENT(LinearWithWarmup, "linear_with_warmup",
                             "Linear warmup, then linear decay to min_lr_ratio at training.max_steps", kDecaySchema),
             ZCODE_COMPONENT(CosineWithWarmup, "cosine_with_warmup",
                             "Linear warmup, then cosine decay to min_lr_ratio at training.max_steps", kDecaySchema),
             ZCODE_COMPONENT(Polynomial, "polynomial", "Linear warmup, then (1-p)^power decay to min_lr_ratio",
                             kPolynomialSchema),
             ZCODE_COMPONENT(Wsd, "wsd", "Warmup, stable, decay (linear, cosine or 1-sqrt)", kWsdSchema),
             ZCODE_COMPONENT(InverseSqrt, "inverse_sqrt", "Linear warmup, then base*sqrt(warmup/(step+1))",
                             kConstantSchema))
