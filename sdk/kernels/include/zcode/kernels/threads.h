// zcode/kernels/threads.h: one compute pool for our OpenMP loops and OpenBLAS.
#pragma once

#include <string>

namespace zcode::kernels {

/// Sets the thread count of the calling thread's OpenMP loops and of
/// OpenBLAS (a global setting). Call at the top of every entry point, since
/// the host may call from different threads. n < 1 is treated as 1.
void set_num_threads(int n);

/// Sets OpenBLAS's thread count. OpenBLAS's sgemm result depends on its
/// thread count (measured: 1 vs 2 threads differ in the last bits), ours do
/// not. OpenBLAS's OpenMP build (Debian's openblas-openmp, what ZCode runs)
/// also calls omp_set_num_threads with it, so it sets the calling thread's
/// OpenMP loops too (checked 2026-12-07): set those after it when they should
/// differ.
void set_blas_num_threads(int n);

/// True when a sgemm called inside one of our parallel loops would start
/// threads of its own: OpenBLAS's pthread build on more than one thread (its
/// OpenMP build runs single-threaded inside a parallel region).
bool blas_spawns_threads();

/// "openmp", "pthread" or "sequential": which OpenBLAS build was loaded
/// (openblas_get_parallel). With "pthread", OpenBLAS and OpenMP run two
/// pools that spin against each other; see CMakeLists.txt.
std::string blas_threading();

/// OpenBLAS's kernel family (openblas_get_corename), e.g. "SkylakeX".
std::string blas_core();

/// A one-line warning when OpenBLAS runs generic kernels on a CPU that has
/// AVX2/AVX-512 (OpenBLAS 0.3.21 detects the family-6 model-207 Xeon of our
/// build machine as "Prescott": sgemm 3 instead of ~24 GFLOP/s on 2 loaded
/// cores, measured). Empty when all is well. The fix is the environment
/// variable OPENBLAS_CORETYPE (read when OpenBLAS loads), e.g. SkylakeX.
std::string blas_core_warning();

}  // namespace zcode::kernels
