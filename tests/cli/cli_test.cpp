// Runs the real zcode-host binary and checks exit codes and output.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {
namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "zcode_cli_XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
    fs::permissions(path, fs::perms(0755));
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// Runs `zcode-host <args>` (args are shell words) with ZCODE_PLUGIN_PATH unset.
Result host(const std::string& args) {
  TempDir t;
  fs::path out = t.path / "out", err = t.path / "err";
  std::string cmd = "env -u ZCODE_PLUGIN_PATH " + std::string(ZCODE_HOST_EXE) + " " + args + " >" + out.string() +
                    " 2>" + err.string();
  int st = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Cli, VersionPrintsVersionAbiCommitBackendsAndDependencies) {
  Result r = host("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out, std::string("zcode-host ") + ZCODE_EXPECTED_VERSION + "\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "plugin ABI " + std::to_string(1) + ".")) << r.out;
  EXPECT_TRUE(contains(r.out, "git commit ")) << r.out;
  EXPECT_TRUE(contains(r.out, "build type ")) << r.out;
  EXPECT_TRUE(contains(r.out, "backends: cpu")) << r.out;
  EXPECT_TRUE(contains(r.out, "CUDA kernels are not implemented yet")) << r.out;
  EXPECT_TRUE(contains(r.out, "  boost 1.")) << r.out;
  EXPECT_TRUE(contains(r.out, "  yaml-cpp ")) << r.out;
}

TEST(Cli, NoCommandIsAUsageError) {
  Result r = host("");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "usage: zcode-host COMMAND")) << r.err;
}

TEST(Cli, UnknownCommandSuggestsTheClosest) {
  Result r = host("rnu");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "zcode-host: unknown command 'rnu' (did you mean 'run'?) (see zcode-host --help)\n");
}

TEST(Cli, EverySubcommandHelpShowsAnExample) {
  for (const char* cmd : {"run", "train", "evaluate", "profile", "validate", "plugins"}) {
    Result r = host(std::string(cmd) + " --help");
    EXPECT_EQ(r.code, 0) << cmd;
    EXPECT_TRUE(contains(r.out, "usage: zcode-host " + std::string(cmd))) << r.out;
    EXPECT_TRUE(contains(r.out, "example:\n  zcode-host " + std::string(cmd))) << r.out;
  }
}

TEST(Cli, BadFlagIsAUsageError) {
  Result r = host("run config.yaml --bogus");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "zcode-host run: unrecognised option '--bogus' (see zcode-host run --help)")) << r.err;
  r = host("evaluate --config c.yaml --checkpoint x --split test");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "zcode-host evaluate: --split: 'test' is not one of val, train\n");
  r = host("profile --config c.yaml --steps 0");
  EXPECT_EQ(r.code, 2);
  r = host("plugins frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "zcode-host plugins: 'frobnicate' is not one of list, show\n");
}

TEST(Cli, MissingConfigFileIsAConfigError) {
  Result r = host("validate /nonexistent/zcode.yaml");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "/nonexistent/zcode.yaml")) << r.err;
  r = host("run /nonexistent/zcode.yaml");
  EXPECT_EQ(r.code, 2);
}

TEST(Cli, PluginsListShowsEveryComponent) {
  TempDir d;
  fs::copy_file(fs::path(ZCODE_TEST_FAKES_DIR) / "libzcode_fake_good.so", d.path / "libzcode_fake_good.so");
  Result r = host("plugins list --no-bundled-plugins --plugin-path " + d.path.string());
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string f = (d.path / "libzcode_fake_good.so").string();
  std::string abi;
  {
    std::istringstream v(host("--version").out);
    std::string line;
    while (std::getline(v, line))
      if (line.rfind("plugin ABI ", 0) == 0) abi = line.substr(11);
  }
  // Columns are padded to the widest cell; expected widths counted by hand:
  // NAME 16 ("fake_fail_create"), KIND 9 ("scheduler"), VERSION 7.
  ASSERT_EQ(abi.size(), 3u);  // "1.1": the ABI column is as wide as its header
  const std::string expected =
      "NAME              KIND       VERSION  ABI  FILE\n"
      "fake_echo         callback   1.2.3    " +
      abi + "  " + f + "\n" + "fake_fail_create  callback   1.2.3    " + abi + "  " + f + "\n" +
      "fake_throw        callback   1.2.3    " + abi + "  " + f + "\n" + "fake_half         scheduler  1.2.3    " +
      abi + "  " + f + "\n";
  EXPECT_EQ(r.out, expected);
}

TEST(Cli, PluginsListReportsABadPluginAndExitsOne) {
  TempDir d;
  fs::copy_file(fs::path(ZCODE_TEST_FAKES_DIR) / "libzcode_fake_major.so", d.path / "libzcode_fake_major.so");
  Result r = host("plugins list --no-bundled-plugins --plugin-path " + d.path.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(
      r.err, "[ERROR] " + (d.path / "libzcode_fake_major.so").string() + ": ABI major mismatch: plugin 2.0, host 1."))
      << r.err;
}

TEST(Cli, WorldWritablePluginFolderNeedsTheOverride) {
  TempDir d;
  fs::copy_file(fs::path(ZCODE_TEST_FAKES_DIR) / "libzcode_fake_good.so", d.path / "libzcode_fake_good.so");
  ::chmod(d.path.c_str(), 0777);
  Result r = host("plugins list --no-bundled-plugins --plugin-path " + d.path.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, d.path.string() + ": refused: world-writable plugin folder")) << r.err;
  EXPECT_FALSE(contains(r.out, "fake_echo"));
  r = host("plugins list --no-bundled-plugins --allow-insecure-plugin-path --plugin-path " + d.path.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "fake_echo")) << r.out;
}

TEST(Cli, PluginsShowPrintsDescriptionSchemaAndDefaults) {
  TempDir d;
  fs::copy_file(fs::path(ZCODE_TEST_FAKES_DIR) / "libzcode_fake_good.so", d.path / "libzcode_fake_good.so");
  Result r = host("plugins show Fake-Echo --no-bundled-plugins --plugin-path " + d.path.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "fake_echo (callback)\n  Logs a greeting, counts steps\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "plugin:  fake_good 1.2.3 (MIT)")) << r.out;
  EXPECT_TRUE(contains(r.out, "options schema:\n{\n  \"type\": \"object\",")) << r.out;
  EXPECT_TRUE(contains(r.out, "defaults:\n  greeting: \"hello\"\n  every: 1\n")) << r.out;
  r = host("plugins show nothing_here --no-bundled-plugins --plugin-path " + d.path.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "no component named 'nothing_here'")) << r.err;
}

// ---- issue #17: validate catches what run would reject (item 3), messages
// that name the real problem (item 6), no "config OK" beside an error (item 5)

TEST(Cli, ValidateRefusesAFolderAsTheConfig) {
  TempDir d;
  Result r = host("validate " + d.path.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, d.path.string() + ": is a folder, expected a config file (YAML or JSON)")) << r.err;
}

TEST(Cli, PluginsShowSuggestsTheClosestName) {
  TempDir d;
  fs::copy_file(fs::path(ZCODE_TEST_FAKES_DIR) / "libzcode_fake_good.so", d.path / "libzcode_fake_good.so");
  Result r = host("plugins show fake_ecoh --no-bundled-plugins --plugin-path " + d.path.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "no component named 'fake_ecoh' on the plugin path (did you mean 'fake_echo'?)"))
      << r.err;
}

TEST(Cli, APluginPathThatIsAFileIsNamedAsSuch) {
  TempDir d;
  const fs::path so = d.path / "libzcode_fake_good.so";
  fs::copy_file(fs::path(ZCODE_TEST_FAKES_DIR) / "libzcode_fake_good.so", so);
  Result r = host("plugins list --no-bundled-plugins --plugin-path " + so.string());
  EXPECT_EQ(r.code, 1);  // before: a warning "no such plugin folder; skipped", exit 0
  EXPECT_TRUE(contains(r.err, so.string() +
                                  " (--plugin-path): is a file, not a plugin folder; give the folder that "
                                  "holds plugin files (" +
                                  d.path.string() + ")"))
      << r.err;
}

/// A run's files in a temporary folder: a nano config whose data exists.
struct RunFiles {
  TempDir d;
  fs::path config;
  RunFiles() {
    std::ofstream(d.path / "train.jsonl") << "{\"text\": \"hello world\"}\n";
    std::ofstream(d.path / "val.jsonl") << "{\"text\": \"hello again\"}\n";
    config = d.path / "config.yaml";
    std::ofstream c(config);
    c << "experiment_name: cli_validate\nhardware: {num_threads: 1}\n"
      << "model: {type: glm52, variant: nano, moe_experts: 4, moe_top_k: 2, max_seq_len: 64}\n"
      << "data: {train_path: " << (d.path / "train.jsonl").string() << ", "
      << "val_path: " << (d.path / "val.jsonl").string()
      << ", tokenizer: " << (fs::path(ZCODE_SOURCE_DIR) / "assets/hf/gpt2").string() << ", batch_size: 2}\n"
      << "optimizer: {name: adamw}\ntraining: {max_steps: 2}\n"
      << "logging: {output_dir: " << (d.path / "outputs").string() << "}\n";
  }
};

bool have_gpt2() { return fs::exists(fs::path(ZCODE_SOURCE_DIR) / "assets/hf/gpt2"); }

TEST(Cli, ValidatePrintsTheMemoryEstimateAndRefusesWhatCannotFit) {
  if (!have_gpt2()) GTEST_SKIP() << "assets/hf/gpt2 missing: run scripts/fetch-assets.sh";
  RunFiles f;
  Result r = host("validate " + f.config.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "config OK")) << r.out;
  const std::string log = r.out + r.err;
  EXPECT_TRUE(contains(log, "Memory estimate: parameters ")) << log;
  EXPECT_TRUE(contains(log, ", optimizer state ")) << log;
  EXPECT_FALSE(contains(log, "unknown")) << log;
  EXPECT_FALSE(fs::exists(f.d.path / "outputs")) << "validate wrote a run folder";
  // 10^6 rows of 64 tokens: far more activation workspace than any machine
  // has. Before: "config OK", and run died allocating after its step-0
  // evaluation.
  r = host("validate " + f.config.string() + " --set data.batch_size=1000000");
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(contains(r.out, "config OK"));
  EXPECT_TRUE(contains(r.err, "data.batch_size: the run needs about parameters ")) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "lower data.batch_size (raise training.gradient_accumulation to keep the tokens per "
                       "step) or model.max_seq_len"))
      << r.err;
  // run refuses the same before it creates the run folder.
  r = host("run " + f.config.string() + " --set data.batch_size=1000000");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "data.batch_size: the run needs about")) << r.err;
  EXPECT_FALSE(fs::exists(f.d.path / "outputs" / "cli_validate" / "config.yaml"));
}

TEST(Cli, ValidateChecksDataPathsAndTheValidationSplit) {
  if (!have_gpt2()) GTEST_SKIP() << "assets/hf/gpt2 missing: run scripts/fetch-assets.sh";
  RunFiles f;
  Result r = host("validate " + f.config.string() + " --set data.train_path=nowhere/train.jsonl");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "data.train_path: 'nowhere/train.jsonl' not found: looked for ")) << r.err;
  EXPECT_TRUE(contains(r.err, "(relative paths are relative to the current folder, ")) << r.err;
  r = host("validate " + f.config.string() + " --set data.train_path=s3://bucket/train.jsonl");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "data.train_path: 's3://bucket/train.jsonl' uses the 's3://' scheme")) << r.err;
  r = host("validate " + f.config.string() + " --set data.val_path=null");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "data.val_path: not set and data.val_fraction is 0, so there is no validation split"))
      << r.err;
  r = host("validate " + f.config.string() + " --set data.tokenizer=hf://no-such-tokenizer");
  EXPECT_NE(r.code, 0);
  EXPECT_FALSE(contains(r.out, "config OK")) << r.out;
  EXPECT_TRUE(contains(r.err, "hf://no-such-tokenizer")) << r.err;
}

TEST(Cli, ValidateNamesTheRealProblem) {
  if (!have_gpt2()) GTEST_SKIP() << "assets/hf/gpt2 missing: run scripts/fetch-assets.sh";
  RunFiles f;
  Result r = host("validate " + f.config.string() + " --set optimizer.name=lion");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err,
                       "optimizer.name: no optimizer plugin named 'lion' on the plugin path (available: "
                       "adafactor, adamw, lamb, sgd, sophia, zerosum_sgd)"))
      << r.err;
  r = host("plugins show adamW2");  // the bundled optimizers
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "no component named 'adamW2' on the plugin path (did you mean 'adamw'?)")) << r.err;
  r = host("validate " + f.config.string() + " --set model.d_model=100000");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(contains(r.err, "model.d_model: 100000 gives head_dim = d_model / n_heads = 25000")) << r.err;
  EXPECT_FALSE(contains(r.err, "model.head_dim:")) << r.err;  // before: the derived head_dim was blamed
  r = host("validate " + f.config.string() + " --set optimizer.lr=.nan");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "optimizer.lr: expected a number, found .nan, which is YAML's not-a-number")) << r.err;
}

TEST(Cli, ValidateWithAWorldWritablePluginFolderIsNotOk) {
  if (!have_gpt2()) GTEST_SKIP() << "assets/hf/gpt2 missing: run scripts/fetch-assets.sh";
  RunFiles f;
  TempDir d;
  ::chmod(d.path.c_str(), 0777);
  Result r = host("validate " + f.config.string() + " --plugin-path " + d.path.string());
  // Before: the refusal as an error, then "config OK" and exit 0.
  EXPECT_TRUE(contains(r.err, d.path.string() + ": refused: world-writable plugin folder")) << r.err;
  EXPECT_FALSE(contains(r.out, "config OK")) << r.out;
  EXPECT_EQ(r.code, 1);
}

}  // namespace
