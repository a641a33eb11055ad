// zcode/core/stage_factory.h: the one place a stage's zc_create_args is
// built, for the engine, generate, tokenize and the benchmarks.
//
//   HostServices host(cfg.seed(), threads);
//   const std::string config_json = cfg.to_json();
//   StageFactory stages(registry, host, config_json, run_dir);
//   StageInstance tok = stages.create(ZC_KIND_TOKENIZER, cfg.data().tokenizer_type, "data.tokenizer",
//                                     cfg.section_json("data.tokenizer"));
//   StageInstance model = stages.create(ZC_KIND_MODEL, cfg.model().type, "model.type",
//                                       cfg.section_json("model"), {.tokenizer = tok.ref()});
#pragma once

#include <zcode/abi.h>
#include <zcode/core/registry.h>

#include <filesystem>
#include <string>

namespace zcode {

class HostServices;  // zcode/core/host_services.h

/// The stages a new stage borrows ({NULL, NULL} when not applicable: see
/// zc_create_args in abi.h) and a dataloader's split.
struct StageLinks {
  zc_stage_ref tokenizer{};
  zc_stage_ref model{};
  const char* split = nullptr;            ///< "train" | "val"; dataloaders only
  const zc_param_shard* shard = nullptr;  ///< an optimizer's ZeRO-1 part (ABI 1.5); NULL: all of it
};

/// zc_create_args for one stage: zero-initialized with struct_size set, so a
/// field appended to the struct later is zero (absent) until it is set here.
/// Every pointer is borrowed: `host` and the links must outlive the instance,
/// the strings the create call. `config_json` is the whole resolved config
/// ("{}" for tools without one), `run_dir` "" for tools that write nothing.
zc_create_args stage_args(const zc_host_services* host, const char* options_json, const char* config_json,
                          const char* run_dir, const StageLinks& links = {});

/// Creates the stages of one run: one host (its seed, threads and device),
/// one resolved config (HarnessConfig::to_json(), or "{}") and one run folder
/// ("" for tools that write nothing). Borrows all four, read at each
/// create(): the registry and host must outlive the instances.
class StageFactory {
 public:
  StageFactory(const Registry& registry, const HostServices& host, const std::string& config_json,
               const std::filesystem::path& run_dir);

  /// The component `name` of `kind` (Registry::require: PluginError naming
  /// the config key `where` when there is none), created with the stage's
  /// own `options_json` (a JSON object). Throws PluginError
  /// `<kind> 'x' (<file>): create failed: <plugin message>`.
  StageInstance create(zc_kind kind, const std::string& name, const std::string& where, const std::string& options_json,
                       const StageLinks& links = {}) const;

  /// The arguments create() passes, for a caller that only estimates memory
  /// (zc_*_table.estimate_memory): `options_json` is borrowed.
  zc_create_args args(const std::string& options_json, const StageLinks& links = {}) const;

  const Registry& registry() const { return registry_; }

 private:
  const Registry& registry_;
  const HostServices& host_;
  const std::string& config_json_;
  const std::filesystem::path& run_dir_;
};

}  // namespace zcode
