// zcode/core/generate.h: the `zcode-host generate` command. The strategies
// themselves (greedy, sample, beam, contrastive; the exact sampling
// procedure) are zcode/generation/generate.h.
#pragma once

#include <zcode/generation/generate.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace zcode::gen {

// ---- the `zcode-host generate` command ----------------------------------------

/// Everything `zcode-host generate` was given. Options left unset come from
/// the config's `generation:` section, then from GenerationOptions' defaults.
struct Command {
  std::string checkpoint;                 // step folder, run folder or "latest" (needs config)
  std::string config_path;                // "" = the config stored in the checkpoint's state.json
  std::vector<std::string> sets;          // --set overrides
  std::vector<std::string> plugin_paths;  // --plugin-path
  bool allow_insecure_plugin_path = false;
  std::string prompt;  // the text (from --prompt or --prompt-file)
  std::optional<std::string> strategy;
  std::optional<double> temperature, top_p, length_penalty, penalty_alpha;
  std::optional<int32_t> top_k, num_beams, max_new_tokens;
  std::optional<uint64_t> seed;
  // --presence-penalty, --frequency-penalty, --logit-bias ID=BIAS (greedy and
  // sample; not in the config: a steering of one call, as in OpenAI's API).
  std::optional<double> presence_penalty, frequency_penalty;
  std::vector<std::pair<int32_t, double>> logit_bias;
  std::vector<std::string> stop;  // added to the config's stop strings
  bool stream = false;            // print tokens as they come
};

/// Loads the tokenizer and model named by the config, restores the model
/// from the verified checkpoint, encodes the prompt and generates. Writes the
/// generated text (without the prompt) to `out`, then a newline; warnings and
/// errors go to the log. Returns 0, 1 (runtime failure) or 2 (usage/config).
int run_command(const Command& cmd, std::ostream& out);

}  // namespace zcode::gen
