// zcode/core/registry.h: plugin discovery, loading (Boost.DLL) and lookup.
//
// Search order (first wins): --plugin-path flags, the config's plugin_path,
// ZCODE_PLUGIN_PATH (colon-separated), then <exe_dir>/../lib/zcode/plugins.
// Plugins are loaded lazily: `run` loads only the files that provide the
// components its config names (see core/README.md, "How a component name
// finds its file": a sidecar index `<stem>.zcode.json` written at build time by
// zcode_add_plugin, then the file name `libzcode_<name>.so`, then a scan of
// files that have no index). `plugins list` loads them all.
//
// Every refusal is one line naming the file and the reason, e.g.
//   libzcode_x.so: ABI major mismatch: plugin 2.0, host 1.0
// Loaded libraries are never unloaded (abi.h, LOADING RULES).
#pragma once

#include <zcode/abi.h>
#include <zcode/core/config.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace zcode {

// ---- names -------------------------------------------------------------------

/// Config name comparison key: lower case, '-' -> '_' ("Zerosum-SGD" ->
/// "zerosum_sgd"). Aliases ("GLM5pt2" -> "glm52") are the config's business.
std::string normalize_component_name(std::string_view name);

/// "tokenizer", "dataloader", "model", "optimizer", "scheduler", "evaluator",
/// "callback"; "unknown" otherwise.
const char* kind_name(zc_kind kind);
/// Inverse of kind_name (normalized); std::nullopt for anything else.
std::optional<zc_kind> parse_kind(std::string_view text);

/// Bytes of the slots the host reads from a table of `kind` (the size of the
/// table at kind_version 1); 0 for an unknown kind.
size_t min_table_size(zc_kind kind);

// ---- errors ------------------------------------------------------------------

/// A plugin problem, one line: `<file>: <reason>` or
/// `optimizer.name: no optimizer plugin named 'adamx' ...`.
class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- what was loaded -------------------------------------------------------

/// One loaded plugin file.
struct PluginFile {
  std::filesystem::path path;  // as found on the search path
  std::string name;            // manifest name, e.g. "bpe"
  std::string version;         // plugin's own semver
  std::string license;         // SPDX id
  std::string description;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
};

/// One stage implementation of a loaded plugin. Pointers stay valid for the
/// life of the process (plugins are never unloaded).
struct Component {
  zc_kind kind = ZC_KIND_UNKNOWN;
  std::string name;  // as the plugin spells it
  std::string description;
  std::string options_schema_json;
  const void* table = nullptr;  // a zc_<kind>_table, header already checked
  const PluginFile* file = nullptr;

  /// The table seen through its common slots (create/destroy/save/load).
  const zc_table_base* base() const { return static_cast<const zc_table_base*>(table); }
  /// The kind's table, e.g. as<zc_model_table>().
  template <class Table>
  const Table* as() const {
    return static_cast<const Table*>(table);
  }
  /// `optimizer 'adamw' (/path/libzcode_optimizers.so)` for messages.
  std::string label() const;
};

// ---- search path -----------------------------------------------------------

struct PluginSearchOptions {
  std::vector<std::filesystem::path> cli_paths;     // --plugin-path, in order
  std::vector<std::filesystem::path> config_paths;  // the config's plugin_path
  bool use_env = true;                              // read ZCODE_PLUGIN_PATH
  bool use_default = true;                          // <exe_dir>/../lib/zcode/plugins
  /// Replaces the bundled folder when not empty (tests, embedders).
  std::filesystem::path default_dir;
  /// Accept world-writable plugin files and folders (--allow-insecure-plugin-path).
  bool allow_insecure = false;
};

/// One folder of the search path and where it came from.
struct SearchDir {
  std::filesystem::path path;
  std::string origin;  // "--plugin-path", "plugin_path", "ZCODE_PLUGIN_PATH", "default"
};

/// <dir of the running executable>/../lib/zcode/plugins (lexically normal).
std::filesystem::path default_plugin_dir();

// ---- the registry ----------------------------------------------------------

/// Finds and loads plugins; thread-safe. Implements the config's
/// SchemaProvider so validation sees each component's options schema.
class Registry : public SchemaProvider {
 public:
  /// Builds the search path (no file is opened yet). Folders that do not
  /// exist are skipped with a DEBUG line; a folder listed twice is searched once.
  explicit Registry(PluginSearchOptions options);
  ~Registry() override;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  /// The folders searched, in order.
  const std::vector<SearchDir>& search_dirs() const;
  /// search_dirs()' paths as text (SchemaProvider).
  std::vector<std::string> searched_folders() const override;

  /// Every candidate plugin file (regular `*.so` files) in search order,
  /// WITHOUT loading any of them.
  std::vector<std::filesystem::path> candidate_files() const;

  /// The component `name` (compared normalized) of `kind`, loading only the
  /// files that may provide it. nullptr when none does. When two files
  /// provide it, the first on the path wins and a warning names both files.
  const Component* find(zc_kind kind, std::string_view name) const;

  /// Like find, but throws PluginError when missing:
  /// `<config_path>: no <kind> plugin named '<name>' on the plugin path (did
  /// you mean '<x>'?)`. `config_path` is e.g. "optimizer.name".
  const Component& require(zc_kind kind, std::string_view name, std::string_view config_path) const;

  /// The component called `name` of any kind (for `plugins show NAME`);
  /// loads everything. nullptr when absent.
  const Component* find_any(std::string_view name) const;

  /// Loads every candidate file (for `plugins list`). Problems are returned
  /// by problems(), never thrown.
  void load_all() const;

  /// Components of the files loaded so far, in search-path order, duplicates
  /// (the losers) excluded.
  std::vector<const Component*> components() const;

  /// One line per file refused so far: `<file>: <reason>`.
  std::vector<std::string> problems() const;

  // SchemaProvider (config.h)
  std::optional<std::string> options_schema(zc_kind kind, std::string_view component_name) const override;
  std::vector<std::string> component_names(zc_kind kind) const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- calling into a component ------------------------------------------------

/// Throws PluginError `<label>: <what> failed: <plugin message>` when
/// `status` is non-NULL; always releases it.
void check_plugin_call(const Component& component, std::string_view what, zc_status* status);

/// An instance of a component: created through its table, destroyed on
/// scope exit. Move-only.
class StageInstance {
 public:
  StageInstance() = default;
  /// Calls create; throws PluginError
  /// `callback 'x' (<file>): create failed: <plugin message>`.
  StageInstance(const Component& component, const zc_create_args& args);
  ~StageInstance();
  StageInstance(StageInstance&& other) noexcept;
  StageInstance& operator=(StageInstance&& other) noexcept;
  StageInstance(const StageInstance&) = delete;
  StageInstance& operator=(const StageInstance&) = delete;

  const Component* component() const { return component_; }
  void* get() const { return instance_; }
  /// {table, instance} to hand to another stage.
  zc_stage_ref ref() const { return zc_stage_ref{component_ ? component_->table : nullptr, instance_}; }
  explicit operator bool() const { return instance_ != nullptr; }
  /// Destroys now (idempotent).
  void reset();

 private:
  const Component* component_ = nullptr;
  void* instance_ = nullptr;
};

}  // namespace zcode
