// Host API against the out-of-tree hello_callback plugin (built by
// out_of_tree.sh, which sets ZCODE_HELLO_DIR): find it through the
// registry, create it, send events, save its state.
#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/core/registry.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

TEST(OutOfTreeSdk, HostCreatesHelloAndSendsEvents) {
  const char* dir = std::getenv("ZCODE_HELLO_DIR");
  if (!dir) GTEST_SKIP() << "ZCODE_HELLO_DIR is not set: run through tests/sdk/out_of_tree.sh (ctest sdk.*)";
  zcode::PluginSearchOptions o;
  o.cli_paths = {dir};
  o.use_env = false;
  o.use_default = false;
  zcode::Registry reg(o);
  const zcode::Component& c = reg.require(ZC_KIND_CALLBACK, "hello", "callbacks[0].type");
  EXPECT_EQ(c.file->name, "hello_callback");
  EXPECT_EQ(c.file->version, "1.0.0");

  std::vector<std::string> lines;
  int id = zcode::log::add_sink([&](zcode::log::Level, const std::string& l) { lines.push_back(l); });
  zcode::HostServices hs(123);
  zc_create_args args{};
  args.struct_size = sizeof args;
  args.host = hs.raw();
  args.options_json = R"({"type":"hello","greeting":"hi"})";
  args.config_json = "{}";
  args.run_dir = "";
  zcode::StageInstance inst(c, args);
  const auto* t = c.as<zc_callback_table>();
  for (zc_event_kind k : {ZC_EVENT_SETUP, ZC_EVENT_STEP_END, ZC_EVENT_STEP_END, ZC_EVENT_STEP_END, ZC_EVENT_TEARDOWN}) {
    zc_event ev{};
    ev.struct_size = sizeof ev;
    ev.kind = k;
    uint32_t flags = 0;
    zcode::check_plugin_call(c, "on_event", t->on_event(inst.get(), &ev, &flags));
    EXPECT_EQ(flags, 0u);
  }
  // save_state through a writer that records the JSON blob.
  struct Saved {
    std::string json;
  } saved;
  zc_state_writer w{};
  w.struct_size = sizeof w;
  w.ctx = &saved;
  w.put_tensor = [](void*, const char*, const DLTensor*) -> zc_status* {
    return zcode::make_status(ZC_ERR_INTERNAL, "no tensors expected");
  };
  w.put_json = [](void* ctx, const char* json, size_t len) -> zc_status* {
    static_cast<Saved*>(ctx)->json.assign(json, len);
    return nullptr;
  };
  zcode::check_plugin_call(c, "save_state", t->save_state(inst.get(), &w));
  zcode::log::remove_sink(id);
  EXPECT_EQ(saved.json, "{\"steps\":3}");
  std::vector<std::string> hello;
  for (const auto& l : lines)
    if (l.rfind("[INFO] hello: ", 0) == 0) hello.push_back(l);
  EXPECT_EQ(hello,
            (std::vector<std::string>{"[INFO] hello: hi from an out-of-tree plugin", "[INFO] hello: hi: saw 3 steps"}));
}

}  // namespace
