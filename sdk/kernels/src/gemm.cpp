#include <zcode/kernels/gemm.h>

#include <zcode/kernels/gemm_avx512.h>
#include <zcode/kernels/isa.h>
#include <zcode/kernels/threads.h>

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <mutex>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace zcode::kernels {

namespace {

// OpenBLAS's AVX-512 kernel families. Compared without case: a DYNAMIC_ARCH
// build names them "SkylakeX", a build for one target may say "SKYLAKEX".
bool blas_core_is_avx512(const std::string& core) {
  for (const char* k : {"skylakex", "cooperlake", "sapphirerapids"})
    if (core.size() == std::strlen(k) &&
        std::equal(core.begin(), core.end(), k, [](char a, char b) { return std::tolower(uint8_t(a)) == b; }))
      return true;
  return false;
}

struct EngineChoice {
  GemmEngine engine;
  std::string description;
};

EngineChoice choose_engine() {
  const char* env = std::getenv("ZCODE_GEMM");
  const std::string want = env ? env : "";
  const std::string core = blas_core();
  const bool avx512 = isa_supported(Isa::kAvx512f);
  const bool blas_avx512 = blas_core_is_avx512(core);
  std::string why = "OpenBLAS kernel " + core + "; ZCODE_GEMM" + (env ? "=" + want : std::string(" unset"));
  if (want == "openblas") return {GemmEngine::kOpenBlas, "OpenBLAS sgemm (" + why + ")"};
  if (!want.empty() && want != "auto" && want != "avx512") {
    std::fprintf(stderr, "zcode: ZCODE_GEMM='%s' is not one of openblas, avx512, auto; using auto\n", want.c_str());
    why += ", not one of openblas, avx512, auto: auto";
  }
  const bool ours = avx512 && (want == "avx512" || !blas_avx512);
  if (ours) return {GemmEngine::kAvx512, "zcode avx512 (" + why + ")"};
  return {GemmEngine::kOpenBlas,
          std::string("OpenBLAS sgemm (") + (avx512 ? "" : "no AVX-512F on this CPU; ") + why + ")"};
}

EngineChoice& engine_choice() {
  static EngineChoice choice = choose_engine();
  return choice;
}

// The engine gemm() runs: the choice above until set_gemm_engine changes it.
// Relaxed is enough: the header's contract is that no GEMM runs while it
// changes.
std::atomic<int>& current_engine() {
  static std::atomic<int> e{static_cast<int>(engine_choice().engine)};
  return e;
}

template <class T>
void scale_only(int M, int N, T beta, T* C, int ldc) {
  if (beta == T(1)) return;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      C[static_cast<long>(i) * ldc + j] = beta == T(0) ? T(0) : C[static_cast<long>(i) * ldc + j] * beta;
}
}  // namespace

std::mutex& description_mutex() {
  static std::mutex m;
  return m;
}

GemmEngine gemm_engine() { return static_cast<GemmEngine>(current_engine().load(std::memory_order_relaxed)); }

std::string gemm_engine_description() {
  const EngineChoice& c = engine_choice();
  std::lock_guard<std::mutex> lock(description_mutex());
  return c.description;
}

const char* gemm_engine_name(GemmEngine e) { return e == GemmEngine::kAvx512 ? "avx512" : "openblas"; }

bool parse_gemm_engine(std::string_view name, GemmEngine* out) {
  if (name == "avx512") *out = GemmEngine::kAvx512;
  else if (name == "openblas") *out = GemmEngine::kOpenBlas;
  else return false;
  return true;
}

bool set_gemm_engine(GemmEngine e, const std::string& why) {
  if (e == GemmEngine::kAvx512 && !isa_supported(Isa::kAvx512f)) return false;
  const GemmEngine was = gemm_engine();
  if (e == was) return true;
  EngineChoice& c = engine_choice();
  {
    std::lock_guard<std::mutex> lock(description_mutex());
    c.description = std::string(e == GemmEngine::kAvx512 ? "zcode avx512" : "OpenBLAS sgemm") + " (" + why +
                    "; this process had chosen " + c.description + ")";
    c.engine = e;
  }
  current_engine().store(static_cast<int>(e), std::memory_order_relaxed);
  return true;
}

void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
          float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_only(M, N, beta, C, ldc);
  if (gemm_engine() == GemmEngine::kAvx512) {
    if (sgemm_avx512(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, openblas_get_num_threads())) return;
    // Not silent: from here this run's bits mix the two engines.
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      std::fprintf(stderr,
                   "zcode: the AVX-512 sgemm could not run a %dx%dx%d product (packing buffers not allocated, or "
                   "lda %d / ldb %d / ldc %d too small): OpenBLAS's sgemm ran it (warned once)\n",
                   M, N, K, lda, ldb, ldc);
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}

void gemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda, const double* B, int ldb,
          double beta, double* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_only(M, N, beta, C, ldc);
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}

}  // namespace zcode::kernels
