// zcode-host tokenize / tokenizer train: placeholders until the tokenizer
// engineer's commands land (this file is theirs to replace; keep the
// signatures of commands.h).
#include "commands.h"

#include <cstdio>

namespace zcode::host {

int cmd_tokenize(const std::vector<std::string>&) {
  std::fprintf(stderr, "zcode-host tokenize: not implemented yet\n");
  return 1;
}

int cmd_tokenizer(const std::vector<std::string>&) {
  std::fprintf(stderr, "zcode-host tokenizer: not implemented yet\n");
  return 1;
}

}  // namespace zcode::host
