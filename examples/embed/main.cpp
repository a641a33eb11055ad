// The guide's embedding API, in C++: load a config, validate it, run it.
//   zcode_embed CONFIG.yaml
// Plugins come from ZCODE_PLUGIN_PATH and the installed plugin folder
// (<prefix>/lib/zcode/plugins, found next to this program only when it is
// installed into the same prefix; otherwise set ZCODE_PLUGIN_PATH, e.g.
// ZCODE_PLUGIN_PATH=/opt/zcode/lib/zcode/plugins). hf://gpt2 needs nothing
// more: the tokenizer plugin finds <prefix>/share/zcode/assets from its own
// location. Set ZCODE_ASSETS_DIR only for assets fetched elsewhere
// (scripts/fetch-assets.sh into a folder of your own).
#include <zcode/core/config.h>
#include <zcode/core/engine.h>
#include <zcode/core/registry.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: zcode_embed CONFIG.yaml\n");
    return 2;
  }
  try {
    auto cfg = zcode::HarnessConfig::from_yaml(argv[1]);
    zcode::Registry registry{zcode::PluginSearchOptions{}};
    cfg.validate(&registry);  // every error at once, before anything runs
    zcode::Engine engine(cfg);
    return engine.run();
  } catch (const zcode::ConfigLoadError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const zcode::ConfigValidationError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zcode_embed: %s\n", e.what());
    return 1;
  }
}
