// Expert parallelism in the glm52 model, run as 2 ranks by mpirun (ctest
// label mpi): each rank holds E/2 of the 8 routed experts and trains on its
// own micro-batch; the routed rows travel to their experts' owners over the
// host's zc_collectives (ZC_GROUP_EXPERT), as the plugin's model gets them.
//
// The independent computation is the one-process model with all 8 experts,
// run on every rank over the ranks' micro-batches one after the other (the
// deterministic reduction's order, gradient_reducer.cpp: micro-batch m·K + q
// is rank q's m-th), each micro-batch's gradient from zero and folded in that
// order. Capacity is counted over one rank's micro-batch, as one process
// counts it over one micro-batch, so the losses, the dropped assignments, the
// per-expert loads and every gradient must be the same bits.
#include "expert_group.h"
#include "test_util.h"

#include <zcode/core/dist/communicator.h>
#include <zcode/core/dist/process_groups.h>
#include <zcode/core/host_services.h>
#include <zcode/kernels/threads.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace zcode::dist;

// Every MoE block on: 8 experts top-2, a capacity that drops, a shared expert,
// a first dense layer, grouped KV heads, the aux and z losses.
const char* kMoE = R"({"vocab_size": 300, "d_model": 32, "n_layers": 3, "n_heads": 4, "n_kv_heads": 2,
  "head_dim": 8, "ffn_hidden": 48, "moe_experts": 8, "moe_top_k": 2, "moe_ffn_hidden": 24,
  "moe_shared_experts": 1, "first_dense_layers": 1, "capacity_factor": 1.0, "moe_aux_loss_coef": 0.01,
  "moe_z_loss_coef": 0.001, "rotary_fraction": 0.5, "max_seq_len": 64})";

/// The job's collectives with one expert group of every rank, as the host
/// builds them for distributed.expert_parallel = world size.
struct Job {
  ProcessGroups groups{world(), world().size()};
  CollectivesService service{groups};
  zcode::HostServices host{7};
  Job() { host.set_collectives(service.table()); }
  glm52::ExpertGroup experts() const { return glm52::expert_group(zcode::sdk::Collectives(host.raw())); }
};

glm52_test::Batch batch_of(int micro) {
  return glm52_test::random_batch(2, 16, 300, 1000 + static_cast<uint64_t>(micro));
}

int64_t targets(const glm52_test::Batch& b) {
  int64_t n = 0;
  for (int32_t t : b.targets) n += t >= 0;
  return n;
}

bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, sizeof(float) * size_t(n)) == 0; }

/// The one-process run: micro-batches 0..count-1 in order, each gradient
/// from zero, folded into `acc` in that order; their metrics.
void reference(glm52::Model<float>& ref, int count, double normalizer, std::vector<float>& acc,
               std::vector<glm52::StepMetrics>& metrics) {
  acc.assign(static_cast<size_t>(ref.num_elements()), 0.0f);
  metrics.assign(static_cast<size_t>(count), glm52::StepMetrics{});
  for (int m = 0; m < count; ++m) {
    const glm52_test::Batch b = batch_of(m);
    metrics[size_t(m)].moe_load.assign(8, 0.0);
    ref.zero_grad();
    ref.forward_backward(b.view(false), normalizer, 1.0, false, 0, metrics[size_t(m)]);
    for (int64_t i = 0; i < ref.num_elements(); ++i) acc[size_t(i)] += ref.grads()[i];
  }
}

void expect_same_metrics(const glm52::StepMetrics& got, const glm52::StepMetrics& want, const std::string& what) {
  EXPECT_EQ(got.loss, want.loss) << what;
  EXPECT_EQ(got.aux_loss, want.aux_loss) << what;
  EXPECT_EQ(got.z_loss, want.z_loss) << what;
  EXPECT_EQ(got.moe_dropped_fraction, want.moe_dropped_fraction) << what;
  EXPECT_EQ(got.moe_load, want.moe_load) << what;
}

TEST(ExpertParallel, EachRankHoldsItsExpertsWithTheFullModelsValues) {
  zcode::kernels::set_num_threads(1);
  Job job;
  const int K = world().size(), r = world().rank();
  const glm52::Config cfg = glm52_test::make_config(kMoE);
  glm52::Model<float> ref(cfg, 5), ep(cfg, 5, job.experts());
  EXPECT_EQ(ep.local_experts(), 8 / K);
  EXPECT_EQ(ep.first_expert(), r * 8 / K);
  int experts = 0;
  for (const glm52::ParamInfo& p : ep.param_infos()) {
    const glm52::ParamInfo* q = ref.find_param(p.name);
    ASSERT_NE(q, nullptr) << p.name;
    EXPECT_TRUE(same_bits(ep.params() + p.offset, ref.params() + q->offset, p.numel)) << p.name;
    if (p.flags & ZC_PARAM_EXPERT) {
      ++experts;
      const int e = std::stoi(p.name.substr(p.name.find("experts.") + 8));
      EXPECT_GE(e, ep.first_expert()) << p.name;
      EXPECT_LT(e, ep.first_expert() + ep.local_experts()) << p.name;
    }
  }
  EXPECT_EQ(experts, 2 * (8 / K) * 3);  // MoE layers 1 and 2, w1 w3 w2 each
  EXPECT_LT(ep.num_elements(), ref.num_elements());
}

TEST(ExpertParallel, OneMicroBatchPerRankIsBitIdenticalToOneProcess) {
  zcode::kernels::set_num_threads(1);
  Job job;
  const int K = world().size(), r = world().rank();
  const glm52::Config cfg = glm52_test::make_config(kMoE);
  double normalizer = 0;
  for (int q = 0; q < K; ++q) normalizer += static_cast<double>(targets(batch_of(q)));

  glm52::Model<float> ref(cfg, 5);
  std::vector<float> acc;
  std::vector<glm52::StepMetrics> want;
  reference(ref, K, normalizer, acc, want);
  double dropped = 0;
  for (const auto& m : want) dropped += m.moe_dropped_fraction;
  EXPECT_GT(dropped, 0) << "the case must drop assignments at capacity";

  glm52::Model<float> ep(cfg, 5, job.experts());
  glm52::StepMetrics got;
  got.moe_load.assign(8, 0.0);
  ep.zero_grad();
  ep.forward_backward(batch_of(r).view(false), normalizer, 1.0, false, 0, got);
  expect_same_metrics(got, want[size_t(r)], "rank " + std::to_string(r));

  for (const glm52::ParamInfo& p : ep.param_infos()) {
    const glm52::ParamInfo* q = ref.find_param(p.name);
    ASSERT_NE(q, nullptr);
    std::vector<float> folded(static_cast<size_t>(p.numel), 0.0f);
    if (p.flags & ZC_PARAM_EXPERT) {
      folded.assign(ep.grads() + p.offset, ep.grads() + p.offset + p.numel);  // summed over sources by its owner
    } else {
      // Dense: every rank's gradient, folded in rank order (the deterministic reducer's order).
      std::vector<float> all(static_cast<size_t>(p.numel * K));
      const std::vector<size_t> counts(static_cast<size_t>(K), static_cast<size_t>(p.numel));
      world().allgatherv(ep.grads() + p.offset, all.data(), counts, DType::kF32);
      for (int s = 0; s < K; ++s)
        for (int64_t i = 0; i < p.numel; ++i) folded[size_t(i)] += all[size_t(s * p.numel + i)];
    }
    EXPECT_TRUE(same_bits(folded.data(), acc.data() + q->offset, p.numel)) << p.name;
  }
}

// Two micro-batches per rank, no zeroing between them: an expert's owner adds
// each source's gradient in the order one process with accumulation 2·K
// meets those micro-batches (m·K + q).
TEST(ExpertParallel, AccumulatedExpertGradientsFollowTheGlobalMicroBatchOrder) {
  zcode::kernels::set_num_threads(1);
  Job job;
  const int K = world().size(), r = world().rank();
  const glm52::Config cfg = glm52_test::make_config(kMoE);
  double normalizer = 0;
  for (int m = 0; m < 2 * K; ++m) normalizer += static_cast<double>(targets(batch_of(m)));
  glm52::Model<float> ref(cfg, 5);
  std::vector<float> acc;
  std::vector<glm52::StepMetrics> want;
  reference(ref, 2 * K, normalizer, acc, want);

  glm52::Model<float> ep(cfg, 5, job.experts());
  ep.zero_grad();
  for (int m = 0; m < 2; ++m) {
    glm52::StepMetrics got;
    got.moe_load.assign(8, 0.0);
    ep.forward_backward(batch_of(m * K + r).view(false), normalizer, 1.0, false, 0, got);
    expect_same_metrics(got, want[size_t(m * K + r)], "micro-batch " + std::to_string(m * K + r));
  }
  for (const glm52::ParamInfo& p : ep.param_infos()) {
    if (!(p.flags & ZC_PARAM_EXPERT)) continue;
    const glm52::ParamInfo* q = ref.find_param(p.name);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(same_bits(ep.grads() + p.offset, acc.data() + q->offset, p.numel)) << p.name;
  }
}

// Evaluation is a collective too: each rank's log-probabilities (dropless)
// are one process's for the same batch.
TEST(ExpertParallel, ForwardLogprobsMatchOneProcess) {
  zcode::kernels::set_num_threads(1);
  Job job;
  const int r = world().rank();
  const glm52::Config cfg = glm52_test::make_config(kMoE);
  glm52::Model<float> ref(cfg, 5), ep(cfg, 5, job.experts());
  const glm52_test::Batch b = batch_of(10 + r);
  std::vector<float> want(b.ids.size()), got(b.ids.size());
  std::vector<int32_t> want_arg(b.ids.size()), got_arg(b.ids.size());
  ref.forward_logprobs(b.view(false), want.data(), want_arg.data());
  ep.forward_logprobs(b.view(false), got.data(), got_arg.data());
  EXPECT_TRUE(same_bits(got.data(), want.data(), static_cast<int64_t>(got.size())));
  EXPECT_EQ(got_arg, want_arg);
}

TEST(ExpertParallel, RefusedWhereItCannotWork) {
  Job job;
  if (world().size() < 2) GTEST_SKIP() << "needs an expert group of 2 or more ranks";
  const std::string three = std::string(kMoE).replace(std::string(kMoE).find("\"moe_experts\": 8"), 16,
                                                      "\"moe_experts\": " + std::to_string(world().size() + 1));
  try {
    glm52::Model<float> m(glm52_test::make_config(three), 5, job.experts());
    ADD_FAILURE() << "E not divisible by K was accepted";
  } catch (const zcode::sdk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide model.moe_experts"), std::string::npos) << e.what();
  }
  glm52::Model<float> ep(glm52_test::make_config(kMoE), 5, job.experts());
  try {
    ep.decode_begin(1, 8);
    ADD_FAILURE() << "decoding with a share of the experts was accepted";
  } catch (const zcode::sdk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expert parallel"), std::string::npos) << e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  zcode::dist::shutdown();
  return rc;
}
