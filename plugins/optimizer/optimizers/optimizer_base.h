// optimizer_base.h: what all six optimizers share: the options every one
// accepts, the parameter slots, the per-parameter state buffers and their
// save/load under `<param>.<buffer>` names, and ZeRO-1 parts (ABI 1.5,
// zc_param_shard): a sharded instance's slots are its parts of the
// parameters, and its buffers hold the state of those parts only.
#pragma once

#include "param_groups.h"

#include <zcode/kernels/block_sum.h>
#include <zcode/sdk/collectives.h>
#include <zcode/sdk/stages.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace zcode::optim {

/// One named state buffer of one parameter (e.g. "layers.0.attn.wq.exp_avg"),
/// fp32, allocated and zeroed at create so that step() never allocates.
/// `shape` is the whole tensor's; `data` holds elements [begin, begin +
/// count) of its row-major order: all of them unless the optimizer is
/// sharded. A `whole` buffer (Adafactor's column statistics) is held whole
/// by every rank whose part touches the parameter, identical on all of
/// them, and saved by the rank whose part starts the parameter (`saver`).
struct StateBuffer {
  std::string name;
  std::vector<int64_t> shape;
  int64_t begin = 0, count = 0;
  bool whole = false, saver = true;
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
    for (const StateBuffer& b : buffers_) {
      if (!sharded_) w.put(b.name, b.data.data(), sdk::kF32, b.shape);
      else if (b.whole && b.saver && b.count > 0) w.put(b.name, b.data.data(), sdk::kF32, b.shape);
      else if (!b.whole && b.count > 0) w.put_slice(b.name, b.data.data(), sdk::kF32, b.shape, b.begin, b.count);
    }
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
    // Validate and read everything before changing anything.
    for (size_t i = 0; i < r.num_tensors(); ++i) {
      const std::string n = r.tensor_name(i);
      if (std::find(buffer_names_.begin(), buffer_names_.end(), n) == buffer_names_.end())
        throw sdk::Error(ZC_ERR_DATA,
                         "optimizer state: unexpected tensor '" + n + "' (saved for a different model or optimizer?)");
    }
    std::vector<std::vector<float>> loaded(buffers_.size());
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const StateBuffer& b = buffers_[i];
      if (b.data.empty() && b.count == 0 && sharded_) continue;  // no part of this parameter here
      loaded[i].resize(b.data.size());
      const int64_t full = numel(b.shape);
      if (!sharded_) r.copy_to(b.name, loaded[i].data(), sdk::kF32, full);
      else r.read_slice(b.name, full, b.begin, loaded[i].data(), sdk::kF32, b.count);
    }
    check_json_fields(d);
    for (size_t i = 0; i < buffers_.size(); ++i)
      if (!loaded[i].empty()) buffers_[i].data.swap(loaded[i]);
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
    for (const StateBuffer& b : buffers_) n += static_cast<uint64_t>(b.count) * sizeof(float);
    return n;
  }

  /// zc_optimizer_table.shard_granularity for optimizers whose state is
  /// per element (AdamW, Sophia, SGD): a part may start anywhere.
  static constexpr bool kShards = true;
  static void shard_granularity(const sdk::CreateContext& /*ctx*/, std::span<int64_t> out) {
    std::fill(out.begin(), out.end(), int64_t{1});
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
    full_n_.resize(slots_.size());
    lo_.assign(slots_.size(), 0);
    groups_.assign(slots_.size(), ZC_GROUP_DATA);
    for (size_t i = 0; i < slots_.size(); ++i) full_n_[i] = slots_[i].n;
    if (const zc_param_shard* sh = ctx.shard()) take_shard(*sh);
  }

  /// Checks that every part starts and ends at a multiple of the
  /// granularity `gran` (the class's own shard_granularity) or at its
  /// parameter's ends; a host that cut elsewhere is an error.
  void check_cuts(const sdk::CreateContext& ctx, void (*gran)(const sdk::CreateContext&, std::span<int64_t>)) const {
    if (!sharded_) return;
    std::vector<int64_t> g(slots_.size(), 1);
    gran(ctx, g);
    for (size_t i = 0; i < slots_.size(); ++i) {
      const int64_t lo = lo_[i], hi = lo_[i] + slots_[i].n, n = full_n_[i], m = std::max<int64_t>(1, g[i]);
      auto ok = [&](int64_t at) { return at == 0 || at == n || at % m == 0; };
      if (slots_[i].n > 0 && (!ok(lo) || !ok(hi)))
        sdk::invalid_argument("optimizer: the shard of '" + slots_[i].name + "' is [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + ") of " + std::to_string(n) +
                              " elements, which does not start and end at multiples of " + std::to_string(m));
    }
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

  /// Adds a zeroed per-element buffer `<slot name>.<suffix>` of the
  /// parameter's `shape`, for the slot's part; returns its index.
  size_t add_buffer(size_t slot, const char* suffix, std::vector<int64_t> shape) {
    return add_part(slot, suffix, std::move(shape), lo_[slot], slots_[slot].n);
  }
  /// Adds a zeroed buffer of `shape` holding elements [begin, begin + count)
  /// of its row-major order (Adafactor's rows of the part).
  size_t add_part(size_t slot, const char* suffix, std::vector<int64_t> shape, int64_t begin, int64_t count) {
    StateBuffer b;
    b.name = slots_[slot].name + "." + suffix;
    b.shape = std::move(shape);
    b.begin = begin;
    b.count = count;
    b.data.assign(estimate_only_ ? 0 : static_cast<size_t>(count), 0.0f);
    buffer_names_.push_back(b.name);
    buffers_.push_back(std::move(b));
    return buffers_.size() - 1;
  }
  /// Adds a zeroed buffer of `shape` held whole by every rank whose part
  /// touches the slot's parameter (none where it does not).
  size_t add_whole(size_t slot, const char* suffix, std::vector<int64_t> shape) {
    const bool held = !sharded_ || slots_[slot].n > 0;
    const size_t i = add_part(slot, suffix, std::move(shape), 0, 0);
    StateBuffer& b = buffers_[i];
    b.whole = true;
    b.saver = !sharded_ || (held && lo_[slot] == 0);
    b.count = held ? numel(b.shape) : 0;
    b.data.assign(estimate_only_ ? 0 : static_cast<size_t>(b.count), 0.0f);
    return i;
  }
  float* buf(size_t index) { return buffers_[index].data.data(); }
  static int64_t numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }

  /// Extra JSON fields an optimizer saves (beyond optimizer and step).
  virtual void write_json_fields(rapidjson::Writer<rapidjson::StringBuffer>&) const {}
  virtual void check_json_fields(const rapidjson::Document&) const {}
  virtual void read_json_fields(const rapidjson::Document&) {}

  sdk::Options opts_;  // the `optimizer` section, errors prefixed "optimizer."
  sdk::Host host_;
  std::string name_;
  int threads_ = 1;
  double weight_decay_ = 0.0;
  // The parameters; when sharded, each slot is this rank's part: w and g
  // point at its first element, n counts its elements (0: none here), and
  // lo_[i] is where it starts in the parameter of full_n_[i] elements.
  std::vector<ParamSlot> slots_;
  std::vector<int64_t> full_n_, lo_;
  std::vector<StateBuffer> buffers_;
  std::vector<std::string> buffer_names_;  // every buffer's name, held here or not
  uint64_t step_ = 0;                      // updates applied so far (bias corrections use step_ after the increment)
  bool estimate_only_ = false;             // built by estimate_memory: buffers have shapes, no data
  bool sharded_ = false;                   // created with a zc_param_shard (ZeRO-1)
  // Per slot, the ranks that share its parameter (zc_param_shard.groups,
  // ABI 1.9; DATA for all when not sharded).
  std::vector<zc_group> groups_;
  sdk::Collectives comm_;  // reductions over groups_ when sharded (one rank otherwise)

 private:
  void take_shard(const zc_param_shard& sh) {
    // (A host of ABI 1.5 to 1.8 passes the struct without `groups`.)
    if (sh.struct_size < offsetof(zc_param_shard, groups))
      sdk::invalid_argument("optimizer: the host's zc_param_shard is " + std::to_string(sh.struct_size) +
                            " bytes, shorter than ABI 1.5's " + std::to_string(offsetof(zc_param_shard, groups)));
    if (sh.count != slots_.size() || (sh.count && (!sh.begin || !sh.end)))
      sdk::invalid_argument("optimizer: the shard lists " + std::to_string(sh.count) + " parameters, the model has " +
                            std::to_string(slots_.size()));
    sharded_ = true;
    const uint32_t* per = ZC_STRUCT_HAS_FIELD(&sh, zc_param_shard, groups) ? sh.groups : nullptr;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const uint32_t g = per ? per[i] : sh.group;
      if (g > ZC_GROUP_EXPERT_DATA)
        sdk::invalid_argument("optimizer: the shard of '" + slots_[i].name + "' names group " + std::to_string(g) +
                              ", not a zc_group");
      groups_[i] = static_cast<zc_group>(g);
    }
    comm_ = sdk::Collectives(host_.raw());
    for (size_t i = 0; i < slots_.size(); ++i) {
      ParamSlot& s = slots_[i];
      const int64_t lo = sh.begin[i], hi = sh.end[i];
      if (lo < 0 || hi < lo || hi > s.n)
        sdk::invalid_argument("optimizer: the shard of '" + s.name + "' is [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "), outside its " + std::to_string(s.n) + " elements");
      lo_[i] = lo;
      if (s.w) s.w += lo;
      if (s.g) s.g += lo;
      s.n = hi - lo;
    }
  }
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
