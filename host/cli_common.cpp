// Shared pieces of the zcode-host subcommands.
#include "cli_common.h"

#include <zcode/core/log.h>

#include <filesystem>
#include <iostream>

namespace zcode::host {

void PluginFlags::add_to(po::options_description& desc) {
  desc.add_options()("plugin-path", po::value<std::vector<std::string>>(&paths)->composing(),
                     "extra plugin folder, searched before the config's plugin_path, ZCODE_PLUGIN_PATH and the bundled "
                     "folder (repeatable)")("allow-insecure-plugin-path", po::bool_switch(&allow_insecure),
                                            "accept world-writable plugin files and folders")(
      "no-bundled-plugins", po::bool_switch(&no_bundled),
      "do not search the bundled plugin folder (<dir of zcode-host>/../lib/zcode/plugins)");
}

PluginSearchOptions PluginFlags::search(const std::vector<std::string>& config_paths) const {
  PluginSearchOptions o;
  for (const auto& p : paths) o.cli_paths.emplace_back(p);
  for (const auto& p : config_paths) o.config_paths.emplace_back(p);
  o.allow_insecure = allow_insecure;
  o.use_default = !no_bundled;
  return o;
}

std::optional<int> parse_args(const std::string& cmd, const std::vector<std::string>& args,
                              po::options_description& desc, const po::positional_options_description& pos,
                              po::variables_map& vm, const CommandHelp& help) {
  desc.add_options()("help,h", "show this help");
  try {
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: " << help.usage << "\n\n"
                << help.summary << "\n\n"
                << desc << "\nexample:\n"
                << help.example << "\n";
      return kOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "zcode-host " << cmd << ": " << e.what() << " (see zcode-host " << cmd << " --help)\n";
    return kUsageError;
  }
  return std::nullopt;
}

std::optional<int> load_and_validate(const std::string& path, const std::vector<std::string>& sets,
                                     const PluginFlags& flags, ValidatedConfig& out, const std::string* text) {
  try {
    out.config = text ? HarnessConfig::from_string(*text, path) : HarnessConfig::from_file(path);
    if (!sets.empty()) out.config.apply_overrides(sets);
    // Host-owned fields first: plugin_path must be valid before it is used
    // to find the plugins whose schemas validate the rest.
    std::vector<ConfigError> errors = out.config.check(nullptr);
    std::vector<std::string> config_paths;
    if (errors.empty()) {
      HarnessConfig host_only = out.config;
      host_only.validate(nullptr);
      // As given (relative to the working directory), like data paths and
      // like the Engine's own registry.
      config_paths = host_only.plugin_path();
      log::set_console_level(static_cast<log::Level>(host_only.logging().console_log_level));
    }
    // With host-level errors plugin_path is not trusted, but every plugin
    // error is still reported (from the other folders), so the user sees
    // every problem at once.
    out.registry = std::make_unique<Registry>(flags.search(config_paths));
    errors = out.config.check(out.registry.get());
    if (!errors.empty()) {
      log::error(path + ": " + std::to_string(errors.size()) + " config error(s)");
      for (const ConfigError& e : errors) log::error("  " + e.str());
      return kUsageError;
    }
    out.config.validate(out.registry.get());
    return std::nullopt;
  } catch (const ConfigLoadError& e) {
    log::error(e.what());
    return kUsageError;
  } catch (const ConfigValidationError& e) {
    log::error(e.what());
    return kUsageError;
  }
}

int report_current_exception(const std::string& cmd) {
  try {
    throw;
  } catch (const ConfigLoadError& e) {
    log::error(e.what());
    return kUsageError;
  } catch (const ConfigValidationError& e) {
    log::error(e.what());
    return kUsageError;
  } catch (const PluginError& e) {
    log::error(e.what());
    return kRuntimeError;
  } catch (const std::exception& e) {
    log::error("zcode-host " + cmd + ": " + e.what());
    return kRuntimeError;
  } catch (...) {
    log::error("zcode-host " + cmd + ": unknown error");
    return kRuntimeError;
  }
}

}  // namespace zcode::host
