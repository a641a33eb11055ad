#include <zcode/kernels/threads.h>

#include <cblas.h>
#include <omp.h>

namespace zcode::kernels {

void set_num_threads(int n) {
  if (n < 1) n = 1;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

void set_blas_num_threads(int n) { openblas_set_num_threads(n < 1 ? 1 : n); }

bool blas_spawns_threads() { return openblas_get_parallel() == 1 && openblas_get_num_threads() > 1; }

std::string blas_threading() {
  switch (openblas_get_parallel()) {
    case 0: return "sequential";
    case 1: return "pthread";
    case 2: return "openmp";
    default: return "unknown";
  }
}

std::string blas_core() {
  const char* c = openblas_get_corename();
  return c ? c : "unknown";
}

std::string blas_core_warning() {
  const std::string core = blas_core();
  if (core != "Prescott" && core != "Core2" && core != "Nehalem" && core != "Sandybridge") return "";
  const char* want = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                     : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                       : nullptr;
  if (!want) return "";
  return "OpenBLAS runs its generic '" + core + "' kernels on a CPU with " +
         (std::string(want) == "SkylakeX" ? "AVX-512" : "AVX2") +
         " (misdetected, ~8x slower GEMMs): set OPENBLAS_CORETYPE=" + want + " in the environment before starting";
}

}  // namespace zcode::kernels
