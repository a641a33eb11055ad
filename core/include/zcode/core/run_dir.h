// zcode/core/run_dir.h: the run folder `<logging.output_dir>/<experiment_name>/`
// and the environment snapshot recorded in checkpoints and the model card.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace zcode::rundir {

/// A run folder that cannot be used (already used, not writable), one line;
/// the CLI exits 2.
class RunDirError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// True when `dir` already holds a run (config.yaml, metrics.json or a
/// checkpoints/ folder).
bool is_used(const std::filesystem::path& dir);

/// The first line of the config.yaml that ZCode writes into a run folder
/// (followed by "; from PATH" when the config came from a file). A
/// config.yaml without it was written by someone else and is never reused.
inline constexpr const char* kResolvedConfigHeader = "# Resolved ZCode config (defaults and --set overrides applied)";

/// True when `dir` holds only what a start that failed before its first
/// step leaves (see discard_failed_start): a config.yaml whose first line is
/// kResolvedConfigHeader, logs/console.log, at most an empty checkpoints/
/// folder, and, from a start killed after its step-0 evaluation, a
/// metrics.json whose train history is empty (with model_card.md and
/// trace.json). Such a folder does not block a new run.
bool is_failed_start(const std::filesystem::path& dir);

/// Makes `dir` ready for a run. A used folder is refused unless `resume`
/// (kept as is), `overwrite` (its previous run files are deleted:
/// checkpoints/, logs/, metrics.json, model_card.md, config.yaml, trace.json)
/// or it is a failed start (is_failed_start: reused, config.yaml rewritten
/// by the caller, logs/console.log appended to). Returns true in that last
/// case, so the caller can say so. Throws RunDirError:
/// `outputs/x: run folder already used (found checkpoints/); pass --resume-from latest to continue or --overwrite to
/// start over`.
bool prepare(const std::filesystem::path& dir, bool resume, bool overwrite);

/// After a run that failed before its first optimizer step: removes what
/// its start wrote besides config.yaml and logs/ (metrics.json with the
/// step-0 evaluation, model_card.md, trace.json, an empty checkpoints/), so
/// that the folder is a failed start that a retry reuses. Never removes a
/// checkpoint. Returns false (and removes nothing) when `dir` holds
/// anything else.
bool discard_failed_start(const std::filesystem::path& dir);

/// JSON object describing where the run happened: host version and git commit,
/// ABI version, build type and compiler, dependency versions, OS (uname), CPU
/// model (/proc/cpuinfo "model name") and logical core count, the thread count
/// used, and the hostname.
std::string environment_json(int num_threads);

/// The CPU model name ("unknown" when /proc/cpuinfo has none).
std::string cpu_model();

}  // namespace zcode::rundir
