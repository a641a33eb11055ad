// zcode/kernels/isa.h: the instruction-set variants of our hand-written
// kernels (gemm_small_m.h, head_logits.h), chosen at run time from the CPU's
// features, so one binary runs the best variant on any x86-64 machine.
#pragma once

namespace zcode::kernels {

/// The variants, best last. kAvx2Fma needs AVX2 and FMA; kAvx512f, AVX-512F.
enum class Isa { kScalar, kAvx2Fma, kAvx512f };

/// Whether this CPU runs `isa` (__builtin_cpu_supports; kScalar always).
bool isa_supported(Isa isa);

/// The best variant this CPU runs, found once per process.
Isa best_isa();

/// "scalar", "avx2+fma" or "avx512f", for the benchmarks' headers.
const char* isa_name(Isa isa);

}  // namespace zcode::kernels
