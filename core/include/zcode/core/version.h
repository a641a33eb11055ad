// zcode/core/version.h: what `zcode-host --version` prints, and the facts
// checkpoints record about the build.
#pragma once

#include <string>

namespace zcode {

/// The project version, e.g. "0.1.0".
const char* version_string();
/// Short git commit of the build ("unknown" outside a git checkout).
const char* git_commit();

/// The multi-line `--version` text: version, plugin ABI version, git commit,
/// build type, compiler, sanitizers, backends (cpu; whether a CUDA toolkit
/// was found at build time — CUDA kernels are not implemented yet) and the
/// versions of the libraries ZCode was built with.
std::string version_text();

}  // namespace zcode
