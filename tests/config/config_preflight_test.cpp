// Issue #17, items 3 and 6 at the library level: messages that name the real
// problem (non-finite numbers, a folder given as the config, root causes
// only, unknown plugin names listing what is there, a wsd schedule with
// nothing left to decay) and check_environment (zcode/core/preflight.h),
// which `zcode-host validate` and `run` call and HarnessConfig::validate
// never does.
#include <zcode/core/config.h>

#include <zcode/core/preflight.h>
#include <zcode/sdk/suggest.h>
#include "glm52_schema_provider.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;
using zcode::ConfigError;
using zcode::HarnessConfig;
using Lines = std::vector<std::string>;

Lines errs(const std::string& yaml, const zcode::SchemaProvider* provider = nullptr) {
  Lines out;
  for (const ConfigError& e :
       HarnessConfig::from_string("data:\n  train_path: t.jsonl\n" + yaml, "t.yaml").check(provider))
    out.push_back(e.str());
  return out;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "zcode_preflight_XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path write(const std::string& rel, const std::string& text) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel) << text;
    return path / rel;
  }
};

/// Runs `f` with the current folder set to `dir` (restored after).
template <class F>
void in_dir(const fs::path& dir, F f) {
  const fs::path old = fs::current_path();
  fs::current_path(dir);
  f();
  fs::current_path(old);
}

TEST(Messages, NonFiniteNumbersAreNamedAsSuch) {
  // Before: "expected a number, found string '.nan'".
  EXPECT_EQ(errs("training:\n  clip_grad_norm: .nan\n"),
            (Lines{"training.clip_grad_norm: expected a number, found .nan, which is YAML's not-a-number; "
                   "a config number must be finite"}));
  EXPECT_EQ(errs("training:\n  clip_grad_norm: -.inf\n"),
            (Lines{"training.clip_grad_norm: expected a number, found -.inf, which is YAML's infinity; "
                   "a config number must be finite"}));
  EXPECT_EQ(errs("training:\n  max_steps: 1e400\n"),
            (Lines{"training.max_steps: expected an integer, found 1e400, which is beyond the largest double "
                   "(about 1.8e308); a config number must be finite"}));
  // A string field keeps its string.
  EXPECT_EQ(errs("logging:\n  output_dir: .nan\n"), Lines{});
}

TEST(Messages, AFolderGivenAsTheConfigSaysSo) {
  TempDir d;
  try {
    HarnessConfig::from_file(d.path.string());
    FAIL() << "a folder loaded as a config";
  } catch (const zcode::ConfigLoadError& e) {
    EXPECT_EQ(std::string(e.what()), d.path.string() + ": is a folder, expected a config file (YAML or JSON)");
  }
  d.write("config.yaml", "seed: 1\n");  // a run folder holds its config.yaml
  try {
    HarnessConfig::from_file(d.path.string());
    FAIL();
  } catch (const zcode::ConfigLoadError& e) {
    EXPECT_EQ(std::string(e.what()), d.path.string() +
                                         ": is a folder, expected a config file (YAML or JSON) (did you "
                                         "mean " +
                                         (d.path / "config.yaml").string() + "?)");
  }
}

TEST(Messages, OnlyTheRootCauseOfABadExpertCount) {
  // Before: also "model.moe_top_k: 2 exceeds model.moe_experts (-2)". The
  // bounds are the glm52 plugin's schema (which also bounds E by 1024).
  const config_test::Glm52SchemaProvider glm52;
  EXPECT_EQ(errs("model:\n  moe_experts: -2\n", &glm52),
            (Lines{"model.moe_experts: expected an integer >= 1 and <= 1024, found -2"}));
  EXPECT_EQ(errs("model:\n  n_layers: 0\n  first_dense_layers: 1\n", &glm52),
            (Lines{"model.n_layers: expected an integer >= 1, found 0"}));
}

TEST(Messages, WsdWithNothingLeftToDecayIsAConfigError) {
  // Before: valid, and the scheduler refused decay_steps 0 when run created it.
  EXPECT_EQ(errs("scheduler:\n  type: wsd\n  warmup_steps: 10\n  stable_steps: 90\ntraining:\n  max_steps: 100\n"),
            (Lines{"scheduler.stable_steps: warmup_steps + stable_steps = 100 equals training.max_steps, which "
                   "leaves 0 steps to decay; expected stable_steps <= 89"}));
  EXPECT_EQ(errs("scheduler:\n  type: wsd\n  warmup_steps: 10\n  stable_steps: 50\n  decay_steps: 0\n"
                 "training:\n  max_steps: 100\n"),
            (Lines{"scheduler.decay_steps: 0 steps to decay; expected an integer >= 1"}));
}

TEST(Messages, UnknownNamesListWhatIsAvailable) {
  EXPECT_EQ(zcode::sdk::did_you_mean_or_available("lion", {"sgd", "adamw", "lamb"}), " (available: adamw, lamb, sgd)");
  EXPECT_EQ(zcode::sdk::did_you_mean_or_available("adamW2", {"sgd", "adamw"}), " (did you mean 'adamw'?)");
  EXPECT_EQ(zcode::sdk::did_you_mean_or_available("lion", {}), " (the plugin path has none of that kind)");
}

// ---- check_environment ------------------------------------------------------

HarnessConfig validated(const std::string& yaml, const std::string& origin = "inline.yaml") {
  HarnessConfig c = HarnessConfig::from_string(yaml, origin);
  c.validate();
  return c;
}

Lines env_errors(const HarnessConfig& c, bool training = true) {
  zcode::EnvironmentCheckOptions o;
  o.training = training;
  Lines out;
  for (const ConfigError& e : zcode::check_environment(c, o)) out.push_back(e.str());
  return out;
}

TEST(Environment, ExistingFilesPass) {
  TempDir d;
  d.write("data/train.jsonl", "{}\n");
  d.write("data/val.jsonl", "{}\n");
  in_dir(d.path, [&] {
    EXPECT_EQ(env_errors(validated("data:\n  train_path: data/train.jsonl\n  val_path: data/val.jsonl\n")), Lines{});
    EXPECT_EQ(env_errors(validated("data:\n  train_path: 'data/*.jsonl'\n  val_fraction: 0.1\n")), Lines{});
    // HarnessConfig::validate itself reads no file: a missing path validates.
    EXPECT_NO_THROW(validated("data:\n  train_path: nowhere.jsonl\n  val_path: v.jsonl\n"));
  });
}

TEST(Environment, MissingPathsSayWhereTheyLooked) {
  TempDir d;
  d.write("cfg/data/train.jsonl", "{}\n");
  const fs::path cfg = d.write("cfg/config.yaml", "");
  in_dir(d.path, [&] {
    const std::string cwd = fs::current_path().string();
    HarnessConfig c = validated("data:\n  train_path: data/train.jsonl\n  val_path: data/val.jsonl\n", cfg.string());
    EXPECT_EQ(env_errors(c), (Lines{"data.train_path: 'data/train.jsonl' not found: looked for " + cwd +
                                        "/data/train.jsonl "
                                        "(relative paths are relative to the current folder, " +
                                        cwd +
                                        "); it exists beside the "
                                        "config file, as " +
                                        (d.path / "cfg/data/train.jsonl").string() +
                                        ": give that path, or run "
                                        "from " +
                                        (d.path / "cfg").string(),
                                    "data.val_path: 'data/val.jsonl' not found: looked for " + cwd +
                                        "/data/val.jsonl "
                                        "(relative paths are relative to the current folder, " +
                                        cwd + ")"}));
    EXPECT_EQ(env_errors(validated("data:\n  train_path: 'nothing/*.jsonl'\n  val_fraction: 0.1\n")),
              (Lines{"data.train_path: no file matches 'nothing/*.jsonl' (relative patterns are relative to the "
                     "current folder, " +
                     cwd + ")"}));
  });
}

TEST(Environment, RemoteSchemesAreRefused) {
  // The guide's chapter 3.1 streaming snippet reads s3://: its schema is
  // valid (config_guide_test), but run cannot read it, so validate says so.
  auto c = HarnessConfig::from_yaml(std::string(ZCODE_CONFIG_TEST_DIR) + "/guide/ch3.1_streaming.yaml");
  c.validate();
  const Lines e = env_errors(c);
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e[0].rfind("data.train_path: 's3://", 0), 0u) << e[0];
  EXPECT_NE(e[0].find("uses the 's3://' scheme; the data loader reads local files only"), std::string::npos) << e[0];
}

TEST(Environment, EvaluationNeedsAValidationSplit) {
  TempDir d;
  d.write("t.jsonl", "{}\n");
  in_dir(d.path, [&] {
    const std::string need =
        "data.val_path: not set and data.val_fraction is 0, so there is no validation split, "
        "which evaluation (every training.eval_every steps and at the end of the run) reads; "
        "set data.val_path, or data.val_fraction (e.g. 0.05), or evaluation.split: train";
    EXPECT_EQ(env_errors(validated("data:\n  train_path: t.jsonl\n")), (Lines{need}));
    EXPECT_EQ(env_errors(validated("data:\n  train_path: t.jsonl\nevaluation:\n  split: train\n")), Lines{});
  });
}

TEST(Environment, AvailableMemoryIsReadFromTheMachine) {
  const auto a = zcode::available_memory_bytes();
  ASSERT_TRUE(a.has_value());  // /proc/meminfo exists on every Linux
  std::ifstream f("/proc/meminfo");
  std::string k;
  uint64_t total_kib = 0;
  while (f >> k >> total_kib)
    if (k == "MemTotal:") break;
  EXPECT_GT(*a, 0u);
  EXPECT_LE(*a, total_kib * 1024);
}

}  // namespace
