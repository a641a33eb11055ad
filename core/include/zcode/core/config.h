// zcode/core/config.h: HarnessConfig, the one typed, validated experiment
// config (the guide's chapter 1.4 schema), loaded from YAML or JSON.
//
//   auto cfg = zcode::HarnessConfig::from_yaml("config.yaml");
//   cfg.apply_overrides({"optimizer.lr=1e-3"});   // --set, before validation
//   cfg.validate(&registry);                        // throws ConfigValidationError
//   cfg.training().max_steps; cfg.section_json("optimizer"); cfg.to_yaml();
//
// Life cycle: from_* parses only (syntax errors throw ConfigLoadError with
// file:line:col). apply_overrides edits the raw tree. validate() checks every
// rule, collects EVERY error, fills defaults, and only then are the typed
// accessors meaningful (before validate() they hold the documented defaults).
// Field reference with defaults and rules: docs/config-reference.md (generated
// from the schema: `cmake --build build/release --target config-reference`).
//
// Plugin-owned sections (model, data, optimizer, scheduler, evaluation, each
// callbacks entry) keep every key, including plugin-specific ones such as
// optimizer.rho; section_json() hands them to the plugin as options_json.
#pragma once

#include <zcode/abi.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace zcode {

/// One validation problem: `path` is the dotted config path
/// ("model.variant", "optimizer.betas[1]", "callbacks[2].type", or "" for the
/// whole document); `message` says what was found and what was expected.
struct ConfigError {
  std::string path;
  std::string message;
  /// "path: message" (just "message" when path is empty).
  std::string str() const;
  bool operator==(const ConfigError&) const = default;
};

/// Thrown by validate() and apply_overrides(): carries every error found.
/// what() is "<origin>: N config error(s)" followed by one "  path: message"
/// line per error. The CLI prints it and exits 2.
class ConfigValidationError : public std::runtime_error {
 public:
  ConfigValidationError(std::string origin, std::vector<ConfigError> errors);
  const std::vector<ConfigError>& errors() const noexcept { return errors_; }
  const std::string& origin() const noexcept { return origin_; }

 private:
  std::string origin_;
  std::vector<ConfigError> errors_;
};

/// Thrown when a config file cannot be read or parsed. what() is one line:
/// "config.yaml:12:5: <parser message>" or "config.yaml: file not found".
/// The CLI exits 2.
class ConfigLoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Gives the JSON Schema of each plugin component's options and the names of
/// the components of each kind (for "did you mean" hints). Implemented by the
/// plugin registry (core/registry.h); tests use a fake.
/// The one error HarnessConfig::check gives when the provider has no
/// component at all (instead of one "no ... plugin named" line per section):
/// names the folders `searched` (SchemaProvider::searched_folders), or says
/// the plugin path is empty when there are none.
std::string no_plugins_found_message(const std::vector<std::string>& searched);

class SchemaProvider {
 public:
  virtual ~SchemaProvider() = default;
  /// The component's options_schema_json, or nullopt when no component of
  /// that kind and name is on the plugin path. `component_name` is already
  /// canonical (see HarnessConfig::canonical_name); implementations compare
  /// with canonical_name() of their own names.
  virtual std::optional<std::string> options_schema(zc_kind kind, std::string_view component_name) const = 0;
  /// Every component name of `kind` on the plugin path (any order).
  virtual std::vector<std::string> component_names(zc_kind kind) const = 0;
  /// The folders of the plugin path that exist and were searched, in order
  /// (for the "no plugins found" message); none by default.
  virtual std::vector<std::string> searched_folders() const { return {}; }
};

// ---------------------------------------------------------------------------
// The typed tree. The member initializers here are the defaults: the field
// table (core/src/config_schema.cpp) writes them into the built-in schema,
// whence they are filled into section_json / to_json and listed in
// docs/config-reference.md. Enumerated strings are stored canonical (lower
// case, '-' -> '_', aliases resolved).
// ---------------------------------------------------------------------------

/// `hardware:` section.
struct HardwareConfig {
  std::string accelerator = "cpu";  ///< cpu | gpu (gpu: not implemented yet)
  int64_t devices = 1;              ///< processes of the job, >= 1; must equal the launched world size
  bool mixed_precision = false;     ///< true: not implemented yet (CPU is fp32)
  int64_t num_threads = 0;          ///< compute threads per process, 0 = the node's cores / processes on it
  bool operator==(const HardwareConfig&) const = default;
};

/// `distributed:` section (host-owned): how the processes of a job started
/// by mpirun or srun train together (zcode/core/dist/). Ignored by a
/// one-process run.
struct DistributedConfig {
  std::string backend = "auto";  ///< auto | mpi | nccl (nccl: not implemented yet); auto = mpi on the CPU
  int64_t zero_stage = 0;        ///< 0 | 1 (ZeRO-1: sharded optimizer state)
  int64_t expert_parallel = 1;   ///< ranks one expert group spans (they split the experts), >= 1, divides devices
  double bucket_mb = 25;         ///< gradient bucket size of the data-parallel reduction, MiB
  bool overlap = false;          ///< start buckets' reduce-scatters during the backward pass
  int64_t timeout_s = 60;        ///< seconds a blocking collective waits for a lost or hung rank (>= 1)
  bool operator==(const DistributedConfig&) const = default;
};

/// `model:` section (plugin-owned; the raw section goes to the model plugin).
/// The host keeps only what it consumes itself; every other key (variant,
/// dims, experts) is the plugin's, validated and defaulted by its options
/// schema and read back from the plugin (info_json, estimate_memory).
struct ModelConfig {
  std::string type = "glm52";  ///< component name; alias GLM5pt2 -> glm52
  int64_t max_seq_len = 1024;  ///< tokens per training window, >= 1 (the data loader's too)
  bool operator==(const ModelConfig&) const = default;
};

/// `data:` section (plugin-owned by the data loader named in `loader`).
struct DataConfig {
  std::string loader = "jsonl";                    ///< dataloader component
  std::string train_path;                          ///< required: file, folder or glob
  std::optional<std::string> val_path;             ///< separate validation file
  std::optional<std::string> train_shard_pattern;  ///< e.g. "part-{:05d}.jsonl"
  std::string tokenizer = "hf://gpt2";             ///< the reference ("path" of the object form)
  std::string tokenizer_type;                      ///< tokenizer component (type, or inferred)
  std::string tokenizer_options_json;              ///< object form, passed as options_json
  int64_t batch_size = 8;                          ///< sequences per micro-batch, >= 1
  int64_t prefetch_factor = 2;                     ///< batches prepared ahead per worker, >= 1
  int64_t num_workers = 2;                         ///< loader threads, 0 = synchronous
  std::string text_field = "text";                 ///< JSON field (dotted path) holding the text
  std::string on_bad_record = "error";             ///< error | skip
  double val_fraction = 0.0;                       ///< 0 <= f < 1, share of train docs held out
  std::optional<std::string> cache_dir;            ///< token cache folder (loader default if unset)
  bool cross_document_attention = true;            ///< false: attention masked per document
  bool mask_document_boundary = false;             ///< true: the target of each <eos> is ignored (-1)
  bool operator==(const DataConfig&) const = default;
};

/// `optimizer:` section (plugin-owned).
struct OptimizerConfig {
  std::string name = "adamw";
  double lr = 3e-4;                            ///< > 0
  double weight_decay = 0.01;                  ///< >= 0
  std::array<double, 2> betas = {0.9, 0.999};  ///< each in [0, 1)
  double eps = 1e-8;                           ///< > 0
  bool operator==(const OptimizerConfig&) const = default;
};

/// `scheduler:` section (plugin-owned).
struct SchedulerConfig {
  std::string type = "cosine_with_warmup";
  int64_t warmup_steps = 0;            ///< <= training.max_steps
  int64_t stable_steps = 0;            ///< wsd only
  std::optional<int64_t> decay_steps;  ///< wsd: default max_steps - warmup - stable
  double min_lr_ratio = 0.0;           ///< final lr / base lr, in [0, 1]
  double power = 1.0;                  ///< polynomial decay power, > 0
  bool operator==(const SchedulerConfig&) const = default;
};

/// `training:` section (host-owned).
struct TrainingConfig {
  int64_t max_steps = 1000;               ///< optimizer steps, >= 1
  int64_t gradient_accumulation = 1;      ///< micro-batches per step, >= 1
  double clip_grad_norm = 1.0;            ///< global L2 clip, 0 = off
  std::string precision = "fp32";         ///< fp32 (fp16 | bf16 | fp8: not implemented yet)
  double loss_scale = 1.0;                ///< static loss scale (!= 1: not implemented yet)
  bool gradient_checkpointing = false;    ///< true: not implemented yet
  bool sequence_parallel = false;         ///< true: not implemented yet
  int64_t sp_group_size = 1;              ///< divides model.max_seq_len
  bool tensor_parallel = false;           ///< true: not implemented yet
  int64_t tp_group_size = 1;              ///< divides model.d_model
  int64_t eval_every = 500;               ///< steps between evaluations, >= 1
  bool eval_at_start = true;              ///< evaluate before the first step of a fresh run (step 0)
  int64_t save_every = 1000;              ///< steps between checkpoints, >= 1
  int64_t keep_last_n = 3;                ///< checkpoints kept, 0 = all
  int64_t log_every = 10;                 ///< steps between log lines, >= 1
  bool deterministic = false;             ///< bit-reproducible kernels
  int64_t max_consecutive_nonfinite = 5;  ///< skipped non-finite steps before stopping, >= 1
  bool operator==(const TrainingConfig&) const = default;
};

/// `logging:` section (host-owned).
struct LoggingConfig {
  zc_log_level console_log_level = ZC_LOG_INFO;  ///< TRACE|DEBUG|INFO|WARNING(WARN)|ERROR
  bool mlflow = false;                           ///< true: adds the mlflow callback
  bool wandb = false;                            ///< true: not implemented yet
  bool tensorboard = false;                      ///< true: adds the tensorboard callback
  std::string output_dir = "outputs";            ///< run folder = output_dir/experiment_name
  bool operator==(const LoggingConfig&) const = default;
};

/// `profiling:` section (host-owned). schedule is torch.profiler's
/// "wait=1,warmup=2,active=3,repeat=2", parsed into the four counts.
struct ProfilingConfig {
  bool enabled = false;
  std::string schedule = "wait=1,warmup=2,active=3,repeat=2";
  int64_t wait = 1, warmup = 2, active = 3, repeat = 2;
  std::string trace_handler = "disk";  ///< disk (trace.json) or tensorboard (logs/tensorboard/*.pt.trace.json)
  bool profile_memory = false;
  bool profile_shapes = false;
  bool operator==(const ProfilingConfig&) const = default;
};

/// `evaluation:` section (plugin-owned by each evaluator in `plugins`).
struct EvaluationConfig {
  std::vector<std::string> plugins = {"lm"};  ///< evaluator components (canonical)
  std::string split = "val";                  ///< val | train
  int64_t batch_size = 8;                     ///< default: data.batch_size
  int64_t max_batches = 0;                    ///< loader batches per evaluation, 0 = the whole split
  bool operator==(const EvaluationConfig&) const = default;
};

/// `generation:` section (host-owned; zcode-host generate).
struct GenerationConfig {
  std::string strategy = "greedy";  ///< greedy | sample | beam | contrastive
  int64_t max_new_tokens = 64;      ///< >= 1
  double temperature = 1.0;         ///< >= 0 (0 = greedy)
  int64_t top_k = 0;                ///< 0 = off
  double top_p = 1.0;               ///< in (0, 1]
  int64_t num_beams = 1;            ///< >= 1; beam needs >= 2
  double length_penalty = 1.0;      ///< beam score / len^length_penalty
  double penalty_alpha = 0.0;       ///< contrastive degeneration penalty, [0, 1]
  std::optional<uint64_t> seed;     ///< default: the top-level seed
  std::vector<std::string> stop;    ///< stop strings
  bool operator==(const GenerationConfig&) const = default;
};

/// One entry of the `callbacks:` list.
struct CallbackConfig {
  std::string type;          ///< component name (canonical)
  std::string options_json;  ///< the whole entry, passed as options_json
};

/// `model_card:` section.
struct ModelCardConfig {
  std::optional<std::string> template_path;  ///< `template:` Mustache file; built-in when unset
  bool operator==(const ModelCardConfig&) const = default;
};

/// The whole experiment config. Copyable (a deep copy).
class HarnessConfig {
 public:
  /// An empty config (every section at its defaults; data.train_path is
  /// missing, so validate() reports it).
  HarnessConfig();
  HarnessConfig(const HarnessConfig&);
  HarnessConfig& operator=(const HarnessConfig&);
  HarnessConfig(HarnessConfig&&) noexcept;
  HarnessConfig& operator=(HarnessConfig&&) noexcept;
  ~HarnessConfig();

  /// Reads a YAML file (yaml-cpp; YAML 1.2 core scalars: `3e-4`, `.5` are
  /// numbers, only true/false are booleans). Throws ConfigLoadError
  /// ("path: file not found", "path:line:col: message", duplicate keys).
  static HarnessConfig from_yaml(const std::string& path);
  /// Reads a JSON file (RapidJSON). Throws ConfigLoadError with
  /// "path:line:col: message".
  static HarnessConfig from_json(const std::string& path);
  /// By extension (.yaml/.yml, .json), else by content (first non-blank
  /// character '{' means JSON). Throws ConfigLoadError.
  static HarnessConfig from_file(const std::string& path);
  /// Parses `text` (JSON when it starts with '{', else YAML; JSON is also
  /// valid YAML). `origin_name` names it in error messages.
  static HarnessConfig from_string(std::string_view text, std::string origin_name = "<string>");

  /// Applies `--set a.b=value` overrides in order, before validation. The
  /// path is dotted, list items by index (`callbacks[0].every` or
  /// `callbacks.0.every`); the value is a YAML scalar or flow value
  /// (`optimizer.betas=[0.9,0.95]`). Intermediate objects are created. Each
  /// accepted override is recorded (overrides(), and the `overrides:` field
  /// of to_json/to_yaml). Throws ConfigValidationError listing every bad
  /// entry: no '=', an unknown section or host-owned key (with did-you-mean),
  /// an unparsable value, or a path through a non-object. On error nothing is
  /// applied.
  void apply_overrides(const std::vector<std::string>& sets);
  /// The `--set` entries applied so far (also those recorded in a loaded
  /// config's `overrides:` field), as "a.b=value".
  const std::vector<std::string>& overrides() const;

  /// Every validation error, in document order (empty = valid). With a
  /// provider, each plugin-owned section is also checked against its
  /// component's options schema, and a missing component is an error.
  /// Never throws for bad config content.
  std::vector<ConfigError> check(const SchemaProvider* provider = nullptr) const;
  /// check(), then throws ConfigValidationError when there are errors;
  /// otherwise fills defaults and the typed tree.
  void validate(const SchemaProvider* provider = nullptr);
  /// True after a successful validate().
  bool validated() const;

  /// One section as a JSON object with defaults filled ("{}" when the
  /// section is unknown). For "data.tokenizer" the tokenizer's options
  /// object. For "callbacks" a JSON array.
  std::string section_json(std::string_view section) const;
  /// The options of evaluator `name`: the `evaluation` section without the
  /// subsections of the other evaluators listed in evaluation.plugins (each
  /// evaluator may have its own, under its name: `evaluation.generation`),
  /// so every evaluator's schema sees the shared keys and its own subsection.
  std::string evaluator_options_json(std::string_view name) const;
  /// The whole resolved config (defaults filled, overrides applied, plus an
  /// `overrides` list) as compact JSON: the config_json given to plugins.
  std::string to_json() const;
  /// The same as YAML, for the run folder's config.yaml; from_string() of it
  /// gives back the same config.
  std::string to_yaml() const;
  /// to_yaml() with every relative file path made absolute against `base`
  /// (the working directory the paths are relative to, as in torchtitan and
  /// Lightning): plugin_path entries, data.train_path, data.val_path,
  /// data.cache_dir, data.tokenizer (string or .path), logging.output_dir,
  /// model_card.template. References with a scheme (`hf://gpt2`, `s3://...`)
  /// are left as written. The run folder's config.yaml is this, so it still
  /// names the same files when read from another folder.
  std::string to_yaml_absolute_paths(const std::filesystem::path& base) const;
  /// True when `key` (a dotted path as to_yaml_absolute_paths lists them,
  /// e.g. "data.tokenizer.path") holds a file path of the config.
  static bool is_path_field(std::string_view key);
  /// Where the config came from (file path or origin_name).
  const std::string& origin() const;

  // Typed accessors (meaningful after validate()).
  const std::string& experiment_name() const;           ///< default "zcode_run"
  uint64_t seed() const;                                ///< default 42
  const std::vector<std::string>& plugin_path() const;  ///< default []
  const HardwareConfig& hardware() const;
  const DistributedConfig& distributed() const;
  const ModelConfig& model() const;
  const DataConfig& data() const;
  const OptimizerConfig& optimizer() const;
  const SchedulerConfig& scheduler() const;
  const TrainingConfig& training() const;
  const LoggingConfig& logging() const;
  const ProfilingConfig& profiling() const;
  const EvaluationConfig& evaluation() const;
  const GenerationConfig& generation() const;
  const std::vector<CallbackConfig>& callbacks() const;
  const ModelCardConfig& model_card() const;

  /// Component-name canonical form: lower case, '-' -> '_' ("Zerosum-SGD"
  /// -> "zerosum_sgd"). Alias GLM5pt2 is NOT resolved here (see
  /// canonical_model_type).
  static std::string canonical_name(std::string_view name);
  /// canonical_name plus the model alias "glm5pt2" -> "glm52".
  static std::string canonical_model_type(std::string_view name);
  /// The built-in JSON Schema of the host-owned fields and the base fields of
  /// plugin-owned sections (with defaults and descriptions).
  static const std::string& builtin_schema_json();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zcode
