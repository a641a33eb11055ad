// glm52/attention.h: the attention core of one head for one query row, and
// causal grouped-query attention over a batch, forward and backward side by
// side. Projections and RoPE live in model.cpp; this is softmax(q·kᵀ/√hd)·v.
#pragma once

#include <zcode/kernels/math.h>

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace glm52 {

/// One query row against n_keys keys (Vaswani et al. 2017, eq. 1):
///   s_j = scale·q·k_j for the keys that pass the mask, P = softmax(s),
///   o = Σ_j P_j v_j. Key j is masked when key_doc && key_doc[j] != q_doc.
/// Dynamic head mask (GLM-5.2, README §4): when head_mask and the entropy
/// −Σ P_j ln P_j (nats) exceeds `threshold`, o = 0 and the row is reported as
/// masked (returns false). p_out [n_keys] gets P (0 at masked keys).
/// q, k_j, v_j, o are [hd]; key j lives at k + j·stride, v + j·stride.
template <class T>
bool attend_row(const T* q, const T* k, const T* v, int64_t stride, int n_keys, const int32_t* key_doc,
                int32_t q_doc, int hd, T scale, bool head_mask, T threshold, T* p_out, T* o) {
  T mx = -std::numeric_limits<T>::infinity();
  for (int j = 0; j < n_keys; ++j) {
    if (key_doc && key_doc[j] != q_doc) {
      p_out[j] = -std::numeric_limits<T>::infinity();
      continue;
    }
    const T* kj = k + j * stride;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < hd; ++i) s += q[i] * kj[i];
    s *= scale;
    p_out[j] = s;
    mx = s > mx ? s : mx;
  }
  T sum = 0, ps = 0;  // ps = Σ e_j s_j, for the entropy
  for (int j = 0; j < n_keys; ++j) {
    const T s = p_out[j];
    const T e = s == -std::numeric_limits<T>::infinity() ? T(0) : zcode::kernels::kexp(s - mx);
    if (e > T(0)) ps += e * s;
    p_out[j] = e;
    sum += e;
  }
  const T inv = T(1) / sum;
  for (int j = 0; j < n_keys; ++j) p_out[j] *= inv;
  for (int i = 0; i < hd; ++i) o[i] = T(0);
  if (head_mask) {
    // H = −Σ P_j (s_j − lse) = lse − Σ P_j s_j, lse = mx + ln(sum).
    const T entropy = mx + std::log(sum) - ps * inv;
    if (entropy > threshold) return false;
  }
  for (int j = 0; j < n_keys; ++j) {
    const T pj = p_out[j];
    if (pj == T(0)) continue;
    const T* vj = v + j * stride;
#pragma omp simd
    for (int i = 0; i < hd; ++i) o[i] += pj * vj[i];
  }
  return true;
}

/// Causal GQA attention forward over a batch.
///   qkv   [B·T, ld] rows: q heads (H·hd) | k heads (Hkv·hd) | v heads (Hkv·hd), RoPE applied.
///   P     [B, H, T, T] out: row t holds P over keys 0..t (keys > t not written).
///   o     [B·T, H·hd] out; hmask [B·T, H] out (1 kept, 0 masked by entropy).
///   doc   [B, T] document ids or nullptr (cross-document attention allowed).
/// Query head h reads kv head h / (H/Hkv). Returns the number of masked (token, head) rows.
template <class T>
int64_t attention_fwd(const T* qkv, T* P, T* o, uint8_t* hmask, int B, int Tn, int H, int Hkv, int hd,
                      const int32_t* doc, bool head_mask, T threshold) {
  const int64_t ld = static_cast<int64_t>(H + 2 * Hkv) * hd;
  const int group = H / Hkv;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  int64_t masked = 0;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) reduction(+ : masked)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int g = h / group;
      const T* kb = qkv + static_cast<int64_t>(b) * Tn * ld + static_cast<int64_t>(H + g) * hd;
      const T* vb = qkv + static_cast<int64_t>(b) * Tn * ld + static_cast<int64_t>(H + Hkv + g) * hd;
      const int32_t* db = doc ? doc + static_cast<int64_t>(b) * Tn : nullptr;
      for (int t = 0; t < Tn; ++t) {
        const int64_t n = static_cast<int64_t>(b) * Tn + t;
        T* prow = P + ((static_cast<int64_t>(b) * H + h) * Tn + t) * Tn;
        const bool kept = attend_row(qkv + n * ld + static_cast<int64_t>(h) * hd, kb, vb, ld, t + 1, db,
                                     db ? db[t] : 0, hd, scale, head_mask, threshold, prow,
                                     o + n * H * hd + static_cast<int64_t>(h) * hd);
        hmask[n * H + h] = kept ? 1 : 0;
        masked += kept ? 0 : 1;
      }
    }
  return masked;
}

/// Backward of attention_fwd. `dout` [B·T, H·hd] is ∂L/∂o (o as returned,
/// i.e. after the head mask; masked rows pass no gradient: the mask is a
/// constant). Writes dqkv [B·T, ld] entirely (q part overwritten, k and v
/// parts summed over the heads of their group). With dS_j = P_j(dP_j − Σ P dP):
///   dq = scale·Σ_j dS_j k_j,  dk_j += scale·dS_j q,  dv_j += P_j·do.
/// `scratch` holds T elements per OpenMP thread. Parallel over (b, kv group),
/// so every sum has a fixed order whatever the thread count.
template <class T>
void attention_bwd(const T* qkv, const T* P, const uint8_t* hmask, const T* dout, T* dqkv, int B, int Tn, int H,
                   int Hkv, int hd, T* scratch) {
  const int64_t ld = static_cast<int64_t>(H + 2 * Hkv) * hd;
  const int group = H / Hkv;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < Hkv; ++g) {
      T* dP = scratch + static_cast<int64_t>(omp_get_thread_num()) * Tn;
      const int64_t row0 = static_cast<int64_t>(b) * Tn;
      const int64_t koff = static_cast<int64_t>(H + g) * hd, voff = static_cast<int64_t>(H + Hkv + g) * hd;
      for (int t = 0; t < Tn; ++t) {
        T* dk = dqkv + (row0 + t) * ld + koff;
        T* dv = dqkv + (row0 + t) * ld + voff;
        for (int i = 0; i < hd; ++i) dk[i] = dv[i] = T(0);
      }
      for (int h = g * group; h < (g + 1) * group; ++h) {
        for (int t = 0; t < Tn; ++t) {
          const int64_t n = row0 + t;
          T* dq = dqkv + n * ld + static_cast<int64_t>(h) * hd;
          if (!hmask[n * H + h]) {
            for (int i = 0; i < hd; ++i) dq[i] = T(0);
            continue;
          }
          const T* prow = P + ((static_cast<int64_t>(b) * H + h) * Tn + t) * Tn;
          const T* q = qkv + n * ld + static_cast<int64_t>(h) * hd;
          const T* dO = dout + n * H * hd + static_cast<int64_t>(h) * hd;
          T c = 0;
          for (int j = 0; j <= t; ++j) {
            if (prow[j] == T(0)) {
              dP[j] = T(0);
              continue;
            }
            const T* vj = qkv + (row0 + j) * ld + voff;
            T s = 0;
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < hd; ++i) s += dO[i] * vj[i];
            dP[j] = s;
            c += prow[j] * s;
          }
          for (int i = 0; i < hd; ++i) dq[i] = T(0);
          for (int j = 0; j <= t; ++j) {
            const T pj = prow[j];
            if (pj == T(0)) continue;
            const T ds = pj * (dP[j] - c) * scale;
            const T* kj = qkv + (row0 + j) * ld + koff;
            T* dkj = dqkv + (row0 + j) * ld + koff;
            T* dvj = dqkv + (row0 + j) * ld + voff;
#pragma omp simd
            for (int i = 0; i < hd; ++i) {
              dq[i] += ds * kj[i];
              dkj[i] += ds * q[i];
              dvj[i] += pj * dO[i];
            }
          }
        }
      }
    }
}

}  // namespace glm52
