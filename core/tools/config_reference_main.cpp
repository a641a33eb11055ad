// zcode_config_reference TEMPLATE OUTPUT [--check]: renders
// docs/config-reference.md (zcode/core/config_reference.h) from the built-in
// schema and the options schema of every bundled plugin (the build tree's
// lib/zcode/plugins, as `zcode-host plugins show NAME` prints them).
// Without --check it writes OUTPUT (atomically); with --check it writes
// nothing and exits 1 when OUTPUT differs from what it renders.
#include <zcode/core/config_reference.h>
#include <zcode/core/registry.h>
#include <zcode/sdk/file.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The first line where `a` and `b` differ (1-based), for the --check message.
size_t first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  size_t n = 1;
  for (std::string l, m;; ++n) {
    const bool gx = static_cast<bool>(std::getline(x, l)), gy = static_cast<bool>(std::getline(y, m));
    if (!gx || !gy || l != m) return n;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool check = std::find(args.begin(), args.end(), "--check") != args.end();
  std::vector<std::string> files;
  std::copy_if(args.begin(), args.end(), std::back_inserter(files),
               [](const std::string& a) { return a != "--check"; });
  if (files.size() != 2) {
    std::cerr << "usage: zcode_config_reference TEMPLATE OUTPUT [--check]\n";
    return 2;
  }
  try {
    zcode::PluginSearchOptions search;
    search.use_env = false;  // the bundled plugins only: the page documents this tree
    zcode::Registry registry(search);
    registry.load_all();
    std::vector<const zcode::Component*> comps = registry.components();
    std::stable_sort(comps.begin(), comps.end(), [](const zcode::Component* a, const zcode::Component* b) {
      return a->kind != b->kind ? a->kind < b->kind : a->name < b->name;
    });
    std::vector<zcode::ComponentOptions> options;
    for (const zcode::Component* c : comps)
      options.push_back({zcode::kind_name(c->kind), c->name, c->description, c->options_schema_json});
    const std::string page = zcode::render_config_reference(slurp(files[0]), options);
    if (!check) {
      zcode::sdk::write_file_atomic(files[1], page);
      return 0;
    }
    const std::string committed = slurp(files[1]);
    if (committed == page) return 0;
    std::cerr << files[1] << " is not current (first difference at line " << first_difference(committed, page)
              << "): it is generated from the config field table (core/src/config_schema.cpp), the plugins' "
                 "options schemas and "
              << files[0] << "; regenerate it with `cmake --build build/release --target config-reference`\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "zcode_config_reference: " << e.what() << "\n";
    return 1;
  }
}
