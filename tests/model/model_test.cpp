// glm52 model: gradient accumulation, determinism, KV-cache decoding.
#include "test_util.h"

#include <zcode/kernels/gemm.h>
#include <zcode/kernels/threads.h>

#include <omp.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <set>
#include <string>
#include <vector>

namespace {

// A nano-sized MoE with every block on: GQA, partial rotary, shared expert,
// first dense layer. Dropless and no aux loss where the spec says equality holds.
const char* kSmall = R"({"vocab_size": 300, "d_model": 32, "n_layers": 3, "n_heads": 4, "n_kv_heads": 2,
  "head_dim": 8, "ffn_hidden": 48, "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 24,
  "moe_shared_experts": 1, "first_dense_layers": 1, "capacity_factor": 0, "moe_aux_loss_coef": 0,
  "moe_z_loss_coef": 0.01, "rotary_fraction": 0.5, "max_seq_len": 64})";

/// The sum of magnitudes behind each gradient element, S_i = |g^z_i| + sum_t |g^t_i|, in
/// double: g^t is the gradient of target token t's cross-entropy term alone (only t labelled,
/// less the label-free run g^z, which holds the z-loss of every token). A float gradient is a
/// sum over these per-token terms computed in some order, so its rounding error is bounded by
/// (number of terms) * u * S_i (Higham, "Accuracy and Stability of Numerical Algorithms",
/// 2nd ed., eq. 4.4), whatever order a machine's BLAS chooses.
std::vector<double> term_magnitudes(const glm52::Config& cfg, const glm52_test::Batch& b, double normalizer) {
  glm52::Model<double> m(cfg, 5);
  glm52::StepMetrics metrics;
  const int64_t n = m.num_elements();
  glm52_test::Batch one = b;
  std::fill(one.targets.begin(), one.targets.end(), -1);
  m.zero_grad();
  m.forward_backward(one.view(false), normalizer, 1.0, false, 0, metrics);
  const std::vector<double> gz(m.grads(), m.grads() + n);
  std::vector<double> s(n);
  for (int64_t i = 0; i < n; ++i) s[i] = std::fabs(gz[i]);
  for (size_t t = 0; t < b.targets.size(); ++t) {
    if (b.targets[t] < 0) continue;
    std::fill(one.targets.begin(), one.targets.end(), -1);
    one.targets[t] = b.targets[t];
    m.zero_grad();
    m.forward_backward(one.view(false), normalizer, 1.0, false, 0, metrics);
    for (int64_t i = 0; i < n; ++i) s[i] += std::fabs(m.grads()[i] - gz[i]);
  }
  return s;
}

/// One batch of 4 rows against 4 micro-batches of one row, same normaliser: the losses and
/// every gradient element must agree within `bound_factor` * u * S_i (S_i from
/// term_magnitudes, u the unit roundoff of T).
template <class T>
void accumulation_case(double bound_factor) {
  zcode::kernels::set_num_threads(1);
  const glm52::Config cfg = glm52_test::make_config(kSmall);
  glm52::Model<T> big(cfg, 5), micro(cfg, 5);
  const glm52_test::Batch b = glm52_test::random_batch(4, 16, 300, 11);
  int64_t targets = 0;
  for (int32_t t : b.targets) targets += t >= 0;
  glm52::StepMetrics m;
  big.forward_backward(b.view(false), static_cast<double>(targets), 1.0, false, 0, m);
  const double big_loss = m.loss;
  double micro_loss = 0;
  for (int i = 0; i < 4; ++i) {
    glm52_test::Batch one;
    one.B = 1;
    one.T = 16;
    one.ids.assign(b.ids.begin() + i * 16, b.ids.begin() + (i + 1) * 16);
    one.targets.assign(b.targets.begin() + i * 16, b.targets.begin() + (i + 1) * 16);
    micro.forward_backward(one.view(false), static_cast<double>(targets), 1.0, false, 0, m);
    micro_loss += m.loss;
  }
  const double u = std::numeric_limits<T>::epsilon() / 2;
  // The loss is a sum of 4 positive per-row terms (each itself a sum over its targets).
  EXPECT_NEAR(micro_loss, big_loss, bound_factor * u * std::fabs(big_loss));
  const std::vector<double> s = term_magnitudes(cfg, b, static_cast<double>(targets));
  for (const glm52::ParamInfo& p : big.param_infos()) {
    double worst = 0, gmax = 0, smax = 0;  // worst |diff| / bound over the tensor
    for (int64_t i = 0; i < p.numel; ++i) {
      const double a = big.grads()[p.offset + i], c = micro.grads()[p.offset + i];
      const double bound = bound_factor * u * s[p.offset + i] + 1e-300;
      worst = std::max(worst, std::fabs(a - c) / bound);
      gmax = std::max(gmax, std::fabs(a));
      smax = std::max(smax, s[p.offset + i]);
    }
    EXPECT_LE(worst, 1.0) << p.name << ": max |grad| " << gmax << ", max S " << smax;
  }
}

// The bound factor is the number of terms of the longest sum behind one element: the
// 64 token positions of the batch, each term itself the result of a chain of dot products
// over d_model = 32 (hence 64 * 32). A wrong term (a normaliser off by the micro-batch count,
// a micro-batch dropped) gives errors of the order of the gradient itself: measured on an AMD
// EPYC (Zen 1) on 2026-12-01, max|grad| of every tensor is 321-8,160 times this bound in
// float, while the agreement found used at most 1.3 % of it (embed.weight).
TEST(Accumulation, FourMicroBatchesEqualOneBatchDouble) { accumulation_case<double>(64.0 * 32.0); }
TEST(Accumulation, FourMicroBatchesEqualOneBatchFloat) { accumulation_case<float>(64.0 * 32.0); }

/// Whether OpenBLAS can run on one thread while our loops run on more: only
/// its pthread build. Its OpenMP build (Debian's default here) runs each
/// sgemm on the caller's omp_get_max_threads() threads and sets that count
/// when its own is set, so "OpenBLAS on 1, ours on 2" is 1 and 1 there, and
/// a comparison of our loops on 1 and 2 threads would compare 1 with 1. The
/// tests that need it skip on the OpenMP build, and ctest runs them again on
/// the pthread build (model.our_loops_thread_count_pthread_blas, with
/// ZCODE_TEST_BLAS=pthread, where a skip is a failure).
bool blas_pinnable_or_skip_reason(std::string* why) {
  const std::string build = zcode::kernels::blas_threading();
  if (build == "pthread") return true;
  *why = "OpenBLAS's " + build +
         " build follows the OpenMP thread count, so it cannot stay on one thread while our loops use two; "
         "ctest runs this test on the pthread build (model.our_loops_thread_count_pthread_blas)";
  if (const char* want = std::getenv("ZCODE_TEST_BLAS"); want && build != want)
    ADD_FAILURE() << "ZCODE_TEST_BLAS=" << want << " but OpenBLAS's " << build << " build is loaded";
  return false;
}

/// Three SGD steps; returns the losses and the final weights.
std::pair<std::vector<double>, std::vector<float>> train(int threads, const char* json, int blas_threads = 0) {
  zcode::kernels::set_num_threads(threads);
  if (blas_threads > 0) zcode::kernels::set_blas_num_threads(blas_threads);
  EXPECT_EQ(threads, omp_get_max_threads()) << "our loops' thread count";
  const glm52::Config cfg = glm52_test::make_config(json, R"({"data": {"cross_document_attention": false}})");
  glm52::Model<float> model(cfg, 1234);
  std::vector<double> losses;
  glm52::StepMetrics m;
  for (int step = 0; step < 3; ++step) {
    const glm52_test::Batch b = glm52_test::random_batch(4, 32, 300, 100 + step);
    model.zero_grad();
    model.forward_backward(b.view(true), 100.0, 1.0, false, 0, m);
    losses.push_back(m.loss);
    for (int64_t i = 0; i < model.num_elements(); ++i) model.params()[i] -= 0.05f * model.grads()[i];
  }
  return {losses, std::vector<float>(model.params(), model.params() + model.num_elements())};
}

const char* kDropping = R"({"vocab_size": 300, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
  "head_dim": 8, "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 24, "first_dense_layers": 0,
  "capacity_factor": 1.0, "max_seq_len": 64, "dynamic_head_mask": {"enabled": true, "entropy_threshold": 2.5}})";

TEST(Determinism, SameSeedSameThreadsBitIdentical) {
  const auto a = train(2, kDropping), b = train(2, kDropping);
  ASSERT_EQ(a.first.size(), b.first.size());
  for (size_t i = 0; i < a.first.size(); ++i) EXPECT_EQ(a.first[i], b.first[i]) << "step " << i;
  EXPECT_EQ(0, std::memcmp(a.second.data(), b.second.data(), a.second.size() * sizeof(float)));
  EXPECT_TRUE(std::isfinite(a.first[0]));
}

// Every reduction of ours runs in a fixed order (rows per thread, sums in row
// order), so our loops give the same bits on 1 or 2 OpenMP threads. OpenBLAS's
// sgemm does not (its blocking changes with its thread count: measured), so
// this holds with OpenBLAS pinned to one thread; with OpenBLAS on N threads
// results are bit-identical run to run for the same N (test above).
TEST(Determinism, OurKernelsThreadCountIndependent) {
  if (std::string why; !blas_pinnable_or_skip_reason(&why)) GTEST_SKIP() << why;
  const auto a = train(1, kDropping, 1), b = train(2, kDropping, 1);
  for (size_t i = 0; i < a.first.size(); ++i) EXPECT_EQ(a.first[i], b.first[i]) << "step " << i;
  EXPECT_EQ(0, std::memcmp(a.second.data(), b.second.data(), a.second.size() * sizeof(float)));
}

// With kernels::gemm on ZCode's AVX-512 kernel (gemm_avx512.h), whose bits do
// not depend on the thread count either, the whole step does not: 1 thread
// against 2, GEMMs included. The dims are large enough that the head's and
// the experts' GEMMs split across the 2 threads (above the kernel's serial
// cut-off of 2^21 multiply-adds).
TEST(Determinism, WholeStepThreadCountIndependentOnOurGemm) {
  if (zcode::kernels::gemm_engine() != zcode::kernels::GemmEngine::kAvx512)
    GTEST_SKIP() << "float GEMMs run on " << zcode::kernels::gemm_engine_description()
                 << ", whose bits depend on the thread count; ctest runs this test again with ZCODE_GEMM=avx512 "
                    "(model.whole_step_thread_count_avx512_gemm), which needs a CPU with AVX-512F";
  const char* wide = R"({"vocab_size": 3000, "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
    "head_dim": 16, "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 256, "first_dense_layers": 1,
    "ffn_hidden": 512, "capacity_factor": 1.0, "max_seq_len": 64})";
  const auto a = train(1, wide), b = train(2, wide);
  for (size_t i = 0; i < a.first.size(); ++i) EXPECT_EQ(a.first[i], b.first[i]) << "step " << i;
  EXPECT_EQ(0, std::memcmp(a.second.data(), b.second.data(), a.second.size() * sizeof(float)));
}

int argmax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

void kv_case(const char* json) {
  zcode::kernels::set_num_threads(2);
  const glm52::Config cfg = glm52_test::make_config(json);
  glm52::Model<float> model(cfg, 77);
  const int V = static_cast<int>(cfg.vocab_size), steps = 24;
  std::vector<int32_t> seq = {5, 17, 42, 199, 3};
  const size_t prompt = seq.size();
  // Greedy by full recompute.
  std::vector<int32_t> full = seq;
  std::vector<float> logits;
  for (int s = 0; s < steps; ++s) {
    logits.assign(full.size() * V, 0.f);
    model.forward_logits(full.data(), static_cast<int>(full.size()), logits.data());
    full.push_back(argmax(logits.data() + (full.size() - 1) * V, V));
  }
  // Greedy with the KV cache (batch 2: sequence 1 is a different prompt, so
  // the batch is not trivially one sequence).
  auto* sess = model.decode_begin(2, static_cast<int>(prompt) + steps);
  std::vector<float> out(2 * V);
  std::vector<int32_t> cached = seq;
  float max_diff = 0;
  for (size_t t = 0; t + 1 < prompt + steps; ++t) {
    const int32_t toks[2] = {cached[t], static_cast<int32_t>((t * 31 + 7) % V)};
    model.decode_step(sess, toks, out.data());
    if (t + 1 >= prompt) {
      cached.push_back(argmax(out.data(), V));
    }
    if (t + 1 == prompt) {  // compare logits once against recompute
      std::vector<float> ref(prompt * V);
      model.forward_logits(seq.data(), static_cast<int>(prompt), ref.data());
      for (int j = 0; j < V; ++j) max_diff = std::max(max_diff, std::fabs(ref[(prompt - 1) * V + j] - out[j]));
    }
  }
  model.decode_end(sess);
  EXPECT_EQ(full, cached);
  EXPECT_LT(max_diff, 1e-4f);
}

TEST(KVCache, GreedyEqualsRecomputeDeepNorm) { kv_case(kSmall); }
TEST(KVCache, GreedyEqualsRecomputePreNormHeadMask) {
  kv_case(R"({"vocab_size": 300, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 1, "head_dim": 8,
    "moe_experts": 4, "moe_top_k": 1, "moe_ffn_hidden": 24, "first_dense_layers": 0, "residual": "prenorm",
    "norm": "rmsnorm", "tie_embeddings": false, "max_seq_len": 64,
    "dynamic_head_mask": {"enabled": true, "entropy_threshold": 1.5}})");
}

// Head dims 64 and 128: the decode row's attention takes attend_row_fixed there.
TEST(KVCache, GreedyEqualsRecomputeHeadDim64) {
  kv_case(R"({"vocab_size": 300, "d_model": 128, "n_layers": 2, "n_heads": 2, "n_kv_heads": 2, "head_dim": 64,
    "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 64, "max_seq_len": 64})");
}
TEST(KVCache, GreedyEqualsRecomputeHeadDim128HeadMask) {
  kv_case(R"({"vocab_size": 300, "d_model": 128, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1, "head_dim": 128,
    "moe_experts": 4, "moe_top_k": 1, "moe_ffn_hidden": 64, "max_seq_len": 64,
    "dynamic_head_mask": {"enabled": true, "entropy_threshold": 1.5}})");
}

TEST(KVCache, ReorderSwapsSequences) {
  zcode::kernels::set_num_threads(1);
  const glm52::Config cfg = glm52_test::make_config(kSmall);
  glm52::Model<float> model(cfg, 77);
  const int V = 300;
  auto* a = model.decode_begin(2, 8);
  auto* b = model.decode_begin(2, 8);
  std::vector<float> la(2 * V), lb(2 * V);
  const int32_t p0[2] = {1, 2}, p0s[2] = {2, 1}, nxt[2] = {9, 9};
  model.decode_step(a, p0, la.data());
  model.decode_step(b, p0s, lb.data());
  const int32_t swap[2] = {1, 0};
  model.decode_reorder(a, swap);
  model.decode_step(a, nxt, la.data());
  model.decode_step(b, nxt, lb.data());
  for (int j = 0; j < 2 * V; ++j) EXPECT_EQ(la[j], lb[j]);
  model.decode_end(a);
  model.decode_end(b);
}

TEST(Model, ErrorsNameTheProblem) {
  zcode::kernels::set_num_threads(1);
  const glm52::Config cfg = glm52_test::make_config(kSmall);
  glm52::Model<float> model(cfg, 1);
  glm52_test::Batch b = glm52_test::random_batch(1, 8, 300, 1);
  b.ids[3] = 300;
  glm52::StepMetrics m;
  try {
    model.forward_backward(b.view(false), 0, 1.0, false, 0, m);
    FAIL() << "no error";
  } catch (const zcode::sdk::Error& e) {
    EXPECT_STREQ(e.what(), "batch.input_ids[0][3]: token id 300 out of range [0, 300)");
  }
  try {
    glm52_test::make_config(R"({"vocab_size": 10, "n_heads": 6, "n_kv_heads": 4})");
    FAIL() << "no error";
  } catch (const zcode::sdk::Error& e) {
    EXPECT_STREQ(e.what(), "model.n_kv_heads: 4 does not divide n_heads 6");
  }
  try {
    glm52_test::make_config(R"({"vocab_size": 10, "variant": "huge"})");
    FAIL() << "no error";
  } catch (const zcode::sdk::Error& e) {
    EXPECT_STREQ(e.what(),
                 "model.variant: unknown model variant 'huge' (expected one of: nano, tiny, base, large, xl)");
  }
  try {
    glm52_test::make_config(R"({"vocab_size": 10, "d_modle": 8})");
    FAIL() << "no error";
  } catch (const zcode::sdk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.d_modle: unknown option"), std::string::npos) << e.what();
  }
}

// The variant table's counts are recomputed here from the formulas of
// README.md (independently of Config::count_params) for the GPT-2 vocabulary.
TEST(Model, VariantParameterCounts) {
  for (const std::string& v : glm52::variant_names()) {
    const glm52::Config c = glm52_test::make_config(R"({"vocab_size": 50257, "variant": ")" + v + "\"}");
    uint64_t total = 0, active = 0;
    c.count_params(total, active);
    const uint64_t d = c.d_model, L = c.n_layers, E = c.moe_experts, F = c.moe_ffn_hidden;
    const uint64_t attn = d * c.head_dim * (2ull * c.n_heads + 2ull * c.n_kv_heads) + c.rotary_dims() / 2 + 2;
    const uint64_t moe_layers = L - c.first_dense_layers;
    const uint64_t expect =
        50304 * d + L * attn + c.first_dense_layers * 3ull * d * c.ffn_hidden + moe_layers * (E * d + E * 3ull * d * F);
    EXPECT_EQ(total, expect) << v;
    EXPECT_EQ(active, expect - moe_layers * (E - c.moe_top_k) * 3ull * d * F) << v;
    if (v == "tiny") {
      EXPECT_NEAR(static_cast<double>(total), 125e6, 10e6);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// No heap allocation in a steady-state step: count global operator new calls
// (every std::vector/std::string growth goes through it) during a third step.
// ---------------------------------------------------------------------------
namespace {
std::atomic<long> g_news{0};
}  // namespace

void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// Through a volatile pointer: GCC otherwise flags free() on memory from
// operator new, not seeing that this file replaces both.
static void (*volatile g_free)(void*) = std::free;
void operator delete(void* p) noexcept { g_free(p); }
void operator delete(void* p, size_t) noexcept { g_free(p); }

namespace {

TEST(Model, NoHeapAllocationInSteadyStateStep) {
  zcode::kernels::set_num_threads(2);
  const glm52::Config cfg = glm52_test::make_config(kSmall);
  glm52::Model<float> model(cfg, 3);
  const glm52_test::Batch b = glm52_test::random_batch(2, 32, 300, 5);
  glm52::StepMetrics m;
  for (int i = 0; i < 2; ++i) model.forward_backward(b.view(false), 0, 1.0, false, 0, m);  // workspace sized here
  const long before = g_news.load();
  model.zero_grad();
  model.forward_backward(b.view(false), 0, 1.0, false, 0, m);
  EXPECT_EQ(g_news.load() - before, 0);
}

}  // namespace

// forward_eval's arg-max (ABI 1.1, used for next-token accuracy) is the arg-max
// of the full-recompute logits row by row (dropless capacity, so both paths
// route the same), and its log-probs are forward_logprobs' log-probs.
TEST(ForwardEval, ArgmaxMatchesFullLogits) {
  zcode::kernels::set_num_threads(2);
  const glm52::Config cfg = glm52_test::make_config(
      R"({"vocab_size": 300, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8,
          "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 16, "first_dense_layers": 0, "capacity_factor": 0,
          "max_seq_len": 32})");
  glm52::Model<float> model(cfg, 11);
  const int B = 2, T = 12, V = static_cast<int>(cfg.vocab_size);
  std::vector<int32_t> ids(B * T), tgt(B * T);
  for (int i = 0; i < B * T; ++i) {
    ids[i] = (i * 37 + 5) % V;
    tgt[i] = i % 5 == 4 ? -1 : (i * 53 + 9) % V;
  }
  glm52::BatchView b;
  b.ids = ids.data();
  b.targets = tgt.data();
  b.B = B;
  b.T = T;
  std::vector<float> lp(B * T), lp_only(B * T);
  std::vector<int32_t> am(B * T, -7);
  model.forward_logprobs(b, lp.data(), am.data());
  model.forward_logprobs(b, lp_only.data());
  EXPECT_EQ(0, std::memcmp(lp.data(), lp_only.data(), lp.size() * sizeof(float)));
  std::vector<float> logits(T * V);
  for (int r = 0; r < B; ++r) {
    model.forward_logits(ids.data() + r * T, T, logits.data());
    for (int t = 0; t < T; ++t)
      EXPECT_EQ(am[r * T + t], argmax(logits.data() + t * V, V)) << "row " << r << " pos " << t;
  }
}

// With a vocabulary of several fused-head slices (pinned here to 512
// columns each, lm_head.h), forward_logprobs' log-probs are the log-softmax of the full-recompute
// logits (computed here in double) and its arg-max is theirs, across slice
// boundaries; both are the same bits on 1 and 2 OpenMP threads.
TEST(ForwardEval, FusedHeadOverSeveralSlicesMatchesTheLogits) {
  if (std::string why; !blas_pinnable_or_skip_reason(&why)) GTEST_SKIP() << why;
  const glm52::Config cfg = glm52_test::make_config(
      R"({"vocab_size": 1500, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8,
          "moe_experts": 0, "max_seq_len": 32, "blocking": {"head_fused_slice": 512, "head_fused_groups": 12}})");
  glm52::Model<float> model(cfg, 5);
  const int B = 2, T = 16, V = static_cast<int>(cfg.vocab_size);
  std::vector<int32_t> ids(B * T), tgt(B * T);
  for (int i = 0; i < B * T; ++i) {
    ids[i] = (i * 389 + 7) % V;
    tgt[i] = i % 7 == 3 ? -1 : (i * 613 + 11) % V;  // targets in all three slices
  }
  glm52::BatchView b;
  b.ids = ids.data();
  b.targets = tgt.data();
  b.B = B;
  b.T = T;
  std::vector<float> lp1(B * T), lp2(B * T);
  std::vector<int32_t> am1(B * T, -7), am2(B * T, -7);
  // OpenBLAS pinned to one thread, as in Determinism.OurKernelsThreadCountIndependent:
  // its sgemm (the layers before the head) varies with its own thread count
  // (seen in the -O1 asan build on an AMD EPYC, 2026-12-05); the fused head's loops must not.
  zcode::kernels::set_num_threads(1);
  model.forward_logprobs(b, lp1.data(), am1.data());
  zcode::kernels::set_num_threads(2);
  zcode::kernels::set_blas_num_threads(1);
  ASSERT_EQ(2, omp_get_max_threads()) << "our loops' thread count";
  model.forward_logprobs(b, lp2.data(), am2.data());
  EXPECT_EQ(0, std::memcmp(lp1.data(), lp2.data(), lp1.size() * sizeof(float)));
  EXPECT_EQ(am1, am2);
  std::vector<float> logits(T * V);
  std::set<int> slices_of_argmax;
  for (int r = 0; r < B; ++r) {
    model.forward_logits(ids.data() + r * T, T, logits.data());
    for (int t = 0; t < T; ++t) {
      const float* z = logits.data() + t * V;
      const int i = r * T + t;
      EXPECT_EQ(am2[i], argmax(z, V)) << "row " << r << " pos " << t;
      slices_of_argmax.insert(am2[i] / 512);
      if (tgt[i] < 0) {
        EXPECT_EQ(lp2[i], 0.0f);
        continue;
      }
      double mx = z[0], sum = 0;
      for (int v = 1; v < V; ++v) mx = std::max(mx, double(z[v]));
      for (int v = 0; v < V; ++v) sum += std::exp(double(z[v]) - mx);
      const double want = double(z[tgt[i]]) - mx - std::log(sum);
      EXPECT_NEAR(lp2[i], want, 1e-5 * std::max(1.0, std::abs(want))) << "row " << r << " pos " << t;
    }
  }
  EXPECT_GE(slices_of_argmax.size(), 2u) << "the arg-maxes should not all fall in one slice";
}

// The activations exposed for inspection (ABI 1.2) are the ones the step
// used: checked against values computed here from the parameters alone.
TEST(Activations, MatchIndependentRecomputation) {
  zcode::kernels::set_num_threads(2);
  const glm52::Config cfg = glm52_test::make_config(kSmall);  // 3 layers, layer 0 dense, deepnorm + scalenorm
  glm52::Model<double> model(cfg, 7);
  const glm52_test::Batch b = glm52_test::random_batch(2, 16, 300, 3);
  std::vector<glm52::Model<double>::Activation> acts;
  int B = -1, T = -1;
  model.activations(acts, B, T);
  EXPECT_TRUE(acts.empty());  // nothing before the first step
  EXPECT_EQ(B, 0);
  glm52::StepMetrics m;
  model.forward_backward(b.view(false), 0, 1.0, false, 0, m);
  model.activations(acts, B, T);
  ASSERT_EQ(B, 2);
  ASSERT_EQ(T, 16);
  // 5 per layer, the router logits of the 2 MoE layers, the final hidden.
  ASSERT_EQ(acts.size(), 3u * 5 + 2 + 1);
  auto find = [&](const std::string& name) -> const glm52::Model<double>::Activation& {
    for (const auto& a : acts)
      if (a.name == name) return a;
    ADD_FAILURE() << "no activation " << name;
    return acts.front();
  };
  const int64_t d = cfg.d_model, N = int64_t{B} * T;
  // layers.0.input = embedding rows of the input ids.
  const double* E = model.params() + model.find_param("embed.weight")->offset;
  const auto& in0 = find("layers.0.input");
  ASSERT_EQ(in0.width, d);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < d; ++i) ASSERT_EQ(in0.data[n * d + i], E[int64_t{b.ids[n]} * d + i]) << n << "," << i;
  // Router logits of layer 1: z = ffn.input · Wrᵀ.
  const auto& xf = find("layers.1.ffn.input");
  const auto& z = find("layers.1.moe.router_logits");
  ASSERT_EQ(z.width, cfg.moe_experts);
  const double* Wr = model.params() + model.find_param("layers.1.moe.router")->offset;
  for (int64_t n = 0; n < N; ++n)
    for (int e = 0; e < cfg.moe_experts; ++e) {
      double s = 0;
      for (int64_t i = 0; i < d; ++i) s += xf.data[n * d + i] * Wr[e * d + i];
      ASSERT_NEAR(z.data[n * cfg.moe_experts + e], s, 1e-12) << n << "," << e;
    }
  // DeepNorm's last op is ScaleNorm g·x/sqrt(‖x‖² + eps) (Nguyen & Salazar
  // 2019): every row of the final hidden state has L2 norm g of
  // layers.2.ffn_norm, up to eps/(2‖x‖²) < 1e-6 for these rows (‖x‖² > 5).
  const double g = model.params()[model.find_param("layers.2.ffn_norm.weight")->offset];
  const auto& fh = find("final_hidden");
  for (int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += fh.data[n * d + i] * fh.data[n * d + i];
    ASSERT_NEAR(std::sqrt(s), g, 1e-6 * g) << n;
  }
  // Another call reuses the workspace: the list is then empty.
  std::vector<float> lp(static_cast<size_t>(N));
  model.forward_logprobs(b.view(false), lp.data());
  model.activations(acts, B, T);
  EXPECT_TRUE(acts.empty());
  EXPECT_EQ(T, 0);
}
