// zcode/kernels/cross_entropy.h: fused softmax + cross-entropy + gradient over
// rows of logits, so a chunk of the LM head never keeps probabilities and
// gradients in two buffers.
#pragma once

#include <zcode/kernels/math.h>
#include <zcode/sdk/hash.h>

#include <cstdint>
#include <limits>

namespace zcode::kernels {

/// Optional label sampling (Sophia's Gauss-Newton-Bartlett estimator, Liu et
/// al. 2023, Alg. 2): the label of row r is drawn from softmax(row) with the
/// counter-based RNG splitmix64(seed ^ splitmix64(row0 + r)) (zcode/sdk/hash.h).
struct LabelSampling {
  bool enabled = false;
  uint64_t seed = 0;
  int64_t row0 = 0;  // global index of the first row (for the RNG counter)
};

/// Fused softmax cross-entropy, in place.
///   logits : [rows, V] (row stride ld), the raw scores; overwritten when want_grad.
///   labels : [rows] class ids in [0, V), or -1 for rows excluded from the loss.
///            With sampling enabled, labelled rows get a sampled label written back.
///   nll    : [rows] out, logsumexp(row) − row[label] (nats), 0 for excluded rows.
///   With want_grad, row r becomes grad_scale·(softmax(row) − onehot(label))
///   (the gradient of grad_scale·nll, e.g. Goodfellow et al. 2016 eq. 6.31),
///   and excluded rows become 0.
/// Parallel over rows; every row's result depends on that row only, so it is
/// independent of the thread count.
template <class T>
void softmax_xent(T* logits, int64_t rows, int64_t V, int64_t ld, int32_t* labels, double* nll, T grad_scale,
                  bool want_grad, LabelSampling sampling = {}) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    T* x = logits + r * ld;
    int32_t y = labels[r];
    if (y < 0) {
      nll[r] = 0.0;
      if (want_grad)
        for (int64_t j = 0; j < V; ++j) x[j] = T(0);
      continue;
    }
    const T x_label = x[y];  // kept: the row is overwritten by its exponentials
    const T mx = max_of(x, V);
    T sum = 0;
    if (want_grad || sampling.enabled) {
      sum = exp_shifted_sum(x, V, mx);
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < V; ++j) sum += kexp(x[j] - mx);
    }
    if (sampling.enabled) {
      double u = sdk::u01(sdk::splitmix64(sampling.seed ^ sdk::splitmix64(static_cast<uint64_t>(sampling.row0 + r)))) *
                 static_cast<double>(sum);
      double c = 0;
      int32_t pick = static_cast<int32_t>(V - 1);
      for (int64_t j = 0; j < V; ++j) {
        c += static_cast<double>(x[j]);
        if (c > u) {
          pick = static_cast<int32_t>(j);
          break;
        }
      }
      labels[r] = y = pick;
    }
    const double lse = static_cast<double>(mx) + std::log(static_cast<double>(sum));
    if (sampling.enabled) {
      // x holds exp(x - mx): its log recovers the sampled label's score.
      nll[r] = lse - static_cast<double>(mx) - std::log(static_cast<double>(x[y]));
    } else {
      nll[r] = lse - static_cast<double>(x_label);
    }
    if (want_grad) {
      const T s = grad_scale / sum;
#pragma omp simd
      for (int64_t j = 0; j < V; ++j) x[j] *= s;
      x[y] -= grad_scale;
    }
  }
}

}  // namespace zcode::kernels
