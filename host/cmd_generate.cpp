// zcode-host generate: placeholder until the engine engineer's generation
// command lands (this file is theirs to replace; keep the signature).
#include "commands.h"

#include <cstdio>

namespace zcode::host {

int cmd_generate(const std::vector<std::string>&) {
  std::fprintf(stderr, "zcode-host generate: not implemented yet\n");
  return 1;
}

}  // namespace zcode::host
