// zcode/kernels/block_sum.h: sums over a tensor in fixed blocks, so that the
// bits of the result depend neither on the thread count nor on how the
// tensor's elements are split between ranks (ZeRO-1 optimizer shards, the
// host's global gradient norm). Header-only.
//
// A tensor of n elements has blocks [b·kSumBlock, min(n, (b+1)·kSumBlock)),
// counted from its first element. Each block's partial is summed on its own
// (serially, in element order, or as the caller's f decides), and the
// tensor's sum is the left fold of the partials in block order:
//   S = ((p_0 + p_1) + p_2) + ...
// A rank that holds elements [lo, hi) of the tensor, lo a multiple of
// kSumBlock, computes exactly the partials of blocks lo/kSumBlock ..., so
// the ranks' partials, gathered in rank order, are the one-process partials
// and give the same S bit for bit.
#pragma once

#include <algorithm>
#include <cstdint>

namespace zcode::kernels {

/// Elements of one block (a multiple of 16, so blocks start 64-byte aligned).
inline constexpr int64_t kSumBlock = 4096;

/// Blocks of a range of n elements that starts on a block boundary.
inline int64_t sum_blocks(int64_t n) { return (n + kSumBlock - 1) / kSumBlock; }

/// For each block b of `block` elements of [0, n): zeroes out[b·width ..
/// + width), then calls f(begin, end, out + b·width) on the block's range
/// [begin, end), the blocks spread over up to `threads` OpenMP threads
/// (each block whole on one thread, so the bits do not depend on the
/// split). `out` holds ceil(n / block)·width doubles.
template <class F>
void block_partials(int64_t n, int64_t block, int64_t width, int threads, F&& f, double* out) {
  const int64_t blocks = (n + block - 1) / block;
#if defined(_OPENMP)
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && blocks > 1 && n >= 32768)
#else
  (void)threads;
#endif
  for (int64_t b = 0; b < blocks; ++b) {
    double* acc = out + b * width;
    for (int64_t k = 0; k < width; ++k) acc[k] = 0.0;
    f(b * block, std::min(n, (b + 1) * block), acc);
  }
}

/// The left fold of `blocks` partials spaced `stride` apart: ((p_0 + p_s) + p_2s) + ...
inline double fold(const double* p, int64_t blocks, int64_t stride = 1) {
  double s = 0.0;
  for (int64_t b = 0; b < blocks; ++b) s += p[b * stride];
  return s;
}

}  // namespace zcode::kernels
