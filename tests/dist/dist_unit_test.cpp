// The parts of zcode/core/dist/ that need no second process: the launcher
// environment (Open MPI's and Slurm's variables as their manuals list them),
// threads per rank, the flat layout and its shards. Expected values are
// worked out by hand in the comments.
#include <zcode/core/dist/flat_layout.h>
#include <zcode/core/dist/launch.h>

#include <gtest/gtest.h>

#include <map>
#include <numeric>

namespace {

using zcode::dist::detect_launch;
using zcode::dist::EnvReader;
using zcode::dist::FlatLayout;
using zcode::dist::LaunchInfo;

EnvReader env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Launch, PlainProcessIsOneRank) {
  const LaunchInfo l = detect_launch(env({}));
  EXPECT_FALSE(l.launched);
  EXPECT_EQ(l.size, 1);
  EXPECT_EQ(l.rank, 0);
  EXPECT_EQ(l.launcher, "");
}

TEST(Launch, OpenMpiVariables) {
  const LaunchInfo l = detect_launch(env({{"OMPI_COMM_WORLD_SIZE", "4"},
                                          {"OMPI_COMM_WORLD_RANK", "3"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_TRUE(l.launched);
  EXPECT_EQ(l.launcher, "mpirun");
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 2);
}

TEST(Launch, SlurmPmixVariables) {
  const LaunchInfo l = detect_launch(env({{"PMIX_RANK", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(l.launcher, "srun");
  EXPECT_EQ(l.size, 2);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.local_size, 2);  // no SLURM_NTASKS_PER_NODE: every task on this node
  // Slurm's variables alone (a batch script's shell, no task launched) are not a launch.
  EXPECT_FALSE(detect_launch(env({{"SLURM_NTASKS", "2"}})).launched);
}

TEST(Launch, MalformedVariablesNameTheVariable) {
  for (const auto& vars :
       std::vector<std::map<std::string, std::string>>{{{"OMPI_COMM_WORLD_SIZE", "two"}},
                                                       {{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "-1"}},
                                                       {{"OMPI_COMM_WORLD_SIZE", ""}}}) {
    try {
      detect_launch(env(vars));
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("OMPI_COMM_WORLD_"), std::string::npos) << e.what();
    }
  }
  // rank >= size: not a place in a job.
  EXPECT_THROW(detect_launch(env({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"}})),
               std::invalid_argument);
  EXPECT_THROW(detect_launch(env({{"OMPI_COMM_WORLD_SIZE", "0"}})), std::invalid_argument);
}

TEST(Launch, RequireOneProcess) {
  EXPECT_NO_THROW(zcode::dist::require_one_process("evaluate", env({})));
  EXPECT_NO_THROW(zcode::dist::require_one_process("evaluate", env({{"OMPI_COMM_WORLD_SIZE", "1"}})));
  try {
    zcode::dist::require_one_process("evaluate", env({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}}));
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("zcode-host evaluate runs in one process"), std::string::npos) << e.what();
  }
}

TEST(Launch, ThreadsPerRank) {
  LaunchInfo two;
  two.size = two.local_size = 2;
  EXPECT_EQ(zcode::dist::threads_per_rank(0, 16, two), 8);  // 16 cores / 2 ranks on the node
  EXPECT_EQ(zcode::dist::threads_per_rank(3, 16, two), 3);  // explicit wins
  LaunchInfo many;
  many.size = many.local_size = 3;
  EXPECT_EQ(zcode::dist::threads_per_rank(0, 2, many), 1);  // never 0
  EXPECT_EQ(zcode::dist::threads_per_rank(0, 2, LaunchInfo{}), 2);
}

TEST(FlatLayout, SplitRange) {
  // 100 elements, granule 16: 7 granules (the last holds 4) over 3 parts ->
  // 3, 2, 2 granules = 48, 32, 20 (the last takes the remainder).
  EXPECT_EQ(zcode::dist::split_range(0, 100, 3, 16), (std::vector<size_t>{48, 32, 20}));
  EXPECT_EQ(zcode::dist::split_range(10, 42, 2, 16), (std::vector<size_t>{16, 16}));
  EXPECT_EQ(zcode::dist::split_range(0, 16, 3, 16), (std::vector<size_t>{16, 0, 0}));
  EXPECT_EQ(zcode::dist::split_range(0, 0, 2, 16), (std::vector<size_t>{0, 0}));
  EXPECT_THROW(zcode::dist::split_range(0, 1, 0, 16), std::invalid_argument);
}

struct Params {
  std::vector<std::vector<float>> grads;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<DLTensor> tensors;
  std::vector<zc_param> params;
  zc_param_list list{};
  explicit Params(std::vector<std::vector<int64_t>> s) : shapes(std::move(s)) {
    grads.resize(shapes.size());
    tensors.resize(shapes.size());
    params.resize(shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) {
      const int64_t n = std::accumulate(shapes[i].begin(), shapes[i].end(), int64_t{1}, std::multiplies<>());
      grads[i].resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) grads[i][static_cast<size_t>(j)] = static_cast<float>(100 * i + j);
      tensors[i] = DLTensor{grads[i].data(),
                            {kDLCPU, 0},
                            static_cast<int32_t>(shapes[i].size()),
                            {kDLFloat, 32, 1},
                            shapes[i].data(),
                            nullptr,
                            0};
      params[i].name = "p";
      params[i].grad = &tensors[i];
    }
    list.params = params.data();
    list.count = params.size();
  }
};

TEST(FlatLayout, OffsetsArePaddedToTheGranuleAndPackRoundTrips) {
  Params p({{3, 5}, {1}, {16}, {2, 9}});
  const FlatLayout l(p.list);
  // 15 -> [0, 15), padded to 16; 1 -> [16, 17) -> 32; 16 -> [32, 48); 18 -> [48, 66) -> 80.
  ASSERT_EQ(l.entries().size(), 4u);
  EXPECT_EQ(l.entries()[0].offset, 0u);
  EXPECT_EQ(l.entries()[1].offset, 16u);
  EXPECT_EQ(l.entries()[2].offset, 32u);
  EXPECT_EQ(l.entries()[3].offset, 48u);
  EXPECT_EQ(l.size(), 80u);
  std::vector<float> flat(l.size(), -7.0f);
  l.pack_grads(p.list, flat.data());
  EXPECT_EQ(flat[0], 0.0f);
  EXPECT_EQ(flat[14], 14.0f);
  EXPECT_EQ(flat[15], -7.0f);  // padding untouched
  EXPECT_EQ(flat[16], 100.0f);
  EXPECT_EQ(flat[48 + 17], 317.0f);
  for (float& v : flat) v *= 2;
  l.unpack_grads(flat.data(), p.list);
  EXPECT_EQ(p.grads[3][17], 634.0f);
  EXPECT_EQ(p.grads[1][0], 200.0f);
}

// Shards cut inside a tensor only at multiples of lcm(the optimizer's
// granularity, kSumBlock = 4096), or at a tensor's start, nearest to q·size/N.
TEST(ShardPlan, CutsAtBlocksOrTensorStartsNearestTheEvenSplit) {
  Params p({{10000}, {5000}, {20000}});
  const FlatLayout l(p.list);
  // Offsets 0, 10000, 15008 (5000 padded to 5008); size 35008.
  ASSERT_EQ(l.size(), 35008u);
  // 2 parts: target 17504 lies in tensor 2 (from 15008): cuts 15008 (2496
  // below) or 15008 + 4096 = 19104 (1600 above) -> 19104.
  auto two = zcode::dist::plan_shards(l, 2, {1, 1, 1});
  EXPECT_EQ(two.bounds, (std::vector<size_t>{0, 19104, 35008}));
  int64_t b = -1, e = -1;
  two.tensor_range(l, 0, 2, &b, &e);
  EXPECT_EQ(b, 0);
  EXPECT_EQ(e, 4096);
  two.tensor_range(l, 1, 2, &b, &e);
  EXPECT_EQ(b, 4096);
  EXPECT_EQ(e, 20000);
  two.tensor_range(l, 1, 0, &b, &e);
  EXPECT_EQ(b, e);  // rank 1 holds none of tensor 0
  EXPECT_EQ(two.counts(), (std::vector<size_t>{19104, 15904}));
  // Tensor 2 never cut (granularity = its size): the cut falls on its start.
  EXPECT_EQ(zcode::dist::plan_shards(l, 2, {1, 1, 20000}).bounds, (std::vector<size_t>{0, 15008, 35008}));
  // 3 parts: 11669 -> 10000 (tensor 1's start; 14096 is 2427 away), 23338
  // -> 15008 + 2·4096 = 23200 (138 below).
  EXPECT_EQ(zcode::dist::plan_shards(l, 3, {1, 1, 1}).bounds, (std::vector<size_t>{0, 10000, 23200, 35008}));
  // An optimizer granularity of 6144 makes the step lcm(6144, 4096) = 12288:
  // 17504 -> 15008 (2496 below; 27296 is 9792 above).
  EXPECT_EQ(zcode::dist::plan_shards(l, 2, {1, 1, 6144}).bounds, (std::vector<size_t>{0, 15008, 35008}));
  EXPECT_THROW(zcode::dist::plan_shards(l, 2, {1, 1}), std::invalid_argument);
}

// The ranged pack/unpack of ZeRO-1 (values all-gathered, grads of a shard).
TEST(FlatLayout, RangedValuesAndGradsTouchOnlyTheRange) {
  Params p({{20}, {20}});  // offsets 0 and 32
  const FlatLayout l(p.list);
  std::vector<float> range(16, 5.0f);  // flat [24, 40): tensor 1's [0, 8) (24..31 is padding)
  l.unpack_grads(range.data(), p.list, 24, 40);
  EXPECT_EQ(p.grads[1][0], 5.0f);
  EXPECT_EQ(p.grads[1][7], 5.0f);
  EXPECT_EQ(p.grads[1][8], 108.0f);  // outside: as it was (100·1 + 8)
  EXPECT_EQ(p.grads[0][19], 19.0f);
}

TEST(FlatLayout, RefusesNonFloatGradients) {
  Params p(std::vector<std::vector<int64_t>>{{4}});
  p.tensors[0].dtype = {kDLFloat, 16, 1};
  EXPECT_THROW(FlatLayout l(p.list), std::invalid_argument);
}

}  // namespace
