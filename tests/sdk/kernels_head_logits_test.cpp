// zcode/kernels/head_logits.h: every variant this CPU has against a
// long-double reference, and the promises the LM head relies on (z equal to
// head_dot bit for bit, first-of-ties arg-max, nothing written outside zt's
// rows, a NaN confined to its row).
#include <zcode/kernels/head_logits.h>

#include <gtest/gtest.h>

#include "isa_variants.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using zcode::kernels::Isa;

std::vector<float> uniform(size_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct Out {
  std::vector<float> zt, mx, sum, arg;
};

// One call on `isa` with a sentinel-filled zt of ldz = M + 3 columns.
Out run(Isa isa, int M, int n, int K, const std::vector<float>& h, const std::vector<float>& W, long ldw,
        bool with_z = true, bool with_arg = true) {
  std::vector<float> hp(size_t(zcode::kernels::head_pack_elems(M, K)), -9.f);
  zcode::kernels::head_pack(M, K, h.data(), K, hp.data());
  Out o;
  const long ldz = M + 3;
  o.zt.assign(size_t(n) * ldz + 1, -7.f);
  o.mx.assign(size_t(M), 5.f);
  o.sum.assign(size_t(M), 5.f);
  o.arg.assign(size_t(M), 5.f);
  EXPECT_TRUE(zcode::kernels::head_logits_on(isa, M, n, K, hp.data(), W.data(), ldw, with_z ? o.zt.data() : nullptr,
                                             ldz, o.mx.data(), o.sum.data(), with_arg ? o.arg.data() : nullptr));
  return o;
}

using HeadLogitsVariant = zcode_test::IsaVariantTest;

TEST(HeadLogits, PackLayoutIsPanelsOfSixteenRowsZeroPadded) {
  const int M = 19, K = 3;
  std::vector<float> h(size_t(M) * 5);
  for (int r = 0; r < M; ++r)
    for (int k = 0; k < 5; ++k) h[size_t(r) * 5 + k] = float(100 * r + k);
  ASSERT_EQ(zcode::kernels::head_pack_elems(M, K), 2 * 16 * K);
  std::vector<float> hp(size_t(zcode::kernels::head_pack_elems(M, K)), -1.f);
  zcode::kernels::head_pack(M, K, h.data(), 5, hp.data());  // row stride 5 > K
  for (int p = 0; p < 2; ++p)
    for (int k = 0; k < K; ++k)
      for (int i = 0; i < 16; ++i) {
        const int r = 16 * p + i;
        EXPECT_EQ(hp[size_t((p * K + k) * 16 + i)], r < M ? float(100 * r + k) : 0.f) << p << " " << k << " " << i;
      }
}

// Against long double: z within Higham's bound, the statistics within their
// exp's accuracy, arg the first column of the exact maximum of the returned z.
TEST_P(HeadLogitsVariant, MatchesLongDouble) {
  const Isa isa = GetParam();
  // M: below a panel, one panel, a 32-row tile plus a short panel, several tiles.
  // n: below every block, block tails of 6 and 12, many blocks. K: 1, odd, d_model.
  for (const int M : {1, 16, 37, 70})
    for (const int n : {1, 5, 13, 50})
      for (const int K : {1, 7, 64}) {
        const long ldw = K + 2;
        const std::vector<float> h = uniform(size_t(M) * K, 3 + M, 2.f), W = uniform(size_t(n) * ldw, 5 + n * K, 2.f);
        const Out o = run(isa, M, n, K, h, W, ldw);
        const long ldz = M + 3;
        for (int r = 0; r < M; ++r) {
          long double m = -INFINITY;
          for (int j = 0; j < n; ++j) {
            long double exact = 0, mag = 0;
            for (int k = 0; k < K; ++k) {
              const long double p = static_cast<long double>(h[size_t(r) * K + k]) * W[size_t(j) * ldw + k];
              exact += p;
              mag += std::fabs(p);
            }
            const float z = o.zt[size_t(j) * ldz + r];
            ASSERT_NEAR(z, static_cast<double>(exact), 2.0 * (K + 1) * 0x1p-24 * static_cast<double>(mag) + 1e-30)
                << zcode::kernels::isa_name(isa) << " M " << M << " n " << n << " K " << K << " at " << r << "," << j;
            m = std::max<long double>(m, z);
          }
          ASSERT_EQ(o.mx[size_t(r)], static_cast<float>(m)) << "row " << r;
          long double s = 0;
          int first = -1;
          for (int j = 0; j < n; ++j) {
            const float z = o.zt[size_t(j) * ldz + r];
            s += std::exp(static_cast<long double>(z) - m);
            if (first < 0 && z == static_cast<float>(m)) first = j;
          }
          // Each exp within 2e-7 relative (fast_exp, math.h); n additions and
          // one rescale per block, each within 2^-24 relative (Higham eq. 3.5).
          ASSERT_NEAR(o.sum[size_t(r)], static_cast<double>(s), (2e-7 + (2 * n + 8) * 0x1p-24) * static_cast<double>(s))
              << zcode::kernels::isa_name(isa) << " M " << M << " n " << n << " K " << K << " row " << r;
          ASSERT_EQ(o.arg[size_t(r)], float(first)) << "row " << r;
        }
        // zt's rows past M are untouched.
        for (int j = 0; j < n; ++j)
          for (long r = M; r < ldz; ++r) ASSERT_EQ(o.zt[size_t(j) * ldz + r], -7.f) << "wrote row " << r;
      }
}

// z is head_dot's value bit for bit (the training head's label logit is taken
// from head_dot), and every variant gives the same z and arg-max bits.
TEST_P(HeadLogitsVariant, LogitsAreHeadDotBitForBit) {
  const int M = 45, n = 29, K = 256;
  const std::vector<float> h = uniform(size_t(M) * K, 21, 1.f), W = uniform(size_t(n) * K, 22, 1.f);
  const Out o = run(GetParam(), M, n, K, h, W, K);
  const Out ref = run(Isa::kScalar, M, n, K, h, W, K);
  for (int r = 0; r < M; ++r) {
    for (int j = 0; j < n; ++j) {
      const float want = zcode::kernels::head_dot(K, h.data() + size_t(r) * K, W.data() + size_t(j) * K);
      const float got = o.zt[size_t(j) * (M + 3) + r];
      ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0) << r << "," << j << ": " << got << " vs " << want;
    }
    EXPECT_EQ(o.mx[size_t(r)], ref.mx[size_t(r)]);
    EXPECT_EQ(o.arg[size_t(r)], ref.arg[size_t(r)]);
  }
}

// Ties go to the first column, across blocks and tiles: W rows repeat.
TEST_P(HeadLogitsVariant, ArgMaxTiesGoToTheFirstColumn) {
  const int M = 33, n = 40, K = 8;
  std::vector<float> h = uniform(size_t(M) * K, 31, 1.f);
  std::vector<float> W = uniform(size_t(n) * K, 32, 1.f);
  // Column 3 (z = 20·h[r,0] ≥ 20 > K·1) is every row's maximum, copied to 15 and 27 (other blocks).
  for (int r = 0; r < M; ++r) h[size_t(r) * K] = 1.f + std::fabs(h[size_t(r) * K]);
  for (int k = 0; k < K; ++k) W[size_t(3) * K + k] = k == 0 ? 20.f : 0.f;
  for (const int c : {15, 27}) std::memcpy(&W[size_t(c) * K], &W[size_t(3) * K], sizeof(float) * K);
  const Out o = run(GetParam(), M, n, K, h, W, K);
  int tied = 0;
  for (int r = 0; r < M; ++r) {
    const float a = o.arg[size_t(r)];
    EXPECT_NE(a, 15.f) << "row " << r;
    EXPECT_NE(a, 27.f) << "row " << r;
    tied += a == 3.f;
  }
  EXPECT_EQ(tied, M);
}

// Without zt and arg, the statistics have the same bits.
TEST_P(HeadLogitsVariant, OptionalOutputsChangeNothing) {
  const int M = 50, n = 31, K = 24;
  const std::vector<float> h = uniform(size_t(M) * K, 41, 1.f), W = uniform(size_t(n) * K, 42, 1.f);
  const Out a = run(GetParam(), M, n, K, h, W, K, true, true);
  const Out b = run(GetParam(), M, n, K, h, W, K, false, false);
  EXPECT_EQ(std::memcmp(a.mx.data(), b.mx.data(), sizeof(float) * M), 0);
  EXPECT_EQ(std::memcmp(a.sum.data(), b.sum.data(), sizeof(float) * M), 0);
  for (const float x : b.zt) ASSERT_EQ(x, -7.f);
  for (const float x : b.arg) ASSERT_EQ(x, 5.f);
}

// A NaN in one row of h makes that row's sum NaN and leaves the others as they were.
TEST_P(HeadLogitsVariant, NanStaysInItsRow) {
  const int M = 40, n = 26, K = 16;
  std::vector<float> h = uniform(size_t(M) * K, 51, 1.f);
  const std::vector<float> W = uniform(size_t(n) * K, 52, 1.f);
  const Out clean = run(GetParam(), M, n, K, h, W, K);
  h[size_t(17) * K + 4] = std::numeric_limits<float>::quiet_NaN();
  const Out o = run(GetParam(), M, n, K, h, W, K);
  for (int r = 0; r < M; ++r) {
    if (r == 17) {
      EXPECT_TRUE(std::isnan(o.sum[size_t(r)]));
      continue;
    }
    EXPECT_EQ(o.mx[size_t(r)], clean.mx[size_t(r)]) << "row " << r;
    EXPECT_EQ(o.sum[size_t(r)], clean.sum[size_t(r)]) << "row " << r;
  }
}

TEST(HeadLogits, BestVariantIsTheDefault) {
  const int M = 20, n = 17, K = 32;
  const std::vector<float> h = uniform(size_t(M) * K, 61, 1.f), W = uniform(size_t(n) * K, 62, 1.f);
  std::vector<float> hp(size_t(zcode::kernels::head_pack_elems(M, K)));
  zcode::kernels::head_pack(M, K, h.data(), K, hp.data());
  std::vector<float> zt(size_t(n) * M), mx(M), sum(M), arg(M);
  zcode::kernels::head_logits(M, n, K, hp.data(), W.data(), K, zt.data(), M, mx.data(), sum.data(), arg.data());
  const Out o = run(zcode::kernels::best_isa(), M, n, K, h, W, K);
  for (int r = 0; r < M; ++r) {
    EXPECT_EQ(mx[size_t(r)], o.mx[size_t(r)]);
    EXPECT_EQ(sum[size_t(r)], o.sum[size_t(r)]);
    EXPECT_EQ(arg[size_t(r)], o.arg[size_t(r)]);
    for (int j = 0; j < n; ++j) EXPECT_EQ(zt[size_t(j) * M + r], o.zt[size_t(j) * (M + 3) + r]);
  }
}

// The double twin (the gradient check's precision) against long double.
TEST(HeadLogits, GenericDoubleMatchesLongDouble) {
  const int M = 19, n = 27, K = 9;
  std::mt19937 rng(71);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> h(size_t(M) * K), W(size_t(n) * K);
  for (double& x : h) x = u(rng);
  for (double& x : W) x = u(rng);
  std::vector<double> hp(size_t(zcode::kernels::head_pack_elems(M, K)));
  zcode::kernels::head_pack(M, K, h.data(), K, hp.data());
  std::vector<double> zt(size_t(n) * M), mx(M), sum(M), arg(M);
  zcode::kernels::head_logits_generic<double>(M, n, K, hp.data(), W.data(), K, zt.data(), M, mx.data(), sum.data(),
                                              arg.data(), 12);
  for (int r = 0; r < M; ++r) {
    long double m = -INFINITY, s = 0;
    std::vector<long double> z(n);
    for (int j = 0; j < n; ++j) {
      for (int k = 0; k < K; ++k) z[j] += static_cast<long double>(h[size_t(r) * K + k]) * W[size_t(j) * K + k];
      EXPECT_NEAR(zt[size_t(j) * M + r], static_cast<double>(z[j]), 1e-15);
      m = std::max(m, z[j]);
    }
    for (int j = 0; j < n; ++j) s += std::exp(z[j] - m);
    EXPECT_NEAR(mx[size_t(r)], static_cast<double>(m), 1e-15);
    EXPECT_NEAR(sum[size_t(r)], static_cast<double>(s), 1e-13);
  }
}

// Test names say the variant (gtest names allow no '+').
INSTANTIATE_TEST_SUITE_P(Isa, HeadLogitsVariant, ::testing::ValuesIn(zcode_test::kAllIsas), zcode_test::isa_test_name);

}  // namespace
