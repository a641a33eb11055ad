// zcode/generation/config_options.h: GenerationOptions from the config's
// `generation` section, for plugins that generate (the `samples` callback,
// the `generation` evaluator): one reading of the section's fields.
#pragma once

#include <zcode/generation/generate.h>
#include <zcode/sdk/options.h>

#include <stdexcept>
#include <string>

namespace zcode::gen {

/// `g` is the config's `generation` object; `default_seed` the config's seed
/// (generation.seed wins); `max_new_tokens` the caller's default. beam gets at
/// least 2 beams. Throws sdk::Error (ZC_ERR_INVALID_ARGUMENT) naming `where`
/// for options validate() refuses.
inline GenerationOptions options_from_config(const sdk::Options& g, uint64_t default_seed, int32_t max_new_tokens,
                                             const std::string& where) {
  GenerationOptions o;
  o.strategy = g.get<std::string>("strategy", "greedy");
  o.temperature = g.get<double>("temperature", 1.0);
  o.top_k = static_cast<int32_t>(g.get<int64_t>("top_k", 0));
  o.top_p = g.get<double>("top_p", 1.0);
  o.num_beams = static_cast<int32_t>(g.get<int64_t>("num_beams", 4));
  o.length_penalty = g.get<double>("length_penalty", 1.0);
  o.penalty_alpha = g.get<double>("penalty_alpha", 0.6);
  o.seed = g.get<uint64_t>("seed", default_seed);
  o.max_new_tokens = max_new_tokens;
  if (o.strategy == "beam" && o.num_beams < 2) o.num_beams = 2;
  try {
    validate(o);
  } catch (const std::invalid_argument& e) {
    sdk::invalid_argument(where + ": " + e.what());
  }
  return o;
}

}  // namespace zcode::gen
