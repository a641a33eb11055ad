#include <zcode/kernels/gemm_avx512.h>

#include <zcode/kernels/isa.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace zcode::kernels {

#if defined(__x86_64__)

namespace {

// Register tile: kMr rows of C by kNr = 32 columns (two zmm). 14 × 2 = 28
// accumulators, two loads of B and one broadcast of A per k: 31 of the 32
// zmm registers, 28 FMAs per 16 loads.
constexpr int kMr = 14;
constexpr int kNr = 32;
// Cache blocks (Goto & van de Geijn 2008, "Anatomy of high-performance matrix
// multiplication", section 6): a B sliver kKc × kNr (32 KiB) stays in L1
// while the A block kMc × kKc (168 KiB) streams from L2; the B panel
// kKc × kNc (2 MiB) from L3. Measured on the AMD EPYC VM (Zen 5, 48 KiB L1,
// 1 MiB L2), 2026-12-07: kMc = 14 × 12 ran 5–15 % faster than 14 × 24, and
// kKc = 384 or 512 no faster than 256 (differences within that VM's noise).
constexpr int kKc = 256;
constexpr int kMc = kMr * 12;
constexpr int kNc = 2048;

// The packed buffers one thread uses for one GEMM.
struct Buffers {
  float* a = nullptr;  // kMc × kKc, slivers [k][kMr]
  float* b = nullptr;  // kKc × kNc, slivers [k][kNr]
  ~Buffers() {
    std::free(a);
    std::free(b);
  }
};

// Every Buffers ever made, lent to one thread at a time. Not thread_local:
// this code runs inside dlopen'ed plugins, and a thread_local with a
// destructor there made LeakSanitizer's exit-time scan crash ("Tracer caught
// signal 11") after the plugin was closed (asan build, 2026-12-07). The pool
// grows to the most threads that ever ran GEMMs at once (a training step's
// team) and then allocates nothing; its destructor frees everything when the
// library is unloaded.
//
// It grows a set per thread of the calling team at once: growing one set at a
// time, when calls first overlapped, made the first step in which two threads'
// GEMMs happened to overlap allocate, and whether they did in the warm-up
// steps depended on timing (Model.NoHeapAllocationInSteadyStateStep failed 4
// times in 30 while another test run loaded the machine, 2026-12-07).
class BufferPool {
 public:
  // A set nobody else holds, or nullptr when a new one cannot be allocated.
  // Never throws (it runs inside OpenMP regions, where an exception would
  // end the process).
  Buffers* acquire() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) {
      // Every thread of this team (or of the team a region would start here)
      // may hold one; more only when more threads than that call at once.
      const size_t team = static_cast<size_t>(std::max({omp_get_num_threads(), omp_get_max_threads(), 1}));
      const size_t want = std::max(all_.size() + 1, team);
      try {
        free_.reserve(want);  // so that release() never allocates
        all_.reserve(want);
        while (all_.size() < want) {
          auto fresh = std::make_unique<Buffers>();
          fresh->a = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * kMc * kKc));
          fresh->b = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * kKc * kNc));
          if (!fresh->a || !fresh->b) break;
          all_.push_back(std::move(fresh));
          free_.push_back(all_.back().get());
        }
      } catch (const std::bad_alloc&) {
      }
      if (free_.empty()) return nullptr;
    }
    Buffers* b = free_.back();
    free_.pop_back();
    return b;
  }
  void release(Buffers* b) {
    if (!b) return;
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(b);
  }

 private:
  std::mutex mu_;
  std::vector<Buffers*> free_;
  std::vector<std::unique_ptr<Buffers>> all_;
};

BufferPool& buffer_pool() {
  static BufferPool pool;
  return pool;
}

struct Op {
  const float* p;
  long ld;
  bool trans;
  // Element (r, c) of op(X): X[r, c] or, transposed, X[c, r].
  const float* at(long r, long c) const { return trans ? p + c * ld + r : p + r * ld + c; }
};

// Packing only moves floats, so none of it changes a bit of the product.
// The strided cases (a row of op(A) or a column of op(B) contiguous in
// memory, wanted spread across a sliver) go 16 × 16 at a time through a
// register transpose: the scalar loops they replace were 5 % of a training
// step's samples (perf, 2026-12-07).

// rows r[0..16) ← their transpose: afterwards r[k][i] is the old r[i][k].
// Four rounds of two-source shuffles, each halving the distance between the
// elements that must meet: pairs of rows, quads of rows, then 128-bit lanes
// twice. The comments give what each register holds after its round.
//
// The merge-masked forms with a full mask are the same instructions; GCC 12's
// plain forms pass _mm512_undefined_ps(), which -Wmaybe-uninitialized flags
// (GCC bug 105593).
__attribute__((target("avx512f"))) inline __m512 unpacklo(__m512 a, __m512 b) {
  return _mm512_mask_unpacklo_ps(a, 0xFFFF, a, b);
}
__attribute__((target("avx512f"))) inline __m512 unpackhi(__m512 a, __m512 b) {
  return _mm512_mask_unpackhi_ps(a, 0xFFFF, a, b);
}
template <int kImm>
__attribute__((target("avx512f"))) inline __m512 lanes(__m512 a, __m512 b) {
  return _mm512_mask_shuffle_f32x4(a, 0xFFFF, a, b, kImm);
}

__attribute__((target("avx512f"))) inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved per 128-bit lane
    t[i] = unpacklo(r[i], r[i + 1]);
    t[i + 1] = unpackhi(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // quads: lane l of r[i + q] holds column 4l + q of rows i..i+3
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int q = 0; q < 4; ++q) {              // 128-bit lanes: rows 0..7 and 8..15 of columns q, 4 + q, 8 + q, 12 + q
    t[q] = lanes<0x88>(r[q], r[4 + q]);      // columns q, 8 + q of rows 0..7
    t[4 + q] = lanes<0xDD>(r[q], r[4 + q]);  // columns 4 + q, 12 + q of rows 0..7
    t[8 + q] = lanes<0x88>(r[8 + q], r[12 + q]);
    t[12 + q] = lanes<0xDD>(r[8 + q], r[12 + q]);
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = lanes<0x88>(t[q], t[8 + q]);            // column q
    r[8 + q] = lanes<0xDD>(t[q], t[8 + q]);        // column 8 + q
    r[4 + q] = lanes<0x88>(t[4 + q], t[12 + q]);   // column 4 + q
    r[12 + q] = lanes<0xDD>(t[4 + q], t[12 + q]);  // column 12 + q
  }
}

inline __mmask16 first_lanes(int n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1); }

// dst[k * stride + i] ← src_i[k] for i < n (zero for n <= i < width) and
// k < kc, where src_i = src + i * ld: the transposing copy both packs need.
// Writes `width` (at most 16) floats per k; rows past n read nothing.
__attribute__((target("avx512f"))) void pack_transposed(const float* src, long ld, int n, int kc, float* dst,
                                                        int stride, int width) {
  const __mmask16 keep = first_lanes(width);
  __m512 r[16];
  for (int k = 0; k < kc; k += 16) {
    const __mmask16 m = first_lanes(kc - k);
    for (int i = 0; i < 16; ++i) r[i] = i < n ? _mm512_maskz_loadu_ps(m, src + i * ld + k) : _mm512_setzero_ps();
    transpose16(r);
    const int ks = std::min(16, kc - k);
    for (int j = 0; j < ks; ++j) _mm512_mask_storeu_ps(dst + long{k + j} * stride, keep, r[j]);
  }
}

// Ap ← op(A)[i0 : i0+mc, k0 : k0+kc] as ceil(mc / kMr) slivers [kc][kMr],
// rows past mc zero.
__attribute__((target("avx512f"))) void pack_a(const Op& A, int i0, int mc, int k0, int kc, float* Ap) {
  for (int s = 0; s < mc; s += kMr) {
    const int rows = std::min(kMr, mc - s);
    float* dst = Ap + long{s} * kc;
    if (A.trans) {  // op(A)[i, k] = A[k, i]: each k's kMr rows are contiguous
      const __mmask16 m = first_lanes(rows), keep = first_lanes(kMr);
      for (int k = 0; k < kc; ++k)
        _mm512_mask_storeu_ps(dst + k * kMr, keep, _mm512_maskz_loadu_ps(m, A.at(i0 + s, k0 + k)));
    } else {  // a row of op(A) per source row: transposed into the sliver
      pack_transposed(A.at(i0 + s, k0), A.ld, rows, kc, dst, kMr, kMr);
    }
  }
}

// Bp ← op(B)[k0 : k0+kc, j0 : j0+nc] as ceil(nc / kNr) slivers [kc][kNr],
// columns past nc zero.
__attribute__((target("avx512f"))) void pack_b(const Op& B, int k0, int kc, int j0, int nc, float* Bp) {
  for (int s = 0; s < nc; s += kNr) {
    const int cols = std::min(kNr, nc - s);
    float* dst = Bp + long{s} * kc;
    if (!B.trans) {  // op(B)[k, j] = B[k, j]: each k's kNr columns are contiguous
      const __mmask16 m0 = first_lanes(cols), m1 = first_lanes(std::max(0, cols - 16));
      for (int k = 0; k < kc; ++k) {
        const float* src = B.at(k0 + k, j0 + s);
        _mm512_store_ps(dst + k * kNr, _mm512_maskz_loadu_ps(m0, src));
        _mm512_store_ps(dst + k * kNr + 16, _mm512_maskz_loadu_ps(m1, src + 16));
      }
    } else {  // op(B)[k, j] = B[j, k]: one source row per column, 16 columns at a time
      for (int h = 0; h < kNr; h += 16) {
        const int n = std::max(0, std::min(16, cols - h));  // 0: a zero half, nothing read
        pack_transposed(n > 0 ? B.at(k0, j0 + s + h) : nullptr, B.ld, n, kc, dst + h, kNr, 16);
      }
    }
  }
}

// How a tile's sums meet C: the first K block applies beta (C = alpha·acc +
// beta·C, C not read when beta is 0), later blocks add (C = C + alpha·acc).
struct Epilogue {
  float alpha, beta;
  bool first;
};

__attribute__((target("avx512f"))) inline __m512 finish(__m512 acc, const float* c, __mmask16 m, const Epilogue& e) {
  const __m512 s = e.alpha == 1.f ? acc : _mm512_mul_ps(_mm512_set1_ps(e.alpha), acc);
  if (e.first) {
    if (e.beta == 0.f) return s;
    const __m512 old = _mm512_maskz_loadu_ps(m, c);
    return _mm512_add_ps(s, e.beta == 1.f ? old : _mm512_mul_ps(_mm512_set1_ps(e.beta), old));
  }
  return _mm512_add_ps(_mm512_maskz_loadu_ps(m, c), s);
}

// C[0 : rows, 0 : cols] ⊕= Ap sliver · Bp sliver over kc. Every C element is
// one FMA chain over k from 0 in order, whatever rows, cols and the tile's
// place: its bits depend on K (and kKc) only.
__attribute__((target("avx512f"))) void micro_kernel(int kc, const float* __restrict Ap, const float* __restrict Bp,
                                                     float* C, long ldc, int rows, int cols, const Epilogue& e) {
  __m512 c0[kMr], c1[kMr];
#pragma GCC unroll 14
  for (int r = 0; r < kMr; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(Bp + k * kNr), b1 = _mm512_load_ps(Bp + k * kNr + 16);
    const float* a = Ap + k * kMr;
#pragma GCC unroll 14
    for (int r = 0; r < kMr; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r]);
      c0[r] = _mm512_fmadd_ps(ar, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(ar, b1, c1[r]);
    }
  }
  const __mmask16 m0 = first_lanes(cols), m1 = first_lanes(std::max(0, cols - 16));
#pragma GCC unroll 14
  for (int r = 0; r < kMr; ++r) {
    if (r >= rows) break;
    float* c = C + r * ldc;
    _mm512_mask_storeu_ps(c, m0, finish(c0[r], c, m0, e));
    if (m1) _mm512_mask_storeu_ps(c + 16, m1, finish(c1[r], c + 16, m1, e));
  }
}

// C[0 : mc, 0 : nc] ⊕= the packed A block times the packed B panel, over kc.
__attribute__((target("avx512f"))) void macro_kernel(int mc, int nc, int kc, const float* Ap, const float* Bp, float* C,
                                                     long ldc, const Epilogue& e) {
  for (int j = 0; j < nc; j += kNr)
    for (int i = 0; i < mc; i += kMr)
      micro_kernel(kc, Ap + long{i} * kc, Bp + long{j} * kc, C + i * ldc + j, ldc, std::min(kMr, mc - i),
                   std::min(kNr, nc - j), e);
}

// The blocked product of C[0:M, 0:N] on the calling thread.
//
// Goto's order runs the K blocks outside the row blocks: one B panel packed
// at a time, but a pass over all of C per K block. Where the column panel is
// narrower than kNc, the B buffer holds several K blocks of it at once
// (kNc / nc_padded of them, nc_padded being nc rounded up to kNr), and those
// run inside each row block, whose C tile then stays in cache across them:
// C is passed ceil(K / group) times (group = that many K blocks' columns)
// instead of ceil(K / kKc). Head gradients over 1,024 tokens with d = 256:
// the weight's 50,304 × 256 C goes from 4 passes to 1, the input's
// 1,024 × 256 from 197 to 25 (−17 % and −6 % time on one core of the AMD EPYC
// VM, 2026-12-07). The arithmetic is the same in either order: every C element
// still meets its K blocks in ascending order, so no bit depends on it.
void gemm_serial(const Op& A, const Op& B, int M, int N, int K, float alpha, float beta, float* C, long ldc,
                 Buffers& buf) {
  for (int j0 = 0; j0 < N; j0 += kNc) {
    const int nc = std::min(kNc, N - j0);
    const long nc_padded = (nc + kNr - 1) / kNr * kNr;
    const int group = static_cast<int>(kNc / nc_padded) * kKc;  // K columns of B the buffer holds at once
    for (int kg = 0, k_end; kg < K; kg = k_end) {
      k_end = K - kg > group ? kg + group : K;  // (kg + group may pass INT_MAX)
      for (int k0 = kg; k0 < k_end; k0 += kKc)
        pack_b(B, k0, std::min(kKc, k_end - k0), j0, nc, buf.b + (k0 - kg) * nc_padded);
      for (int i0 = 0; i0 < M; i0 += kMc) {
        const int mc = std::min(kMc, M - i0);
        for (int k0 = kg; k0 < k_end; k0 += kKc) {
          const int kc = std::min(kKc, k_end - k0);
          pack_a(A, i0, mc, k0, kc, buf.a);
          macro_kernel(mc, nc, kc, buf.a, buf.b + (k0 - kg) * nc_padded, C + i0 * ldc + j0, ldc,
                       {alpha, beta, k0 == 0});
        }
      }
    }
  }
}

}  // namespace

bool sgemm_avx512(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                  int ldb, float beta, float* C, int ldc, int threads) {
  if (!isa_supported(Isa::kAvx512f)) return false;
  if (M <= 0 || N <= 0 || K <= 0 || !A || !B || !C) return false;
  if (lda < (trans_a ? M : K) || ldb < (trans_b ? K : N) || ldc < N) return false;
  if (alpha == 0.f) {  // BLAS's convention: A and B are not read, C = beta·C
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        float& c = C[long{i} * ldc + j];
        c = beta == 0.f ? 0.f : beta * c;
      }
    return true;
  }
  const Op a{A, lda, trans_a}, b{B, ldb, trans_b};
  // Threads split C into row or column ranges (whichever is longer), each a
  // whole number of register tiles; the K order inside a tile is the same on
  // every split, so the bits do not depend on the thread count.
  const int64_t work = int64_t{M} * N * K;
  if (threads > 1 && omp_in_parallel()) threads = 1;
  if (work < (int64_t{1} << 21)) threads = 1;
  const bool by_rows = M >= N;
  const int unit = by_rows ? kMr : kNr, units = ((by_rows ? M : N) + unit - 1) / unit;
  threads = std::max(1, std::min(threads, units));
  if (threads == 1) {  // no OpenMP region at all: inside the model's parallel loops it would be a nested one
    Buffers* buf = buffer_pool().acquire();
    if (!buf) return false;
    gemm_serial(a, b, M, N, K, alpha, beta, C, ldc, *buf);
    buffer_pool().release(buf);
    return true;
  }
  // C is written only once every thread has its buffers: a failed
  // allocation leaves C untouched for the caller's fallback.
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int u0 = int(int64_t{units} * t / nt), u1 = int(int64_t{units} * (t + 1) / nt);
    Buffers* buf = buffer_pool().acquire();
    if (!buf) failed = true;
#pragma omp barrier
    if (!failed && u0 < u1) {
      const int lo = u0 * unit, hi = std::min(by_rows ? M : N, u1 * unit);
      if (by_rows) {
        const Op as{a.at(lo, 0), lda, trans_a};
        gemm_serial(as, b, hi - lo, N, K, alpha, beta, C + long{lo} * ldc, ldc, *buf);
      } else {
        const Op bs{b.at(0, lo), ldb, trans_b};
        gemm_serial(a, bs, M, hi - lo, K, alpha, beta, C + lo, ldc, *buf);
      }
    }
    buffer_pool().release(buf);
  }
  return !failed;
}

#else

bool sgemm_avx512(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int, int) {
  return false;
}

#endif

}  // namespace zcode::kernels
