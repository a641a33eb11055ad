// zcode/kernels/parallel.h: the ranges cover [0, n) exactly once, and the
// block sums give the same bits whatever the thread count.
#include <zcode/kernels/parallel.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using zcode::kernels::parallel_ranges;
using zcode::kernels::parallel_sum;

TEST(KernelsParallel, RangesCoverEveryItemOnceAlignedTo16) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{1} << 15, (int64_t{1} << 17) + 3}) {
    for (int threads : {1, 2, 3, 8}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_ranges(n, threads, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b % 16, 0);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << threads;
    }
  }
}

TEST(KernelsParallel, SumIsBitIdenticalAcrossThreadCounts) {
  const int64_t n = (int64_t{1} << 18) + 5;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::sin(0.001f * static_cast<float>(i)) * 1e3f;
  auto run = [&](int threads) {
    return parallel_sum<2>(n, threads, [&](int64_t b, int64_t e, double* acc) {
      for (int64_t i = b; i < e; ++i) {
        const double v = x[static_cast<size_t>(i)];
        acc[0] += v;
        acc[1] += v * v;
      }
    });
  };
  const auto one = run(1);
  for (int threads : {2, 3, 7}) {
    const auto many = run(threads);
    EXPECT_EQ(std::memcmp(one.data(), many.data(), sizeof one), 0) << threads;
  }
  // Small inputs: one block, the plain serial sum.
  const auto small = parallel_sum<1>(3, 4, [&](int64_t b, int64_t e, double* acc) {
    for (int64_t i = b; i < e; ++i) acc[0] += static_cast<double>(i + 1);
  });
  EXPECT_EQ(small[0], 6.0);
}

}  // namespace
