// bench/common/glm52_bench.h: what the glm52 benchmarks share, so that they
// measure the same models: bench_train_step's dense and MoE configurations
// (the dims of the PyTorch peer torch_lm_bench.py), the OpenBLAS core fix
// every process of a paired run gets alike, and the CPU's name for the
// printed header.
#pragma once

#include <zcode/kernels/threads.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace zcode::bench {

/// Dense: vocab 50257, 4 layers, d 256, 4 heads; GLU hidden 683 ≈ the peer's
/// 4·d GELU MLP in parameters (3·683 ≈ 8·256). `model` options (JSON) for
/// glm52::Config::resolve.
inline constexpr const char* kDenseJson =
    R"({"vocab_size": 50257, "d_model": 256, "n_layers": 4, "n_heads": 4, "ffn_hidden": 683,
    "first_dense_layers": 4, "max_seq_len": 256})";
/// MoE: the same trunk with 8 SiLU-GLU experts of hidden 512, top-2, dropless
/// in training (capacity_factor 0), every layer MoE.
inline constexpr const char* kMoeJson =
    R"({"vocab_size": 50257, "d_model": 256, "n_layers": 4, "n_heads": 4, "moe_experts": 8,
    "moe_top_k": 2, "moe_ffn_hidden": 512, "first_dense_layers": 0, "capacity_factor": 0, "moe_aux_loss_coef": 0.01,
    "max_seq_len": 256})";

/// OpenBLAS misdetects some CPUs as "Prescott" (generic kernels, ~8x slower,
/// see zcode/kernels/threads.h). Fixes it for this process and the peers it
/// starts alike: sets OPENBLAS_CORETYPE (SkylakeX with AVX-512, else Haswell)
/// and execs the binary again (OpenBLAS reads it at load time). Returns when
/// nothing needs fixing or OPENBLAS_CORETYPE is already set.
inline void fix_openblas_core(const char* tool, char** argv) {
  if (zcode::kernels::blas_core_warning().empty() || std::getenv("OPENBLAS_CORETYPE")) return;
  const char* core = __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell";
  std::printf("%s: OpenBLAS detected '%s'; restarting with OPENBLAS_CORETYPE=%s (peers get it too)\n", tool,
              zcode::kernels::blas_core().c_str(), core);
  std::fflush(stdout);
  setenv("OPENBLAS_CORETYPE", core, 1);
  execv("/proc/self/exe", argv);
}

/// The first "model name" of /proc/cpuinfo ("unknown CPU" when there is none).
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      const size_t b = c == std::string::npos ? c : line.find_first_not_of(" \t", c + 1);
      if (b != std::string::npos) return line.substr(b);
    }
  return "unknown CPU";
}

}  // namespace zcode::bench
