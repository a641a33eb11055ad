// glm52::derive_blocking against the rules of blocking.h worked by hand for
// the two machines the project ran on, and the `blocking` option's checks.
#include "blocking.h"
#include "config.h"

#include <zcode/sdk/error.h>

#include <gtest/gtest.h>

#include <string>

namespace {

glm52::MachineInfo machine(int64_t l2, int64_t line, int cpus) {
  glm52::MachineInfo m;
  m.l2 = l2;
  m.line = line;
  m.cpus = cpus;
  m.source = "test";
  return m;
}

// The 2-core Intel Xeon VM the path was tuned on (2 MiB L2, 64-byte lines):
// slice: 512·598·4 + 342·256·4 = 1,574,912 ≤ 2,097,152 < 1024·598·4 + 350,208;
// groups 6·2 = 12; embedding blocks 4·64/4 = 64. Today's values, i.e. Blocking{}.
TEST(Blocking, TunedMachineGivesTheTunedValues) {
  const glm52::Blocking b = glm52::derive_blocking(machine(int64_t{2} << 20, 64, 2));
  EXPECT_EQ(b.head_fused_slice, 512);
  EXPECT_EQ(b.head_fused_groups, 12);
  EXPECT_EQ(b.embed_grad_cols, 64);
  EXPECT_EQ(b.logits_chunk_elems, int64_t{29} << 19);
  EXPECT_EQ(b.head_slice, 4096);
  EXPECT_EQ(b.attn_tile, 64);
  EXPECT_EQ(b.expert_alone_share, 1.0);
  EXPECT_TRUE(b == glm52::Blocking{});
}

// The 2-core AMD EPYC Zen 4 VM (1 MiB L2 per core): 512 columns need
// 1,574,912 B > 1,048,576; 256 need 256·2392 + 350,208 = 962,560 ≤ 1,048,576.
// A 32-CPU machine: 6·32 = 192, capped at 64 groups; 128-byte lines: 128.
TEST(Blocking, OtherMachines) {
  const glm52::Blocking amd = glm52::derive_blocking(machine(int64_t{1} << 20, 64, 2));
  EXPECT_EQ(amd.head_fused_slice, 256);
  EXPECT_EQ(amd.head_fused_groups, 12);
  const glm52::Blocking big = glm52::derive_blocking(machine(int64_t{512} << 10, 128, 32));
  EXPECT_EQ(big.head_fused_slice, 128);  // 128·2392 + 350,208 = 656,384 > 512 KiB: the floor
  EXPECT_EQ(big.head_fused_groups, glm52::kMaxHeadFusedGroups);
  EXPECT_EQ(big.embed_grad_cols, 128);
  // Nothing known: the tuned machine's values.
  EXPECT_TRUE(glm52::derive_blocking(glm52::MachineInfo{}) == glm52::Blocking{});
}

// The thread count never enters: the fields that set a summation order are
// functions of the machine only (derive_blocking takes no thread count).
TEST(Blocking, ThisMachineIsReadOnce) {
  const glm52::MachineInfo& m = glm52::this_machine();
  EXPECT_GE(m.cpus, 1);
  EXPECT_EQ(&m, &glm52::this_machine());
  EXPECT_FALSE(m.describe().empty());
}

TEST(Blocking, OptionOverlaysAndChecks) {
  const zcode::sdk::Options o(R"({"blocking": {"head_fused_slice": 64, "attn_tile": 8}})", "model");
  const glm52::Blocking b = glm52::apply_blocking_options(o.object("blocking"), glm52::Blocking{});
  EXPECT_EQ(b.head_fused_slice, 64);
  EXPECT_EQ(b.attn_tile, 8);
  EXPECT_EQ(b.head_fused_groups, 12);  // not written: the base's
  auto error_of = [](const char* json) {
    try {
      const zcode::sdk::Options c("{}", "config"), m(json, "model");
      glm52::Config::resolve(m, c, 100);
    } catch (const zcode::sdk::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"({"blocking": {"head_fused_slice": 100}})"),
            "model.blocking.head_fused_slice: 100 (expected 16..65536, a multiple of 16)");
  EXPECT_EQ(error_of(R"({"blocking": {"head_fused_groups": 65}})"),
            "model.blocking.head_fused_groups: 65 (expected 1..64)");
  EXPECT_EQ(error_of(R"({"blocking": {"expert_alone_share": 0}})"),
            "model.blocking.expert_alone_share: number 0 (expected a finite number > 0)");
  EXPECT_NE(error_of(R"({"blocking": {"head_slices": 4096}})").find("model.blocking.head_slices: unknown option"),
            std::string::npos);
  // A resolved config carries the option over the machine's blocking.
  const zcode::sdk::Options c("{}", "config"), m(R"({"blocking": {"attn_tile": 16}})", "model");
  const glm52::Config cfg = glm52::Config::resolve(m, c, 100);
  EXPECT_EQ(cfg.blocking.attn_tile, 16);
  EXPECT_EQ(cfg.blocking.head_fused_slice, glm52::derive_blocking(glm52::this_machine()).head_fused_slice);
}

}  // namespace
