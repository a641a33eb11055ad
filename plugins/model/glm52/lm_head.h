// glm52/lm_head.h: the LM head, softmax cross-entropy and their backward,
// chunked over rows and fused over vocab slices so that each slice of logits
// is post-processed while it is still in the cache of the core that computed it.
#pragma once

#include "blocking.h"

#include <zcode/kernels/gemm.h>
#include <zcode/kernels/head_logits.h>
#include <zcode/kernels/math.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace glm52 {

/// First slice of group g of `groups` over `slices` slices. Group sizes
/// shrink linearly (group g gets a share ∝ groups − g), so the groups handed
/// out last by the dynamic schedule are small and the two cores finish pass 2
/// together even when one runs slower. Measured in the dense benchmark
/// (2026-11-30): the idle time of the faster thread in pass 2 fell from
/// 35-60 ms to 11-12 ms a step against 8 equal groups. Depends on the counts
/// only, so the summation order is fixed. Groups may be empty when slices <
/// groups; group 0 never is.
inline int64_t head_group_begin(int64_t g, int64_t groups, int64_t slices) {
  const int64_t left = groups - g;
  return slices - slices * left * (left + 1) / (groups * (groups + 1));
}

/// logsumexp of row r of a chunk from its per-slice maxima m_s and exp sums
/// σ_s = Σ e^{z_s − m_s} (tables [slices, R], row r at s·R + r): M + ln Σ_s
/// σ_s·e^{m_s−M} with M = max_s m_s, summed in slice order in double (the
/// streaming softmax of Milakov & Gimelshein 2018). The one merge of both
/// heads, so that evaluation's nll is training's bit for bit.
template <class T>
double slices_logsumexp(const T* smax, const T* ssum, int64_t slices, int64_t R, int64_t r) {
  double M = -std::numeric_limits<double>::infinity();
  for (int64_t s = 0; s < slices; ++s) M = std::max(M, static_cast<double>(smax[s * R + r]));
  double sum = 0;
  for (int64_t s = 0; s < slices; ++s)
    sum += static_cast<double>(ssum[s * R + r]) * std::exp(static_cast<double>(smax[s * R + r]) - M);
  return M + std::log(sum);
}

/// A chunk of `rows` rows (labels [rows], −1 = excluded) with no label left:
/// writes its nll [rows] = 0 and dh [rows, d] = 0 and returns true, so the
/// caller skips the chunk's GEMMs; returns false (writing nothing) otherwise.
template <class T>
bool skip_unlabelled_chunk(int64_t rows, int d, const int32_t* labels, double* nll, T* dh) {
  for (int64_t i = 0; i < rows; ++i)
    if (labels[i] >= 0) return false;
  std::memset(static_cast<void*>(dh), 0, sizeof(T) * size_t(rows) * size_t(d));
  for (int64_t i = 0; i < rows; ++i) nll[i] = 0.0;
  return true;
}

/// One vocab slice of the fused heads: z = h·W_sᵀ for the packed rows hp,
/// each row's max, exp sum and (arg ≠ nullptr) first arg-max column, and
/// (zt ≠ nullptr) z transposed, zt[j·ldz + r]: zcode/kernels/head_logits.h's
/// contract. float runs its vector kernel (the best variant this CPU has);
/// double, the gradient check's precision, its generic template.
template <class T>
void slice_logits(int rows, int n, int d, const T* hp, const T* Ws, T* zt, long ldz, T* mx, T* sum, T* arg) {
  if constexpr (std::is_same_v<T, float>) zcode::kernels::head_logits(rows, n, d, hp, Ws, d, zt, ldz, mx, sum, arg);
  else zcode::kernels::head_logits_generic<T>(rows, n, d, hp, Ws, d, zt, ldz, mx, sum, arg, 12);
}

/// Scratch of head_xent_fused, in elements of T, for chunks of `rows` rows
/// under blocking `bl` (its head_fused_slice and head_fused_groups). Linear in
/// rows for multiples of 16 (kernels::kHeadPanelRows).
inline int64_t head_xent_fused_scratch(int64_t rows, int64_t V, int64_t d, const Blocking& bl) {
  const int64_t slices = (V + bl.head_fused_slice - 1) / bl.head_fused_slice;
  return 2 * slices * rows + 2 * rows + int64_t{bl.head_fused_groups} * rows * d +
         zcode::kernels::head_pack_elems(static_cast<int>(rows), static_cast<int>(d));
}

/// Fused LM head + softmax cross-entropy + backward over N rows, in chunks
/// of `chunk` rows (the last may be shorter) so that the [N, V] logits never
/// exist.
///   h      : [N, d] final hidden states; W: [V, d] head weight (row v = token v).
///   labels : [N] target ids in [0, V), or −1 for rows excluded from the loss.
///   logits : chunk·V elements of scratch, any content on entry, clobbered;
///            slice s (vocab v0 = s·S, S = bl.head_fused_slice, n columns) of a
///            chunk is a contiguous [n, chunk] block at logits + v0·chunk, z
///            transposed (column j of the slice is contiguous over the rows:
///            the layout the logits kernel's tiles store).
///   scratch: head_xent_fused_scratch(chunk, V, d, bl) elements.
///   bl     : the blocking (blocking.h): slice width S and the fixed number of
///            dh groups (also the most threads used); both set the summation
///            order, neither depends on the thread count.
///   nll    : [N] out, logsumexp(z_r) − z_r[label] (nats), 0 for excluded rows.
///   dh     : [N, d] out (overwritten), ∂(grad_scale·Σ nll)/∂h; exactly 0 for
///            excluded rows.
///   dW     : [V, d] accumulated (+=), ∂(grad_scale·Σ nll)/∂W.
/// With z = h·Wᵀ and p = softmax(z): ∂nll/∂z = p − onehot(label) (Goodfellow
/// et al. 2016, eq. 6.31); dh = G·W, dW += Gᵀ·h with G = grad_scale·(p − onehot).
///
/// Per chunk: h's rows are packed once (kernels::head_pack). Pass 1, per
/// slice s: kernels::head_logits writes z_s and the rows' maxima m_s and exp
/// sums σ_s, computed while z_s is in registers (the online softmax of
/// Milakov & Gimelshein 2018). Merge, per row: lse = slices_logsumexp, nll =
/// lse − z[label] (kernels::head_dot: the same bits as the kernel's z).
/// Pass 2, per slice: G_s = grad_scale·e^{z_s − lse} − grad_scale·onehot in
/// place of z_s, then dW_s += G_sᵀ·h and a group's partial dh += G_s·W_s,
/// reading G_s from cache. The logits are read back from memory once.
///
/// Pass 2 of chunk c and pass 1 of chunk c+1 run in one sweep over the
/// slices: slice s of chunk c+1 is computed right after slice s of chunk c is
/// consumed, into the same memory, while it and W_s are still in that core's
/// cache. W is read C+1 times per call instead of 2C, and the logits need no
/// zeroing between chunks. Measured in paired training steps (2026-11-30,
/// dense and MoE benchmarks, 2 threads): 1-2 % a step against one chunk at a
/// time, same bits.
///
/// The sweeps hand out the bl.head_fused_groups groups of slices dynamically, but
/// a result never depends on the thread that computes it (a group's partial
/// dh sums its slices in order, and the groups are summed in order): the same
/// bits for any thread count. Chunks
/// without a label are skipped (nll 0, dh 0). The GEMMs run inside OpenMP
/// loops, where the OpenMP build of OpenBLAS runs them single-threaded (its
/// pthread build would start its own threads: the model uses the unfused
/// path then).
template <class T>
void head_xent_fused(int64_t N, int64_t chunk, int64_t V, int d, const T* h, const T* W, const int32_t* labels,
                     T grad_scale, T* logits, T* scratch, double* nll, T* dh, T* dW, const Blocking& bl) {
  const int64_t S = bl.head_fused_slice, slices = (V + S - 1) / S, R = chunk;
  const int64_t groups = std::min<int64_t>(std::clamp(bl.head_fused_groups, 1, kMaxHeadFusedGroups), slices);
  struct Chunk {
    int64_t r0 = -1;  // first row (< 0: no chunk)
    int rows = 0;
  };
  T* smax = scratch;               // [slices, R]: m_s
  T* ssum = smax + slices * R;     // [slices, R]: σ_s
  T* lse = ssum + slices * R;      // [R]: the row's logsumexp, for pass 2
  T* coef = lse + R;               // [R]: grad_scale, 0 for an excluded row
  T* dpart = coef + R;             // [groups, R, d]
  T* hp = dpart + groups * R * d;  // head_pack of the chunk in pass 1

  auto pass1 = [&](const Chunk& c, int64_t s) {
    const int64_t v0 = s * S;
    const int n = static_cast<int>(std::min(S, V - v0));
    slice_logits<T>(c.rows, n, d, hp, W + v0 * d, logits + v0 * R, R, smax + s * R, ssum + s * R, nullptr);
  };
  auto merge = [&](const Chunk& c) {
    const int32_t* lab = labels + c.r0;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < c.rows; ++r) {
      const double l = slices_logsumexp(smax, ssum, slices, R, r);
      lse[r] = static_cast<T>(l);
      coef[r] = lab[r] < 0 ? T(0) : grad_scale;
      nll[c.r0 + r] =
          lab[r] < 0
              ? 0.0
              : l - static_cast<double>(zcode::kernels::head_dot(d, h + (c.r0 + r) * d, W + int64_t{lab[r]} * d));
    }
  };
  auto pass2 = [&](const Chunk& c, int64_t s, T* part, bool first) {
    const int64_t v0 = s * S;
    const int n = static_cast<int>(std::min(S, V - v0));
    T* G = logits + v0 * R;  // [n, R]: z_s transposed, then G_s transposed
    for (int j = 0; j < n; ++j) {
      T* g = G + int64_t{j} * R;
      // An excluded row's G is 0 whatever its z (even NaN or infinite).
#pragma omp simd
      for (int r = 0; r < c.rows; ++r) {
        const T e = coef[r] * zcode::kernels::kexp(g[r] - lse[r]);
        g[r] = coef[r] != T(0) ? e : T(0);
      }
    }
    const int32_t* lab = labels + c.r0;
    for (int r = 0; r < c.rows; ++r)
      if (lab[r] >= v0 && lab[r] < v0 + n) G[(lab[r] - v0) * R + r] -= grad_scale;
    zcode::kernels::gemm(false, false, n, d, c.rows, T(1), G, R, h + c.r0 * d, d, T(1), dW + v0 * d, d);
    zcode::kernels::gemm(true, false, c.rows, d, n, T(1), G, R, W + v0 * d, d, first ? T(0) : T(1), part, d);
  };
  // One sweep: pass 2 of `done` (or none) and pass 1 of `next` (or none).
  // Dynamic schedules: on a shared machine one core often runs slower for a while.
  auto sweep = [&](const Chunk* done, const Chunk* next) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t s0 = head_group_begin(g, groups, slices), s1 = head_group_begin(g + 1, groups, slices);
      for (int64_t s = s0; s < s1; ++s) {
        if (done) pass2(*done, s, dpart + g * R * d, s == s0);
        if (next) pass1(*next, s);
      }
    }
  };
  bool empty[kMaxHeadFusedGroups];  // a group without slices never wrote its partial
  for (int64_t g = 0; g < groups; ++g)
    empty[g] = head_group_begin(g, groups, slices) == head_group_begin(g + 1, groups, slices);
  auto reduce = [&](const Chunk& c) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < c.rows; ++r) {
      T* out = dh + (c.r0 + r) * d;
      std::memcpy(static_cast<void*>(out), dpart + r * d, sizeof(T) * size_t(d));
      for (int64_t g = 1; g < groups; ++g) {
        if (empty[g]) continue;
        const T* p = dpart + (g * R + r) * d;
#pragma omp simd
        for (int i = 0; i < d; ++i) out[i] += p[i];
      }
    }
  };

  Chunk done;  // the chunk whose pass 1 and merge are finished
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    const int rows = static_cast<int>(std::min<int64_t>(R, N - r0));
    if (skip_unlabelled_chunk(rows, d, labels + r0, nll + r0, dh + r0 * d)) continue;
    const Chunk next{r0, rows};
    zcode::kernels::head_pack(rows, d, h + r0 * d, d, hp);  // pass 2 of `done` reads h, not hp
    sweep(done.r0 >= 0 ? &done : nullptr, &next);
    if (done.r0 >= 0) reduce(done);
    merge(next);
    done = next;
  }
  if (done.r0 >= 0) {
    sweep(&done, nullptr);
    reduce(done);
  }
}

/// Scratch of head_logprob_fused, in elements of T, for chunks of `rows`
/// rows, with blocking `bl`; the model's workspace gives it the buffer of
/// head_xent_fused, sized for the larger of the two.
inline int64_t head_logprob_fused_scratch(int64_t rows, int64_t V, int64_t d, const Blocking& bl) {
  const int64_t slices = (V + bl.head_fused_slice - 1) / bl.head_fused_slice;
  return 3 * slices * rows + zcode::kernels::head_pack_elems(static_cast<int>(rows), static_cast<int>(d));
}

/// The forward-only twin of head_xent_fused (evaluation: forward_logprobs,
/// forward_eval), over N rows in chunks of `chunk` rows:
///   h, W, labels : as head_xent_fused (labels −1: no nll);
///   scratch : head_logprob_fused_scratch(chunk, V, d, bl) elements;
///   bl      : the blocking (blocking.h), as head_xent_fused's;
///   nll     : [N] out, logsumexp(z_r) − z_r[label] (nats), 0 for rows without
///             a label; the same bits as head_xent_fused's nll for the same
///             h and W (the same kernel, slice maxima, exp sums and merge);
///   argmax  : [N] out or nullptr: argmax_v z_r[v] for every row, labelled or
///             not, ties to the lowest id (the slices' first maxima, merged
///             in slice order).
/// Per chunk, h packed once, then one sweep over the slices with
/// kernels::head_logits, which keeps each slice's logits in registers: the
/// [rows, V] logits are never written, where the unfused path (head_fwd, then
/// a pass for the arg-max and one for the softmax) writes them once and reads
/// them twice. Results do not depend on the thread count (each slice's values
/// are computed by one thread, merged in order). Requires V < 2^24 (the
/// slices' arg-max columns are kept as T); the caller uses the unfused path
/// otherwise, and with OpenBLAS's pthread build.
template <class T>
void head_logprob_fused(int64_t N, int64_t chunk, int64_t V, int d, const T* h, const T* W, const int32_t* labels,
                        T* scratch, double* nll, int32_t* argmax, const Blocking& bl) {
  const int64_t S = bl.head_fused_slice, slices = (V + S - 1) / S, R = chunk;
  const int64_t groups = std::min<int64_t>(std::clamp(bl.head_fused_groups, 1, kMaxHeadFusedGroups), slices);
  T* smax = scratch;            // [slices, R]: m_s
  T* ssum = smax + slices * R;  // [slices, R]: σ_s
  T* sarg = ssum + slices * R;  // [slices, R]: first column of m_s in slice s (exact: V < 2^24)
  T* hp = sarg + slices * R;    // head_pack of the chunk
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    const int rows = static_cast<int>(std::min<int64_t>(R, N - r0));
    const int32_t* lab = labels + r0;
    bool any_label = false;
    for (int r = 0; r < rows && !any_label; ++r) any_label = lab[r] >= 0;
    if (!any_label && !argmax) {
      for (int r = 0; r < rows; ++r) nll[r0 + r] = 0.0;
      continue;
    }
    zcode::kernels::head_pack(rows, d, h + r0 * d, d, hp);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t s = head_group_begin(g, groups, slices); s < head_group_begin(g + 1, groups, slices); ++s) {
        const int64_t v0 = s * S;
        const int n = static_cast<int>(std::min(S, V - v0));
        slice_logits<T>(rows, n, d, hp, W + v0 * d, nullptr, 0, smax + s * R, ssum + s * R,
                        argmax ? sarg + s * R : nullptr);
      }
    }
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
      if (argmax) {
        int64_t best = 0;
        for (int64_t s = 1; s < slices; ++s)
          if (smax[s * R + r] > smax[best * R + r]) best = s;
        argmax[r0 + r] = static_cast<int32_t>(best * S + static_cast<int64_t>(sarg[best * R + r]));
      }
      if (lab[r] < 0) {
        nll[r0 + r] = 0.0;
        continue;
      }
      nll[r0 + r] = slices_logsumexp(smax, ssum, slices, R, r) -
                    static_cast<double>(zcode::kernels::head_dot(d, h + (r0 + r) * d, W + int64_t{lab[r]} * d));
    }
  }
}

}  // namespace glm52
