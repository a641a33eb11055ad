// zcode/core/preflight.h: what `run` needs from this machine, checked before
// anything is trained, allocated or written (`zcode-host validate` runs the
// same checks). HarnessConfig::validate stays a pure schema check: these read
// the filesystem.
#pragma once

#include <zcode/core/config.h>

#include <zcode/abi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zcode {

/// Which stages' files the command will open.
struct EnvironmentCheckOptions {
  /// The command trains: data.train_path must resolve, and so must the
  /// validation split when evaluation runs (run evaluates every
  /// training.eval_every steps and at the end).
  bool training = true;
};

/// Checks the validated `cfg` against the filesystem, every problem at once
/// (document order), each one line naming the config path, the value and
/// what was expected:
///   - data.train_path, data.val_path and a local data.tokenizer: remote
///     schemes (s3://, gs://, http://...) are refused (the bundled loader
///     reads local files), a plain path must exist and a glob must match.
///     A path not found says where it looked, that relative paths are
///     relative to the current folder, and whether the file exists beside
///     the config file instead.
///   - model_card.template: must exist when set.
///   - evaluation with split `val` needs a validation split: data.val_path or
///     data.val_fraction > 0.
/// hf://NAME tokenizer references are the tokenizer plugin's to resolve (the
/// Engine's preflight creates the tokenizer). Never throws for bad content.
std::vector<ConfigError> check_environment(const HarnessConfig& cfg, const EnvironmentCheckOptions& options = {});

/// The message of a local path that does not exist: "'p' not found: looked
/// for /abs/p (relative paths are relative to the current folder, /cwd)",
/// plus "; it exists beside the config file, as /cfgdir/p" when it does.
/// `config_origin` is the config file's path ("" when the config has none).
std::string path_not_found_message(const std::string& path, const std::string& config_origin);

struct Component;  // zcode/core/registry.h

/// A run's memory estimate (ABI 1.3 estimate_memory slots), bytes. A part is
/// nullopt when its plugin cannot say (built for ABI 1.2 or older, or it
/// returns ZC_ERR_UNSUPPORTED); `unknown` then names which and why.
struct MemoryEstimate {
  std::optional<uint64_t> parameters, gradients, optimizer_state, activations;
  std::vector<std::string> unknown;  ///< e.g. "optimizer state (optimizer 'x' ... has no estimate_memory)"
  /// Sum of the known parts.
  uint64_t known_total() const;
  /// "parameters 12.0 MiB, gradients 12.0 MiB, optimizer state 24.0 MiB,
  /// activation workspace 300.0 MiB: total 348.0 MiB" (unknown parts named).
  std::string describe() const;
};

/// Asks `model` (with `model_args`, as for its create) and, when given,
/// `optimizer` (with `optimizer_args`; its `model` field is replaced by a
/// shape-only model listing the parameters the model's estimate put) for
/// the bytes they will allocate. Throws PluginError when a plugin's
/// estimate fails with anything but ZC_ERR_UNSUPPORTED.
MemoryEstimate estimate_run_memory(const Component& model, const zc_create_args& model_args, const Component* optimizer,
                                   zc_create_args optimizer_args);

/// Memory this process may still allocate, bytes: /proc/meminfo
/// MemAvailable, lowered to the cgroup's limit minus its usage when the
/// process runs in a memory-limited cgroup (v2 memory.max/memory.current,
/// or v1 memory.limit_in_bytes/memory.usage_in_bytes). nullopt when none of
/// them can be read.
std::optional<uint64_t> available_memory_bytes();

}  // namespace zcode
