#include <zcode/kernels/isa.h>

namespace zcode::kernels {

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return true;
#if defined(__x86_64__)
    case Isa::kAvx2Fma: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512f: return __builtin_cpu_supports("avx512f");
#else
    default: return false;
#endif
  }
  return false;
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::kAvx512f)   ? Isa::kAvx512f
                          : isa_supported(Isa::kAvx2Fma) ? Isa::kAvx2Fma
                                                         : Isa::kScalar;
  return best;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512f: return "avx512f";
    case Isa::kAvx2Fma: return "avx2+fma";
    case Isa::kScalar: return "scalar";
  }
  return "?";
}

}  // namespace zcode::kernels
