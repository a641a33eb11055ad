// zcode/kernels/blas_env.h: the one choice of OpenBLAS's kernel family
// (OPENBLAS_CORETYPE), made for the product (zcode-host, before any plugin
// loads OpenBLAS) and for the benchmarks (which link OpenBLAS directly and so
// re-execute themselves once with it set). Header-only: core uses it without
// linking OpenBLAS.
#pragma once

#include <cstdlib>
#include <mutex>
#include <string>

namespace zcode::kernels {

/// The OPENBLAS_CORETYPE ZCode picks from the CPU's own flags, or nullptr
/// (leave OpenBLAS its detection):
///   AVX-512 F+BW+DQ+VL → "SkylakeX";  AVX2+FMA → "Haswell".
/// Why these, not OpenBLAS's own pick: Debian 12's OpenBLAS 0.3.21 does not
/// know newer Xeons (family 6 model 207) and falls back to "Prescott" (generic
/// SSE3, ~8× slower). Where it does know the CPU its pick is the same sgemm:
/// on the 2-core AMD EPYC Zen 4 VM (2026-12-02) OpenBLAS picks "Cooperlake",
/// whose sgemm is the SkylakeX kernel (Cooperlake adds bf16 kernels only);
/// sgemm 2048³ measured SkylakeX vs Cooperlake vs Haswell in
/// plugins/model/glm52/README.md ("OpenBLAS kernel"). One rule on every CPU
/// keeps the product and the benchmarks on the same kernels.
inline const char* blas_coretype_for_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

/// What prepare_blas_environment did.
struct BlasEnvironment {
  std::string description;  ///< one line for the debug log / a benchmark's header
  bool set_here = false;    ///< true when this call set OPENBLAS_CORETYPE (it was unset)
};

/// Sets OPENBLAS_CORETYPE for this process to blas_coretype_for_cpu() when it
/// is unset and ZCODE_KEEP_BLAS_CORETYPE is not set; a value the user or the
/// machine already set is never changed. Runs once per binary (a plugin's
/// copy of this inline function runs its own once, and finds the variable set).
///
/// OpenBLAS reads OPENBLAS_CORETYPE once, when the library initialises: call
/// this before the first dlopen of a plugin that links it (the registry
/// does), or, in a binary linked against OpenBLAS, re-execute the binary when
/// set_here is true (bench_train_step does).
inline BlasEnvironment prepare_blas_environment() {
  static std::once_flag once;
  static BlasEnvironment what;
  std::call_once(once, [] {
    if (const char* set = std::getenv("OPENBLAS_CORETYPE"); set && *set) {
      what.description = std::string("OPENBLAS_CORETYPE=") + set + " (from the environment)";
      return;
    }
    if (const char* keep = std::getenv("ZCODE_KEEP_BLAS_CORETYPE"); keep && *keep) {
      what.description = "OPENBLAS_CORETYPE left unset (ZCODE_KEEP_BLAS_CORETYPE)";
      return;
    }
    const char* core = blas_coretype_for_cpu();
    if (!core) {
      what.description = "OPENBLAS_CORETYPE left unset (no AVX2/AVX-512: OpenBLAS detects the core itself)";
      return;
    }
    setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/0);
    what.description = std::string("OPENBLAS_CORETYPE=") + core + " (set by ZCode from the CPU's features)";
    what.set_here = true;
  });
  return what;
}

}  // namespace zcode::kernels
