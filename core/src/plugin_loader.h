// Private to core/src: the process-wide cache of loaded plugin files.
//
// One mutex serialises every load (abi.h, LOADING RULES). A file is loaded
// (and negotiated) at most once per process, whatever Registry asks for it;
// its library stays loaded until the process exits, and its Components live
// as long. Refusals are cached too, so a bad file is diagnosed once.
#pragma once

#include <zcode/core/registry.h>

#include <filesystem>
#include <string>
#include <vector>

namespace zcode::detail {

/// The outcome of loading one file.
struct LoadedFile {
  PluginFile info;
  std::vector<Component> components;  // empty when refused
  std::string error;                  // "" on success, else the reason (no file prefix)
};

/// Loads `path` (once per canonical path) with RTLD_NOW|RTLD_LOCAL, checks
/// the ABI version, the manifest and every table header. Never throws for a
/// bad plugin: the reason is in LoadedFile::error. The reference is valid
/// for the life of the process.
const LoadedFile& load_plugin_file(const std::filesystem::path& path);

/// The sidecar index of a plugin file: `<dir>/<stem>.zcode.json`, written by
/// zcode_add_plugin at build time (see core/README.md).
std::filesystem::path index_path_for(const std::filesystem::path& plugin_file);

}  // namespace zcode::detail
