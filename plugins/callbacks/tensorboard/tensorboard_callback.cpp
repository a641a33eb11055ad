// `tensorboard` callback: the run's metrics and histograms as TensorBoard
// event files (see README.md).
#include <zcode/sdk/plugin.h>

#include <rapidjson/document.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cadence.h"
#include "event_writer.h"
#include "model_views.h"

namespace {

using namespace zcode::sdk;
namespace tb = zcode::tensorboard;
using zcode::callbacks::for_each_activation;
using zcode::callbacks::group_of;

// Value-space histogram of float32 values in `bins` equal buckets over
// [min, max] (bucket i's right edge is min + (i+1)(max-min)/bins, the last
// exactly max), with count, sum and sum of squares in double, as TensorBoard's
// histogram plugin reads a HistogramProto. Non-finite values are left out.
class HistogramBuilder {
 public:
  explicit HistogramBuilder(int bins) : bins_(bins) {}
  // Two passes over the same spans: range first, then counts.
  void range(const float* x, int64_t n) {
    for (int64_t k = 0; k < n; ++k)
      if (std::isfinite(x[k])) {
        lo_ = std::min(lo_, static_cast<double>(x[k]));
        hi_ = std::max(hi_, static_cast<double>(x[k]));
      }
  }
  void count(const float* x, int64_t n) {
    if (counts_.empty()) counts_.assign(static_cast<size_t>(bins_), 0.0);
    const double width = (hi_ - lo_) / bins_;
    for (int64_t k = 0; k < n; ++k) {
      const double v = x[k];
      if (!std::isfinite(v)) continue;
      int64_t i = width > 0 ? static_cast<int64_t>(std::ceil((v - lo_) / width)) - 1 : 0;
      i = std::clamp<int64_t>(i, 0, bins_ - 1);
      counts_[static_cast<size_t>(i)] += 1;
      num_ += 1;
      sum_ += v;
      sq_ += v * v;
    }
  }
  bool empty() const { return num_ == 0; }
  void fill(tb::HistogramProto& h) const {
    h.set_min(lo_);
    h.set_max(hi_);
    h.set_num(num_);
    h.set_sum(sum_);
    h.set_sum_squares(sq_);
    const double width = (hi_ - lo_) / bins_;
    for (int i = 0; i < bins_; ++i) {
      h.add_bucket_limit(i + 1 == bins_ ? hi_ : lo_ + (i + 1) * width);
      h.add_bucket(counts_[static_cast<size_t>(i)]);
    }
  }

 private:
  int bins_;
  double lo_ = std::numeric_limits<double>::infinity(), hi_ = -std::numeric_limits<double>::infinity();
  std::vector<double> counts_;
  double num_ = 0, sum_ = 0, sq_ = 0;
};

const float* f32_cpu(const DLTensor* t) {
  return t && t->device.device_type == kDLCPU && same_dtype(t->dtype, kF32) ? data_ptr<float>(*t) : nullptr;
}

class TensorBoardCallback : public Callback {
 public:
  explicit TensorBoardCallback(const CreateContext& ctx) : host_(ctx.host()) {
    const Options& o = ctx.options();
    every_ = zcode::callbacks::every_option(ctx, "log_every", "callbacks.tensorboard.every");
    histogram_every_ = o.get<int64_t>("histogram_every", 100);
    if (histogram_every_ < 0)
      invalid_argument("callbacks.tensorboard.histogram_every: expected an integer >= 0, found " +
                       std::to_string(histogram_every_));
    bins_ = o.get<int64_t>("bins", 30);
    if (bins_ < 1 || bins_ > 1000)
      invalid_argument("callbacks.tensorboard.bins: expected 1..1000, found " + std::to_string(bins_));
    const std::string rel = o.get<std::string>("logdir", "logs/tensorboard");
    if (ctx.run_dir().empty() && !rel.starts_with("/"))
      invalid_argument("tensorboard: no run folder (args.run_dir is empty) for the relative logdir " + rel);
    dir_ = rel.starts_with("/") ? rel : ctx.run_dir() + "/" + rel;
    samples_path_ = ctx.run_dir() + "/logs/samples.jsonl";
  }

  uint32_t on_event(const zc_event& e) override {
    switch (e.kind) {
      case ZC_EVENT_SETUP: {
        open();
        rapidjson::Document d;
        d.Parse(e.metrics_json && *e.metrics_json ? e.metrics_json : "{}");
        const uint64_t resumed = d.IsObject() && d.HasMember("resumed_step") && d["resumed_step"].IsUint64()
                                     ? d["resumed_step"].GetUint64()
                                     : 0;
        if (resumed > 0) {  // samples up to the checkpoint are in the earlier event files already
          std::error_code ec;
          const auto size = std::filesystem::file_size(samples_path_, ec);
          samples_read_ = ec ? 0 : static_cast<size_t>(size);
        }
        if (resumed > 0) {  // drop what an interrupted run wrote after the checkpoint
          tb::Event ev;
          ev.set_wall_time(tb::now_wall_time());
          ev.set_step(static_cast<int64_t>(resumed + 1));
          ev.mutable_session_log()->set_status(tb::SessionLog::START);
          writer_->write(ev);
        }
        break;
      }
      case ZC_EVENT_STEP_END:
        if (zcode::callbacks::log_step(e.step, e.max_steps, every_)) scalars("train/", e.step, e.metrics_json);
        if (histogram_every_ > 0 && e.step % static_cast<uint64_t>(histogram_every_) == 0)
          histograms(e.step, ModelRef(host_.raw(), e.model));
        samples();
        break;
      case ZC_EVENT_EVAL_END: scalars("eval/", e.step, e.metrics_json); break;
      case ZC_EVENT_TEARDOWN:
        samples();
        writer_.reset();
        break;
      default: break;
    }
    return 0;
  }

 private:
  void open() {
    if (!writer_) writer_ = std::make_unique<tb::EventWriter>(dir_, tb::now_wall_time());
  }

  // The `samples` callback's new lines of logs/samples.jsonl (it runs before
  // this callback in the list) as text summaries "samples/<prompt index>":
  // "**prompt**continuation", at the sample's step.
  void samples() {
    std::FILE* f = std::fopen(samples_path_.c_str(), "rb");
    if (!f) return;
    std::string fresh;
    if (std::fseek(f, static_cast<long>(samples_read_), SEEK_SET) == 0) {
      char buf[4096];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) fresh.append(buf, n);
    }
    std::fclose(f);
    const size_t complete = fresh.rfind('\n');
    if (complete == std::string::npos) return;
    samples_read_ += complete + 1;
    open();
    std::map<uint64_t, int> index;  // prompt number within its step
    size_t at = 0;
    for (size_t nl; (nl = fresh.find('\n', at)) != std::string::npos && nl <= complete; at = nl + 1) {
      rapidjson::Document d;
      d.Parse(fresh.c_str() + at, nl - at);
      if (d.HasParseError() || !d.IsObject() || !d.HasMember("step") || !d["step"].IsUint64() ||
          !d.HasMember("prompt") || !d.HasMember("text") || !d["prompt"].IsString() || !d["text"].IsString())
        continue;
      const uint64_t step = d["step"].GetUint64();
      tb::Event ev;
      ev.set_wall_time(tb::now_wall_time());
      ev.set_step(static_cast<int64_t>(step));
      tb::Summary::Value* v = ev.mutable_summary()->add_value();
      v->set_tag("samples/" + std::to_string(index[step]++));
      v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
      tb::TensorProto* t = v->mutable_tensor();
      t->set_dtype(tb::DT_STRING);
      t->mutable_tensor_shape();  // a scalar: no dims
      t->add_string_val(std::string("**") + d["prompt"].GetString() + "**" + d["text"].GetString());
      writer_->write(ev);
    }
  }

  // One event per record: every number of the metrics object as a scalar
  // "<prefix><key>" (TensorBoard stores scalars as float32).
  void scalars(const char* prefix, uint64_t step, const char* json) {
    open();
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(json && *json ? json : "{}");
    if (d.HasParseError() || !d.IsObject()) return;
    tb::Event ev;
    ev.set_wall_time(tb::now_wall_time());
    ev.set_step(static_cast<int64_t>(step));
    for (const auto& m : d.GetObject()) {
      if (!m.value.IsNumber()) continue;
      tb::Summary::Value* v = ev.mutable_summary()->add_value();
      v->set_tag(std::string(prefix) + m.name.GetString());
      v->set_simple_value(static_cast<float>(m.value.GetDouble()));
    }
    if (ev.summary().value_size() > 0) writer_->write(ev);
  }

  // "params/<group>" and "grads/<group>" per parameter group, and
  // "activations/<name>" per kept activation, in one event.
  void histograms(uint64_t step, const ModelRef& model) {
    if (!model) return;
    open();
    const zc_param_list pl = model.params();
    std::map<std::string, std::pair<HistogramBuilder, HistogramBuilder>> groups;  // values, grads
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < pl.count; ++i) {
        const zc_param& p = pl.params[i];
        const float* v = f32_cpu(p.value);
        if (!v) continue;
        const int64_t n = numel(*p.value);
        auto it = groups
                      .try_emplace(group_of(p.name), HistogramBuilder(static_cast<int>(bins_)),
                                   HistogramBuilder(static_cast<int>(bins_)))
                      .first;
        const float* g = f32_cpu(p.grad);
        if (pass == 0) {
          it->second.first.range(v, n);
          if (g) it->second.second.range(g, n);
        } else {
          it->second.first.count(v, n);
          if (g) it->second.second.count(g, n);
        }
      }
    tb::Event ev;
    ev.set_wall_time(tb::now_wall_time());
    ev.set_step(static_cast<int64_t>(step));
    auto add = [&](const std::string& tag, const HistogramBuilder& h) {
      if (h.empty()) return;
      tb::Summary::Value* v = ev.mutable_summary()->add_value();
      v->set_tag(tag);
      h.fill(*v->mutable_histo());
    };
    for (const auto& [name, hs] : groups) {
      add("params/" + name, hs.first);
      add("grads/" + name, hs.second);
    }
    for_each_activation(model, [&](const char* name, const DLTensor* t) {
      const float* x = f32_cpu(t);
      if (!x) return;
      HistogramBuilder h(static_cast<int>(bins_));
      h.range(x, numel(*t));
      h.count(x, numel(*t));
      add(std::string("activations/") + name, h);
    });
    if (ev.summary().value_size() > 0) writer_->write(ev);
  }

  Host host_;
  int64_t every_ = 10, histogram_every_ = 100, bins_ = 30;
  std::string dir_, samples_path_;
  size_t samples_read_ = 0;  // bytes of samples.jsonl already turned into text summaries
  std::unique_ptr<tb::EventWriter> writer_;
};

}  // namespace

ZCODE_PLUGIN(
    "tensorboard", "0.1.0", "Apache-2.0", "TensorBoard event files for a run's metrics and histograms",
    ZCODE_COMPONENT(
        TensorBoardCallback, "tensorboard",
        "Writes logs/tensorboard/events.out.tfevents.*: train and eval scalars, parameter, gradient and activation "
        "histograms",
        R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "every":{"type":"integer","minimum":1,"description":"steps between scalar events (default training.log_every)"},
      "histogram_every":{"type":"integer","minimum":0,"default":100,"description":"steps between histogram events; 0 = none"},
      "bins":{"type":"integer","minimum":1,"maximum":1000,"default":30,"description":"buckets per histogram (equal width over [min, max])"},
      "logdir":{"type":"string","minLength":1,"default":"logs/tensorboard","description":"folder, relative to the run folder"}}})JS"))
