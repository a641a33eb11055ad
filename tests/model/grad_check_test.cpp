// Finite-difference gradient checks in double precision: every block alone
// (kernels and attention), then the whole model per parameter tensor in
// configurations that switch each block option on.
//
// Central differences with eps = 1e-6 in double: truncation error ~eps²·f''' ≈ 1e-12
// and rounding ~1e-16·|L|/eps ≈ 1e-10, so agreement to 1e-6 relative is a real check
// (a wrong term in a backward formula gives errors of order 1).
#include "attention.h"
#include "lm_head.h"
#include "test_util.h"

#include <zcode/kernels/cross_entropy.h>
#include <zcode/kernels/glu.h>
#include <zcode/kernels/norm.h>
#include <zcode/kernels/rope.h>
#include <zcode/kernels/threads.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using Vec = std::vector<double>;
constexpr double kEps = 1e-6;

Vec randn(size_t n, uint64_t seed, double sd = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, sd);
  Vec v(n);
  for (double& x : v) x = nd(rng);
  return v;
}

/// Checks analytic[i] against the central difference of loss() in x[i] for
/// every i, or for the i that `only` accepts (large tensors).
void expect_grad(Vec& x, const Vec& analytic, const std::function<double()>& loss, const char* what,
                 const std::function<bool(size_t)>& only = nullptr) {
  ASSERT_EQ(x.size(), analytic.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (only && !only(i)) continue;
    const double x0 = x[i];
    x[i] = x0 + kEps;
    const double lp = loss();
    x[i] = x0 - kEps;
    const double lm = loss();
    x[i] = x0;
    const double num = (lp - lm) / (2 * kEps);
    EXPECT_NEAR(analytic[i], num, 1e-6 * std::max(1.0, std::fabs(num))) << what << "[" << i << "]";
  }
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(GradCheck, ScaleNorm) {
  const int rows = 3, d = 7;
  Vec x = randn(rows * d, 1), w = randn(rows * d, 2), gain{1.7};
  auto loss = [&] {
    Vec y(rows * d), r(rows);
    zcode::kernels::scalenorm_fwd(x.data(), y.data(), r.data(), rows, d, gain[0], 1e-6);
    return dot(y, w);
  };
  Vec y(rows * d), r(rows), dx(rows * d), dg(rows);
  zcode::kernels::scalenorm_fwd(x.data(), y.data(), r.data(), rows, d, gain[0], 1e-6);
  zcode::kernels::scalenorm_bwd(x.data(), r.data(), w.data(), dx.data(), dg.data(), rows, d, gain[0], false);
  double g = 0;
  for (double v : dg) g += v;
  expect_grad(x, dx, loss, "scalenorm dx");
  expect_grad(gain, Vec{g}, loss, "scalenorm dg");
  // Independent value: row 0 by the formula g·x/||x||.
  double ss = 0;
  for (int i = 0; i < d; ++i) ss += x[i] * x[i];
  EXPECT_NEAR(y[3], gain[0] * x[3] / std::sqrt(ss + 1e-6), 1e-12);
}

TEST(GradCheck, RMSNorm) {
  const int rows = 3, d = 6;
  Vec x = randn(rows * d, 3), w = randn(rows * d, 4), gain = randn(d, 5);
  auto loss = [&] {
    Vec y(rows * d), r(rows);
    zcode::kernels::rmsnorm_fwd(x.data(), y.data(), r.data(), rows, d, gain.data(), 1e-6);
    return dot(y, w);
  };
  Vec y(rows * d), r(rows), dx(rows * d), dw(d, 0.0);
  zcode::kernels::rmsnorm_fwd(x.data(), y.data(), r.data(), rows, d, gain.data(), 1e-6);
  zcode::kernels::rmsnorm_bwd(x.data(), r.data(), w.data(), dx.data(), dw.data(), rows, d, gain.data(), false);
  expect_grad(x, dx, loss, "rmsnorm dx");
  expect_grad(gain, dw, loss, "rmsnorm dw");
}

TEST(GradCheck, RopeWithFrequencyGradient) {
  // 4 rows at positions 0..3, 3 heads of hd 6 with R = 4 rotary dims (2 pass through).
  const int rows = 4, heads = 3, hd = 6, R = 4, ld = heads * hd;
  Vec x = randn(rows * ld, 6), w = randn(rows * ld, 7), logf = {-0.1, -1.3};
  std::vector<int32_t> pos = {0, 1, 2, 3};
  auto fwd = [&](Vec& y) {
    Vec inv = {std::exp(logf[0]), std::exp(logf[1])}, ct(rows * 2), st(rows * 2);
    zcode::kernels::rope_table(inv.data(), rows, 0, R, ct.data(), st.data());
    y = x;
    zcode::kernels::rope_fwd(y.data(), rows, ld, heads, hd, R, ct.data(), st.data(), pos.data());
  };
  auto loss = [&] {
    Vec y;
    fwd(y);
    return dot(y, w);
  };
  Vec y;
  fwd(y);
  // Independent value: head 1 of row 2, pair 1 by the formula.
  const double th = 2 * std::exp(logf[1]);
  const double xa = x[2 * ld + hd + 1], xb = x[2 * ld + hd + 3];
  EXPECT_NEAR(y[2 * ld + hd + 1], xa * std::cos(th) - xb * std::sin(th), 1e-12);
  EXPECT_NEAR(y[2 * ld + hd + 3], xb * std::cos(th) + xa * std::sin(th), 1e-12);
  EXPECT_EQ(y[2 * ld + hd + 4], x[2 * ld + hd + 4]);  // pass-through dim
  Vec dx = w, dth(rows * R / 2);
  Vec inv = {std::exp(logf[0]), std::exp(logf[1])}, ct(rows * 2), st(rows * 2);
  zcode::kernels::rope_table(inv.data(), rows, 0, R, ct.data(), st.data());
  zcode::kernels::rope_bwd(dx.data(), y.data(), rows, ld, heads, hd, R, ct.data(), st.data(), pos.data(), dth.data());
  Vec dlog(2, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int n = 0; n < rows; ++n) dlog[i] += inv[i] * pos[n] * dth[n * 2 + i];
  expect_grad(x, dx, loss, "rope dx");
  expect_grad(logf, dlog, loss, "rope d log_inv_freq");
}

TEST(GradCheck, SiluGlu) {
  const int rows = 3, F = 5;
  Vec a = randn(rows * 2 * F, 8, 2.0), w = randn(rows * F, 9);
  auto loss = [&] {
    Vec g(rows * F);
    zcode::kernels::silu_glu_fwd(a.data(), g.data(), rows, F);
    return dot(g, w);
  };
  Vec g(rows * F), da(rows * 2 * F);
  zcode::kernels::silu_glu_fwd(a.data(), g.data(), rows, F);
  EXPECT_NEAR(g[F + 2], a[2 * F + 2] / (1 + std::exp(-a[2 * F + 2])) * a[3 * F + 2], 1e-12);
  zcode::kernels::silu_glu_bwd(a.data(), w.data(), da.data(), rows, F);
  expect_grad(a, da, loss, "glu da");
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  const int rows = 4, V = 9;
  Vec x = randn(rows * V, 10, 3.0);
  std::vector<int32_t> labels = {3, -1, 8, 0};
  const double scale = 0.37;
  auto loss = [&] {
    Vec l = x;
    std::vector<double> nll(rows);
    std::vector<int32_t> lb = labels;
    zcode::kernels::softmax_xent(l.data(), rows, V, V, lb.data(), nll.data(), scale, false);
    double s = 0;
    for (double v : nll) s += v;
    return scale * s;
  };
  Vec g = x;
  std::vector<double> nll(rows);
  std::vector<int32_t> lb = labels;
  zcode::kernels::softmax_xent(g.data(), rows, V, V, lb.data(), nll.data(), scale, true);
  // Independent value: log-sum-exp in long double.
  long double s = 0;
  for (int j = 0; j < V; ++j) s += std::exp(static_cast<long double>(x[2 * V + j]));
  EXPECT_NEAR(nll[2], static_cast<double>(std::log(s) - x[2 * V + 8]), 1e-12);
  EXPECT_EQ(nll[1], 0.0);
  expect_grad(x, g, loss, "xent dlogits");
}

/// The fused LM head (glm52/lm_head.h): nll against a long-double
/// log-sum-exp of h·Wᵀ computed here, and dh, dW against central differences
/// of grad_scale·Σ nll. The blocking is pinned (`bl`, default the tuned
/// Blocking{}: 512-column slices, 12 groups) so the cases do not move with the
/// machine. V spans several head_fused_slice-column slices with a
/// partial last one; rows include an excluded one (label −1) and labels in the
/// first and last slices. `chunk` < rows runs several chunks through the
/// pipelined sweeps (pass 2 of one chunk with pass 1 of the next, in the same
/// memory); the logits memory starts filled with 7.0, so a GEMM that
/// accumulated into it instead of overwriting would show.
void fused_head_case(int rows, int V, int d, std::vector<int32_t> labels, int chunk,
                     const glm52::Blocking& bl = glm52::Blocking{}) {
  Vec h = randn(size_t(rows) * d, 21, 0.8), W = randn(size_t(V) * d, 22, 0.5);
  const double scale = 0.29;
  auto run = [&](Vec& dh, Vec& dW, std::vector<double>& nll) {
    Vec logits(size_t(chunk) * V, 7.0), scr(size_t(glm52::head_xent_fused_scratch(chunk, V, d, bl)));
    dh.assign(size_t(rows) * d, -3.0);
    dW.assign(size_t(V) * d, 0.0);
    nll.assign(rows, -1.0);
    glm52::head_xent_fused<double>(rows, chunk, V, d, h.data(), W.data(), labels.data(), scale, logits.data(),
                                   scr.data(), nll.data(), dh.data(), dW.data(), bl);
  };
  auto loss = [&] {
    Vec dh, dW;
    std::vector<double> nll;
    run(dh, dW, nll);
    double s = 0;
    for (double v : nll) s += v;
    return scale * s;
  };
  Vec dh, dW;
  std::vector<double> nll;
  run(dh, dW, nll);
  for (int r = 0; r < rows; ++r) {
    if (labels[r] < 0) {
      EXPECT_EQ(nll[r], 0.0) << "row " << r;
      for (int i = 0; i < d; ++i) EXPECT_EQ(dh[size_t(r) * d + i], 0.0) << "row " << r;
      continue;
    }
    long double mx = -1e300L, s = 0, zl = 0;
    std::vector<long double> z(V);
    for (int v = 0; v < V; ++v) {
      long double acc = 0;
      for (int i = 0; i < d; ++i) acc += static_cast<long double>(h[r * d + i]) * W[size_t(v) * d + i];
      z[v] = acc;
      mx = std::max(mx, acc);
    }
    for (int v = 0; v < V; ++v) s += std::exp(z[v] - mx);
    zl = z[labels[r]];
    EXPECT_NEAR(nll[r], static_cast<double>(mx + std::log(s) - zl), 1e-11) << "row " << r;
  }
  expect_grad(h, dh, loss, "fused head dh");
  // dW: every row of W that is a label, the rows around slice edges, and a stride.
  expect_grad(W, dW, loss, "fused head dW", [&](size_t i) {
    const size_t v = i / size_t(d);
    const bool label = std::find(labels.begin(), labels.end(), static_cast<int32_t>(v)) != labels.end();
    const size_t S = static_cast<size_t>(bl.head_fused_slice);
    return label || v % S == 0 || v % S == S - 1 || v + 1 == size_t(V) || v % 97 == 0;
  });
}

TEST(GradCheck, FusedLmHeadOneSlice) { fused_head_case(4, 300, 5, {299, 0, -1, 150}, 4); }
TEST(GradCheck, FusedLmHeadSeveralSlices) { fused_head_case(5, 2600, 6, {7, -1, 2599, 1024, 1500}, 5); }
// More slices than head_fused_groups: groups of several slices each.
TEST(GradCheck, FusedLmHeadManySlices) { fused_head_case(3, 9 * 1024 + 5, 3, {9220, 0, -1}, 3); }
// Another blocking (the 1 MiB-L2 rule's 256 columns, 5 groups): the slices and
// groups come from the struct, not from constants.
TEST(GradCheck, FusedLmHeadOtherBlocking) {
  glm52::Blocking bl;
  bl.head_fused_slice = 256;
  bl.head_fused_groups = 5;
  fused_head_case(5, 2600, 6, {7, -1, 2599, 1024, 1500}, 2, bl);
}
// Chunks of 2 rows: three pipelined chunks of 2, 2 and a last one of 1 row;
// then chunks whose rows are all excluded (skipped: nll 0, dh 0), between
// two that are not, and first.
TEST(GradCheck, FusedLmHeadChunks) { fused_head_case(5, 2600, 6, {7, -1, 2599, 1024, 1500}, 2); }
TEST(GradCheck, FusedLmHeadChunkWithoutLabels) {
  fused_head_case(7, 2600, 4, {3, 2000, -1, -1, 1030, 2599, 0}, 2);
  fused_head_case(6, 2600, 4, {-1, -1, 5, 2100, -1, 1100}, 2);
}

// Fixed slices and groups, summed in order: the same bits on 1, 2 and 5
// threads, over two pipelined chunks.
TEST(FusedLmHead, ThreadCountIndependent) {
  const int rows = 6, V = 9 * 1024 + 5, d = 16, chunk = 4;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> h(size_t(rows) * d), W(size_t(V) * d);
  for (float& x : h) x = nd(rng);
  for (float& x : W) x = 0.3f * nd(rng);
  const std::vector<int32_t> labels = {1, 9000, -1, 4096, 5, 2047};
  auto run = [&](int threads) {
    zcode::kernels::set_num_threads(threads);
    const glm52::Blocking bl;  // pinned: the tuned values (12 groups)
    std::vector<float> logits(size_t(chunk) * V), scr(size_t(glm52::head_xent_fused_scratch(chunk, V, d, bl)));
    std::vector<float> out(size_t(rows) * d + size_t(V) * d, 0.f);
    std::vector<double> nll(rows);
    glm52::head_xent_fused<float>(rows, chunk, V, d, h.data(), W.data(), labels.data(), 0.5f, logits.data(), scr.data(),
                                  nll.data(), out.data(), out.data() + size_t(rows) * d, bl);
    std::vector<float> all(out);
    for (double v : nll) all.push_back(static_cast<float>(v));
    return all;
  };
  const auto a = run(1), b = run(2), c = run(5);  // 5 does not divide the 12 groups
  zcode::kernels::set_num_threads(2);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), c.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float)));
}

// The evaluation head (head_logprob_fused) gives the training head's nll bit
// for bit (the same slice statistics and slices_logsumexp), over two chunks
// with an unlabelled row; its arg-max is the arg-max of h·Wᵀ computed here in
// double, for every row, labelled or not.
TEST(FusedLmHead, EvaluationHeadGivesTheTrainingNll) {
  const int rows = 6, V = 9 * 1024 + 5, d = 16, chunk = 4;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> h(size_t(rows) * d), W(size_t(V) * d);
  for (float& x : h) x = nd(rng);
  for (float& x : W) x = 0.3f * nd(rng);
  const std::vector<int32_t> labels = {1, 9000, -1, 4096, 5, 2047};
  zcode::kernels::set_num_threads(2);
  const glm52::Blocking bl;
  std::vector<float> logits(size_t(chunk) * V), scr(size_t(glm52::head_xent_fused_scratch(chunk, V, d, bl)));
  ASSERT_LE(glm52::head_logprob_fused_scratch(chunk, V, d, bl), static_cast<int64_t>(scr.size()));
  std::vector<float> grads(size_t(rows) * d + size_t(V) * d, 0.f);
  std::vector<double> train_nll(rows), eval_nll(rows, -1.0);
  glm52::head_xent_fused<float>(rows, chunk, V, d, h.data(), W.data(), labels.data(), 1.0f, logits.data(), scr.data(),
                                train_nll.data(), grads.data(), grads.data() + size_t(rows) * d, bl);
  std::vector<int32_t> am(rows, -7);
  glm52::head_logprob_fused<float>(rows, chunk, V, d, h.data(), W.data(), labels.data(), scr.data(), eval_nll.data(),
                                   am.data(), bl);
  for (int r = 0; r < rows; ++r) {
    EXPECT_EQ(eval_nll[r], train_nll[r]) << "row " << r;
    int best = 0;
    double best_z = -1e300;
    for (int v = 0; v < V; ++v) {
      double z = 0;
      for (int i = 0; i < d; ++i) z += double(h[size_t(r) * d + i]) * W[size_t(v) * d + i];
      if (z > best_z) best_z = z, best = v;
    }
    EXPECT_EQ(am[r], best) << "row " << r;
  }
  EXPECT_EQ(eval_nll[2], 0.0);  // the unlabelled row
}

/// Attention core: GQA (4 query heads on 2 KV heads), causal, document mask,
/// optional entropy head mask. L = Σ w ⊙ o over qkv. T > the tile (pinned:
/// Blocking{}.attn_tile = 64 unless given) covers the tiled GEMM path (rows of
/// a later tile against earlier keys).
constexpr int kTile = glm52::Blocking{}.attn_tile;
void attention_case(bool docs, bool head_mask, int T = 5, int tile = kTile) {
  const int B = 2, H = 4, Hkv = 2, hd = 3, ld = (H + 2 * Hkv) * hd;
  Vec qkv = randn(B * T * ld, 11, 1.5), w = randn(B * T * H * hd, 12);
  std::vector<int32_t> doc = {0, 0, 1, 1, 1, 0, 0, 0, 2, 2};
  if (T != 5) {  // documents of 37 tokens, shifted between the two sequences
    doc.resize(size_t(B) * T);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) doc[size_t(b) * T + t] = (t + 11 * b) / 37;
  }
  const double thr = 0.9;
  std::vector<uint8_t> mask(B * T * H);
  auto run = [&](Vec& o) {
    Vec P(B * H * T * T);
    o.assign(B * T * H * hd, 0.0);
    return glm52::attention_fwd(qkv.data(), P.data(), o.data(), mask.data(), B, T, H, Hkv, hd,
                                docs ? doc.data() : nullptr, head_mask, thr, tile);
  };
  auto loss = [&] {
    Vec o;
    run(o);
    return dot(o, w);
  };
  Vec o, P(B * H * T * T), dqkv(B * T * ld), scratch(size_t(tile) * T * omp_get_max_threads());
  const int64_t masked =
      glm52::attention_fwd(qkv.data(), P.data(), (o.assign(B * T * H * hd, 0.0), o.data()), mask.data(), B, T, H, Hkv,
                           hd, docs ? doc.data() : nullptr, head_mask, thr, tile);
  if (head_mask) {
    EXPECT_GT(masked, 0) << "threshold should mask some rows";
    EXPECT_LT(masked, B * T * H) << "threshold should keep some rows";
  }
  // Independent value: batch 1, t = 2, head 3 (kv head 1) by the formula.
  {
    const int b = 1, t = 2, h = 3, g = 1;
    double s[3], mx = -1e300, sum = 0;
    for (int j = 0; j <= t; ++j) {
      s[j] = 0;
      for (int i = 0; i < hd; ++i)
        s[j] += qkv[(b * T + t) * ld + h * hd + i] * qkv[(b * T + j) * ld + (H + g) * hd + i];
      s[j] /= std::sqrt(3.0);
      mx = std::max(mx, s[j]);
    }
    for (int j = 0; j <= t; ++j) sum += std::exp(s[j] - mx);
    for (int i = 0; i < hd; ++i) {
      double ref = 0;
      for (int j = 0; j <= t; ++j) ref += std::exp(s[j] - mx) / sum * qkv[(b * T + j) * ld + (H + Hkv + g) * hd + i];
      if (!mask[(b * T + t) * H + h]) ref = 0;
      EXPECT_NEAR(o[(b * T + t) * H * hd + h * hd + i], ref, 1e-12);
    }
  }
  glm52::attention_bwd(qkv.data(), P.data(), mask.data(), w.data(), dqkv.data(), B, T, H, Hkv, hd, scratch.data(),
                       tile);
  expect_grad(qkv, dqkv, loss, "attention dqkv");
}

// The decode path's attention row for head dims 64 and 128 (float runs
// attend_row_fixed there, with its own order of the score sums) against the
// definition in double: s_j = scale·q·k_j, P = softmax over the unmasked keys,
// entropy −Σ P ln P against the threshold, o = Σ_j P_j v_j. Keys sit at a
// stride wider than hd, as in the KV cache.
TEST(AttendRow, FixedHeadDimsMatchTheDefinition) {
  for (int hd : {64, 128}) {
    for (int n_keys : {1, 17, 100}) {
      for (int mode = 0; mode < 4; ++mode) {  // 0 plain, 1 document mask, 2 head mask kept, 3 head mask masked
        const int64_t stride = 3 * hd;
        const Vec qd = randn(size_t(hd), 11 + hd + n_keys, 0.3), kd = randn(size_t(n_keys * stride), 12 + n_keys, 0.3),
                  vd = randn(size_t(n_keys * stride), 13 + n_keys);
        std::vector<float> q(qd.begin(), qd.end()), k(kd.begin(), kd.end()), v(vd.begin(), vd.end());
        std::vector<int32_t> doc(static_cast<size_t>(n_keys));
        for (int j = 0; j < n_keys; ++j) doc[size_t(j)] = j % 3 == 1 ? 7 : 2;
        const bool use_doc = mode == 1, head_mask = mode >= 2;
        const float threshold = mode == 3 ? 0.f : 1e9f;
        const double scale = 1.0 / std::sqrt(double(hd));
        // The definition, in double, on the float inputs.
        std::vector<double> pr(size_t(n_keys), 0.0), orf(size_t(hd), 0.0);
        double mx = -INFINITY;
        for (int j = 0; j < n_keys; ++j) {
          if (use_doc && doc[size_t(j)] != 2) continue;
          double sj = 0;
          for (int i = 0; i < hd; ++i) sj += double(q[size_t(i)]) * double(k[size_t(j * stride + i)]);
          pr[size_t(j)] = sj * scale;
          mx = std::max(mx, pr[size_t(j)]);
        }
        double sum = 0;
        for (int j = 0; j < n_keys; ++j)
          if (!use_doc || doc[size_t(j)] == 2) sum += std::exp(pr[size_t(j)] - mx);
        double entropy = 0;
        for (int j = 0; j < n_keys; ++j) {
          const bool live = !use_doc || doc[size_t(j)] == 2;
          pr[size_t(j)] = live ? std::exp(pr[size_t(j)] - mx) / sum : 0.0;
          if (pr[size_t(j)] > 0) entropy -= pr[size_t(j)] * std::log(pr[size_t(j)]);
        }
        const bool kept = !(head_mask && entropy > threshold);
        for (int j = 0; j < n_keys && kept; ++j)
          for (int i = 0; i < hd; ++i) orf[size_t(i)] += pr[size_t(j)] * double(v[size_t(j * stride + i)]);
        std::vector<float> p(static_cast<size_t>(n_keys)), o(static_cast<size_t>(hd), -1.f);
        const bool got = glm52::attend_row(q.data(), k.data(), v.data(), stride, n_keys,
                                           use_doc ? doc.data() : static_cast<const int32_t*>(nullptr), 2, hd,
                                           static_cast<float>(scale), head_mask, threshold, p.data(), o.data());
        const std::string at =
            "hd " + std::to_string(hd) + ", keys " + std::to_string(n_keys) + ", mode " + std::to_string(mode);
        EXPECT_EQ(got, kept) << at;
        for (int j = 0; j < n_keys; ++j)
          EXPECT_NEAR(p[size_t(j)], kept ? pr[size_t(j)] : 0.0, 1e-6) << at << ", P[" << j << "]";
        for (int i = 0; i < hd; ++i) EXPECT_NEAR(o[size_t(i)], orf[size_t(i)], 2e-6) << at << ", o[" << i << "]";
      }
    }
  }
}

TEST(GradCheck, AttentionGqaCausal) { attention_case(false, false); }
TEST(GradCheck, AttentionDocumentMask) { attention_case(true, false); }
TEST(GradCheck, AttentionEntropyHeadMask) { attention_case(true, true); }
TEST(GradCheck, AttentionMultiTile) { attention_case(false, false, 2 * kTile + 5); }
TEST(GradCheck, AttentionMultiTileDocumentHeadMask) { attention_case(true, true, 2 * kTile + 5); }
TEST(GradCheck, AttentionSmallTiles) { attention_case(true, true, 41, 16); }

// ---------------------------------------------------------------------------
// Whole model, double precision, per parameter tensor: a random direction u
// over the tensor, analytic g·u against (L(θ+εu) − L(θ−εu)) / 2ε.
// ---------------------------------------------------------------------------

struct ModelCase {
  const char* name;
  const char* model_json;
  const char* config_json;
  bool expect_drops;
};

void model_case(const ModelCase& mc, int B = 2, int T = 8) {
  zcode::kernels::set_num_threads(1);
  const glm52::Config cfg = glm52_test::make_config(mc.model_json, mc.config_json);
  glm52::Model<double> model(cfg, 42);
  // Larger random weights than the init so that every path carries signal.
  {
    Vec noise = randn(static_cast<size_t>(model.num_elements()), 99, 0.05);
    for (const glm52::ParamInfo& p : model.param_infos())
      if (p.name.find("norm") == std::string::npos && p.name.find("rope") == std::string::npos)
        for (int64_t i = 0; i < p.numel; ++i) model.params()[p.offset + i] += noise[p.offset + i];
  }
  const glm52_test::Batch batch = glm52_test::random_batch(B, T, static_cast<int>(cfg.vocab_size), 7);
  const glm52::BatchView bv = batch.view(true);
  const double nstep = 23.0;  // a whole-step normaliser different from this batch's count
  glm52::StepMetrics m;
  auto loss = [&] {
    model.forward_backward(bv, nstep, 1.0, false, 0, m);
    return m.loss;
  };
  model.zero_grad();
  model.forward_backward(bv, nstep, 1.0, false, 0, m);
  if (cfg.moe_experts > 0) {
    EXPECT_GT(m.aux_loss, 0.0);
    EXPECT_GT(m.z_loss, 0.0);
  }
  if (mc.expect_drops) EXPECT_GT(m.moe_dropped_fraction, 0.0) << "capacity should drop some assignments";
  else EXPECT_EQ(m.moe_dropped_fraction, 0.0);
  const Vec grad(model.grads(), model.grads() + model.num_elements());
  int checked = 0;
  for (const glm52::ParamInfo& p : model.param_infos()) {
    if (p.name == "embed.weight" && !cfg.tie_embeddings) {
      // only rows of ids seen carry gradient; the direction covers all rows anyway
    }
    const Vec u = randn(static_cast<size_t>(p.numel), 1000 + checked);
    double* w = model.params() + p.offset;
    const Vec w0(w, w + p.numel);
    for (int64_t i = 0; i < p.numel; ++i) w[i] = w0[i] + kEps * u[i];
    const double lp = loss();
    for (int64_t i = 0; i < p.numel; ++i) w[i] = w0[i] - kEps * u[i];
    const double lm = loss();
    for (int64_t i = 0; i < p.numel; ++i) w[i] = w0[i];
    const double num = (lp - lm) / (2 * kEps);
    double ana = 0;
    for (int64_t i = 0; i < p.numel; ++i) ana += grad[p.offset + i] * u[i];
    EXPECT_NEAR(ana, num, 1e-6 * std::max(1e-3, std::fabs(num))) << mc.name << ": " << p.name;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(model.param_infos().size()));
}

TEST(GradCheckModel, DeepNormScaleNormMoECapacitySharedDense) {
  model_case(
      {"deepnorm+scalenorm, softmax router top-2, capacity drops, shared expert, dense first layer, "
       "GQA, doc mask, partial rotary",
       R"({"vocab_size": 37, "d_model": 12, "n_layers": 3, "n_heads": 4, "n_kv_heads": 2, "head_dim": 4,
                  "ffn_hidden": 10, "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 6,
                  "moe_shared_experts": 1, "first_dense_layers": 1, "capacity_factor": 1.0,
                  "moe_aux_loss_coef": 0.3, "moe_z_loss_coef": 0.05, "rotary_fraction": 0.5, "max_seq_len": 16})",
       R"({"data": {"cross_document_attention": false}})", true});
}

TEST(GradCheckModel, PreNormRMSNormSigmoidRouterUntied) {
  model_case({"prenorm+rmsnorm, sigmoid router, no top-k renorm, untied head, dropless",
              R"({"vocab_size": 29, "d_model": 8, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1, "head_dim": 4,
                  "moe_experts": 3, "moe_top_k": 2, "moe_ffn_hidden": 5, "first_dense_layers": 0,
                  "capacity_factor": 0, "router_activation": "sigmoid", "norm_topk_prob": false,
                  "norm": "rmsnorm", "residual": "prenorm", "tie_embeddings": false,
                  "moe_aux_loss_coef": 0.2, "moe_z_loss_coef": 0.02, "max_seq_len": 16})",
              "{}", false});
}

TEST(GradCheckModel, DynamicHeadMaskTop1) {
  model_case({"entropy head mask, top-1 routing",
              R"({"vocab_size": 31, "d_model": 8, "n_layers": 2, "n_heads": 4, "head_dim": 2,
                  "moe_experts": 4, "moe_top_k": 1, "moe_ffn_hidden": 4, "first_dense_layers": 1, "ffn_hidden": 6,
                  "capacity_factor": 0, "dynamic_head_mask": {"enabled": true, "entropy_threshold": 1.0},
                  "max_seq_len": 16})",
              "{}", false});
}

}  // namespace
