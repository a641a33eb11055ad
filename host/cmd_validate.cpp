// zcode-host validate CONFIG: load + validate (built-in schema and every
// plugin's options schema through the registry); prints every error or
// `config OK`. Then the checks `run` makes before it trains (files, the
// tokenizer, the memory estimate: Engine::preflight).
#include "cli_common.h"
#include "commands.h"

#include <zcode/core/engine.h>
#include <zcode/core/log.h>

#include <iostream>

namespace zcode::host {

int cmd_validate(const std::vector<std::string>& args) {
  const CommandHelp help{"zcode-host validate CONFIG [--set k=v]... [--plugin-path P]...",
                         "Check CONFIG against the schema and the options schema of every plugin it names; "
                         "print every error (exit 2) or `config OK` (exit 0). Loads only the plugins it names.",
                         "  zcode-host validate examples/quickstart/config.yaml --set optimizer.lr=1e-3"};
  std::string config;
  std::vector<std::string> sets;
  PluginFlags plugins;
  po::options_description d("options");
  d.add_options()("config", po::value(&config)->required(), "experiment config (YAML or JSON)")(
      "set", po::value<std::vector<std::string>>(&sets)->composing(), "override a config field (repeatable)");
  plugins.add_to(d);
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  if (auto rc = parse_args("validate", args, d, pos, vm, help)) return *rc;
  try {
    ValidatedConfig vc;
    if (auto rc = load_and_validate(config, sets, plugins, vc)) return *rc;
    // A refused plugin folder or file was logged as an error: the config is
    // not OK on this machine, whatever else passed.
    if (const auto problems = vc.registry->problems(); !problems.empty()) {
      log::error(config + ": the plugin path has " + std::to_string(problems.size()) +
                 " problem(s), listed above; config not OK");
      return kRuntimeError;
    }
    // What `run` checks before it trains: files, tokenizer, memory.
    EngineOptions eo;
    eo.plugin_paths = plugins.paths;
    eo.allow_insecure_plugin_path = plugins.allow_insecure;
    eo.config_path = config;
    eo.install_signal_handlers = false;
    Engine engine(std::move(vc.config), eo);
    try {
      engine.preflight();
    } catch (const ConfigValidationError& e) {  // one [ERROR] line each, as load_and_validate prints them
      log::error(e.origin() + ": " + std::to_string(e.errors().size()) + " config error(s)");
      for (const ConfigError& ce : e.errors()) log::error("  " + ce.str());
      return kUsageError;
    }
    std::cout << "config OK\n";
    return kOk;
  } catch (...) {
    return report_current_exception("validate");
  }
}

}  // namespace zcode::host
