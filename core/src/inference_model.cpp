// InferenceModel: the loading half of `zcode-host generate`, shared with
// `zcode-host serve` and the Python Engine (zcode/core/inference_model.h).
#include <zcode/core/checkpoint.h>
#include <zcode/core/inference_model.h>
#include <zcode/core/log.h>
#include <zcode/sdk/buffers.h>

#include <rapidjson/document.h>

#include <algorithm>
#include <optional>
#include <thread>

namespace zcode {

namespace fs = std::filesystem;

InferenceModel::InferenceModel(const InferenceSource& src) {
  // 1. The config: the given file, or the one the checkpoint was trained with.
  std::optional<ckpt::LoadedCheckpoint> ck;
  if (!src.config_path.empty()) {
    cfg_ = HarnessConfig::from_file(src.config_path);
  } else {
    if (src.checkpoint == "latest")
      throw InferenceUsageError("--checkpoint latest needs --config (to find the run folder)");
    ck = ckpt::load_checkpoint(ckpt::resolve(src.checkpoint, fs::path(".")), ckpt::Parts::kModelOnly);
    cfg_ = HarnessConfig::from_string(ckpt::stored_config_json(*ck), (ck->dir / "state.json").string());
  }
  if (!src.sets.empty()) cfg_.apply_overrides(src.sets);
  PluginSearchOptions so;
  for (const auto& p : src.plugin_paths) so.cli_paths.emplace_back(p);
  so.allow_insecure = src.allow_insecure_plugin_path;
  {
    HarnessConfig host_only = cfg_;
    host_only.validate(nullptr);
    for (const auto& p : host_only.plugin_path()) so.config_paths.emplace_back(p);
  }
  registry_ = std::make_unique<Registry>(so);
  cfg_.validate(registry_.get());
  if (!ck) {
    const fs::path run_dir = fs::path(cfg_.logging().output_dir) / cfg_.experiment_name();
    ck = ckpt::load_checkpoint(ckpt::resolve(src.checkpoint, run_dir), ckpt::Parts::kModelOnly);
  }
  checkpoint_dir_ = ck->dir;
  step_ = ck->step;

  // 2. Stages, the model's weights.
  int threads = static_cast<int>(cfg_.hardware().num_threads);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  host_ = std::make_unique<HostServices>(cfg_.seed(), threads);
  cfg_json_ = cfg_.to_json();
  stages_ = std::make_unique<StageFactory>(*registry_, *host_, cfg_json_, no_run_dir_);
  tokenizer_ = stages_->create(ZC_KIND_TOKENIZER, cfg_.data().tokenizer_type, "data.tokenizer",
                               cfg_.section_json("data.tokenizer"));
  model_ = stages_->create(ZC_KIND_MODEL, cfg_.model().type, "model.type", cfg_.section_json("model"),
                           {.tokenizer = tokenizer_.ref()});
  {
    const ckpt::StoredState state = ckpt::read_state(*ck);
    const std::string* json = state.stage("model");
    ckpt::StateReaderView rd(ck->tensors(ckpt::TensorFile::kModel), "", json ? *json : std::string());
    check_plugin_call(*model_.component(), "load_state",
                      model_.component()->base()->load_state(model_.get(), rd.get()));
  }

  // 3. The tokenizer's vocabulary and special ids.
  const auto* tt = tokenizer_table();
  uint64_t vocab = 0;
  check_plugin_call(*tokenizer_.component(), "vocab_size", tt->vocab_size(tokenizer_.get(), &vocab));
  vocab_ = static_cast<int64_t>(vocab);
  const char* info = nullptr;
  check_plugin_call(*tokenizer_.component(), "info_json", tt->info_json(tokenizer_.get(), &info));
  rapidjson::Document ti;
  ti.Parse(info ? info : "{}");
  auto id_of = [&](const char* k) { return ti.IsObject() && ti.HasMember(k) && ti[k].IsInt() ? ti[k].GetInt() : -1; };
  bos_ = id_of("bos_id");
  eos_ = id_of("eos_id");
}

int inference_command_failed(const char* command) {
  try {
    throw;
  } catch (const InferenceUsageError& e) {
    log::error(std::string(command) + ": " + e.what());
    return 2;
  } catch (const ConfigValidationError& e) {
    log::error(e.what());
    return 2;
  } catch (const ConfigLoadError& e) {
    log::error(e.what());
    return 2;
  } catch (const std::exception& e) {
    log::error(std::string(command) + ": " + e.what());
    return 1;
  } catch (...) {
    log::error(std::string(command) + ": unknown error");
    return 1;
  }
}

InferenceModel::~InferenceModel() {
  model_.reset();  // the model borrows the tokenizer
  tokenizer_.reset();
}

const zc_tokenizer_table* InferenceModel::tokenizer_table() const {
  return tokenizer_.component()->as<zc_tokenizer_table>();
}
const zc_model_table* InferenceModel::model_table() const { return model_.component()->as<zc_model_table>(); }

std::vector<int32_t> InferenceModel::encode(std::string_view text) const {
  std::vector<int32_t> buf;
  zc_ids ids = zcode::sdk::ids_into(buf);
  check_plugin_call(*tokenizer_.component(), "encode",
                    tokenizer_table()->encode(tokenizer_.get(), text.data(), text.size(), 0, &ids));
  buf.resize(ids.size);
  return buf;
}

std::string InferenceModel::decode(std::span<const int32_t> ids) const {
  std::string text;
  zc_bytes b = zcode::sdk::bytes_into(text);
  check_plugin_call(*tokenizer_.component(), "decode",
                    tokenizer_table()->decode(tokenizer_.get(), ids.data(), ids.size(), &b));
  text.resize(b.size);
  return text;
}

}  // namespace zcode
