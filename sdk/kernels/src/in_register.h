// in_register.h (private to the kernels): keeps a loaded vector in a register.
//
// GCC's tunings for AMD's Zen (what -march=native picks there: znver2 and
// later) fold a load into every FMA that reads the loaded value, and for AVX2
// code so do its generic x86-64-v3 and haswell tunings; a register tile that
// reuses one vector for R rows then reads it R times instead of once. Measured
// on gemm_packed's 4 × 4 tile (2-core AMD EPYC Zen 5 KVM guest, GCC 12,
// 2026-12-07): the decode head at 32 rows ran 67 GFLOP/s on one core with the
// folded loads, 156 with this. An empty asm that takes the value as an in-out
// register operand makes it opaque to the folding. The FMAs and their order
// do not change, so neither do the bits.
//
// A macro, not a function: it must expand inside the function that carries
// the vector ISA's target attribute. A function of its own has no such
// attribute, so without inlining (-O0, the debug preset) GCC finds no
// register for a __m512 operand, nor clang on a machine without AVX-512.
// "v" is any SSE/AVX register, zmm16-31 included.
#pragma once

#if defined(__GNUC__)
#define ZC_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define ZC_IN_REGISTER(v) ((void)0)
#endif
