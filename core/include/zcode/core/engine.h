// zcode/core/engine.h: the Engine, which runs one experiment from a validated
// HarnessConfig: setup -> train/eval -> checkpoint -> teardown.
//
//   auto cfg = zcode::HarnessConfig::from_yaml("config.yaml");
//   zcode::Engine engine(cfg);
//   return engine.run();
//
// Stages are resolved from the config through the plugin registry (see the
// integration contract in DESIGN.md). The run folder is
// `<logging.output_dir, default "outputs">/<experiment_name>/`:
//   config.yaml            resolved config (defaults and --set overrides applied)
//   logs/console.log       every log line at DEBUG and above
//   checkpoints/step_N/    model.safetensors, optimizer.safetensors, state.json
//   checkpoints/latest     text file naming the newest complete step folder
//   metrics.json           final and best train/val metrics + history
//   model_card.md          rendered by the model_card callback
//
// Exit codes (DESIGN.md conventions): 0 success, 1 runtime failure, 2 usage or
// config error, 130 interrupted (SIGINT/SIGTERM: the current step finishes, a
// checkpoint is written, then run() returns 130 — the shell's 128+SIGINT
// convention, so scripts can tell "stopped on request" from "failed").
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <zcode/abi.h>

namespace zcode {

class HarnessConfig;  // zcode/core/config.h

/// Exit codes returned by Engine's entry points.
enum ExitCode : int {
  kExitOk = 0,
  kExitRuntimeError = 1,
  kExitUsageError = 2,
  kExitInterrupted = 130,
};

/// Command-line level choices that are not part of the experiment config.
struct EngineOptions {
  /// Extra plugin folders (--plugin-path), searched before the bundled ones.
  std::vector<std::string> plugin_paths;
  /// Accept plugin folders that are group/world-writable.
  bool allow_insecure_plugin_path = false;
  /// Reuse a run folder that already holds a run (its checkpoints are removed).
  bool overwrite = false;
  /// "" (fresh run), a checkpoint folder `.../checkpoints/step_N`, or "latest"
  /// (the newest complete checkpoint of this config's run folder).
  std::string resume_from;
  /// The `--set key=value` overrides, as given; recorded in state.json and in
  /// the resolved config.yaml header (they are already applied to the config).
  std::vector<std::string> overrides;
  /// Path of the config file the run came from ("" when built in code); only
  /// for messages and the record.
  std::string config_path;
  /// Install SIGINT/SIGTERM handlers for the duration of run() (the CLI does;
  /// an embedding application may keep its own).
  bool install_signal_handlers = true;
};

/// An in-process observer of a run: the events callback plugins receive
/// through the ABI (zc_event), for programs that embed the engine (the Python
/// bindings' callbacks). Called on the thread running the engine, after the
/// callback plugins, with the same event.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  /// `kind` a zc_event_kind (ZC_EVENT_SETUP, STEP_END, EVAL_END, CHECKPOINT,
  /// TEARDOWN); `metrics_json` the event's JSON object (CHECKPOINT: {"path",
  /// "step"}). Returns ZC_CALLBACK_* flags (0: go on). An exception fails the
  /// run: its message is logged as one error line, run() returns 1.
  virtual uint32_t on_event(uint32_t kind, uint64_t step, const std::string& metrics_json) = 0;
};

/// Runs one experiment. Not copyable; one Engine per thread.
class Engine {
 public:
  /// Takes a validated config. Nothing is loaded or written until an entry
  /// point is called.
  explicit Engine(HarnessConfig cfg, EngineOptions opts = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Trains for training.max_steps optimizer steps (or resumes), evaluates
  /// before the first step of a fresh run (training.eval_at_start, recorded
  /// as step 0), every training.eval_every steps and at the end, writes checkpoints every
  /// training.save_every steps and at the end, then renders the model card.
  /// Errors are logged as one line; returns an ExitCode.
  int run();

  /// Evaluates the checkpoint folder `checkpoint` (".../step_N" or the run
  /// folder's "latest") on `split` ("val" or "train") with the config's
  /// evaluators, data loader and tokenizer, without training. Prints the
  /// metrics; writes them as JSON to `out_json` when it is not "".
  int evaluate(const std::string& checkpoint, const std::string& split, const std::string& out_json);
  /// The same, also giving the metrics (name, value, in the order the
  /// evaluators reported them) to `metrics` when it returns 0.
  int evaluate(const std::string& checkpoint, const std::string& split, const std::string& out_json,
               std::vector<std::pair<std::string, double>>* metrics);

  /// Runs `steps` training steps without writing checkpoints and writes a
  /// Chrome trace (`trace.json`, chrome://tracing format) of the engine's
  /// phases (data wait, forward/backward, clip, optimizer step, eval) into
  /// the run folder; returns an ExitCode.
  int profile(int steps);

  /// What run() checks first, before anything is trained, allocated or
  /// written (zcode-host validate calls it too): the config's files and
  /// paths (check_environment in zcode/core/preflight.h), the tokenizer
  /// resolves (it is created), and the memory estimate of the model and
  /// optimizer (parameters, gradients, optimizer state, activation
  /// workspace; logged) fits the machine's available memory. Throws
  /// ConfigValidationError listing every file problem, PluginError for a
  /// tokenizer that cannot be created, and RunFailure-like std::runtime_error
  /// naming the knobs (data.batch_size, model.max_seq_len,
  /// training.gradient_accumulation) when the estimate does not fit.
  void preflight();

  /// The run folder (valid after run/profile started).
  const std::filesystem::path& run_dir() const;

  /// Adds an observer (borrowed: it must outlive the calls that run).
  void add_observer(EngineObserver* observer);

  /// After run(): the stages stay until the Engine is destroyed. The model
  /// and tokenizer stages of the last run ({NULL, NULL} before one), for
  /// embedding programs (parameters, forward_logprobs, encode). One thread
  /// at a time, as every stage (abi.h).
  zc_stage_ref model() const;
  zc_stage_ref tokenizer() const;
  /// Writes a checkpoint of the current state after run() (the newest one,
  /// when it already holds this step) and returns its folder. Throws
  /// std::runtime_error before a run, or when the write fails.
  std::filesystem::path save_checkpoint();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zcode
