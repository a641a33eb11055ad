// host/cli_common.h: what every subcommand shares: option parsing with an
// example under --help, the plugin-path flags, config loading + validation
// with the registry, and mapping exceptions to exit codes.
#pragma once

#include <zcode/core/config.h>
#include <zcode/core/registry.h>

#include <boost/program_options.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zcode::host {
namespace po = boost::program_options;

enum : int { kOk = 0, kRuntimeError = 1, kUsageError = 2 };

/// --plugin-path P (repeatable), --allow-insecure-plugin-path, --no-bundled-plugins.
struct PluginFlags {
  std::vector<std::string> paths;
  bool allow_insecure = false;
  bool no_bundled = false;  // --no-bundled-plugins
  void add_to(po::options_description& desc);
  /// Search options for a Registry; `config_paths` from the config's plugin_path.
  PluginSearchOptions search(const std::vector<std::string>& config_paths = {}) const;
};

/// Help text of one subcommand.
struct CommandHelp {
  std::string usage;    // "zcode-host run CONFIG [options]"
  std::string summary;  // one line
  std::string example;  // one or more example command lines
};

/// Parses `args` into `vm`. Returns kOk after printing the help for --help,
/// kUsageError after printing `zcode-host <cmd>: <problem>` for bad usage,
/// and std::nullopt when the command should go on.
std::optional<int> parse_args(const std::string& cmd, const std::vector<std::string>& args,
                              po::options_description& desc, const po::positional_options_description& pos,
                              po::variables_map& vm, const CommandHelp& help);

/// A config loaded from CONFIG, with --set overrides applied and validated
/// against the built-in schema and, through `registry`, every plugin's
/// options schema.
struct ValidatedConfig {
  HarnessConfig config;
  std::unique_ptr<Registry> registry;
};

/// Loads and validates. On failure prints every error (one per line) and
/// returns kUsageError; never throws for bad config content. Relative
/// entries of the config's plugin_path are relative to the working
/// directory (as data paths are). Sets the console log level from
/// logging.console_log_level. With `text` (the config stored in a
/// checkpoint), that text is loaded instead of a file and `path` names it.
std::optional<int> load_and_validate(const std::string& path, const std::vector<std::string>& sets,
                                     const PluginFlags& flags, ValidatedConfig& out, const std::string* text = nullptr);

/// Inside a catch block: prints the current exception as one `[ERROR]`
/// line and returns its exit code (config load and validation errors 2;
/// plugin errors and everything else 1, with the message unprefixed for
/// plugin errors).
int report_current_exception(const std::string& cmd);

}  // namespace zcode::host
