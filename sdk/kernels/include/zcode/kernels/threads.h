// zcode/kernels/threads.h: one compute pool for our OpenMP loops and OpenBLAS.
#pragma once

#include <string>

namespace zcode::kernels {

/// Sets the thread count of the calling thread's OpenMP loops and of
/// OpenBLAS (a global setting). Call at the top of every entry point, since
/// the host may call from different threads. n < 1 is treated as 1.
void set_num_threads(int n);

/// Sets only OpenBLAS's thread count. OpenBLAS's sgemm result depends on its
/// thread count (measured: 1 vs 2 threads differ in the last bits), ours do not.
void set_blas_num_threads(int n);

/// "openmp", "pthread" or "sequential": which OpenBLAS build was loaded
/// (openblas_get_parallel). With "pthread", OpenBLAS and OpenMP run two
/// pools that spin against each other; see CMakeLists.txt.
std::string blas_threading();

}  // namespace zcode::kernels
