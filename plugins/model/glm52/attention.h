// glm52/attention.h: the attention core of one head for one query row, and
// causal grouped-query attention over a batch, forward and backward side by
// side. Projections and RoPE live in model.cpp; this is softmax(q·kᵀ/√hd)·v.
#pragma once

#include <zcode/kernels/gemm.h>
#include <zcode/kernels/math.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace glm52 {

/// Softmax of one score row in place (scores at keys 0..t, Vaswani et al.
/// 2017, eq. 1), with the document mask, zeros at keys t+1..n_cols−1, and the
/// dynamic head mask: when head_mask and the entropy −Σ P_j ln P_j (nats)
/// exceeds `threshold`, the row becomes all zeros and false is returned.
template <class T>
bool softmax_row(T* p, int t, int n_cols, const int32_t* key_doc, int32_t q_doc, bool head_mask, T threshold) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  if (key_doc)
    for (int j = 0; j <= t; ++j) p[j] = key_doc[j] != q_doc ? kNegInf : p[j];
  T mx = kNegInf;
#pragma omp simd reduction(max : mx)
  for (int j = 0; j <= t; ++j) mx = p[j] > mx ? p[j] : mx;
  T sum = 0, ps = 0;  // ps = Σ e_j s_j, for the entropy
#pragma omp simd reduction(+ : sum, ps)
  for (int j = 0; j <= t; ++j) {
    const T s = p[j];
    const bool live = s != kNegInf;
    const T e = live ? zcode::kernels::kexp(s - mx) : T(0);
    ps += live ? e * s : T(0);
    sum += e;
    p[j] = e;
  }
  const T inv = T(1) / sum;
  bool kept = true;
  if (head_mask) {
    // H = −Σ P_j (s_j − lse) = lse − Σ P_j s_j, lse = mx + ln(sum).
    const T entropy = mx + std::log(sum) - ps * inv;
    kept = !(entropy > threshold);
  }
  const T f = kept ? inv : T(0);
#pragma omp simd
  for (int j = 0; j <= t; ++j) p[j] *= f;
  for (int j = t + 1; j < n_cols; ++j) p[j] = T(0);
  return kept;
}

/// attend_row for a head dimension HD fixed at compile time (a multiple of
/// 16). Each score sums q_i·k_i in 16 lanes (lane l over i ≡ l mod 16, in
/// order of i), then the lanes pairwise (l + 8, + 4, + 2, + 1), with q
/// copied out of reach of p_out's stores. Why: with hd a run-time value GCC
/// reduced each score through the stack one lane at a time, so a decode
/// step's attention ran at a fraction of the loads' rate (2026-12-07, 2-core
/// AMD EPYC VM: one layer of 32 slots × 4 heads × 128 cached keys, 720–741 →
/// 404–456 µs). o's sums are attend_row's (the same products added in the
/// same order); the scores' order differs. o is summed in a local array and
/// copied out at the end, not in place as attend_row's loop does: sharing
/// that loop (even with o __restrict) measured 20–30 % slower on the same
/// layer (2026-12-07, 6 alternating runs). The array still makes a round
/// trip through the stack per key; GCC vector types measured no faster.
template <class T, int HD>
bool attend_row_fixed(const T* q, const T* k, const T* v, int64_t stride, int n_keys, const int32_t* key_doc,
                      int32_t q_doc, T scale, bool head_mask, T threshold, T* p_out, T* o) {
  static_assert(HD % 16 == 0);
  constexpr int L = 16;
  T qr[HD];  // a copy: p_out's stores may alias q, which would reload it at every key
  for (int i = 0; i < HD; ++i) qr[i] = q[i];
  for (int j = 0; j < n_keys; ++j) {
    const T* kj = k + j * stride;
    T lane[L] = {};
#pragma GCC unroll 16
    for (int c = 0; c < HD; c += L)
#pragma omp simd
      for (int l = 0; l < L; ++l) lane[l] += qr[c + l] * kj[c + l];
#pragma GCC unroll 4
    for (int w = L / 2; w > 0; w /= 2)
#pragma omp simd
      for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
    p_out[j] = lane[0] * scale;
  }
  const bool kept = softmax_row(p_out, n_keys - 1, n_keys, key_doc, q_doc, head_mask, threshold);
  T acc[HD] = {};
  for (int j = 0; j < n_keys; ++j) {
    const T pj = p_out[j];
    if (pj == T(0)) continue;
    const T* vj = v + j * stride;
#pragma omp simd
    for (int i = 0; i < HD; ++i) acc[i] += pj * vj[i];
  }
  for (int i = 0; i < HD; ++i) o[i] = acc[i];
  return kept;
}

/// One query row against n_keys keys (Vaswani et al. 2017, eq. 1), the
/// KV-cache decode path: s_j = scale·q·k_j, P = softmax_row(s), o = Σ_j P_j v_j
/// (the same softmax, masks and entropy as the batched forward). Key j is
/// masked when key_doc && key_doc[j] != q_doc. Dynamic head mask: a row whose
/// entropy exceeds `threshold` gets o = 0 and returns false. p_out [n_keys]
/// gets P. q, k_j, v_j, o are [hd]; key j lives at k + j·stride, v + j·stride.
/// float with hd 64 or 128 runs attend_row_fixed (its scores sum in another order).
template <class T>
bool attend_row(const T* q, const T* k, const T* v, int64_t stride, int n_keys, const int32_t* key_doc, int32_t q_doc,
                int hd, T scale, bool head_mask, T threshold, T* p_out, T* o) {
  if constexpr (std::is_same_v<T, float>) {
    if (hd == 64)
      return attend_row_fixed<T, 64>(q, k, v, stride, n_keys, key_doc, q_doc, scale, head_mask, threshold, p_out, o);
    if (hd == 128)
      return attend_row_fixed<T, 128>(q, k, v, stride, n_keys, key_doc, q_doc, scale, head_mask, threshold, p_out, o);
  }
  for (int j = 0; j < n_keys; ++j) {
    const T* kj = k + j * stride;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < hd; ++i) s += q[i] * kj[i];
    p_out[j] = s * scale;
  }
  const bool kept = softmax_row(p_out, n_keys - 1, n_keys, key_doc, q_doc, head_mask, threshold);
  for (int i = 0; i < hd; ++i) o[i] = T(0);
  for (int j = 0; j < n_keys; ++j) {
    const T pj = p_out[j];
    if (pj == T(0)) continue;
    const T* vj = v + j * stride;
#pragma omp simd
    for (int i = 0; i < hd; ++i) o[i] += pj * vj[i];
  }
  return kept;
}

/// Causal GQA attention forward over a batch: per (batch, head), in tiles of
/// `tile` query rows (Blocking::attn_tile: each tile's GEMMs run over keys
/// 0..(last row of the tile) only, so the causal half is mostly skipped; with
/// T = 256 and 64-row tiles they cover 62.5 % of the T×T square), S =
/// scale·Q·Kᵀ and O = P·V are GEMMs (single-threaded
/// inside the OpenMP loop; the OpenMP build of OpenBLAS does not nest).
///   qkv   [B·T, ld] rows: q heads (H·hd) | k heads (Hkv·hd) | v heads (Hkv·hd), RoPE applied.
///   P     [B, H, T, T] out: row t holds P over keys 0..t, zeros up to the end
///         of its tile's key range, anything beyond; a masked row is all zeros.
///   o     [B·T, H·hd] out; hmask [B·T, H] out (1 kept, 0 masked by entropy).
///   doc   [B, T] document ids or nullptr (cross-document attention allowed).
/// Query head h reads kv head h / (H/Hkv). Returns the number of masked (token, head) rows.
template <class T>
int64_t attention_fwd(const T* qkv, T* P, T* o, uint8_t* hmask, int B, int Tn, int H, int Hkv, int hd,
                      const int32_t* doc, bool head_mask, T threshold, int tile) {
  using zcode::kernels::gemm;
  const int64_t ld = static_cast<int64_t>(H + 2 * Hkv) * hd;
  const int ldo = H * hd;
  const int group = H / Hkv;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  int64_t masked = 0;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) reduction(+ : masked)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int g = h / group;
      const int64_t row0 = static_cast<int64_t>(b) * Tn;
      const T* qb = qkv + row0 * ld + static_cast<int64_t>(h) * hd;
      const T* kb = qkv + row0 * ld + static_cast<int64_t>(H + g) * hd;
      const T* vb = qkv + row0 * ld + static_cast<int64_t>(H + Hkv + g) * hd;
      const int32_t* db = doc ? doc + row0 : nullptr;
      T* Pb = P + (static_cast<int64_t>(b) * H + h) * Tn * Tn;
      for (int r0 = 0; r0 < Tn; r0 += tile) {
        const int rows = std::min(tile, Tn - r0), nk = r0 + rows;
        T* Pt = Pb + static_cast<int64_t>(r0) * Tn;
        gemm(false, true, rows, nk, hd, scale, qb + r0 * ld, static_cast<int>(ld), kb, static_cast<int>(ld), T(0), Pt,
             Tn);
        for (int i = 0; i < rows; ++i) {
          const int t = r0 + i;
          const bool kept =
              softmax_row(Pt + static_cast<int64_t>(i) * Tn, t, nk, db, db ? db[t] : 0, head_mask, threshold);
          hmask[(row0 + t) * H + h] = kept ? 1 : 0;
          masked += kept ? 0 : 1;
        }
        gemm(false, false, rows, hd, nk, T(1), Pt, Tn, vb, static_cast<int>(ld), T(0),
             o + (row0 + r0) * ldo + static_cast<int64_t>(h) * hd, ldo);
      }
    }
  return masked;
}

/// Backward of attention_fwd. `dout` [B·T, H·hd] is ∂L/∂o (o as returned,
/// i.e. after the head mask; masked rows pass no gradient: the mask is a
/// constant). Writes dqkv [B·T, ld] entirely (q part overwritten, k and v
/// parts summed over the heads of their group). Per tile, as GEMMs:
///   dP = dO·Vᵀ,  dS_j = scale·P_j(dP_j − Σ_j P_j dP_j),
///   dQ = dS·K,  dK += dSᵀ·Q,  dV += Pᵀ·dO.
/// `tile` must be attention_fwd's (P's zeros are laid out per tile); it sets
/// the order of the dK and dV sums. `scratch` holds tile·T elements per OpenMP
/// thread. Parallel over (b, kv group), so every sum has a fixed order
/// whatever the thread count.
template <class T>
void attention_bwd(const T* qkv, const T* P, const uint8_t* hmask, const T* dout, T* dqkv, int B, int Tn, int H,
                   int Hkv, int hd, T* scratch, int tile) {
  using zcode::kernels::gemm;
  const int64_t ld = static_cast<int64_t>(H + 2 * Hkv) * hd;
  const int ldi = static_cast<int>(ld), ldo = H * hd;
  const int group = H / Hkv;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < Hkv; ++g) {
      T* dS = scratch + static_cast<int64_t>(omp_get_thread_num()) * tile * Tn;
      const int64_t row0 = static_cast<int64_t>(b) * Tn;
      const int64_t koff = static_cast<int64_t>(H + g) * hd, voff = static_cast<int64_t>(H + Hkv + g) * hd;
      const T* kb = qkv + row0 * ld + koff;
      const T* vb = qkv + row0 * ld + voff;
      T* dk = dqkv + row0 * ld + koff;
      T* dv = dqkv + row0 * ld + voff;
      for (int t = 0; t < Tn; ++t)
        for (int i = 0; i < hd; ++i) dk[t * ld + i] = dv[t * ld + i] = T(0);
      for (int h = g * group; h < (g + 1) * group; ++h) {
        const T* qb = qkv + row0 * ld + static_cast<int64_t>(h) * hd;
        const T* dob = dout + row0 * ldo + static_cast<int64_t>(h) * hd;
        T* dq = dqkv + row0 * ld + static_cast<int64_t>(h) * hd;
        const T* Pb = P + (static_cast<int64_t>(b) * H + h) * Tn * Tn;
        for (int r0 = 0; r0 < Tn; r0 += tile) {
          const int rows = std::min(tile, Tn - r0), nk = r0 + rows;
          const T* Pt = Pb + static_cast<int64_t>(r0) * Tn;
          gemm(false, true, rows, nk, hd, T(1), dob + r0 * ldo, ldo, vb, ldi, T(0), dS, Tn);
          for (int i = 0; i < rows; ++i) {
            const int t = r0 + i;
            const T* p = Pt + static_cast<int64_t>(i) * Tn;
            T* ds = dS + static_cast<int64_t>(i) * Tn;
            const bool kept = hmask[(row0 + t) * H + h] != 0;
            T c = 0;
#pragma omp simd reduction(+ : c)
            for (int j = 0; j <= t; ++j) c += p[j] * ds[j];
            const T f = kept ? scale : T(0);
#pragma omp simd
            for (int j = 0; j <= t; ++j) ds[j] = f * p[j] * (ds[j] - c);
            for (int j = t + 1; j < nk; ++j) ds[j] = T(0);
          }
          gemm(false, false, rows, hd, nk, T(1), dS, Tn, kb, ldi, T(0), dq + r0 * ld, ldi);
          gemm(true, false, nk, hd, rows, T(1), dS, Tn, qb + r0 * ld, ldi, T(1), dk, ldi);
          gemm(true, false, nk, hd, rows, T(1), Pt, Tn, dob + r0 * ldo, ldo, T(1), dv, ldi);
        }
      }
    }
}

}  // namespace glm52
