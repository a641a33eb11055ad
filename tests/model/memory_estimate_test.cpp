// glm52's memory estimate (zc_model_table.estimate_memory, ABI 1.3) against
// what the model really allocates: its parameter and gradient buffers after
// construction and the activation workspace after a training step and an
// evaluation forward of the sizes the estimate was asked for.
#include "test_util.h"

#include "model.h"

#include <zcode/kernels/memory.h>
#include <zcode/kernels/threads.h>

#include <gtest/gtest.h>

namespace {

size_t huge_round(size_t n) {
  const size_t h = zcode::kernels::kHugePageBytes;
  return (n + h - 1) / h * h;
}

const char* kMoe = R"({"vocab_size": 300, "d_model": 32, "n_layers": 3, "n_heads": 4, "n_kv_heads": 2,
  "head_dim": 8, "ffn_hidden": 48, "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 24,
  "moe_shared_experts": 1, "first_dense_layers": 1, "max_seq_len": 64})";

TEST(MemoryEstimate, MatchesTheBuffersTheModelAllocates) {
  const int threads = 2;
  zcode::kernels::set_num_threads(threads);
  const glm52::Config cfg = glm52_test::make_config(kMoe);
  std::vector<glm52::ParamInfo> infos;
  // Training batch 3 x 64, evaluation batch 5 x 64: the workspace is sized
  // for the larger.
  const auto plan = glm52::Model<float>::memory_plan(cfg, 5, 64, threads, &infos);

  glm52::Model<float> m(cfg, 7);
  // Parameters and gradients: one buffer each of num_elements() floats,
  // rounded to whole huge pages by alloc_large.
  EXPECT_EQ(plan.parameter_bytes, huge_round(sizeof(float) * static_cast<size_t>(m.num_elements())));
  EXPECT_EQ(plan.gradient_bytes, plan.parameter_bytes);
  // Independent of the layout code: at least the analytic parameter count
  // (config.cpp's count_params), padding adds < 16 floats a tensor.
  uint64_t total = 0, active = 0;
  cfg.count_params(total, active);
  EXPECT_GE(static_cast<uint64_t>(m.num_elements()), total);
  EXPECT_LT(static_cast<uint64_t>(m.num_elements()), total + 16 * m.param_infos().size() + 16);
  ASSERT_EQ(infos.size(), m.param_infos().size());
  for (size_t i = 0; i < infos.size(); ++i) {
    EXPECT_EQ(infos[i].name, m.param_infos()[i].name);
    EXPECT_EQ(infos[i].shape, m.param_infos()[i].shape);
    EXPECT_EQ(infos[i].flags, m.param_infos()[i].flags);
  }

  EXPECT_EQ(m.workspace_bytes(), 0u);  // nothing before the first batch
  glm52::StepMetrics sm;
  const glm52_test::Batch train = glm52_test::random_batch(3, 64, 300, 1);
  m.forward_backward(train.view(false), 0, 1.0, false, 0, sm);
  const glm52_test::Batch eval = glm52_test::random_batch(5, 64, 300, 2);
  std::vector<float> lp(5 * 64);
  m.forward_logprobs(eval.view(false), lp.data());
  EXPECT_EQ(plan.workspace_bytes, huge_round(m.workspace_bytes()));
  EXPECT_GT(m.workspace_bytes(), m.activation_bytes(5, 64));  // kept activations plus scratch
}

}  // namespace
