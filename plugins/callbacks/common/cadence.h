// When the callbacks act: the `every` option that every bundled callback and
// sink reads the same way, and the log-step rule the console, metrics.jsonl,
// TensorBoard, MLflow and Prometheus share. Header-only; built into each plugin.
#pragma once

#include <zcode/sdk/plugin.h>

#include <cstdint>
#include <string>

namespace zcode::callbacks {

/// Option `key` of `o` (or `fallback`), checked >= 1. Throws
/// sdk::Error(ZC_ERR_INVALID_ARGUMENT) "<path>: expected an integer >= 1, found N".
inline int64_t positive_option(const sdk::Options& o, const char* key, int64_t fallback, const std::string& path) {
  const int64_t v = o.get<int64_t>(key, fallback);
  if (v < 1) sdk::invalid_argument(path + ": expected an integer >= 1, found " + std::to_string(v));
  return v;
}

/// The entry's `every` (checked >= 1, named `path` in errors), else the host's
/// `training.<host_key>` from the resolved config, whose defaults the host has
/// filled (so no second copy of that default lives here). Throws when neither
/// is there (a config_json that is not the resolved one).
inline int64_t every_option(const sdk::CreateContext& ctx, const char* host_key, const std::string& path) {
  if (ctx.options().has("every")) return positive_option(ctx.options(), "every", 1, path);
  const int64_t v = ctx.config().object("training").require<int64_t>(host_key);
  if (v < 1)
    sdk::invalid_argument("training." + std::string(host_key) + ": expected an integer >= 1, found " +
                          std::to_string(v));
  return v;
}

/// Whether a STEP_END at `step` is a log step for cadence `every`: every
/// `every` steps, the first and the last.
inline bool log_step(uint64_t step, uint64_t max_steps, int64_t every) {
  return step % static_cast<uint64_t>(every) == 0 || step == 1 || step == max_steps;
}

}  // namespace zcode::callbacks
