// `debugger` callback (see callbacks.h).
#include "callbacks.h"
#include "model_views.h"

#include <zcode/sdk/json.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

namespace zcode::callbacks {

Debugger::Debugger(const CreateContext& ctx) : host_(ctx.host()) {
  every_ = positive_option(ctx.options(), "every", 100, "callbacks.debugger.every");
  bins_ = ctx.options().get<int64_t>("bins", 20);
  if (bins_ < 2 || bins_ > 200)
    invalid_argument("callbacks.debugger.bins: expected 2..200, found " + std::to_string(bins_));
  const std::string rel = ctx.options().get<std::string>("path", "logs/debug.jsonl");
  path_ = rel.starts_with("/") || ctx.run_dir().empty() ? rel : ctx.run_dir() + "/" + rel;
}

namespace {

// Histogram of log10|x| over [-12, 2) in `bins` equal bins; exact zeros and
// non-finite values are counted apart.
struct Hist {
  std::vector<uint64_t> counts;
  uint64_t zeros = 0, nonfinite = 0;
  explicit Hist(int64_t bins) : counts(static_cast<size_t>(bins), 0) {}
  void add(float x) {
    if (!std::isfinite(x)) {
      ++nonfinite;
      return;
    }
    if (x == 0) {
      ++zeros;
      return;
    }
    const double l = std::log10(std::fabs(static_cast<double>(x)));
    const double pos = (l + 12.0) / 14.0 * static_cast<double>(counts.size());
    const int64_t i =
        std::clamp<int64_t>(static_cast<int64_t>(std::floor(pos)), 0, static_cast<int64_t>(counts.size()) - 1);
    ++counts[static_cast<size_t>(i)];
  }
  void write(json::Writer& w) const {
    w.begin_object().key("log10_range").begin_array().integer(-12).integer(2).end_array();
    w.key("counts").begin_array();
    for (const auto c : counts) w.integer(c);
    w.end_array().key("zeros").integer(zeros).key("nonfinite").integer(nonfinite).end_object();
  }
};

// One kept activation as "name": {"shape", "mean", "std", "max_abs",
// "hist"}; mean and std are over every element, in double (population std,
// two passes). Tensors other than float32 on the CPU are skipped.
void write_activation(json::Writer& w, const char* name, const DLTensor* t, int64_t bins) {
  if (!t || t->device.device_type != kDLCPU || !same_dtype(t->dtype, kF32)) return;
  const int64_t n = numel(*t);
  const float* x = data_ptr<float>(*t);
  Hist h(bins);
  double sum = 0, sq = 0, mx = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double v = x[k];
    sum += v;
    mx = std::max(mx, std::fabs(v));
    h.add(x[k]);
  }
  const double mean = n ? sum / static_cast<double>(n) : 0.0;
  for (int64_t k = 0; k < n; ++k) sq += (x[k] - mean) * (x[k] - mean);  // two passes: no cancellation
  const double var = n ? sq / static_cast<double>(n) : 0.0;
  w.key(name ? name : "").begin_object().key("shape").begin_array();
  for (int d = 0; d < t->ndim; ++d) w.integer(t->shape[d]);
  w.end_array().key("mean").number(mean, 9).key("std").number(std::sqrt(var), 9).key("max_abs").number(mx, 9);
  w.key("hist");
  h.write(w);
  w.end_object();
}

// The model's kept activations as an object of write_activation entries;
// null when the model exposes none.
void write_activations(json::Writer& w, const ModelRef& model, int64_t bins) {
  if (!for_each_activation(model, [](const char*, const DLTensor*) {})) {  // (the lists are views: cheap)
    w.null();
    return;
  }
  w.begin_object();
  for_each_activation(model, [&](const char* name, const DLTensor* t) { write_activation(w, name, t, bins); });
  w.end_object();
}

}  // namespace

uint32_t Debugger::on_event(const zc_event& e) {
  if (e.kind != ZC_EVENT_STEP_END || e.step % static_cast<uint64_t>(every_) != 0) return 0;
  ModelRef model(host_.raw(), e.model);
  if (!model) return 0;
  const zc_param_list pl = model.params();
  std::map<std::string, std::pair<double, double>> groups;  // grad², value²
  Hist hg(bins_), hv(bins_);
  for (size_t i = 0; i < pl.count; ++i) {
    const zc_param& p = pl.params[i];
    if (!p.value || p.value->device.device_type != kDLCPU || !same_dtype(p.value->dtype, kF32)) continue;
    auto& g = groups[group_of(p.name)];
    const int64_t n = numel(*p.value);
    const float* v = data_ptr<float>(*p.value);
    const float* gr = p.grad ? data_ptr<float>(*p.grad) : nullptr;
    for (int64_t k = 0; k < n; ++k) {
      g.second += static_cast<double>(v[k]) * v[k];
      hv.add(v[k]);
      if (gr) {
        g.first += static_cast<double>(gr[k]) * gr[k];
        hg.add(gr[k]);
      }
    }
  }
  json::Writer w;
  w.begin_object().key("step").integer(e.step).key("grad_norm").begin_object();
  for (const auto& [name, v] : groups) w.key(name).number(std::sqrt(v.first), 9);
  w.end_object().key("param_norm").begin_object();
  for (const auto& [name, v] : groups) w.key(name).number(std::sqrt(v.second), 9);
  w.end_object().key("grad_hist");
  hg.write(w);
  w.key("param_hist");
  hv.write(w);
  w.key("activations");
  write_activations(w, model, bins_);
  w.end_object();
  const std::string line = w.str() + "\n";
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::FILE* f = std::fopen(path_.c_str(), "a");
  if (!f) throw Error(ZC_ERR_IO, "debugger: cannot open " + path_);
  std::fputs(line.c_str(), f);
  std::fclose(f);
  return 0;
}

}  // namespace zcode::callbacks
