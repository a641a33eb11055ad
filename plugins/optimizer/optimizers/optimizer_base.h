// optimizer_base.h: what all six optimizers share: the options every one
// accepts, the parameter slots, the per-parameter state buffers and their
// save/load under `<param>.<buffer>` names.
#pragma once

#include "param_groups.h"

#include <zcode/sdk/stages.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace zcode::optim {

/// One named state buffer of one parameter (e.g. "layers.0.attn.wq.exp_avg"),
/// fp32, allocated and zeroed at create so that step() never allocates.
struct StateBuffer {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

/// Base of every optimizer in this plugin.
///
/// Options common to all (the `optimizer` config section): name, lr (the base
/// lr the scheduler scales; the per-step lr arrives in step()), weight_decay,
/// decay_embeddings, param_groups. Each optimizer adds its own keys; any other
/// key is an error naming the key and the allowed ones.
///
/// State: `step()` counts updates in `step_` (saved as JSON
/// {"optimizer": <name>, "step": N, ...}); each buffer is saved as a tensor
/// `<param name>.<buffer>`. load_state checks the optimizer name, every
/// buffer's presence, dtype and size, and refuses unknown tensors, and changes
/// nothing when any check fails.
class OptimizerBase : public sdk::Optimizer {
 public:
  void save_state(const sdk::StateWriter& w) override {
    for (const StateBuffer& b : buffers_) w.put(b.name, b.data.data(), sdk::kF32, b.shape);
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> jw(sb);
    jw.StartObject();
    jw.Key("optimizer");
    jw.String(name_.c_str());
    jw.Key("step");
    jw.Uint64(step_);
    write_json_fields(jw);
    jw.EndObject();
    w.put_json(sb.GetString());
  }

  void load_state(const sdk::StateReader& r) override {
    rapidjson::Document d;
    const std::string_view js = r.json();
    d.Parse(js.data(), js.size());
    if (d.HasParseError() || !d.IsObject()) throw sdk::Error(ZC_ERR_DATA, "optimizer state: JSON is not an object");
    if (!d.HasMember("optimizer") || !d["optimizer"].IsString() || name_ != d["optimizer"].GetString())
      throw sdk::Error(
          ZC_ERR_DATA,
          "optimizer state: saved by optimizer '" +
              std::string(d.HasMember("optimizer") && d["optimizer"].IsString() ? d["optimizer"].GetString() : "?") +
              "', cannot load into '" + name_ + "'");
    if (!d.HasMember("step") || !d["step"].IsUint64())
      throw sdk::Error(ZC_ERR_DATA, "optimizer state: missing or invalid \"step\"");
    // Validate everything before changing anything.
    for (const StateBuffer& b : buffers_) {
      const DLTensor& t = r.get(b.name);
      if (!sdk::same_dtype(t.dtype, sdk::kF32) || sdk::numel(t) != static_cast<int64_t>(b.data.size()))
        throw sdk::Error(ZC_ERR_DATA, "optimizer state: tensor '" + b.name + "' has " + std::to_string(sdk::numel(t)) +
                                          " elements or a non-fp32 dtype, expected " + std::to_string(b.data.size()) +
                                          " fp32");
    }
    if (r.num_tensors() != buffers_.size()) {
      for (size_t i = 0; i < r.num_tensors(); ++i) {
        const std::string n = r.tensor_name(i);
        if (std::none_of(buffers_.begin(), buffers_.end(), [&](const StateBuffer& b) { return b.name == n; }))
          throw sdk::Error(ZC_ERR_DATA, "optimizer state: unexpected tensor '" + n +
                                            "' (saved for a different model or optimizer?)");
      }
    }
    check_json_fields(d);
    for (StateBuffer& b : buffers_) r.copy_to(b.name, b.data.data(), sdk::kF32, static_cast<int64_t>(b.data.size()));
    step_ = d["step"].GetUint64();
    read_json_fields(d);
  }

  uint64_t updates_done() const { return step_; }

  /// Bytes of every state buffer (zc_optimizer_table.estimate_memory): the
  /// same buffers create allocates, counted without allocating them when
  /// the context is estimate_only.
  static constexpr bool kEstimatesMemory = true;
  uint64_t state_bytes() const override {
    uint64_t n = 0;
    for (const StateBuffer& b : buffers_) {
      uint64_t e = 1;
      for (int64_t s : b.shape) e *= static_cast<uint64_t>(s);
      n += e * sizeof(float);
    }
    return n;
  }

 protected:
  /// Parses the common options and the model's parameters. `own_keys` are
  /// the optimizer's extra option names; `default_weight_decay` applies when
  /// the config has no optimizer.weight_decay.
  OptimizerBase(const sdk::CreateContext& ctx, std::string name, double default_weight_decay,
                std::initializer_list<const char*> own_keys)
      : opts_(ctx.raw()->options_json, "optimizer"),
        host_(ctx.host()),
        name_(std::move(name)),
        threads_(ctx.host().num_threads()),
        estimate_only_(ctx.estimate_only()) {
    const sdk::Options& o = opts_;
    check_keys(o, own_keys);
    weight_decay_ = o.get<double>("weight_decay", default_weight_decay);
    if (!(weight_decay_ >= 0.0) || !std::isfinite(weight_decay_))
      sdk::invalid_argument(o.path("weight_decay") + ": expected a number >= 0, found " +
                            std::to_string(weight_decay_));
    const bool decay_embeddings = o.get<bool>("decay_embeddings", false);
    std::vector<ParamGroup> groups = parse_param_groups(o);
    sdk::ModelRef model = ctx.model();
    if (!model) sdk::invalid_argument("optimizer: created without a model (args.model is NULL)");
    slots_ = resolve_params(model.params(), groups, weight_decay_, decay_embeddings, "optimizer");
  }

  /// Reads `key` as a pair of numbers in [0, 1) (Adam-style betas).
  static void read_betas(const sdk::Options& o, double& b1, double& b2) {
    std::vector<double> b = o.get_list<double>("betas", {b1, b2});
    if (b.size() != 2)
      sdk::invalid_argument(o.path("betas") + ": expected 2 numbers, found " + std::to_string(b.size()));
    for (int i = 0; i < 2; ++i)
      if (!(b[i] >= 0.0 && b[i] < 1.0))
        sdk::invalid_argument(o.path("betas") + "[" + std::to_string(i) + "]: expected a number in [0, 1), found " +
                              std::to_string(b[i]));
    b1 = b[0];
    b2 = b[1];
  }
  /// A number option that must be > lo (or >= lo when `inclusive`).
  static double positive(const sdk::Options& o, const char* key, double fallback, double lo = 0.0,
                         bool inclusive = false) {
    const double v = o.get<double>(key, fallback);
    if (!std::isfinite(v) || (inclusive ? v < lo : v <= lo))
      sdk::invalid_argument(o.path(key) + ": expected a number " + (inclusive ? ">= " : "> ") + std::to_string(lo) +
                            ", found " + std::to_string(v));
    return v;
  }

  /// Adds a zeroed buffer `<slot name>.<suffix>` of `shape`; returns its index.
  size_t add_buffer(size_t slot, const char* suffix, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    buffers_.push_back(StateBuffer{slots_[slot].name + "." + suffix, std::move(shape),
                                   std::vector<float>(estimate_only_ ? 0 : static_cast<size_t>(n), 0.0f)});
    return buffers_.size() - 1;
  }
  float* buf(size_t index) { return buffers_[index].data.data(); }

  /// Extra JSON fields an optimizer saves (beyond optimizer and step).
  virtual void write_json_fields(rapidjson::Writer<rapidjson::StringBuffer>&) const {}
  virtual void check_json_fields(const rapidjson::Document&) const {}
  virtual void read_json_fields(const rapidjson::Document&) {}

  sdk::Options opts_;  // the `optimizer` section, errors prefixed "optimizer."
  sdk::Host host_;
  std::string name_;
  int threads_ = 1;
  double weight_decay_ = 0.0;
  std::vector<ParamSlot> slots_;
  std::vector<StateBuffer> buffers_;
  uint64_t step_ = 0;           // updates applied so far (bias corrections use step_ after the increment)
  bool estimate_only_ = false;  // built by estimate_memory: buffers have shapes, no data

 private:
  void check_keys(const sdk::Options& o, std::initializer_list<const char*> own) const {
    static constexpr const char* kCommon[] = {"name", "lr", "weight_decay", "decay_embeddings", "param_groups"};
    const rapidjson::Value& v = o.json();
    for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
      const std::string_view k(it->name.GetString(), it->name.GetStringLength());
      bool ok = std::any_of(std::begin(kCommon), std::end(kCommon), [&](const char* c) { return k == c; }) ||
                std::any_of(own.begin(), own.end(), [&](const char* c) { return k == c; });
      if (!ok) {
        std::string allowed;
        for (const char* c : kCommon) allowed += std::string(allowed.empty() ? "" : ", ") + c;
        for (const char* c : own) allowed += std::string(", ") + c;
        sdk::invalid_argument("optimizer." + std::string(k) + ": unknown option for " + name_ +
                              " (allowed: " + allowed + ")");
      }
    }
  }
};

}  // namespace zcode::optim
