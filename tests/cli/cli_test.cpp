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
  const std::string expected = "NAME              KIND       VERSION  ABI  FILE\n"
                               "fake_echo         callback   1.2.3    " + abi + "  " + f + "\n" +
                               "fake_fail_create  callback   1.2.3    " + abi + "  " + f + "\n" +
                               "fake_throw        callback   1.2.3    " + abi + "  " + f + "\n" +
                               "fake_half         scheduler  1.2.3    " + abi + "  " + f + "\n";
  EXPECT_EQ(r.out, expected);
}

TEST(Cli, PluginsListReportsABadPluginAndExitsOne) {
  TempDir d;
  fs::copy_file(fs::path(ZCODE_TEST_FAKES_DIR) / "libzcode_fake_major.so", d.path / "libzcode_fake_major.so");
  Result r = host("plugins list --no-bundled-plugins --plugin-path " + d.path.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "[ERROR] " + (d.path / "libzcode_fake_major.so").string() +
                                  ": ABI major mismatch: plugin 2.0, host 1."))
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

}  // namespace
