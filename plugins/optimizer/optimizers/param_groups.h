// param_groups.h: which learning-rate multiplier and weight decay each
// parameter gets. Shared by every optimizer of this plugin.
//
// Rules, applied per parameter in this order (README "Parameter groups"):
//   1. The first entry of `optimizer.param_groups` whose `pattern` matches the
//      parameter name (fnmatch(3) glob, `*` also matches dots) sets lr_mult
//      (default 1) and weight_decay (default optimizer.weight_decay).
//   2. ZC_PARAM_EMBEDDING: weight decay 0 unless `decay_embeddings: true` or a
//      matching group sets `weight_decay` explicitly (LLM recipes such as
//      GPT-3/LLaMA exclude embeddings from decay, hence the default false).
//   3. ZC_PARAM_NO_DECAY (norm gains, biases, RoPE frequencies): weight decay 0,
//      always; decaying a norm gain towards 0 is never intended.
#pragma once

#include <zcode/abi.h>
#include <zcode/sdk/error.h>
#include <zcode/sdk/host.h>
#include <zcode/sdk/options.h>

#include <fnmatch.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace zcode::optim {

/// One `optimizer.param_groups[i]` entry.
struct ParamGroup {
  std::string pattern;
  double lr_mult = 1.0;
  bool has_weight_decay = false;
  double weight_decay = 0.0;
  size_t matched = 0;  // parameters that took this group (a group that matches none is an error)
};

/// One parameter as the optimizers see it: raw fp32 pointers plus the
/// resolved group settings. `shape` is the DLPack shape.
struct ParamSlot {
  std::string name;
  float* w = nullptr;  // value, [numel]
  float* g = nullptr;  // gradient, [numel]
  int64_t n = 0;       // numel
  std::vector<int64_t> shape;
  uint32_t flags = 0;
  double lr_mult = 1.0;
  double weight_decay = 0.0;
};

/// Parses `optimizer.param_groups` (array of {pattern, lr_mult?, weight_decay?}).
/// Throws sdk::Error(ZC_ERR_INVALID_ARGUMENT) naming the config path on a bad entry.
inline std::vector<ParamGroup> parse_param_groups(const sdk::Options& opt) {
  std::vector<ParamGroup> groups;
  if (!opt.has("param_groups")) return groups;
  const rapidjson::Value& arr = opt.json()["param_groups"];
  if (arr.IsNull()) return groups;
  if (!arr.IsArray())
    sdk::invalid_argument(opt.path("param_groups") + ": expected an array, found " + sdk::describe_json(arr));
  for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
    const std::string where = opt.path("param_groups") + "[" + std::to_string(i) + "]";
    const rapidjson::Value& g = arr[i];
    if (!g.IsObject()) sdk::invalid_argument(where + ": expected an object, found " + sdk::describe_json(g));
    ParamGroup pg;
    for (auto it = g.MemberBegin(); it != g.MemberEnd(); ++it) {
      const std::string key(it->name.GetString(), it->name.GetStringLength());
      const rapidjson::Value& v = it->value;
      if (key == "pattern") {
        if (!v.IsString() || v.GetStringLength() == 0)
          sdk::invalid_argument(where + ".pattern: expected a non-empty glob string, found " + sdk::describe_json(v));
        pg.pattern = v.GetString();
      } else if (key == "lr_mult") {
        if (!v.IsNumber() || v.GetDouble() < 0 || !std::isfinite(v.GetDouble()))
          sdk::invalid_argument(where + ".lr_mult: expected a number >= 0, found " + sdk::describe_json(v));
        pg.lr_mult = v.GetDouble();
      } else if (key == "weight_decay") {
        if (!v.IsNumber() || v.GetDouble() < 0 || !std::isfinite(v.GetDouble()))
          sdk::invalid_argument(where + ".weight_decay: expected a number >= 0, found " + sdk::describe_json(v));
        pg.has_weight_decay = true;
        pg.weight_decay = v.GetDouble();
      } else {
        sdk::invalid_argument(where + "." + key + ": unknown key (expected pattern, lr_mult, weight_decay)");
      }
    }
    if (pg.pattern.empty()) sdk::invalid_argument(where + ".pattern: missing required key");
    groups.push_back(std::move(pg));
  }
  return groups;
}

/// Builds the slots for `params`, applying the rules at the top of this file.
/// Checks that every value/grad is a contiguous fp32 CPU tensor of equal size.
/// Throws sdk::Error: ZC_ERR_UNSUPPORTED for a CUDA tensor (no CUDA kernels
/// yet), ZC_ERR_INVALID_ARGUMENT for anything else malformed, including a
/// group whose pattern matches no parameter (almost always a typo).
inline std::vector<ParamSlot> resolve_params(const zc_param_list& params, std::vector<ParamGroup>& groups,
                                             double weight_decay, bool decay_embeddings, const std::string& prefix) {
  std::vector<ParamSlot> slots;
  slots.reserve(params.count);
  for (size_t i = 0; i < params.count; ++i) {
    const zc_param& p = params.params[i];
    const std::string name = p.name ? p.name : ("#" + std::to_string(i));
    if (!p.value || !p.grad) sdk::invalid_argument(prefix + ": parameter '" + name + "' has no value or grad tensor");
    for (const DLTensor* t : {p.value, p.grad}) {
      if (t->device.device_type == kDLCUDA)
        throw sdk::Error(ZC_ERR_UNSUPPORTED,
                         prefix + ": parameter '" + name +
                             "' is on CUDA; the optimizers have CPU kernels only (not implemented yet)");
      if (t->device.device_type != kDLCPU)
        sdk::invalid_argument(prefix + ": parameter '" + name + "' is not on the CPU");
      if (!sdk::same_dtype(t->dtype, sdk::kF32))
        sdk::invalid_argument(prefix + ": parameter '" + name + "' is not float32");
      if (t->strides) {
        int64_t expect = 1;
        for (int32_t d = t->ndim - 1; d >= 0; --d) {
          if (t->shape[d] != 1 && t->strides[d] != expect)
            sdk::invalid_argument(prefix + ": parameter '" + name + "' is not contiguous");
          expect *= t->shape[d];
        }
      }
    }
    if (sdk::numel(*p.value) != sdk::numel(*p.grad))
      sdk::invalid_argument(prefix + ": parameter '" + name + "' has a grad of " + std::to_string(sdk::numel(*p.grad)) +
                            " elements for a value of " + std::to_string(sdk::numel(*p.value)));
    ParamSlot s;
    s.name = name;
    s.w = sdk::data_ptr<float>(*p.value);
    s.g = sdk::data_ptr<float>(*p.grad);
    s.n = sdk::numel(*p.value);
    s.shape.assign(p.value->shape, p.value->shape + p.value->ndim);
    s.flags = p.flags;
    s.weight_decay = weight_decay;
    bool explicit_wd = false;
    for (ParamGroup& g : groups) {
      if (fnmatch(g.pattern.c_str(), name.c_str(), 0) == 0) {
        s.lr_mult = g.lr_mult;
        if (g.has_weight_decay) {
          s.weight_decay = g.weight_decay;
          explicit_wd = true;
        }
        ++g.matched;
        break;
      }
    }
    if ((p.flags & ZC_PARAM_EMBEDDING) && !decay_embeddings && !explicit_wd) s.weight_decay = 0.0;
    if (p.flags & ZC_PARAM_NO_DECAY) s.weight_decay = 0.0;
    slots.push_back(std::move(s));
  }
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].matched == 0)
      sdk::invalid_argument(prefix + ".param_groups[" + std::to_string(i) + "].pattern: '" + groups[i].pattern +
                            "' matches no parameter (or only parameters an earlier group took)");
  return slots;
}

}  // namespace zcode::optim
