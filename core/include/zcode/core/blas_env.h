// zcode/core/blas_env.h: choose OpenBLAS's kernel family before any plugin
// loads OpenBLAS.
#pragma once

#include <string>

namespace zcode {

/// Sets OPENBLAS_CORETYPE for this process when it is unset, the CPU supports
/// AVX-512 (F, BW, DQ, VL → "SkylakeX") or AVX2+FMA ("Haswell"), and
/// ZCODE_KEEP_BLAS_CORETYPE is not set. Runs once; later calls return the
/// first call's description.
///
/// Why: OpenBLAS reads OPENBLAS_CORETYPE once, when the library is loaded (a
/// plugin's dlopen). Debian 12's OpenBLAS 0.3.21 does not know newer CPUs and
/// falls back to its generic "Prescott" kernels: on the 2-core AVX-512 Xeon
/// these machines have, the quickstart's training step ran at ~250 tokens/s
/// instead of ~2,300 tokens/s with the same losses to every printed digit.
/// A value the user or the machine already set is never changed.
///
/// Returns a one-line description of what was done (for the debug log).
std::string prepare_blas_environment();

}  // namespace zcode
