// zcode/sdk/hash.h against the published vectors: seeds derived from these
// functions feed every recorded figure, so any change must fail here.
#include <zcode/sdk/hash.h>

#include <gtest/gtest.h>

#include <cstdint>

namespace {

using zcode::sdk::fnv1a64;
using zcode::sdk::mix64;
using zcode::sdk::splitmix64;
using zcode::sdk::splitmix64_next;

TEST(Hash, Fnv1a64MatchesPublishedVectors) {
  // Test vectors of the FNV reference (isthe.com/chongo/tech/comp/fnv, test_fnv.c).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  // Piecewise: continuing from an earlier result hashes the concatenation.
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));
  // Bytes >= 0x80 are hashed as unsigned (the spec works on octets).
  EXPECT_EQ(fnv1a64("\xff"), (0xcbf29ce484222325ull ^ 0xffull) * 0x100000001b3ull);
  static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cull, "usable in constant expressions");
}

TEST(Hash, SplitMix64GeneratorMatchesReference) {
  // First outputs of Vigna's splitmix64.c seeded with 0.
  uint64_t s = 0;
  EXPECT_EQ(splitmix64_next(&s), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64_next(&s), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(splitmix64_next(&s), 0x06c45d188009454full);
  EXPECT_EQ(s, 3 * zcode::sdk::kSplitMix64Gamma);
  // Seeded with 1234567: first two outputs of the same reference.
  s = 1234567;
  EXPECT_EQ(splitmix64_next(&s), 6457827717110365317ull);
  EXPECT_EQ(splitmix64_next(&s), 3203168211198807973ull);
}

TEST(Hash, SplitMix64IsTheStatelessStep) {
  // splitmix64(x) is the output of one step from state x; mix64 is the bare
  // finalizer (no increment).
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(mix64(zcode::sdk::kSplitMix64Gamma), 0xe220a8397b1dcdafull);
  EXPECT_EQ(mix64(0), 0u);
  EXPECT_EQ(mix64(1), 0x5692161d100b05e5ull);
  for (uint64_t x : {0ull, 1ull, 42ull, ~0ull}) {
    uint64_t s = x;
    EXPECT_EQ(splitmix64_next(&s), splitmix64(x));
  }
}

TEST(Hash, DeriveSeedIsSplitMixOfFnvXorSeed) {
  // abi.h, zc_host_services.derive_seed; hand-computed with Python's integers.
  EXPECT_EQ(zcode::sdk::derive_seed(42, "data"), 0x93a77708b39d31a4ull);
  EXPECT_EQ(zcode::sdk::derive_seed(0, ""), 0xc3817c016ba4ff30ull);
}

TEST(Hash, U01TakesTheTop53Bits) {
  EXPECT_EQ(zcode::sdk::u01(0), 0.0);
  EXPECT_EQ(zcode::sdk::u01(~0ull), 1.0 - 0x1.0p-53);
  EXPECT_EQ(zcode::sdk::u01(1ull << 63), 0.5);
}

}  // namespace
