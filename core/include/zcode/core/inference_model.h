// zcode/core/inference_model.h: a trained model ready to generate: the
// config (given or stored in the checkpoint), the registry, the tokenizer
// and the model stages, the weights of a verified checkpoint. The one loader
// for `zcode-host generate`, `zcode-host serve` and the Python Engine.
#pragma once

#include <zcode/core/config.h>
#include <zcode/core/host_services.h>
#include <zcode/core/registry.h>
#include <zcode/core/stage_factory.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace zcode {

/// Where the model comes from (the flags of generate and serve).
struct InferenceSource {
  std::string checkpoint;                 ///< step folder, run folder, checkpoints/, or "latest" (needs config)
  std::string config_path;                ///< "" = the config stored in the checkpoint's state.json
  std::vector<std::string> sets;          ///< --set overrides
  std::vector<std::string> plugin_paths;  ///< --plugin-path
  bool allow_insecure_plugin_path = false;
};

/// A usage mistake (exit code 2), e.g. "latest" without a config, or a flag
/// the chosen strategy does not use.
struct InferenceUsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// For `generate` and `serve`: call in a catch (...) block. Logs the
/// exception being handled as one line ("<command>: <message>"; config errors
/// as they are) and returns the exit code: 2 for InferenceUsageError,
/// ConfigValidationError and ConfigLoadError, 1 for anything else.
int inference_command_failed(const char* command);

/// Tokenizer + model with a checkpoint's weights. Not thread-safe: the ABI's
/// threading contract (one instance, one thread at a time) is the caller's.
class InferenceModel {
 public:
  /// Loads and verifies; throws InferenceUsageError, ConfigLoadError,
  /// ConfigValidationError, ckpt errors or PluginError with one-line messages.
  explicit InferenceModel(const InferenceSource& src);
  ~InferenceModel();
  InferenceModel(const InferenceModel&) = delete;
  InferenceModel& operator=(const InferenceModel&) = delete;

  const HarnessConfig& config() const { return cfg_; }
  const StageInstance& tokenizer() const { return tokenizer_; }
  const StageInstance& model() const { return model_; }
  const zc_tokenizer_table* tokenizer_table() const;
  const zc_model_table* model_table() const;
  /// The folder of the checkpoint loaded (step_N).
  const std::filesystem::path& checkpoint_dir() const { return checkpoint_dir_; }
  /// The checkpoint's step (state.json), 0 when absent.
  uint64_t step() const { return step_; }

  int64_t vocab_size() const { return vocab_; }  ///< the tokenizer's (logit columns)
  int32_t bos_id() const { return bos_; }        ///< -1 when absent
  int32_t eos_id() const { return eos_; }        ///< -1 when absent
  int32_t max_seq_len() const { return static_cast<int32_t>(cfg_.model().max_seq_len); }

  /// Tokenizer calls (throw PluginError naming the plugin).
  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(std::span<const int32_t> ids) const;

 private:
  HarnessConfig cfg_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<HostServices> host_;
  std::string cfg_json_;
  std::filesystem::path no_run_dir_;
  std::unique_ptr<StageFactory> stages_;
  StageInstance tokenizer_, model_;
  std::filesystem::path checkpoint_dir_;
  uint64_t step_ = 0;
  int64_t vocab_ = 0;
  int32_t bos_ = -1, eos_ = -1;
};

}  // namespace zcode
