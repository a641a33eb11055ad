// zcode-host generate: text generation from a checkpoint (logic in
// core/src/generate_command.cpp; strategies in zcode/core/generate.h).
#include "cli_common.h"
#include "commands.h"

#include <zcode/core/config.h>
#include <zcode/core/generate.h>
#include <zcode/core/log.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace zcode::host {

int cmd_generate(const std::vector<std::string>& args) {
  // stdout is this command's data (text, ids, listings): log lines, INFO too, go to stderr.
  log::set_data_on_stdout(true);
  const CommandHelp help{
      "zcode-host generate --checkpoint P (--prompt TEXT | --prompt-file F) [options]",
      "Generate text with a trained model (KV cache). Unset options come from the config's generation section.",
      "  zcode-host generate --checkpoint outputs/glm5pt2_hello/checkpoints/step_500 --prompt 'Hello' \\\n"
      "      --strategy sample --temperature 0.8 --top-p 0.9 --seed 1 --stream"};
  gen::Command c;
  std::string prompt_file;
  std::string strategy;
  double temperature = 0, top_p = 0, length_penalty = 0, penalty_alpha = 0;
  int32_t top_k = 0, num_beams = 0, max_new_tokens = 0;
  uint64_t seed = 0;
  double presence_penalty = 0, frequency_penalty = 0;
  std::vector<std::string> logit_bias;
  PluginFlags plugins;
  // Every default shown in --help, from the one place that defines them.
  const GenerationConfig g0;
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  auto dflt = [](const char* key, const std::string& v) {
    return std::string(" (default: generation.") + key + " of the config, else " + v + ")";
  };
  po::options_description d("options");
  d.add_options()(
      "checkpoint", po::value(&c.checkpoint)->required(),
      "checkpoint: a step folder (.../checkpoints/step_N), .../checkpoints/latest, a checkpoints/ or run folder, "
      "or 'latest' (with --config)")("config,c", po::value(&c.config_path),
                                     "config (default: the one stored in the checkpoint)")(
      "set", po::value<std::vector<std::string>>(&c.sets)->composing(), "override a config field (repeatable)")(
      "prompt", po::value(&c.prompt), "prompt text (may be empty: generation starts from <bos>)")(
      "prompt-file", po::value(&prompt_file), "read the prompt from a file")(
      "strategy", po::value(&strategy),
      ("greedy | sample | beam | contrastive" + dflt("strategy", g0.strategy)).c_str())(
      "temperature", po::value(&temperature),
      ("sampling temperature, sample only; 0 = greedy" + dflt("temperature", num(g0.temperature))).c_str())(
      "top-k", po::value(&top_k),
      ("sample: keep the k most likely tokens; contrastive: candidates; 0 = off" + dflt("top_k", num(g0.top_k)))
          .c_str())("top-p", po::value(&top_p),
                    ("nucleus probability mass in (0, 1], sample only" + dflt("top_p", num(g0.top_p))).c_str())(
      "num-beams", po::value(&num_beams), ("beams, beam only, >= 2" + dflt("num_beams", "at least 2")).c_str())(
      "length-penalty", po::value(&length_penalty),
      ("beam score / length^length_penalty, beam only" + dflt("length_penalty", num(g0.length_penalty))).c_str())(
      "penalty-alpha", po::value(&penalty_alpha),
      ("degeneration penalty in [0, 1], contrastive only" + dflt("penalty_alpha", num(g0.penalty_alpha))).c_str())(
      "max-new-tokens", po::value(&max_new_tokens),
      ("tokens to generate at most" + dflt("max_new_tokens", num(g0.max_new_tokens))).c_str())(
      "stop", po::value<std::vector<std::string>>(&c.stop)->composing(),
      "stop string, added to generation.stop (repeatable; default: none)")(
      "seed", po::value(&seed), "sampling seed (default: generation.seed, else the config's seed)")(
      "presence-penalty", po::value(&presence_penalty),
      "in [-2, 2], greedy and sample: subtracted from the logit of every token generated so far (OpenAI's "
      "presence_penalty; default: 0)")(
      "frequency-penalty", po::value(&frequency_penalty),
      "in [-2, 2], greedy and sample: subtracted from a token's logit once per time it was generated so far "
      "(OpenAI's frequency_penalty; default: 0)")(
      "logit-bias", po::value<std::vector<std::string>>(&logit_bias)->composing(),
      "ID=BIAS: add BIAS in [-100, 100] to token ID's logit, greedy and sample (repeatable, at most 300; "
      "OpenAI's logit_bias; default: none)")("stream", po::bool_switch(&c.stream),
                                             "print tokens as they are generated (default: off)");
  plugins.add_to(d);
  po::positional_options_description pos;
  po::variables_map vm;
  if (auto rc = parse_args("generate", args, d, pos, vm, help)) return *rc;
  if (vm.count("prompt") && vm.count("prompt-file")) {
    std::cerr << "zcode-host generate: give --prompt or --prompt-file, not both\n";
    return kUsageError;
  }
  if (!vm.count("prompt") && !vm.count("prompt-file")) {
    std::cerr << "zcode-host generate: --prompt or --prompt-file is required (see zcode-host generate --help)\n";
    return kUsageError;
  }
  if (vm.count("prompt-file")) {
    std::ifstream in(prompt_file, std::ios::binary);
    if (!in) {
      std::cerr << "zcode-host generate: --prompt-file: file '" << prompt_file << "' not found\n";
      return kUsageError;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    c.prompt = ss.str();
  }
  if (vm.count("strategy")) c.strategy = strategy;
  if (vm.count("temperature")) c.temperature = temperature;
  if (vm.count("top-k")) c.top_k = top_k;
  if (vm.count("top-p")) c.top_p = top_p;
  if (vm.count("num-beams")) c.num_beams = num_beams;
  if (vm.count("length-penalty")) c.length_penalty = length_penalty;
  if (vm.count("penalty-alpha")) c.penalty_alpha = penalty_alpha;
  if (vm.count("max-new-tokens")) c.max_new_tokens = max_new_tokens;
  if (vm.count("seed")) c.seed = seed;
  auto usage = [](const std::string& msg) {
    std::cerr << "zcode-host generate: " << msg << " (see zcode-host generate --help)\n";
    return kUsageError;
  };
  // NaN fails both comparisons, so it is refused with the out-of-range values.
  auto penalty = [&](const char* flag, double v, std::optional<double>* dst) {
    if (!(v >= -gen::kMaxPenalty && v <= gen::kMaxPenalty)) {
      usage(std::string(flag) + ": " + num(v) + " is outside [-2, 2]");
      return false;
    }
    *dst = v;
    return true;
  };
  if (vm.count("presence-penalty") && !penalty("--presence-penalty", presence_penalty, &c.presence_penalty))
    return kUsageError;
  if (vm.count("frequency-penalty") && !penalty("--frequency-penalty", frequency_penalty, &c.frequency_penalty))
    return kUsageError;
  if (logit_bias.size() > gen::kMaxLogitBiasEntries)
    return usage("--logit-bias: given " + std::to_string(logit_bias.size()) + " times; at most " +
                 std::to_string(gen::kMaxLogitBiasEntries) + " are allowed");
  for (const std::string& e : logit_bias) {
    const auto eq = e.find('=');
    const char* b = e.data();
    const char* end = b + e.size();
    int32_t id = -1;
    double bias = 0;
    const bool digits =
        eq != std::string::npos && eq > 0 && std::all_of(b, b + eq, [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!digits) return usage("--logit-bias: '" + e + "' is not ID=BIAS with ID a token id (an integer >= 0)");
    if (std::from_chars(b, b + eq, id).ec != std::errc())  // digits only: the one failure left is overflow
      return usage("--logit-bias: '" + e + "': token id " + e.substr(0, eq) + " is outside the vocabulary");
    const auto res = std::from_chars(b + eq + 1, end, bias);
    if (eq + 1 == e.size() || res.ptr != end || res.ec != std::errc())
      return usage("--logit-bias: '" + e + "': BIAS is not a number (expected ID=BIAS, BIAS in [-100, 100])");
    if (!(bias >= -gen::kMaxLogitBias && bias <= gen::kMaxLogitBias))
      return usage("--logit-bias: '" + e + "': BIAS " + num(bias) + " is outside [-100, 100]");
    for (const auto& prev : c.logit_bias)
      if (prev.first == id) return usage("--logit-bias: token id " + std::to_string(id) + " is given twice");
    c.logit_bias.emplace_back(id, bias);
  }
  c.plugin_paths = plugins.paths;
  c.allow_insecure_plugin_path = plugins.allow_insecure;
  return gen::run_command(c, std::cout);
}

}  // namespace zcode::host
