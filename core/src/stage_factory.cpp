// Stage creation (see stage_factory.h).
#include <zcode/core/host_services.h>
#include <zcode/core/stage_factory.h>

namespace zcode {

zc_create_args stage_args(const zc_host_services* host, const char* options_json, const char* config_json,
                          const char* run_dir, const StageLinks& links) {
  zc_create_args a{};
  a.struct_size = sizeof(zc_create_args);
  a.host = host;
  a.options_json = options_json;
  a.config_json = config_json;
  a.run_dir = run_dir;
  a.tokenizer = links.tokenizer;
  a.model = links.model;
  a.split = links.split;
  a.shard = links.shard;
  return a;
}

StageFactory::StageFactory(const Registry& registry, const HostServices& host, const std::string& config_json,
                           const std::filesystem::path& run_dir)
    : registry_(registry), host_(host), config_json_(config_json), run_dir_(run_dir) {}

zc_create_args StageFactory::args(const std::string& options_json, const StageLinks& links) const {
  return stage_args(host_.raw(), options_json.c_str(), config_json_.c_str(), run_dir_.c_str(), links);
}

StageInstance StageFactory::create(zc_kind kind, const std::string& name, const std::string& where,
                                   const std::string& options_json, const StageLinks& links) const {
  return StageInstance(registry_.require(kind, name, where), args(options_json, links));
}

}  // namespace zcode
