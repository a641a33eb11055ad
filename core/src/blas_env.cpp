// See blas_env.h.
#include <zcode/core/blas_env.h>

#include <cstdlib>
#include <mutex>

namespace zcode {

std::string prepare_blas_environment() {
  static std::once_flag once;
  static std::string what;
  std::call_once(once, [] {
    if (const char* set = std::getenv("OPENBLAS_CORETYPE"); set && *set) {
      what = std::string("OPENBLAS_CORETYPE=") + set + " (from the environment)";
      return;
    }
    if (const char* keep = std::getenv("ZCODE_KEEP_BLAS_CORETYPE"); keep && *keep) {
      what = "OPENBLAS_CORETYPE left unset (ZCODE_KEEP_BLAS_CORETYPE)";
      return;
    }
    const char* core = nullptr;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
      core = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) core = "Haswell";
    if (!core) {
      what = "OPENBLAS_CORETYPE left unset (no AVX2/AVX-512: OpenBLAS detects the core itself)";
      return;
    }
    setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/0);
    what = std::string("OPENBLAS_CORETYPE=") + core + " (set by ZCode from the CPU's features)";
  });
  return what;
}

}  // namespace zcode
