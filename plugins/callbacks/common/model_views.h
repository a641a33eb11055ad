// What the callbacks that look inside the model (`debugger`, `tensorboard`)
// share: the parameter groups they report per, and the walk over the
// model's kept activations. Header-only; built into each plugin.
#pragma once

#include <zcode/sdk/plugin.h>

#include <string>

namespace zcode::callbacks {

/// The reporting group of a parameter: the block for layer parameters, the
/// first part otherwise. "layers.3.moe.experts.1.w1" -> "layers.3.moe";
/// "embed.weight" -> "embed"; a name without '.' is its own group.
inline std::string group_of(const std::string& name) {
  size_t a = name.find('.');
  if (a == std::string::npos) return name;
  if (name.compare(0, a, "layers") == 0) {
    size_t b = name.find('.', a + 1);
    if (b == std::string::npos) return name;
    size_t c = name.find('.', b + 1);
    return c == std::string::npos ? name : name.substr(0, c);
  }
  return name.substr(0, a);
}

/// Calls fn(name, tensor) for each activation the model kept from its last
/// micro-batch: zc_model_table.named_activations (ABI 1.4), else
/// activations (ABI 1.2, named by their zc_param names). Returns false when
/// the model exposes neither (fn never called). Tensors are borrowed, valid
/// until the model's next forward.
template <class Fn>
bool for_each_activation(const sdk::ModelRef& model, Fn&& fn) {
  zc_named_tensor_list named{};
  zc_param_list acts{};
  if (model.named_activations(&named)) {
    for (size_t i = 0; i < named.count; ++i) fn(named.names[i] ? named.names[i] : "", &named.tensors[i]);
    return true;
  }
  if (model.activations(&acts)) {
    for (size_t i = 0; i < acts.count; ++i) fn(acts.params[i].name ? acts.params[i].name : "", acts.params[i].value);
    return true;
  }
  return false;
}

}  // namespace zcode::callbacks
