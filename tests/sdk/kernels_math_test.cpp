// zcode/kernels/math.h: the exp kernels against long-double std::exp.
#include <zcode/kernels/math.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace {

// fast_exp's polynomial is accurate to ~2e-7 relative (Cephes' expf); the
// rounding of t = x − shift adds up to |t|·2⁻²⁴ ≤ 6e-6 relative at |t| ≈ 100,
// so the bound grows with |t| like that of any fp32 exp(x − shift).
double rel_bound(double t) { return 4e-7 + std::fabs(t) * 0x1p-24; }

TEST(KernelsMath, ExpShiftedSumMatchesLongDouble) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-30.f, 12.f);
  // Every length from 0 to 70 covers full vectors and every masked tail.
  for (int n = 0; n <= 70; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = u(rng);
    const std::vector<float> orig = x;
    const float shift = n ? *std::max_element(x.begin(), x.end()) : 0.f;
    const float sum = zcode::kernels::exp_shifted_sum(x.data(), n, shift);
    long double want_sum = 0;
    for (int j = 0; j < n; ++j) {
      const long double t = static_cast<long double>(orig[j]) - shift;
      const long double want = std::exp(t);
      want_sum += want;
      EXPECT_LE(std::fabs(static_cast<double>((x[j] - want) / want)), rel_bound(static_cast<double>(t)))
          << "n " << n << " j " << j << " x " << orig[j];
    }
    if (n == 0) EXPECT_EQ(sum, 0.f);
    else EXPECT_LE(std::fabs(static_cast<double>((sum - want_sum) / want_sum)), 1e-6) << "n " << n;
  }
}

TEST(KernelsMath, ExpShiftedSumUnderflowsToZeroNotNaN) {
  // exp(−200) and exp(−1000) are below the smallest normal float: the result
  // must be 0 or tiny (the AVX-512 path underflows to 0, the portable one
  // stops at exp(−87.3) ≈ 1.22e-38), never NaN or garbage from the 2^n scaling.
  std::vector<float> x = {0.f, -200.f, -1000.f, -87.f, -88.f, -103.f, 1.f, -3.4e38f};
  const float sum = zcode::kernels::exp_shifted_sum(x.data(), static_cast<int>(x.size()), 1.f);
  for (size_t j = 0; j < x.size(); ++j) EXPECT_TRUE(std::isfinite(x[j]) && x[j] >= 0.f) << j;
  EXPECT_LE(x[1], 1.25e-38f);
  EXPECT_LE(x[2], 1.25e-38f);
  EXPECT_LE(x[7], 1.25e-38f);
  EXPECT_FLOAT_EQ(x[6], 1.f);
  EXPECT_NEAR(x[0], 0.36787944f, 0.36787944f * 4e-7f);
  EXPECT_NEAR(sum, 1.36787944f, 1e-6f);
}

TEST(KernelsMath, MaxOf) {
  const std::vector<float> x = {-5.f, 3.f, 2.5f, 3.25f, -1e30f};
  for (int n = 1; n <= 5; ++n)
    EXPECT_EQ(zcode::kernels::max_of(x.data(), n), *std::max_element(x.begin(), x.begin() + n)) << n;
  EXPECT_EQ(zcode::kernels::max_of(x.data(), 0), -std::numeric_limits<float>::infinity());
}

}  // namespace
