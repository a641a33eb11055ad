// zcode/sdk/suggest.h: the edit distance and the "did you mean" rule. The
// messages built from it are checked where they are made (tests/config,
// tests/cli, tests/registry).
#include <zcode/sdk/suggest.h>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace {

TEST(Suggest, EditDistanceKnownValues) {
  EXPECT_EQ(zcode::sdk::edit_distance("kitten", "sitting"), 3u);  // Levenshtein's classic example
  EXPECT_EQ(zcode::sdk::edit_distance("ca", "ac"), 1u);           // one adjacent transposition
  EXPECT_EQ(zcode::sdk::edit_distance("", "abc"), 3u);
  EXPECT_EQ(zcode::sdk::edit_distance("Zerosum-SGD", "zerosum_sgd"), 0u);
}

TEST(Suggest, DidYouMean) {
  const std::vector<std::string> v{"nano", "tiny", "base", "large", "xl"};
  EXPECT_EQ(zcode::sdk::did_you_mean("tinyy", v), "tiny");
  EXPECT_EQ(zcode::sdk::did_you_mean("lrage", v), "large");  // transposition
  EXPECT_EQ(zcode::sdk::did_you_mean("huge", v), std::nullopt);
  EXPECT_EQ(zcode::sdk::did_you_mean("max_step", {"max_steps", "log_every"}), "max_steps");
  EXPECT_EQ(zcode::sdk::did_you_mean("grad", {"gradient_accumulation"}), "gradient_accumulation");  // prefix
}

}  // namespace
