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

/// Makes `dir` ready for a run. A used folder is refused unless `resume`
/// (kept as is) or `overwrite` (its previous run files are deleted:
/// checkpoints/, logs/, metrics.json, model_card.md, config.yaml, trace.json).
/// Throws RunDirError:
/// `outputs/x: run folder already used (found checkpoints/); pass --resume-from latest to continue or --overwrite to start over`.
void prepare(const std::filesystem::path& dir, bool resume, bool overwrite);

/// JSON object describing where the run happened: host version and git commit,
/// ABI version, build type and compiler, dependency versions, OS (uname), CPU
/// model (/proc/cpuinfo "model name") and logical core count, the thread count
/// used, and the hostname.
std::string environment_json(int num_threads);

/// The CPU model name ("unknown" when /proc/cpuinfo has none).
std::string cpu_model();

}  // namespace zcode::rundir
