// zcode-host: the ZCode command line. Dispatches to one cmd_* per
// subcommand group (commands.h); all logic lives in core/.
#include "commands.h"

#include <zcode/core/version.h>
#include <zcode/sdk/suggest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct Command {
  const char* name;
  int (*fn)(const std::vector<std::string>&);
  const char* summary;
};

const Command kCommands[] = {
    {"run", zcode::host::cmd_run, "validate a config, then train, evaluate and checkpoint"},
    {"train", zcode::host::cmd_train, "the same as run, with --config C"},
    {"evaluate", zcode::host::cmd_evaluate, "evaluate a checkpoint (no training)"},
    {"generate", zcode::host::cmd_generate, "generate text from a checkpoint"},
    {"profile", zcode::host::cmd_profile, "run N steps and write a Chrome trace"},
    {"validate", zcode::host::cmd_validate, "check a config and the plugin options it sets"},
    {"plugins", zcode::host::cmd_plugins, "list the plugins on the path, or show one"},
    {"tokenize", zcode::host::cmd_tokenize, "encode or decode text with a tokenizer"},
    {"tokenizer", zcode::host::cmd_tokenizer, "tokenizer tools (tokenizer train ...)"},
    {"score", zcode::host::cmd_score, "BLEU, ROUGE or diversity of generated text against references"},
    {"serve", zcode::host::cmd_serve, "serve a checkpoint over HTTP (OpenAI API, continuous batching)"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: zcode-host COMMAND [options]   (zcode-host COMMAND --help for its options)\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\n  --version  print version, ABI, build and dependency versions\n\n"
               "example:\n  zcode-host run examples/quickstart/config.yaml\n"
               "exit codes: 0 success, 1 runtime failure, 2 usage or config error\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string first = argv[1];
  if (first == "--version" || first == "-V") {
    std::cout << zcode::version_text();
    return 0;
  }
  if (first == "--help" || first == "-h" || first == "help") {
    usage(stdout);
    return 0;
  }
  std::vector<std::string> rest(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (first == c.name) {
      try {
        return c.fn(rest);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[ERROR] zcode-host %s: %s\n", c.name, e.what());
        return 1;
      }
    }
  }
  std::vector<std::string> names;
  for (const Command& c : kCommands) names.emplace_back(c.name);
  std::fprintf(stderr, "zcode-host: unknown command '%s'%s (see zcode-host --help)\n", first.c_str(),
               zcode::sdk::did_you_mean_hint(first, names).c_str());
  return 2;
}
