// core/src/resume.h: what a resumed run checks of its config against the
// checkpoint's (Engine::run with --resume-from).
#pragma once

#include <string>
#include <vector>

namespace zcode {
class SchemaProvider;  // zcode/core/config.h (the Registry is one)
}

namespace zcode::core {

/// The differences between a checkpoint's config and a resumed run's, one
/// line per flattened field ("a.b[0].c: checkpoint has X, config has Y").
struct ConfigDiff {
  /// Fields a checkpoint can follow (learning rate, logging, ...): warned about.
  std::vector<std::string> changed;
  /// Architecture and tokenizer fields (model.*, except the evaluation-only
  /// ones, and data.tokenizer*): the run cannot resume.
  std::vector<std::string> fatal;

  /// The one-line error for a non-empty `fatal`: its first line, then
  /// "(and N more)".
  std::string fatal_message() const;
};

/// Compares `checkpoint_json` (state.json's "config") with `config_json`
/// (this run's HarnessConfig::to_json()). The checkpoint's config is first
/// resolved against today's schemas (validated with `schemas`), so a key
/// added since it was written counts only when this run's value differs from
/// that key's default; one that no longer validates is compared as written.
/// File paths naming the same file (relative vs absolute) are equal; the
/// "overrides" record is not compared.
ConfigDiff diff_resume_config(const std::string& checkpoint_json, const std::string& config_json,
                              const SchemaProvider* schemas);

}  // namespace zcode::core
