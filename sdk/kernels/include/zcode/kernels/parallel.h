// zcode/kernels/parallel.h: the two parallel loop shapes of the update
// kernels (the optimizers; the model may use them too), on the one OpenMP
// pool (threads.h). Header-only.
//
// Elementwise kernels split [0, n) into one contiguous range per thread; the
// result does not depend on the split. Reductions (LAMB's norms, Adafactor's
// RMS) use a FIXED number of blocks that depends on n only and sum the
// partials in block order, so the bits of a result do not depend on the
// thread count or on OpenMP's reduction order (needed for bit-identical resume).
//
// Without OpenMP (no -fopenmp) both run serially on the calling thread, with
// the same blocks, so the results are the same bits.
#pragma once

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <array>
#include <cstdint>

namespace zcode::kernels {

/// Below this many elements a kernel runs on the calling thread (a fork/join
/// costs more than it saves).
inline constexpr int64_t kParallelMinElements = 1 << 15;
/// Reductions split their range into at most this many blocks.
inline constexpr int64_t kReduceBlocks = 64;

/// Calls f(begin, end) over a partition of [0, n) on up to `threads` threads.
/// Range starts are multiples of 16 items (64 bytes of fp32) so vector loops
/// start aligned. `item_cost` is the elements each item touches (a matrix row:
/// its length), for the serial cut-off.
template <class F>
void parallel_ranges(int64_t n, int threads, F&& f, int64_t item_cost = 1) {
  if (threads <= 1 || n * item_cost < kParallelMinElements || n < 2) {
    f(int64_t{0}, n);
    return;
  }
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
  {
    const int64_t t = 0, nt = 1;
#endif
    const int64_t chunk = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  }
}

/// Deterministic sum of K partial values: f(begin, end, acc) adds its block's
/// contributions over items [begin, end) into acc[0..K). Returns the block
/// sums added in block order. The blocks depend on n and item_cost only.
template <size_t K, class F>
std::array<double, K> parallel_sum(int64_t n, int threads, F&& f, int64_t item_cost = 1) {
  const int64_t blocks = std::clamp<int64_t>(std::min(n, (n * item_cost + 4095) / 4096), 1, kReduceBlocks);
  const int64_t bs = (n + blocks - 1) / blocks;
  std::array<std::array<double, K>, kReduceBlocks> part{};
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && n * item_cost >= kParallelMinElements)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = std::min(n, b * bs), hi = std::min(n, lo + bs);
    f(lo, hi, part[b].data());
  }
  std::array<double, K> total{};
  for (int64_t b = 0; b < blocks; ++b)
    for (size_t k = 0; k < K; ++k) total[k] += part[b][k];
  return total;
}

}  // namespace zcode::kernels
