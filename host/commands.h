// host/commands.h: one entry point per subcommand group of zcode-host.
//
// Each receives the arguments AFTER its own name (for `zcode-host run
// c.yaml --overwrite`, cmd_run gets {"c.yaml", "--overwrite"}) and returns
// the process exit code: 0 success, 1 runtime failure, 2 usage or config
// error (130: a run stopped by SIGINT/SIGTERM after its checkpoint).
// Every command prints an example under --help.
#pragma once

#include <string>
#include <vector>

namespace zcode::host {

int cmd_run(const std::vector<std::string>& args);        // run CONFIG [--set k=v]... (cmd_run.cpp)
int cmd_train(const std::vector<std::string>& args);      // train --config C (cmd_run.cpp)
int cmd_evaluate(const std::vector<std::string>& args);   // evaluate --config C --checkpoint P (cmd_run.cpp)
int cmd_profile(const std::vector<std::string>& args);    // profile --config C --steps N (cmd_run.cpp)
int cmd_validate(const std::vector<std::string>& args);   // validate CONFIG (cmd_validate.cpp)
int cmd_plugins(const std::vector<std::string>& args);    // plugins list | show NAME (cmd_plugins.cpp)
int cmd_generate(const std::vector<std::string>& args);   // generate ... (cmd_generate.cpp, engine owner)
int cmd_tokenize(const std::vector<std::string>& args);   // tokenize ... (cmd_tokenize.cpp, tokenizer owner)
int cmd_tokenizer(const std::vector<std::string>& args);  // tokenizer train ... (cmd_tokenize.cpp, tokenizer owner)
int cmd_score(const std::vector<std::string>& args);      // score --metric M ... (cmd_score.cpp)
int cmd_serve(const std::vector<std::string>& args);      // serve --checkpoint P (cmd_serve.cpp)

}  // namespace zcode::host
