// zcode/kernels/gemm_packed.h: every variant this CPU has against a plain
// fused multiply-add chain written here (the header's definition of each
// output) and against a long-double dot product, and the promises the
// decode step relies on (a row's bits independent of the batch, the
// threads and the variant).
#include <zcode/kernels/gemm_packed.h>
#include <zcode/kernels/threads.h>

#include <gtest/gtest.h>

#include "isa_variants.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

using zcode::kernels::Isa;

using zcode_test::uniform;

std::vector<float> packed(int N, int K, const std::vector<float>& W) {
  std::vector<float> Wp(size_t(zcode::kernels::packed_w_elems(N, K)), -3.f);
  zcode::kernels::pack_w_panels(N, K, W.data(), Wp.data());
  return Wp;
}

/// accumulate: y starts as values of its own and must become y + the chain
/// (one rounded float add after it).
void check(Isa isa, int M, int N, int K, long ldy, bool accumulate = false) {
  const std::vector<float> x = uniform(size_t(M) * K, 11 + M), W = uniform(size_t(N) * K, 17 + K);
  const std::vector<float> Wp = packed(N, K, W);
  std::vector<float> y(size_t(M) * ldy + 1, -7.f);  // sentinel past each row's N
  const std::vector<float> y0 = uniform(y.size(), 23 + N);
  if (accumulate)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) y[size_t(i) * ldy + j] = y0[size_t(i) * ldy + j];
  ASSERT_TRUE(zcode::kernels::linear_fwd_packed_on(isa, M, N, K, x.data(), Wp.data(), y.data(), ldy, accumulate));
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float chain = 0;  // the definition: one fma chain in k order from 0
      long double exact = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const float a = x[size_t(i) * K + k], b = W[size_t(j) * K + k];
        chain = std::fma(a, b, chain);
        exact += static_cast<long double>(a) * b;
        mag += std::fabs(static_cast<long double>(a) * b);
      }
      const float got = y[size_t(i) * ldy + j];
      if (accumulate) {
        const float want = y0[size_t(i) * ldy + j] + chain;
        ASSERT_EQ(0, std::memcmp(&got, &want, sizeof(float))) << zcode::kernels::isa_name(isa) << " accumulate M " << M
                                                              << " N " << N << " K " << K << " at " << i << "," << j;
        continue;
      }
      ASSERT_EQ(0, std::memcmp(&got, &chain, sizeof(float)))
          << zcode::kernels::isa_name(isa) << " M " << M << " N " << N << " K " << K << " at " << i << "," << j << ": "
          << got << " vs the fma chain's " << chain;
      // Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 3.5.
      ASSERT_NEAR(got, static_cast<double>(exact), 2.0 * (K + 2) * 0x1p-24 * static_cast<double>(mag) + 1e-30);
    }
    for (long j = N; j < ldy; ++j) ASSERT_EQ(y[size_t(i) * ldy + j], -7.f) << "wrote past N at row " << i;
  }
}

using GemmPackedVariant = zcode_test::IsaVariantTest;

TEST_P(GemmPackedVariant, EqualsTheFmaChain) {
  // M: every row tail of both tile heights, and a serving batch. N: below one
  // panel, a panel tail, every panel-group tail. K: 1, odd, d_model.
  for (int M : {1, 2, 3, 4, 5, 7, 33})
    for (int K : {1, 7, 16, 64, 257})
      for (int N : {1, 5, 16, 17, 31, 48, 63, 64, 65, 130}) check(GetParam(), M, N, K, N + (N % 3));
}

TEST_P(GemmPackedVariant, AccumulateAddsTheChainToY) {
  for (int M : {1, 3, 4, 6})
    for (int N : {5, 16, 17, 64, 65, 130}) check(GetParam(), M, N, 64, N + 2, true);
}

TEST_P(GemmPackedVariant, ManyColumnsInParallel) {
  zcode::kernels::set_num_threads(2);
  check(GetParam(), 9, 5003, 256, 5003);
}

INSTANTIATE_TEST_SUITE_P(Isa, GemmPackedVariant, ::testing::ValuesIn(zcode_test::kAllIsas), zcode_test::isa_test_name);

TEST(GemmPacked, PackLayout) {
  // W[j, k] = 100 j + k, N = 18 (one full panel, one of 2 columns), K = 3.
  const int N = 18, K = 3;
  std::vector<float> W(size_t(N) * K);
  for (int j = 0; j < N; ++j)
    for (int k = 0; k < K; ++k) W[size_t(j) * K + k] = float(100 * j + k);
  ASSERT_EQ(zcode::kernels::packed_w_elems(N, K), 2 * 16 * 3);
  const std::vector<float> Wp = packed(N, K, W);
  EXPECT_EQ(Wp[(0 * K + 2) * 16 + 5], 502.f);   // panel 0, k 2, column 5
  EXPECT_EQ(Wp[(1 * K + 1) * 16 + 1], 1701.f);  // panel 1, k 1, column 1 = row 17
  EXPECT_EQ(Wp[(1 * K + 1) * 16 + 2], 0.f);     // past N: zero
}

// A row's result does not depend on the rest of the batch, its place in it,
// the thread count or the variant: continuous batching's invariance, and one
// set of bits on AVX-512 and AVX2 machines.
TEST(GemmPacked, RowIndependentOfBatchThreadsAndVariant) {
  const int N = 1037, K = 256, M = 13;
  const std::vector<float> x = uniform(size_t(M) * K, 3), W = uniform(size_t(N) * K, 4);
  const std::vector<float> Wp = packed(N, K, W);
  zcode::kernels::set_num_threads(1);
  std::vector<float> one(N);
  zcode::kernels::linear_fwd_packed_on(Isa::kScalar, 1, N, K, x.data() + 5 * K, Wp.data(), one.data(), N);
  zcode::kernels::set_num_threads(2);
  for (Isa isa : zcode_test::kAllIsas) {
    std::vector<float> all(size_t(M) * N);
    if (!zcode::kernels::linear_fwd_packed_on(isa, M, N, K, x.data(), Wp.data(), all.data(), N)) continue;
    EXPECT_EQ(0, std::memcmp(one.data(), all.data() + 5 * N, sizeof(float) * N)) << zcode::kernels::isa_name(isa);
  }
}

}  // namespace
