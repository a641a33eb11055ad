// Plugin registry: loading, refusals with their exact messages, search order,
// duplicates, world-writable refusal, lazy loading, calls into components.
#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/core/registry.h>

#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;
using zcode::Component;
using zcode::PluginError;
using zcode::PluginSearchOptions;
using zcode::Registry;

const fs::path kFakes = ZCODE_TEST_FAKES_DIR;

std::string abi(uint32_t major, uint32_t minor) { return std::to_string(major) + "." + std::to_string(minor); }
const std::string kHostAbi = abi(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR);

/// A fresh folder (mode 0755) removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "zcode_registry_XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
    fs::permissions(path, fs::perms(0755));
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  /// Copies fake `variant` here as libzcode_<as>.so (default: its own name); with `index`, its sidecar too.
  fs::path add(const std::string& variant, std::string as = "", bool index = false) const {
    if (as.empty()) as = "fake_" + variant;
    fs::path dst = path / ("libzcode_" + as + ".so");
    fs::copy_file(kFakes / ("libzcode_fake_" + variant + ".so"), dst, fs::copy_options::overwrite_existing);
    if (index)
      fs::copy_file(kFakes / ("libzcode_fake_" + variant + ".zcode.json"), path / ("libzcode_" + as + ".zcode.json"),
                    fs::copy_options::overwrite_existing);
    return dst;
  }
  fs::path sub(const std::string& name) const {
    fs::create_directories(path / name);
    fs::permissions(path / name, fs::perms(0755));
    return path / name;
  }
};

/// Captures log lines (console off) for the test's lifetime.
struct LogCapture {
  std::vector<std::string> lines;
  int id;
  LogCapture() {
    id = zcode::log::add_sink([this](zcode::log::Level, const std::string& l) { lines.push_back(l); });
    zcode::log::set_console_enabled(false);
  }
  ~LogCapture() {
    zcode::log::set_console_enabled(true);
    zcode::log::remove_sink(id);
  }
  bool has(const std::string& s) const {
    for (const auto& l : lines)
      if (l == s) return true;
    return false;
  }
};

PluginSearchOptions only(const fs::path& dir) {
  PluginSearchOptions o;
  o.cli_paths = {dir};
  o.use_env = false;
  o.use_default = false;
  return o;
}

std::vector<std::string> problems_of(const fs::path& dir) {
  Registry reg(only(dir));
  reg.load_all();
  return reg.problems();
}

TEST(Registry, LoadsAGoodPluginAndReadsItsManifest) {
  TempDir d;
  fs::path f = d.add("good");
  Registry reg(only(d.path));
  const Component* c = reg.find(ZC_KIND_CALLBACK, "Fake-Echo");  // names compare normalized
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name, "fake_echo");
  EXPECT_EQ(c->kind, static_cast<zc_kind>(ZC_KIND_CALLBACK));
  EXPECT_EQ(c->description, "Logs a greeting, counts steps");
  EXPECT_EQ(c->file->name, "fake_good");
  EXPECT_EQ(c->file->version, "1.2.3");
  EXPECT_EQ(c->file->license, "MIT");
  EXPECT_EQ(c->file->path, f);
  EXPECT_EQ(abi(c->file->abi_major, c->file->abi_minor), kHostAbi);
  EXPECT_NE(c->options_schema_json.find("\"greeting\""), std::string::npos);
  EXPECT_EQ(reg.find(ZC_KIND_MODEL, "fake_echo"), nullptr);  // right name, wrong kind
  EXPECT_NE(reg.find(ZC_KIND_SCHEDULER, "fake_half"), nullptr);
  EXPECT_TRUE(reg.problems().empty());
  auto schema = reg.options_schema(ZC_KIND_CALLBACK, "fake_echo");
  ASSERT_TRUE(schema.has_value());
  EXPECT_EQ(*schema, c->options_schema_json);
  EXPECT_FALSE(reg.options_schema(ZC_KIND_CALLBACK, "nope").has_value());
}

TEST(Registry, RefusesAbiMajorMismatchShowingBothVersions) {
  TempDir d;
  fs::path f = d.add("major");
  EXPECT_EQ(problems_of(d.path), std::vector<std::string>{f.string() + ": ABI major mismatch: plugin " +
                                                          abi(ZC_ABI_VERSION_MAJOR + 1, 0) + ", host " + kHostAbi});
}

TEST(Registry, RefusesANewerMinor) {
  TempDir d;
  fs::path f = d.add("minor");
  EXPECT_EQ(problems_of(d.path),
            std::vector<std::string>{f.string() + ": ABI minor too new: plugin " +
                                     abi(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR + 1) + ", host " + kHostAbi +
                                     " (rebuild the plugin against this host's SDK, or upgrade the host)"});
}

TEST(Registry, RefusesAFileWithoutTheEntrySymbol) {
  TempDir d;
  fs::path f = d.add("noentry");
  EXPECT_EQ(problems_of(d.path),
            std::vector<std::string>{f.string() + ": not a ZCode plugin (no entry symbol 'zcode_plugin_negotiate')"});
}

TEST(Registry, RefusesAFileThatIsNotElf) {
  TempDir d;
  fs::path f = d.path / "libzcode_text.so";
  std::ofstream(f) << "just some text\n";
  EXPECT_EQ(problems_of(d.path),
            std::vector<std::string>{f.string() + ": not a ZCode plugin (not an ELF shared object)"});
}

TEST(Registry, RefusesAPluginWithAMissingSymbol) {
  TempDir d;
  fs::path f = d.add("missing");
  auto p = problems_of(d.path);
  ASSERT_EQ(p.size(), 1u);
  const std::string prefix = f.string() + ": missing symbol 'zcode_fake_symbol_that_does_not_exist' (";
  EXPECT_EQ(p[0].substr(0, prefix.size()), prefix) << p[0];
}

TEST(Registry, RefusesATableWhoseHeaderKindIsWrong) {
  TempDir d;
  fs::path f = d.add("badkind");
  EXPECT_EQ(
      problems_of(d.path),
      std::vector<std::string>{f.string() + ": component 'fake_badkind': table header kind is 3 (model), the manifest "
                                            "says 7 (callback)"});
}

TEST(Registry, RefusesATableWhoseStructSizeIsTooSmall) {
  TempDir d;
  fs::path f = d.add("badsize");
  EXPECT_EQ(
      problems_of(d.path),
      std::vector<std::string>{f.string() + ": component 'fake_badsize': table struct_size 16 is smaller than the " +
                               std::to_string(sizeof(zc_callback_table)) + " bytes of a callback table (version 1)"});
}

TEST(Registry, BadPluginsAreLoggedAndTheGoodOnesStillLoad) {
  TempDir d;
  d.add("good");
  d.add("major");
  d.add("noentry");
  d.add("badkind");
  LogCapture cap;
  Registry reg(only(d.path));
  reg.load_all();
  EXPECT_EQ(reg.problems().size(), 3u);
  EXPECT_EQ(reg.components().size(), 4u);  // the four of fake_good
  for (const auto& p : reg.problems()) EXPECT_TRUE(cap.has("[ERROR] " + p)) << p;
}

TEST(Registry, CreateFailureCarriesThePluginsMessage) {
  TempDir d;
  fs::path f = d.add("good");
  Registry reg(only(d.path));
  const Component& c = reg.require(ZC_KIND_CALLBACK, "fake_fail_create", "callbacks[0].type");
  zcode::HostServices hs;
  zc_create_args args{};
  args.struct_size = sizeof args;
  args.host = hs.raw();
  args.options_json = "{}";
  args.config_json = "{}";
  args.run_dir = "";
  try {
    zcode::StageInstance inst(c, args);
    FAIL() << "create should have failed";
  } catch (const PluginError& e) {
    EXPECT_EQ(std::string(e.what()),
              "callback 'fake_fail_create' (" + f.string() + "): create failed: fake_fail_create: refused on purpose");
  }
}

TEST(Registry, AThrowInsideACallBecomesAStatusTheHostPrints) {
  TempDir d;
  fs::path f = d.add("good");
  Registry reg(only(d.path));
  const Component& c = reg.require(ZC_KIND_CALLBACK, "fake_throw", "callbacks[0].type");
  zcode::HostServices hs;
  zc_create_args args{};
  args.struct_size = sizeof args;
  args.host = hs.raw();
  args.options_json = "{}";
  args.config_json = "{}";
  zcode::StageInstance inst(c, args);
  zc_event ev{};
  ev.struct_size = sizeof ev;
  ev.kind = ZC_EVENT_STEP_END;
  ev.step = 7;
  uint32_t flags = 0;
  zc_status* st = c.as<zc_callback_table>()->on_event(inst.get(), &ev, &flags);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(zcode::status_code(st), static_cast<zc_status_code>(ZC_ERR_INTERNAL));
  try {
    zcode::check_plugin_call(c, "on_event", st);
    FAIL() << "expected PluginError";
  } catch (const PluginError& e) {
    EXPECT_EQ(std::string(e.what()),
              "callback 'fake_throw' (" + f.string() + "): on_event failed: unhandled exception: boom at step 7");
  }
}

TEST(Registry, CreateAndSendEvents) {
  TempDir d;
  d.add("good");
  Registry reg(only(d.path));
  const Component& c = reg.require(ZC_KIND_CALLBACK, "fake_echo", "callbacks[0].type");
  LogCapture cap;
  zcode::HostServices hs(1);
  zc_create_args args{};
  args.struct_size = sizeof args;
  args.host = hs.raw();
  args.options_json = R"({"type":"fake_echo","greeting":"hi there"})";
  args.config_json = "{}";
  zcode::StageInstance inst(c, args);
  const auto* t = c.as<zc_callback_table>();
  std::vector<uint32_t> flags;
  for (zc_event_kind k : {ZC_EVENT_SETUP, ZC_EVENT_STEP_END, ZC_EVENT_STEP_END, ZC_EVENT_STEP_END, ZC_EVENT_TEARDOWN}) {
    zc_event ev{};
    ev.struct_size = sizeof ev;
    ev.kind = k;
    uint32_t f = 99;
    ASSERT_EQ(t->on_event(inst.get(), &ev, &f), nullptr);
    flags.push_back(f);
  }
  EXPECT_EQ(flags, (std::vector<uint32_t>{0, 0, 0, ZC_CALLBACK_REQUEST_STOP, ZC_CALLBACK_REQUEST_STOP}));
  EXPECT_TRUE(cap.has("[INFO] fake_echo: hi there"));
  EXPECT_TRUE(cap.has("[INFO] fake_echo: steps=3"));
}

TEST(Registry, RequireSuggestsTheClosestName) {
  TempDir d;
  d.add("good", "", /*index=*/true);
  Registry reg(only(d.path));
  try {
    reg.require(ZC_KIND_CALLBACK, "fake_ecoh", "callbacks[1].type");
    FAIL();
  } catch (const PluginError& e) {
    EXPECT_EQ(std::string(e.what()),
              "callbacks[1].type: no callback plugin named 'fake_ecoh' on the plugin path (did you mean 'fake_echo'?)");
  }
  try {
    reg.require(ZC_KIND_OPTIMIZER, "adamx", "optimizer.name");
    FAIL();
  } catch (const PluginError& e) {
    // Issue #17, item 6: the message says what the plugin path has of that
    // kind (here nothing: the fake provides callbacks and a scheduler only).
    EXPECT_EQ(std::string(e.what()),
              "optimizer.name: no optimizer plugin named 'adamx' on the plugin path (the plugin "
              "path has none of that kind)");
  }
  auto names = reg.component_names(ZC_KIND_CALLBACK);
  EXPECT_EQ(names, (std::vector<std::string>{"fake_echo", "fake_fail_create", "fake_throw"}));
}

TEST(Registry, SearchOrderIsFlagsThenConfigThenEnvThenDefault) {
  TempDir d;
  const fs::path cli = d.sub("cli"), cfg = d.sub("cfg"), env = d.sub("env"), def = d.sub("def");
  std::vector<fs::path> files;
  for (const auto& dir : {cli, cfg, env, def}) {
    fs::copy_file(kFakes / "libzcode_fake_good.so", dir / "libzcode_fake_good.so");
    files.push_back(dir / "libzcode_fake_good.so");
  }
  // empty items are skipped
  const std::string env_value = std::string(":").append(env.string()).append(":");
  ::setenv("ZCODE_PLUGIN_PATH", env_value.c_str(), 1);
  auto opts = [&](bool c1, bool c2, bool e, bool df) {
    PluginSearchOptions o;
    if (c1) o.cli_paths = {cli};
    if (c2) o.config_paths = {cfg};
    o.use_env = e;
    o.use_default = df;
    o.default_dir = def;
    return o;
  };
  {
    Registry reg(opts(true, true, true, true));
    ASSERT_EQ(reg.search_dirs().size(), 4u);
    EXPECT_EQ(reg.search_dirs()[0].origin, "--plugin-path");
    EXPECT_EQ(reg.search_dirs()[1].origin, "plugin_path");
    EXPECT_EQ(reg.search_dirs()[2].origin, "ZCODE_PLUGIN_PATH");
    EXPECT_EQ(reg.search_dirs()[3].origin, "default");
    EXPECT_EQ(reg.candidate_files(), files);
  }
  const std::vector<std::pair<PluginSearchOptions, fs::path>> cases = {
      {opts(true, true, true, true), files[0]},
      {opts(false, true, true, true), files[1]},
      {opts(false, false, true, true), files[2]},
      {opts(false, false, false, true), files[3]},
  };
  for (const auto& [o, expected] : cases) {
    LogCapture cap;
    Registry reg(o);
    const Component* c = reg.find(ZC_KIND_CALLBACK, "fake_echo");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->file->path, expected);
  }
  ::unsetenv("ZCODE_PLUGIN_PATH");
}

TEST(Registry, DuplicateNameWarningNamesBothFiles) {
  TempDir d;
  const fs::path a = d.sub("a"), b = d.sub("b");
  fs::copy_file(kFakes / "libzcode_fake_good.so", a / "libzcode_fake_good.so");
  fs::copy_file(kFakes / "libzcode_fake_good.so", b / "libzcode_fake_good.so");
  PluginSearchOptions o;
  o.cli_paths = {a, b};
  o.use_env = false;
  o.use_default = false;
  LogCapture cap;
  Registry reg(o);
  reg.load_all();
  const std::string fa = (a / "libzcode_fake_good.so").string(), fb = (b / "libzcode_fake_good.so").string();
  EXPECT_TRUE(cap.has("[WARN] callback 'fake_echo' is provided by both " + fa + " and " + fb + "; using " + fa +
                      " (first on the plugin path)"));
  EXPECT_EQ(reg.components().size(), 4u);  // the losers are not listed
  EXPECT_EQ(reg.find(ZC_KIND_CALLBACK, "fake_echo")->file->path, a / "libzcode_fake_good.so");
}

TEST(Registry, AFolderListedTwiceIsSearchedOnce) {
  TempDir d;
  d.add("good");
  PluginSearchOptions o = only(d.path);
  o.config_paths = {d.path / "."};
  LogCapture cap;
  Registry reg(o);
  EXPECT_EQ(reg.search_dirs().size(), 1u);
  reg.load_all();
  for (const auto& l : cap.lines) EXPECT_EQ(l.rfind("[DEBUG] ", 0), 0u) << l;  // no warning, no duplicate
}

TEST(Registry, WorldWritableFolderIsRefusedUnlessAllowed) {
  TempDir d;
  const fs::path dir = d.sub("ww");
  fs::copy_file(kFakes / "libzcode_fake_good.so", dir / "libzcode_fake_good.so");
  ::chmod(dir.c_str(), 0777);
  {
    LogCapture cap;
    Registry reg(only(dir));
    EXPECT_TRUE(reg.search_dirs().empty());
    EXPECT_EQ(reg.problems(),
              std::vector<std::string>{dir.string() + ": refused: world-writable plugin folder (chmod o-w it, or "
                                                      "pass --allow-insecure-plugin-path)"});
    EXPECT_EQ(reg.find(ZC_KIND_CALLBACK, "fake_echo"), nullptr);
  }
  PluginSearchOptions o = only(dir);
  o.allow_insecure = true;
  Registry reg(o);
  EXPECT_NE(reg.find(ZC_KIND_CALLBACK, "fake_echo"), nullptr);
  EXPECT_TRUE(reg.problems().empty());
}

TEST(Registry, WorldWritableFileIsRefusedUnlessAllowed) {
  TempDir d;
  fs::path f = d.add("good");
  ::chmod(f.c_str(), 0666);
  {
    LogCapture cap;
    Registry reg(only(d.path));
    EXPECT_EQ(reg.find(ZC_KIND_CALLBACK, "fake_echo"), nullptr);
    EXPECT_EQ(reg.problems(),
              std::vector<std::string>{f.string() + ": refused: world-writable plugin file (chmod o-w it, or "
                                                    "pass --allow-insecure-plugin-path)"});
  }
  PluginSearchOptions o = only(d.path);
  o.allow_insecure = true;
  Registry reg(o);
  EXPECT_NE(reg.find(ZC_KIND_CALLBACK, "fake_echo"), nullptr);
}

TEST(Registry, DeeplyNestedIndexIsIgnoredNotACrash) {
  // A sidecar index nested 10^6 deep (parsed iteratively, 256 levels at most)
  // is not a valid index: warned about, and the plugin is found by loading it.
  TempDir d;
  d.add("good");
  std::ofstream(d.path / "libzcode_fake_good.zcode.json") << "{\"components\":" << std::string(1000000, '[');
  LogCapture cap;
  Registry reg(only(d.path));
  ASSERT_NE(reg.find(ZC_KIND_CALLBACK, "fake_echo"), nullptr);
  EXPECT_TRUE(
      cap.has("[WARN] " + (d.path / "libzcode_fake_good.zcode.json").string() +
              ": not a valid plugin index (ignored; the plugin is loaded only when a name is not found elsewhere)"));
}

TEST(Registry, LazyLookupLoadsOnlyTheFileThatProvidesTheName) {
  TempDir d;
  d.add("good", "", /*index=*/true);
  // A broken plugin with an index that does not list fake_echo: never loaded
  // for fake_echo, so its refusal never shows up.
  d.add("major");
  std::ofstream(d.path / "libzcode_fake_major.zcode.json")
      << R"({"plugin":"fake_major","components":[{"kind":"callback","name":"fake_major"}]})";
  LogCapture cap;
  Registry reg(only(d.path));
  EXPECT_EQ(reg.candidate_files().size(), 2u);  // listing loads nothing
  ASSERT_NE(reg.find(ZC_KIND_CALLBACK, "fake_echo"), nullptr);
  EXPECT_TRUE(reg.problems().empty());
  EXPECT_EQ(reg.find(ZC_KIND_OPTIMIZER, "adamw"), nullptr);  // indexed files only: nothing else loads
  EXPECT_TRUE(reg.problems().empty());
  EXPECT_EQ(reg.find(ZC_KIND_CALLBACK, "fake_major"), nullptr);  // now it is loaded, and refused
  EXPECT_EQ(reg.problems().size(), 1u);
}

TEST(Registry, FileNamedAfterTheComponentIsTriedFirst) {
  TempDir d;
  d.add("major", "aaa_broken");  // unindexed, would be first in a scan
  d.add("good", "fake_echo");    // unindexed, named after the component
  LogCapture cap;
  Registry reg(only(d.path));
  ASSERT_NE(reg.find(ZC_KIND_CALLBACK, "fake_echo"), nullptr);
  EXPECT_TRUE(reg.problems().empty());
  // An unknown name scans the unindexed files: the broken one is met and reported.
  EXPECT_EQ(reg.find(ZC_KIND_CALLBACK, "fake_other"), nullptr);
  EXPECT_EQ(reg.problems().size(), 1u);
}

TEST(Registry, SidecarIndexWrittenAtBuildTimeListsTheManifest) {
  // Expected content written by hand from fake_plugin.cpp's ZCODE_PLUGIN
  // (compact, as sdk::json::Writer writes every JSON file).
  std::ifstream f(kFakes / "libzcode_fake_good.zcode.json");
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), R"({"plugin":"fake_good","components":[{"kind":"callback","name":"fake_echo"},)"
                      R"({"kind":"callback","name":"fake_fail_create"},{"kind":"callback","name":"fake_throw"},)"
                      R"({"kind":"scheduler","name":"fake_half"}]})"
                      "\n");
}

TEST(Registry, NamesAndKinds) {
  EXPECT_EQ(zcode::normalize_component_name("Zerosum-SGD"), "zerosum_sgd");
  EXPECT_EQ(zcode::normalize_component_name("AdamW"), "adamw");
  EXPECT_EQ(zcode::parse_kind("Callback"), static_cast<zc_kind>(ZC_KIND_CALLBACK));
  EXPECT_FALSE(zcode::parse_kind("layer").has_value());
  EXPECT_STREQ(zcode::kind_name(ZC_KIND_EVALUATOR), "evaluator");
  // The version-1 size: a model table from ABI 1.0 ends after forward_logits
  // (forward_eval came with 1.1), an optimizer table from 1.2 after
  // update_hessian (estimate_memory came with 1.3); older plugins keep loading.
  EXPECT_EQ(zcode::min_table_size(ZC_KIND_MODEL), offsetof(zc_model_table, forward_eval));
  EXPECT_EQ(zcode::min_table_size(ZC_KIND_OPTIMIZER), offsetof(zc_optimizer_table, estimate_memory));
  EXPECT_EQ(zcode::min_table_size(ZC_KIND_CALLBACK), sizeof(zc_callback_table));
  EXPECT_EQ(zcode::min_table_size(99), 0u);
}

}  // namespace
