// bench/common/glm52_bench.h: what the glm52 benchmarks share, so that they
// measure the same models: bench_train_step's dense and MoE configurations
// (the dims of the PyTorch peer torch_lm_bench.py), the OpenBLAS kernel
// every process of a paired run gets alike (the product's), and the CPU's
// name for the printed header.
#pragma once

#include <zcode/kernels/blas_env.h>
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

/// The OpenBLAS kernel the product picks (zcode::kernels::
/// prepare_blas_environment, one rule for zcode-host and every benchmark),
/// for this process and the peers it starts alike. OpenBLAS reads
/// OPENBLAS_CORETYPE when the binary loads, so when the rule sets it here the
/// binary execs itself once with it set; returns when nothing needed setting
/// (already set by the environment, or by the first run).
inline void use_the_products_blas_kernel(const char* tool, char** argv) {
  const zcode::kernels::BlasEnvironment env = zcode::kernels::prepare_blas_environment();
  if (!env.set_here) return;
  std::printf("%s: %s; restarting so that OpenBLAS loads with it (peers get it too)\n", tool, env.description.c_str());
  std::fflush(stdout);
  execv("/proc/self/exe", argv);
  std::perror("execv /proc/self/exe");
  std::exit(1);
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
