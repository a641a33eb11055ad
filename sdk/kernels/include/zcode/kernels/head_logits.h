// zcode/kernels/head_logits.h: the LM head's logits z = h·Wᵀ for one vocab
// slice, with each row's softmax statistics computed while z is in registers.
//
// The head is most of the FLOPs of a small-d_model model (K = d_model = 256,
// V = 50257), and sgemm spends a large share of each slice's call outside its
// micro-kernel: it packs the same rows of h again for every slice, packs the
// W slice, and the caller then reads z back to find its maxima and exp sums.
// Here h is packed once per row chunk (head_pack), W is read in its own
// [V, K] layout (each element broadcast from L1), and the maxima, arg-maxima
// and exp sums come out of the tile's registers (Milakov & Gimelshein 2018,
// "Online normalizer calculation for softmax"), so the forward-only head never
// writes z at all; the training head stores it once, transposed (zt).
//
// Numerics: every z[r, j] is one fused multiply-add chain over k = 0..K−1 in
// order, starting from 0, on every variant: the same bits whatever the tile,
// the slice, the thread and the CPU, and the same as head_dot's. The exp sums
// rescale once per block of columns (head_logits_block: 12 on AVX-512 and in
// the scalar variant, 6 on AVX2), and the exp differs in its last bits between
// the vector and the scalar code: sum may differ in its last bits between
// machines, never between runs or thread counts on one machine.
#pragma once

#include <zcode/kernels/isa.h>
#include <zcode/kernels/math.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace zcode::kernels {

/// Rows of h per panel of the packed layout.
inline constexpr int kHeadPanelRows = 16;

/// Elements of the packed copy of M rows of K columns: ceil(M / 16)·16·K.
inline int64_t head_pack_elems(int M, int K) {
  return int64_t{(M + kHeadPanelRows - 1) / kHeadPanelRows} * kHeadPanelRows * K;
}

/// hp ← h [M, K] (row stride ldh ≥ K) as ceil(M/16) panels, each [K][16]
/// row-minor: hp[(p·K + k)·16 + i] = h[16p + i, k], 0 for rows ≥ M.
/// hp holds head_pack_elems(M, K) elements. Any T (float or double).
template <class T>
void head_pack(int M, int K, const T* h, long ldh, T* hp) {
  const int P = (M + kHeadPanelRows - 1) / kHeadPanelRows;
  for (int p = 0; p < P; ++p) {
    T* panel = hp + int64_t{p} * K * kHeadPanelRows;
    for (int i = 0; i < kHeadPanelRows; ++i) {
      const int r = p * kHeadPanelRows + i;
      const T* row = h + int64_t{r} * ldh;
      for (int k = 0; k < K; ++k) panel[int64_t{k} * kHeadPanelRows + i] = r < M ? row[k] : T(0);
    }
  }
}

/// Σ_k x[k]·w[k] as one fused multiply-add chain in k order from 0: the same
/// bits as head_logits' z for that row and column (a label's logit, computed
/// on its own).
template <class T>
T head_dot(int K, const T* x, const T* w) {
  T s = 0;
  for (int k = 0; k < K; ++k) s = std::fma(x[k], w[k], s);
  return s;
}

/// One slice of the head: rows of W are the slice's n vocab entries.
///   hp   : head_pack of M rows of h, K columns.
///   W    : [n, K], row stride ldw ≥ K (row j = vocab entry v0 + j).
///   zt   : nullptr, or [n, ldz] out with ldz ≥ M: zt[j·ldz + r] = z[r, j]
///          (z transposed: a column of the slice is contiguous over rows).
///   mx   : [M] out, max_j z[r, j] (NaN entries ignored; −FLT_MAX if all are NaN).
///   sum  : [M] out, Σ_j exp(z[r, j] − mx[r]) in [1, n] (NaN if a z is NaN).
///   arg  : nullptr, or [M] out: the first j with z[r, j] = mx[r], as T
///          (exact for n < 2^24).
/// The statistics are streamed over blocks of `block` columns (in order):
/// per block m' = max(m, the block's max), s ← s·exp(m − m') + Σ_j exp(z_j −
/// m') in column order, m ← m'. exp is kexp (math.h). Serial; no allocation.
template <class T>
void head_logits_generic(int M, int n, int K, const T* hp, const T* W, long ldw, T* zt, long ldz, T* mx, T* sum, T* arg,
                         int block) {
  for (int r = 0; r < M; ++r) {
    const T* panel = hp + int64_t{r / kHeadPanelRows} * K * kHeadPanelRows + r % kHeadPanelRows;
    T m = std::numeric_limits<T>::lowest(), s = 0, a = 0;
    for (int j0 = 0; j0 < n; j0 += block) {
      const int j1 = std::min(n, j0 + block);
      T z[64];  // block ≤ 64
      T m1 = m;
      for (int j = j0; j < j1; ++j) {
        const T* w = W + int64_t{j} * ldw;
        T acc = 0;
        for (int k = 0; k < K; ++k) acc = std::fma(panel[int64_t{k} * kHeadPanelRows], w[k], acc);
        z[j - j0] = acc;
        if (zt) zt[int64_t{j} * ldz + r] = acc;
        if (acc > m1) m1 = acc, a = static_cast<T>(j);
      }
      s *= kexp(m - m1);
      for (int j = j0; j < j1; ++j) s += kexp(z[j - j0] - m1);
      m = m1;
    }
    mx[r] = m;
    sum[r] = s;
    if (arg) arg[r] = a;
  }
}

/// The column block of `isa`'s variant (12, or 6 on AVX2): the granule of its
/// online statistics.
int head_logits_block(Isa isa);

/// head_logits_generic's contract for float, on best_isa()'s variant (isa.h):
/// AVX-512 tiles of 32 rows × 12 columns, AVX2+FMA tiles of 16 × 6, else
/// head_logits_generic with block 12. Serial (the caller runs slices on its
/// threads); no allocation. M, n ≥ 0; K ≥ 1.
void head_logits(int M, int n, int K, const float* hp, const float* W, long ldw, float* zt, long ldz, float* mx,
                 float* sum, float* arg);

/// head_logits on a given variant (the tests check each one). Returns false,
/// computing nothing, when this CPU lacks its instructions.
bool head_logits_on(Isa isa, int M, int n, int K, const float* hp, const float* W, long ldw, float* zt, long ldz,
                    float* mx, float* sum, float* arg);

}  // namespace zcode::kernels
