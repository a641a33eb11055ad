// zcode/kernels/gemm_small_m.h: every variant this CPU has against a
// long-double dot product, and the promises the decode step relies on.
#include <zcode/kernels/gemm_small_m.h>
#include <zcode/kernels/threads.h>

#include <gtest/gtest.h>

#include "isa_variants.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using zcode::kernels::Isa;

using zcode_test::uniform;

// |fp32 sum − exact| ≤ K·2⁻²⁴·Σ|x·w| (Higham, "Accuracy and Stability of
// Numerical Algorithms", 2nd ed., eq. 3.5, for any summation order), with
// slack for the product roundings FMA does not make.
void check(Isa isa, int M, int N, int K, long ldy) {
  const std::vector<float> x = uniform(size_t(M) * K, 11 + M), W = uniform(size_t(N) * K, 17 + K);
  std::vector<float> y(size_t(M) * ldy + 1, -7.f);  // sentinel past each row's N
  ASSERT_TRUE(zcode::kernels::linear_fwd_small_m_on(isa, M, N, K, x.data(), W.data(), y.data(), ldy));
  // Accumulating onto y (a residual add): y + the same sum.
  std::vector<float> acc(size_t(M) * ldy + 1, -7.f);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) acc[size_t(i) * ldy + j] = 0.25f * static_cast<float>(j % 5);
  ASSERT_TRUE(zcode::kernels::linear_fwd_small_m_on(isa, M, N, K, x.data(), W.data(), acc.data(), ldy, true));
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      long double exact = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        exact += static_cast<long double>(x[size_t(i) * K + k]) * W[size_t(j) * K + k];
        mag += std::fabs(static_cast<long double>(x[size_t(i) * K + k]) * W[size_t(j) * K + k]);
      }
      const double bound = 2.0 * (K + 2) * 0x1p-24 * static_cast<double>(mag) + 1e-30;
      ASSERT_NEAR(y[size_t(i) * ldy + j], static_cast<double>(exact), bound)
          << zcode::kernels::isa_name(isa) << " M " << M << " N " << N << " K " << K << " at " << i << "," << j;
      const double base = 0.25 * (j % 5);
      ASSERT_NEAR(acc[size_t(i) * ldy + j], base + static_cast<double>(exact), bound + base * 0x1p-23)
          << "accumulate: " << zcode::kernels::isa_name(isa) << " M " << M << " N " << N << " K " << K;
    }
    for (long j = N; j < ldy; ++j) {
      ASSERT_EQ(y[size_t(i) * ldy + j], -7.f) << "wrote past N at row " << i;
      ASSERT_EQ(acc[size_t(i) * ldy + j], -7.f) << "accumulate wrote past N at row " << i;
    }
  }
}

// One instantiation per variant, so that a variant this CPU lacks shows as a skip of its own.
using GemmSmallMVariant = zcode_test::IsaVariantTest;

TEST_P(GemmSmallMVariant, MatchesLongDouble) {
  // K: below one vector, every masked tail of both widths, the model's d_model.
  // N: below one block of 8 W rows, a block tail, many blocks.
  for (int M : {1, 3, 8, 16})
    for (int K : {1, 7, 8, 15, 16, 17, 31, 64, 100, 256})
      for (int N : {1, 5, 8, 13, 300}) check(GetParam(), M, N, K, N + (N % 3));
}

TEST_P(GemmSmallMVariant, ManyRowsInParallel) {
  zcode::kernels::set_num_threads(2);
  check(GetParam(), 2, 5003, 256, 5003);
}

INSTANTIATE_TEST_SUITE_P(Isa, GemmSmallMVariant, ::testing::ValuesIn(zcode_test::kAllIsas), zcode_test::isa_test_name);

// A row's result does not depend on the rest of the batch, its place in it,
// or the thread count: the decode step's batch-1 and batch-8 logits of one
// sequence are the same bits (tests/model's KV-cache tests rely on it).
TEST(GemmSmallM, RowIndependentOfBatchPositionAndThreads) {
  const int N = 1037, K = 256;
  const std::vector<float> x = uniform(size_t(8) * K, 3), W = uniform(size_t(N) * K, 4);
  zcode::kernels::set_num_threads(1);
  std::vector<float> one(N);
  zcode::kernels::linear_fwd_small_m(1, N, K, x.data() + 5 * K, W.data(), one.data(), N);
  zcode::kernels::set_num_threads(2);
  std::vector<float> all(size_t(8) * N);
  zcode::kernels::linear_fwd_small_m(8, N, K, x.data(), W.data(), all.data(), N);
  EXPECT_EQ(0, std::memcmp(one.data(), all.data() + 5 * N, sizeof(float) * N));
}

// The register-blocked tiles (4 rows of x on AVX-512, 2 on AVX2) give every
// output the chain of the one-row path: each row of a 13-row batch (three
// tiles and a remainder on AVX-512) equals that row alone, bit for bit, on
// every variant this CPU has, with K not a multiple of the vector width.
TEST(GemmSmallM, TiledRowsEqualSingleRowsOnEveryVariant) {
  const int N = 77, K = 203, M = 13;
  const std::vector<float> x = uniform(size_t(M) * K, 5), W = uniform(size_t(N) * K, 6);
  for (Isa isa : zcode_test::kAllIsas) {
    std::vector<float> all(size_t(M) * N), one(N);
    if (!zcode::kernels::linear_fwd_small_m_on(isa, M, N, K, x.data(), W.data(), all.data(), N)) continue;
    for (int i = 0; i < M; ++i) {
      zcode::kernels::linear_fwd_small_m_on(isa, 1, N, K, x.data() + size_t(i) * K, W.data(), one.data(), N);
      EXPECT_EQ(0, std::memcmp(one.data(), all.data() + size_t(i) * N, sizeof(float) * N))
          << zcode::kernels::isa_name(isa) << ", row " << i;
    }
  }
}

TEST(GemmSmallM, BestVariantIsOneThisCpuHas) {
  const Isa best = zcode::kernels::best_isa();
  float y = 0;
  const float x = 2, w = 3;
  EXPECT_TRUE(zcode::kernels::linear_fwd_small_m_on(best, 1, 1, 1, &x, &w, &y, 1)) << zcode::kernels::isa_name(best);
  EXPECT_EQ(y, 6.f);
}

}  // namespace
