// in_register.h (private to the kernels): keeps a loaded vector in a register.
//
// GCC's Zen tunings (what -march=native picks on AMD: znver3 and later) fold
// a load into every FMA that reads the loaded value, so a register tile that
// reuses one vector for R rows reads it R times instead of once. Measured on
// gemm_packed's 4 × 4 tile (2-core AMD EPYC Zen 5 KVM guest, GCC 12,
// 2026-12-07): the decode head at 32 rows ran 67 GFLOP/s on one core with the
// folded loads, 156 with this. An empty asm that takes the value as an in-out
// register operand makes it opaque to the folding. The FMAs and their order
// do not change, so neither do the bits.
#pragma once

namespace zcode::kernels {

template <class V>
inline void in_register(V& v) {
#if defined(__GNUC__)
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}

}  // namespace zcode::kernels
