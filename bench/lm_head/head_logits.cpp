// bench_lm_head: pass 1 of glm52's fused training head, on our kernel and on
// OpenBLAS, paired in one run (#19 item 3: "measure it against OpenBLAS on
// both kinds before keeping it").
//
// The work (one row chunk of the dense benchmark: M = 342 rows of h, d = K =
// 256, V = 50,257, vocab slices of the machine's derived head_fused_slice,
// single slices handed out dynamically to the threads; the product hands out
// groups of slices of shrinking size, lm_head.h):
//   ours     kernels::head_pack of h once, then per slice kernels::head_logits:
//            the logits written transposed for pass 2, each row's max and
//            exp sum from the tile's registers (the product's pass 1).
//   OpenBLAS per slice one cblas_sgemm (z = h·W_sᵀ, row-major [M, S], inside
//            the parallel loop, OpenBLAS held to one thread), then each row's
//            max and exp sum read back from the slice with the vectorised
//            kernels::max_of and exp_shifted_sum, as the head before
//            2026-12-04 (00c72f9) did.
// Both write 2·M·V·K FLOPs' worth of logits and the same statistics; the
// check compares the statistics (not bit for bit: the sums' orders differ).
//
// Paired rounds: each round times ours and OpenBLAS's back to back, in
// alternating order (median of --reps passes each, after one warm-up pass);
// the ratio printed last is the median over rounds of OpenBLAS time / ours.
//
//   bench_lm_head [--threads 2] [--rounds 5] [--reps 5] [--slice S]
#include <zcode/kernels/head_logits.h>
#include <zcode/kernels/math.h>
#include <zcode/kernels/threads.h>

#include <blocking.h>
#include <cblas.h>
#include <common/glm52_bench.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kM = 342, kK = 256, kV = 50257;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Buffers {
  std::vector<float> h, W, hp, zt, mx, sum, z;  // z: per thread, one slice [M, S]
};

void ours(Buffers& b, int S, int slices) {
#pragma omp parallel for schedule(dynamic, 1)
  for (int s = 0; s < slices; ++s) {
    const int v0 = s * S, n = std::min(S, kV - v0);
    zcode::kernels::head_logits(kM, n, kK, b.hp.data(), b.W.data() + int64_t{v0} * kK, kK,
                                b.zt.data() + int64_t{v0} * kM, kM, b.mx.data() + int64_t{s} * kM,
                                b.sum.data() + int64_t{s} * kM, nullptr);
  }
}

void openblas(Buffers& b, int S, int slices) {
#pragma omp parallel for schedule(dynamic, 1)
  for (int s = 0; s < slices; ++s) {
    const int v0 = s * S, n = std::min(S, kV - v0);
    float* z = b.z.data() + int64_t{omp_get_thread_num()} * kM * S;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kM, n, kK, 1.f, b.h.data(), kK, b.W.data() + int64_t{v0} * kK,
                kK, 0.f, z, n);
    for (int r = 0; r < kM; ++r) {
      float* row = z + int64_t{r} * n;
      const float m = zcode::kernels::max_of(row, n);
      b.mx[int64_t{s} * kM + r] = m;
      b.sum[int64_t{s} * kM + r] = zcode::kernels::exp_shifted_sum(row, n, m);
    }
  }
}

template <class F>
double time_pass(F&& f, int reps) {
  std::vector<double> t;
  f();  // warm
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(t);
}

}  // namespace

int main(int argc, char** argv) {
  zcode::bench::use_the_products_blas_kernel("bench_lm_head", argv);
  int threads = 2, rounds = 5, reps = 5, S = 0;
  bool slice_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> int {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_lm_head: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (a == "--threads") threads = next();
    else if (a == "--rounds") rounds = next();
    else if (a == "--reps") reps = next();
    else if (a == "--slice") S = next(), slice_given = S > 0;
    else {
      std::fprintf(stderr, "bench_lm_head: unknown argument '%s' (see the header of bench/lm_head/head_logits.cpp)\n",
                   a.c_str());
      return 2;
    }
  }
  if (threads < 1 || rounds < 1 || reps < 1 || S < 0) {
    std::fprintf(stderr, "bench_lm_head: --threads, --rounds, --reps must be >= 1 and --slice >= 0\n");
    return 2;
  }
  const glm52::MachineInfo& machine = glm52::this_machine();
  if (S == 0) S = glm52::derive_blocking(machine).head_fused_slice;
  // Each sgemm runs inside the parallel loop, on one thread. OpenBLAS's
  // OpenMP build sets the OpenMP thread count with its own, so ours after.
  zcode::kernels::set_blas_num_threads(1);
  omp_set_num_threads(threads);
  const int slices = (kV + S - 1) / S;
  std::printf("bench_lm_head: CPU %s\n", machine.describe().c_str());
  std::printf(
      "bench_lm_head: OpenBLAS kernel %s (%s build); M %d rows, d %d, V %d, slices of %d (%s), %d threads, "
      "%d rounds x median of %d passes\n",
      zcode::kernels::blas_core().c_str(), zcode::kernels::blas_threading().c_str(), kM, kK, kV, S,
      slice_given ? "given" : "derived", threads, rounds, reps);

  Buffers b;
  std::mt19937 rng(2026);
  std::normal_distribution<float> nd(0.f, 1.f);
  b.h.resize(size_t(kM) * kK);
  b.W.resize(size_t(kV) * kK);
  for (float& x : b.h) x = nd(rng);
  for (float& x : b.W) x = 0.05f * nd(rng);
  b.hp.resize(size_t(zcode::kernels::head_pack_elems(kM, kK)));
  b.zt.resize(size_t(kV) * kM);
  b.mx.resize(size_t(slices) * kM);
  b.sum.resize(size_t(slices) * kM);
  b.z.resize(size_t(threads) * kM * S);

  // The check: the two give the same statistics up to the sums' orders.
  zcode::kernels::head_pack(kM, kK, b.h.data(), kK, b.hp.data());
  ours(b, S, slices);
  const std::vector<float> mx1 = b.mx, sum1 = b.sum;
  openblas(b, S, slices);
  double dmx = 0, dsum = 0;
  for (size_t i = 0; i < mx1.size(); ++i) {
    const double a = std::fabs(mx1[i] - b.mx[i]), r = std::fabs(sum1[i] - b.sum[i]) / b.sum[i];
    if (!(a <= dmx)) dmx = a;  // a NaN sticks
    if (!(r <= dsum)) dsum = r;
  }
  // And the logits themselves: ours transposed against one slice's sgemm.
  {
    const int v0 = (slices / 2) * S, n = std::min(S, kV - v0);
    std::vector<float> z(size_t(kM) * n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kM, n, kK, 1.f, b.h.data(), kK, b.W.data() + int64_t{v0} * kK,
                kK, 0.f, z.data(), n);
    ours(b, S, slices);
    for (int r = 0; r < kM; ++r)
      for (int j = 0; j < n; ++j) {
        const double d = std::fabs(z[size_t(r) * n + j] - b.zt[size_t(v0 + j) * kM + r]);
        if (!(d <= dmx)) dmx = d;
      }
  }
  std::printf(
      "check: max |ours - OpenBLAS| over row maxima and one slice's logits %.2e, max relative exp-sum "
      "difference %.2e\n",
      dmx, dsum);
  if (!(dmx < 1e-4 && dsum < 1e-4)) {
    std::printf("bench_lm_head: FAILED: the two passes disagree beyond float rounding\n");
    return 1;
  }

  const double flop = 2.0 * kM * kV * kK;
  std::vector<double> ratio;
  for (int r = 0; r < rounds; ++r) {
    auto run_ours = [&] {
      return time_pass(
          [&] {
            zcode::kernels::head_pack(kM, kK, b.h.data(), kK, b.hp.data());
            ours(b, S, slices);
          },
          reps);
    };
    auto run_openblas = [&] { return time_pass([&] { openblas(b, S, slices); }, reps); };
    double a = 0, o = 0;
    if (r % 2 == 0) a = run_ours(), o = run_openblas();
    else o = run_openblas(), a = run_ours();
    ratio.push_back(o / a);
    std::printf("round %d: ours %.2f ms (%.1f GFLOP/s) | OpenBLAS sgemm + stats %.2f ms (%.1f GFLOP/s) | %.2fx\n",
                r + 1, a * 1e3, flop / a * 1e-9, o * 1e3, flop / o * 1e-9, o / a);
  }
  const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
  std::printf("--- ratio ---\nOpenBLAS time / ours: %.2fx (rounds %.2f-%.2f)\n", median(ratio), *lo, *hi);
  return 0;
}
