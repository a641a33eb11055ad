// zcode/kernels/gemm_avx512.h against its definition written here (one FMA
// chain per 256-long K block, combined with alpha and beta in the stated
// order), against a long-double product, and the promises the model relies
// on: a row's bits independent of the other rows, of the thread count and of
// its place; C outside the product untouched; C not read when beta is 0.
// And gemm.h's engine choice from ZCODE_GEMM, one child process per case
// (the choice is made once per process; nothing in this binary's parent
// process calls kernels::gemm).
#include <zcode/kernels/gemm.h>
#include <zcode/kernels/gemm_avx512.h>
#include <zcode/kernels/isa.h>
#include <zcode/kernels/threads.h>

#include <gtest/gtest.h>

#include "isa_variants.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using zcode_test::uniform;

constexpr int kBlock = 256;  // the header's K block

struct Case {
  bool ta, tb;
  int M, N, K;
  float alpha, beta;
};

struct Mats {
  int lda, ldb, ldc;
  std::vector<float> A, B, C0;
};

// A, B and C with leading dimensions a few floats past the minimum, so a
// kernel that assumes contiguous rows fails.
Mats make(const Case& c, unsigned seed) {
  Mats m;
  m.lda = (c.ta ? c.M : c.K) + 3;
  m.ldb = (c.tb ? c.K : c.N) + 5;
  m.ldc = c.N + 7;
  m.A = uniform(size_t(c.ta ? c.K : c.M) * m.lda, seed);
  m.B = uniform(size_t(c.tb ? c.N : c.K) * m.ldb, seed + 1);
  m.C0 = uniform(size_t(c.M) * m.ldc, seed + 2);
  return m;
}

float a_at(const Case& c, const Mats& m, int i, int k) {
  return c.ta ? m.A[size_t(k) * m.lda + i] : m.A[size_t(i) * m.lda + k];
}
float b_at(const Case& c, const Mats& m, int k, int j) {
  return c.tb ? m.B[size_t(j) * m.ldb + k] : m.B[size_t(k) * m.ldb + j];
}

// The header's definition of C[i, j], in float, operation by operation.
float definition(const Case& c, const Mats& m, int i, int j) {
  const float old = m.C0[size_t(i) * m.ldc + j];
  float r = 0;
  for (int k0 = 0; k0 < c.K; k0 += kBlock) {
    float chain = 0;
    for (int k = k0; k < std::min(c.K, k0 + kBlock); ++k) chain = std::fma(a_at(c, m, i, k), b_at(c, m, k, j), chain);
    const float s = c.alpha == 1.f ? chain : c.alpha * chain;
    if (k0 == 0) r = c.beta == 0.f ? s : s + (c.beta == 1.f ? old : c.beta * old);
    else r = r + s;
  }
  return r;
}

bool have_avx512() { return zcode::kernels::isa_supported(zcode::kernels::Isa::kAvx512f); }

#define SKIP_WITHOUT_AVX512()                                                                              \
  if (!have_avx512()) {                                                                                    \
    GTEST_SKIP() << "this CPU lacks AVX-512F: sgemm_avx512 refuses (tested below) and kernels::gemm runs " \
                    "OpenBLAS";                                                                            \
  }

void check(const Case& c, int threads) {
  const Mats m = make(c, unsigned(c.M * 7 + c.N * 3 + c.K));
  std::vector<float> C = m.C0;
  ASSERT_TRUE(zcode::kernels::sgemm_avx512(c.ta, c.tb, c.M, c.N, c.K, c.alpha, m.A.data(), m.lda, m.B.data(), m.ldb,
                                           c.beta, C.data(), m.ldc, threads));
  for (int i = 0; i < c.M; ++i) {
    for (int j = 0; j < m.ldc; ++j) {
      const float got = C[size_t(i) * m.ldc + j];
      if (j >= c.N) {  // past the product: untouched
        ASSERT_EQ(got, m.C0[size_t(i) * m.ldc + j]) << "column " << j << " past N = " << c.N << " was written";
        continue;
      }
      ASSERT_EQ(got, definition(c, m, i, j))
          << "C[" << i << ", " << j << "] of " << c.M << "x" << c.N << "x" << c.K << " ta " << c.ta << " tb " << c.tb
          << " alpha " << c.alpha << " beta " << c.beta << " on " << threads << " threads";
      long double exact = c.beta * static_cast<long double>(m.C0[size_t(i) * m.ldc + j]), mag = std::fabs(exact);
      for (int k = 0; k < c.K; ++k) {
        const long double p = static_cast<long double>(a_at(c, m, i, k)) * b_at(c, m, k, j) * c.alpha;
        exact += p;
        mag += std::fabs(p);
      }
      // A float sum of K + 2 terms errs by at most ~(K + 2)·eps·Σ|terms| (Higham, "Accuracy and
      // Stability of Numerical Algorithms", 2nd ed., eq. 3.5); it is far inside that in practice.
      ASSERT_LE(std::fabs(got - exact), (c.K + 2) * std::numeric_limits<float>::epsilon() * mag);
    }
  }
}

TEST(GemmAvx512, EqualsItsDefinitionForEveryTransposeAndShape) {
  SKIP_WITHOUT_AVX512();
  const int shapes[][3] = {{1, 1, 1},    {14, 32, 256},  {15, 33, 257}, {13, 31, 255}, {29, 70, 513}, {200, 3, 40},
                           {3, 200, 40}, {170, 64, 600}, {64, 170, 96}, {1, 700, 300}, {300, 1, 300}, {45, 45, 45}};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const auto& s : shapes) check({ta, tb, s[0], s[1], s[2], 1.f, 0.f}, 1);
}

// A column panel narrower than kNc = 2048 holds 2048 / round_up(N, 32) K
// blocks of 256 at once (gemm_avx512.cpp, gemm_serial): K past that group
// runs a second group, whose first K block must add to C, not restart it.
// N 1000 → groups of 512; N 1 → 16,384; N 2049 → a 2048 panel and a
// 1-column one; N 400 → 1024. On 2 threads the split halves change the group.
TEST(GemmAvx512, KBlocksAcrossGroupsOfANarrowPanel) {
  SKIP_WITHOUT_AVX512();
  const int shapes[][3] = {{20, 1000, 600}, {20, 1, 16384 + 300}, {3, 2049, 600}, {30, 400, 1281}};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const auto& s : shapes)
        for (int threads : {1, 2}) check({ta, tb, s[0], s[1], s[2], 1.f, 0.5f}, threads);
}

TEST(GemmAvx512, AlphaAndBetaAsDefined) {
  SKIP_WITHOUT_AVX512();
  for (float alpha : {1.f, 0.125f, -2.5f})
    for (float beta : {0.f, 1.f, -0.5f}) {
      check({false, true, 37, 45, 300, alpha, beta}, 1);
      check({true, false, 20, 90, 520, alpha, beta}, 2);
    }
}

TEST(GemmAvx512, BigEnoughToSplitAcrossThreads) {
  SKIP_WITHOUT_AVX512();
  check({false, true, 300, 200, 64, 1.f, 0.f}, 2);   // rows split
  check({true, false, 60, 700, 300, 1.f, 1.f}, 2);   // columns split
  check({false, false, 2100, 40, 30, 1.f, 0.f}, 3);  // more row blocks than one cache block
}

TEST(GemmAvx512, ZeroBetaNeverReadsC) {
  SKIP_WITHOUT_AVX512();
  const Case c{false, true, 20, 40, 70, 1.f, 0.f};
  const Mats m = make(c, 5);
  std::vector<float> C(m.C0.size(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(zcode::kernels::sgemm_avx512(c.ta, c.tb, c.M, c.N, c.K, 1.f, m.A.data(), m.lda, m.B.data(), m.ldb, 0.f,
                                           C.data(), m.ldc, 1));
  for (int i = 0; i < c.M; ++i)
    for (int j = 0; j < c.N; ++j) ASSERT_FALSE(std::isnan(C[size_t(i) * m.ldc + j])) << i << ", " << j;
}

// What continuous batching and bit-identical multi-rank runs need: a row of
// C gets the same bits alone, inside a batch, at another row, on 1 or 2
// threads and whichever way the threads split the product.
TEST(GemmAvx512, RowIndependentOfBatchPlaceAndThreads) {
  SKIP_WITHOUT_AVX512();
  const int K = 600, N = 90, rows = 300;
  const std::vector<float> X = uniform(size_t(rows) * K, 1), W = uniform(size_t(N) * K, 2);
  std::vector<float> batch1(size_t(rows) * N), batch2(size_t(rows) * N), one(N);
  ASSERT_TRUE(
      zcode::kernels::sgemm_avx512(false, true, rows, N, K, 1.f, X.data(), K, W.data(), K, 0.f, batch1.data(), N, 1));
  ASSERT_TRUE(
      zcode::kernels::sgemm_avx512(false, true, rows, N, K, 1.f, X.data(), K, W.data(), K, 0.f, batch2.data(), N, 2));
  EXPECT_EQ(std::memcmp(batch1.data(), batch2.data(), batch1.size() * sizeof(float)), 0) << "1 vs 2 threads";
  for (int i : {0, 13, 14, 167, 168, 299}) {
    ASSERT_TRUE(zcode::kernels::sgemm_avx512(false, true, 1, N, K, 1.f, X.data() + size_t(i) * K, K, W.data(), K, 0.f,
                                             one.data(), N, 1));
    EXPECT_EQ(std::memcmp(one.data(), batch1.data() + size_t(i) * N, N * sizeof(float)), 0) << "row " << i;
  }
  // Few rows, many columns: the threads split the columns instead.
  std::vector<float> wide1(size_t(3) * 2000), wide2(wide1.size());
  const std::vector<float> Wb = uniform(size_t(2000) * K, 3);
  ASSERT_TRUE(zcode::kernels::sgemm_avx512(false, true, 3, 2000, K, 1.f, X.data(), K, Wb.data(), K, 0.f, wide1.data(),
                                           2000, 1));
  ASSERT_TRUE(zcode::kernels::sgemm_avx512(false, true, 3, 2000, K, 1.f, X.data(), K, Wb.data(), K, 0.f, wide2.data(),
                                           2000, 2));
  EXPECT_EQ(std::memcmp(wide1.data(), wide2.data(), wide1.size() * sizeof(float)), 0) << "columns split";
}

// BLAS's convention for alpha 0: A and B are not read (NaN there stays out
// of C), C = beta·C.
TEST(GemmAvx512, ZeroAlphaOnlyScalesC) {
  SKIP_WITHOUT_AVX512();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> A(6 * 5, nan), B(5 * 7, nan);
  std::vector<float> C = uniform(6 * 7, 4);
  const std::vector<float> C0 = C;
  ASSERT_TRUE(
      zcode::kernels::sgemm_avx512(false, false, 6, 7, 5, 0.f, A.data(), 5, B.data(), 7, -0.5f, C.data(), 7, 1));
  for (size_t i = 0; i < C.size(); ++i) ASSERT_EQ(C[i], -0.5f * C0[i]) << i;
  std::fill(C.begin(), C.end(), nan);
  ASSERT_TRUE(zcode::kernels::sgemm_avx512(false, false, 6, 7, 5, 0.f, A.data(), 5, B.data(), 7, 0.f, C.data(), 7, 1));
  for (size_t i = 0; i < C.size(); ++i) ASSERT_EQ(C[i], 0.f) << i;
}

// Called from the threads of a parallel region at once (the model's loops
// do): each call runs on its own thread, with its own buffers from the pool,
// and gives the definition's bits.
TEST(GemmAvx512, ConcurrentCallsInsideAParallelRegion) {
  SKIP_WITHOUT_AVX512();
  const Case c{false, true, 150, 90, 520, 1.f, 0.f};
  const Mats m = make(c, 21);
  std::vector<std::vector<float>> out(4, m.C0);
  std::vector<int> ok(4, 0);
#pragma omp parallel for num_threads(2) schedule(static, 1)
  for (int t = 0; t < 4; ++t)
    ok[size_t(t)] = zcode::kernels::sgemm_avx512(c.ta, c.tb, c.M, c.N, c.K, 1.f, m.A.data(), m.lda, m.B.data(), m.ldb,
                                                 0.f, out[size_t(t)].data(), m.ldc, 2);
  for (int t = 0; t < 4; ++t) {
    ASSERT_TRUE(ok[size_t(t)]) << "call " << t;
    for (int i = 0; i < c.M; ++i)
      for (int j = 0; j < c.N; ++j)
        ASSERT_EQ(out[size_t(t)][size_t(i) * m.ldc + j], definition(c, m, i, j))
            << "call " << t << " " << i << ", " << j;
  }
}

TEST(GemmAvx512, RefusesBadLeadingDimensionsAndNullsTouchingNothing) {
  SKIP_WITHOUT_AVX512();
  std::vector<float> A(64, 1.f), B(64, 1.f), C(64, 2.f);
  auto run = [&](bool ta, bool tb, int lda, int ldb, int ldc, const float* a, const float* b, float* cp) {
    return zcode::kernels::sgemm_avx512(ta, tb, 3, 4, 5, 1.f, a, lda, b, ldb, 0.f, cp, ldc, 1);
  };
  EXPECT_FALSE(run(false, false, 4, 4, 4, A.data(), B.data(), C.data()));  // lda < K = 5
  EXPECT_FALSE(run(true, false, 2, 4, 4, A.data(), B.data(), C.data()));   // lda < M = 3 (A is [K, M])
  EXPECT_FALSE(run(false, false, 5, 3, 4, A.data(), B.data(), C.data()));  // ldb < N = 4
  EXPECT_FALSE(run(false, true, 5, 4, 4, A.data(), B.data(), C.data()));   // ldb < K = 5 (B is [N, K])
  EXPECT_FALSE(run(false, false, 5, 4, 3, A.data(), B.data(), C.data()));  // ldc < N
  EXPECT_FALSE(run(false, false, 5, 4, 4, nullptr, B.data(), C.data()));
  EXPECT_FALSE(run(false, false, 5, 4, 4, A.data(), nullptr, C.data()));
  EXPECT_FALSE(run(false, false, 5, 4, 4, A.data(), B.data(), nullptr));
  for (float v : C) ASSERT_EQ(v, 2.f);
  EXPECT_TRUE(run(false, false, 5, 4, 4, A.data(), B.data(), C.data()));  // the smallest valid ones
  EXPECT_EQ(C[0], 5.f);
}

TEST(GemmAvx512, RefusesEmptyShapesAndTouchesNothing) {
  float C[4] = {1, 2, 3, 4};
  const float A[4] = {}, B[4] = {};
  EXPECT_FALSE(zcode::kernels::sgemm_avx512(false, false, 0, 2, 2, 1.f, A, 2, B, 2, 0.f, C, 2, 1));
  EXPECT_FALSE(zcode::kernels::sgemm_avx512(false, false, 2, 0, 2, 1.f, A, 2, B, 2, 0.f, C, 2, 1));
  EXPECT_FALSE(zcode::kernels::sgemm_avx512(false, false, 2, 2, 0, 1.f, A, 2, B, 2, 0.f, C, 2, 1));
  if (!have_avx512()) {
    EXPECT_FALSE(zcode::kernels::sgemm_avx512(false, false, 2, 2, 2, 1.f, A, 2, B, 2, 0.f, C, 2, 1));
  }
  EXPECT_EQ(C[0], 1.f);
  EXPECT_EQ(C[3], 4.f);
}

// --- gemm.h's engine choice ---

// Runs `body` in a forked child with ZCODE_GEMM = value (nullptr: unset);
// returns its exit status.
template <class F>
int in_child(const char* value, F body) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (value) setenv("ZCODE_GEMM", value, 1);
    else unsetenv("ZCODE_GEMM");
    _exit(body());
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

using zcode::kernels::GemmEngine;

int engine_is(GemmEngine want) { return zcode::kernels::gemm_engine() == want ? 0 : 1; }

// Whether kernels::gemm, on whatever engine it runs now, gives the header's
// definition of sgemm_avx512's bits on a 30 × 50 × 300 NT product.
bool gemm_gives_the_definition() {
  const Case c{false, true, 30, 50, 300, 1.f, 0.f};
  const Mats m = make(c, 9);
  std::vector<float> C = m.C0;
  zcode::kernels::gemm(c.ta, c.tb, c.M, c.N, c.K, 1.f, m.A.data(), m.lda, m.B.data(), m.ldb, 0.f, C.data(), m.ldc);
  for (int i = 0; i < c.M; ++i)
    for (int j = 0; j < c.N; ++j)
      if (C[size_t(i) * m.ldc + j] != definition(c, m, i, j)) return false;
  return true;
}

TEST(GemmEngine, OpenBlasWhenAsked) {
  EXPECT_EQ(in_child("openblas", [] { return engine_is(GemmEngine::kOpenBlas); }), 0);
}

TEST(GemmEngine, Avx512WhenAskedAndTheCpuHasIt) {
  const GemmEngine want = have_avx512() ? GemmEngine::kAvx512 : GemmEngine::kOpenBlas;
  EXPECT_EQ(in_child("avx512", [&] { return engine_is(want); }), 0);
}

TEST(GemmEngine, AutoUsesOursOnlyWhereOpenBlasRunsNoAvx512Kernel) {
  std::string core = zcode::kernels::blas_core();  // OpenBLAS's own answer, not ours
  for (char& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  // OpenBLAS's kernel families with AVX-512 sgemm kernels (its kernel/x86_64 KERNEL.* files), any case.
  const bool blas512 = core == "skylakex" || core == "cooperlake" || core == "sapphirerapids";
  const GemmEngine want = have_avx512() && !blas512 ? GemmEngine::kAvx512 : GemmEngine::kOpenBlas;
  EXPECT_EQ(in_child(nullptr, [&] { return engine_is(want); }), 0) << "OpenBLAS kernel " << core;
  EXPECT_EQ(in_child("auto", [&] { return engine_is(want); }), 0);
  // An unknown value is auto, and says so on stderr.
  EXPECT_EQ(in_child("fast", [&] { return engine_is(want); }), 0);
  EXPECT_EQ(
      in_child("fast",
               [&] { return zcode::kernels::gemm_engine_description().find("ZCODE_GEMM=fast") == std::string::npos; }),
      0);
}

TEST(GemmEngine, NamesRoundTripAndNothingElseParses) {
  GemmEngine e = GemmEngine::kAvx512;
  EXPECT_TRUE(zcode::kernels::parse_gemm_engine("openblas", &e));
  EXPECT_EQ(e, GemmEngine::kOpenBlas);
  EXPECT_TRUE(zcode::kernels::parse_gemm_engine("avx512", &e));
  EXPECT_EQ(e, GemmEngine::kAvx512);
  for (const char* bad : {"auto", "", "AVX512", "openblas "}) {
    EXPECT_FALSE(zcode::kernels::parse_gemm_engine(bad, &e)) << "'" << bad << "'";
    EXPECT_EQ(e, GemmEngine::kAvx512) << "a failed parse must leave *out alone";
  }
  EXPECT_STREQ(zcode::kernels::gemm_engine_name(GemmEngine::kOpenBlas), "openblas");
  EXPECT_STREQ(zcode::kernels::gemm_engine_name(GemmEngine::kAvx512), "avx512");
}

// set_gemm_engine (what a resume calls with its checkpoint's engine) switches
// the process's engine and says why; kernels::gemm then runs it.
TEST(GemmEngine, SetSwitchesTheProcesssEngine) {
  SKIP_WITHOUT_AVX512();
  EXPECT_EQ(in_child("openblas",
                     [] {
                       if (zcode::kernels::gemm_engine() != GemmEngine::kOpenBlas) return 1;
                       if (!zcode::kernels::set_gemm_engine(GemmEngine::kAvx512, "from the test")) return 2;
                       if (zcode::kernels::gemm_engine() != GemmEngine::kAvx512) return 3;
                       const std::string d = zcode::kernels::gemm_engine_description();
                       if (d.rfind("zcode avx512 (from the test; this process had chosen OpenBLAS sgemm", 0) != 0)
                         return 4;
                       return gemm_gives_the_definition() ? 0 : 5;
                     }),
            0);
}

// kernels::gemm gives the engine's bits: sgemm_avx512's when it runs ours.
TEST(GemmEngine, GemmRunsTheChosenEngine) {
  SKIP_WITHOUT_AVX512();
  EXPECT_EQ(in_child("avx512", [] { return gemm_gives_the_definition() ? 0 : 1; }), 0);
}

}  // namespace
