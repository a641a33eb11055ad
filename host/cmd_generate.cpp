// zcode-host generate: text generation from a checkpoint (logic in
// core/src/generate_command.cpp; strategies in zcode/core/generate.h).
#include "cli_common.h"
#include "commands.h"

#include <zcode/core/generate.h>
#include <zcode/core/log.h>

#include <fstream>
#include <iostream>
#include <sstream>

namespace zcode::host {

int cmd_generate(const std::vector<std::string>& args) {
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
  PluginFlags plugins;
  po::options_description d("options");
  d.add_options()
      ("checkpoint", po::value(&c.checkpoint)->required(), "checkpoint folder (.../checkpoints/step_N), run folder, or 'latest' (with --config)")
      ("config,c", po::value(&c.config_path), "config (default: the one stored in the checkpoint)")
      ("set", po::value<std::vector<std::string>>(&c.sets)->composing(), "override a config field (repeatable)")
      ("prompt", po::value(&c.prompt), "prompt text (may be empty: generation starts from <bos>)")
      ("prompt-file", po::value(&prompt_file), "read the prompt from a file")
      ("strategy", po::value(&strategy), "greedy | sample | beam | contrastive")
      ("temperature", po::value(&temperature), "sampling temperature (0 = greedy)")
      ("top-k", po::value(&top_k), "keep the k most likely tokens (sample), candidates (contrastive)")
      ("top-p", po::value(&top_p), "nucleus probability mass, in (0, 1]")
      ("num-beams", po::value(&num_beams), "beams (beam)")
      ("length-penalty", po::value(&length_penalty), "beam score / length^length_penalty")
      ("penalty-alpha", po::value(&penalty_alpha), "contrastive degeneration penalty, [0, 1]")
      ("max-new-tokens", po::value(&max_new_tokens), "tokens to generate at most")
      ("stop", po::value<std::vector<std::string>>(&c.stop)->composing(), "stop string (repeatable)")
      ("seed", po::value(&seed), "sampling seed (default: generation.seed, else the config's seed)")
      ("stream", po::bool_switch(&c.stream), "print tokens as they are generated");
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
  c.plugin_paths = plugins.paths;
  c.allow_insecure_plugin_path = plugins.allow_insecure;
  return gen::run_command(c, std::cout);
}

}  // namespace zcode::host
