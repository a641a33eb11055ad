// Untrusted structure in a config is bounded before it is walked: nesting
// depth (YAML and JSON, 256 levels) and alias expansion (100000 values).
// Each document below is built so that its depth or size is known by
// construction: `training:\n  x: ` + m '[' is 2 + m containers deep (the
// top-level mapping, `training`, then m lists), and a chain of k anchors each
// listing the previous one 10 times expands to 10^k values.
#include <zcode/core/config.h>

#include <gtest/gtest.h>

#include <unistd.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using zcode::ConfigLoadError;
using zcode::HarnessConfig;

std::string load_error(const std::string& text, const std::string& name) {
  try {
    HarnessConfig::from_string(text, name);
  } catch (const ConfigLoadError& e) {
    return e.what();
  }
  return "";
}

std::string nested_yaml(size_t lists) {
  return "training:\n  x: " + std::string(lists, '[') + std::string(lists, ']') + "\n";
}
std::string nested_json(size_t lists) {
  return "{\"training\": {\"x\": " + std::string(lists, '[') + std::string(lists, ']') + "}}";
}
// "training.x" then the [0] of each of its 254 lists, as far as the message
// shows it (80 characters, then "...").
std::string deep_path() {
  std::string p = "training.x";
  for (int i = 0; i < 254; ++i) p += "[0]";
  return p.substr(0, 80) + "...";
}

TEST(Bounds, YamlNestingLimitIs256Levels) {
  EXPECT_EQ(load_error(nested_yaml(254), "ok.yaml"), "");  // 256 containers
  // The 257th container is x[0]...[0] with 254 indices; it starts at column
  // 6 + 254 of line 2 (after "  x: " and 254 '[').
  EXPECT_EQ(load_error(nested_yaml(255), "deep.yaml"),
            "deep.yaml:2:" + std::to_string(6 + 254) + ": nesting deeper than 256 levels at " + deep_path());
}

TEST(Bounds, JsonNestingLimitIs256Levels) {
  EXPECT_EQ(load_error(nested_json(254), "ok.json"), "");
  // The refused '[' is the 255th: byte 19 + 254 (after `{"training": {"x": `), column 20 + 254.
  EXPECT_EQ(load_error(nested_json(255), "deep.json"),
            "deep.json:1:" + std::to_string(20 + 254) + ": nesting deeper than 256 levels at " + deep_path());
}

TEST(Bounds, HundredsOfThousandsDeepIsAnErrorNotACrash) {
  const size_t n = 300000;
  std::string e = load_error(nested_yaml(n), "deep.yaml");
  EXPECT_TRUE(e.starts_with("deep.yaml:2:")) << e;
  EXPECT_NE(e.find(": nesting deeper than 256 levels"), std::string::npos) << e;
  e = load_error(nested_json(n), "deep.json");
  EXPECT_NE(e.find("deep.json:1:274: nesting deeper than 256 levels at training.x[0]"), std::string::npos) << e;
  // Through a file, as `zcode-host validate` reads it.
  auto path = std::filesystem::temp_directory_path() / ("zcode_bounds_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << nested_json(n);
  EXPECT_THROW(HarnessConfig::from_file(path.string()), ConfigLoadError);
  std::filesystem::remove(path);
}

TEST(Bounds, AliasExpansionIsLimited) {
  // a0 lists 10 scalars; a_k lists a_{k-1} ten times: a_k stands for 10^(k+1) scalars.
  auto laughs = [](int k) {
    std::string s = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i <= k; ++i) {
      const std::string name = std::to_string(i), prev = std::to_string(i - 1);
      s.append("a").append(name).append(": &a").append(name).append(" [");
      for (int j = 0; j < 10; ++j) s.append(j ? ", *a" : "*a").append(prev);
      s.append("]\n");
    }
    return s;
  };
  // k = 2: 10 + 110 + 1110 + 4 containers = 1234 values: loads.
  EXPECT_EQ(load_error(laughs(2), "small.yaml"), "");
  // k = 11: 10^12 scalars. Refused after the walk has made 100000 values:
  // the top level, a0..a3 make 1 + 11 + 111 + 1111 + 11111 = 12345, a4 would
  // make 111111 more, so the limit falls inside a4.
  auto t0 = std::chrono::steady_clock::now();
  std::string e = load_error(laughs(11), "laughs.yaml");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(e.find("laughs.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find(": the document expands to more than 100000 values (anchors and aliases are copied where they are "
                   "used) at a4["),
            std::string::npos)
      << e;
  EXPECT_LT(seconds, 30.0);  // bounded work; today it ran for minutes
}

TEST(Bounds, AliasInsideItsOwnAnchorEndsAtTheDepthLimit) {
  std::string e = load_error("training: &a\n  x: *a\n", "self.yaml");
  EXPECT_NE(e.find("nesting deeper than 256 levels at training.x.x.x"), std::string::npos) << e;
}

TEST(Bounds, OverrideValuesAreBoundedToo) {
  HarnessConfig c = HarnessConfig::from_string("data:\n  train_path: a.jsonl\n", "t.yaml");
  try {
    // optimizer.* keys belong to the plugin, so any value reaches the YAML parser.
    c.apply_overrides({"optimizer.x=" + std::string(300, '[') + std::string(300, ']')});
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("nesting deeper than 256 levels"), std::string::npos) << e.what();
  }
}

TEST(Bounds, InvalidUtf8IsRefusedWhereItIs) {
  // Found by config_fuzz: a 0xF6 byte in a string was saved as U+FFFD in the
  // run folder's config.yaml. Line 3, after "  tokenizer: a" (14 bytes).
  EXPECT_EQ(load_error("data:\n  train_path: a.jsonl\n  tokenizer: a\xF6\n", "u.yaml"),
            "u.yaml:3:15: invalid UTF-8 (byte 0xF6); a config is UTF-8 text");
  EXPECT_EQ(load_error("{\"data\": {\"tokenizer\": \"\xC0\xAF\"}}", "u.json"),
            "u.json:1:25: invalid UTF-8 (byte 0xC0); a config is UTF-8 text");  // overlong '/'
  EXPECT_EQ(load_error("experiment_name: \"caf\xC3\xA9\"\n", "ok.yaml"), "");
  // Found by scripts/fuzz-long.sh: a key holding a NUL byte (valid UTF-8 as a
  // file, but not as text) came back changed from the run folder's config.yaml.
  const std::string nul_key = std::string("data:\n  \"nam") + '\0' + "x\": 1\n";
  EXPECT_NE(load_error(nul_key, "k.yaml").find("invalid UTF-8 or a NUL byte in a value or key at data"),
            std::string::npos)
      << load_error(nul_key, "k.yaml");
  // The same in JSON, where the NUL or the lone surrogate comes from a \u escape.
  EXPECT_EQ(
      load_error(R"({"data": {"nam\u0000x": 1}})", "k.json"),
      "k.json: invalid UTF-8 or a NUL byte (after \\u escapes) in a value or key at data; a config is UTF-8 text");
  EXPECT_EQ(load_error(R"({"data": {"tokenizer": "a\u0000"}})", "s.json"),
            "s.json: invalid UTF-8 or a NUL byte (after \\u escapes) in a value or key at data.tokenizer; a config is "
            "UTF-8 text");
  // A lone surrogate is refused by the parser itself, at its place.
  EXPECT_EQ(load_error(R"({"data": {"tokenizer": "a\ud800"}})", "s.json"),
            "s.json:1:26: The surrogate pair in string is invalid.");
}

}  // namespace

namespace {
// Found by scripts/fuzz-long.sh: a key holding '[' made the error sorter's
// std::stoul throw std::invalid_argument out of validate (a crash in the host).
TEST(Bounds, KeyWithABracketIsAnErrorNotACrash) {
  zcode::HarnessConfig cfg =
      zcode::HarnessConfig::from_string("training:\n  \"x[a\": 1\n  \"y[\": 2\n  max_steps: -1\n", "b.yaml");
  try {
    cfg.validate(nullptr);
    ADD_FAILURE() << "an unknown key was accepted";
  } catch (const zcode::ConfigValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("training.x[a"), std::string::npos) << e.what();
  }
}
}  // namespace
