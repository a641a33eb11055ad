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

std::string blas_threading() {
  switch (openblas_get_parallel()) {
    case 0: return "sequential";
    case 1: return "pthread";
    case 2: return "openmp";
    default: return "unknown";
  }
}

}  // namespace zcode::kernels
