// Plugins built for older ABI minors keep loading and working in today's host:
// fakes/fake_model.cpp as a 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8 and 1.9 (this
// header's) model plugin, each found through the registry, created with the
// args the host builds, run, and read through the slots their minor has. A
// reader that touched a slot past a table's struct_size would call a thunk that
// fails, and a plugin reading zc_create_args.stream past struct_size would see
// the sentinel instead of NULL.
#include <zcode/core/host_services.h>
#include <zcode/core/preflight.h>
#include <zcode/core/registry.h>
#include <zcode/sdk/host.h>
#include <zcode/sdk/stages.h>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace {

// What the host fills on the CPU (NULL) and what a test puts there to see
// whether a plugin read the field.
void* const kSentinelStream = reinterpret_cast<void*>(uintptr_t{0x5eed});

zc_create_args host_args(const zcode::HostServices& hs) {
  zc_create_args a{};
  a.struct_size = sizeof a;
  a.host = hs.raw();
  a.options_json = "{}";
  a.config_json = "{}";
  a.run_dir = "";
  return a;
}

// info_json's "stream": null, or the pointer the fake's create saw.
const void* stream_seen(const zcode::sdk::ModelRef& m) {
  rapidjson::Document d;
  d.Parse(m.info_json().c_str());
  return d["stream"].IsNull() ? nullptr
                              : reinterpret_cast<const void*>(static_cast<uintptr_t>(d["stream"].GetUint64()));
}

class AbiCompat : public ::testing::TestWithParam<uint32_t> {
 protected:
  void SetUp() override {
    zcode::PluginSearchOptions o;
    o.cli_paths = {ZCODE_TEST_ABI_FAKES_DIR};
    o.use_env = false;
    o.use_default = false;
    reg_ = std::make_unique<zcode::Registry>(o);
    c_ = reg_->find(ZC_KIND_MODEL, "fake_model_1_" + std::to_string(GetParam()));
    ASSERT_NE(c_, nullptr);
    ASSERT_TRUE(reg_->problems().empty()) << reg_->problems().front();
  }
  std::unique_ptr<zcode::Registry> reg_;
  const zcode::Component* c_ = nullptr;
  zcode::HostServices hs_{7};
};

TEST_P(AbiCompat, LoadsWithItsMinorAndItsTableSize) {
  const uint32_t minor = GetParam();
  EXPECT_EQ(c_->file->abi_major, ZC_ABI_VERSION_MAJOR);
  EXPECT_EQ(c_->file->abi_minor, minor);
  const auto* t = c_->as<zc_model_table>();
  // 1.2 ends after activations, 1.3 after estimate_memory, 1.4 after
  // named_activations; 1.5 appended nothing to the model's table; 1.6 the
  // slot decoding; 1.7 nothing; 1.8 decode_extend; 1.9 nothing (an
  // optimizer's zc_param_shard.groups).
  const size_t v14 = offsetof(zc_model_table, decode_slots_begin), v16 = offsetof(zc_model_table, decode_extend);
  const std::array<size_t, 8> sizes = {offsetof(zc_model_table, estimate_memory),
                                       offsetof(zc_model_table, named_activations),
                                       v14,
                                       v14,
                                       v16,
                                       v16,
                                       sizeof(zc_model_table),
                                       sizeof(zc_model_table)};
  EXPECT_EQ(t->header.struct_size, sizes[minor - 2]);
  EXPECT_EQ(ZC_TABLE_HAS_SLOT(t, zc_model_table, activations), true);
  EXPECT_EQ(ZC_TABLE_HAS_SLOT(t, zc_model_table, estimate_memory), minor >= 3);
  EXPECT_EQ(ZC_TABLE_HAS_SLOT(t, zc_model_table, named_activations), minor >= 4);
  EXPECT_EQ(ZC_TABLE_HAS_SLOT(t, zc_model_table, decode_slot_reset), minor >= 6);
  EXPECT_EQ(ZC_TABLE_HAS_SLOT(t, zc_model_table, decode_extend), minor >= 8);
}

TEST_P(AbiCompat, RunsAndTheHostReadsOnlyTheSlotsItsMinorHas) {
  const uint32_t minor = GetParam();
  zcode::StageInstance inst(*c_, host_args(hs_));
  const zcode::sdk::ModelRef m(hs_.raw(), inst.ref());
  EXPECT_EQ(stream_seen(m), nullptr);  // the CPU host passes NULL

  std::array<int32_t, 6> ids = {3, 1, 4, 1, 5, 9};
  std::array<int64_t, 2> bt = {2, 3};
  zc_batch b{};
  b.struct_size = sizeof b;
  b.input_ids = zcode::sdk::make_view(ids.data(), zcode::sdk::kI32, 2, bt.data());
  b.targets = b.input_ids;
  zc_fb_options fb{};
  fb.struct_size = sizeof fb;
  fb.loss_normalizer = 6;
  fb.loss_scale = 1;
  double loss = 0;
  const zc_metrics_sink sink{&loss, [](void* ctx, const char* name, double v) {
                               if (std::string(name) == "loss") *static_cast<double*>(ctx) = v;
                             }};
  // The host's tracer (ABI 1.7): a recording sink, off, then on.
  struct Sink final : zcode::TraceSink {
    zc_trace_level lv = ZC_TRACE_OFF;
    std::vector<std::string> calls;
    zc_trace_level level() const override { return lv; }
    void begin(const char* cat, const char* name, const char* args) override {
      calls.push_back(std::string("begin ") + cat + " " + name + " " + (args ? args : "NULL"));
    }
    void end() override { calls.push_back("end"); }
    void counter(const char* name, const char*) override { calls.push_back(std::string("counter ") + name); }
  } rec;
  hs_.set_trace_sink(&rec);
  m.forward_backward(b, fb, &sink);
  EXPECT_EQ(loss, 1.0);
  EXPECT_TRUE(rec.calls.empty());  // level 0: nothing recorded, whatever the minor
  rec.lv = ZC_TRACE_SPANS | ZC_TRACE_SHAPES;
  m.forward_backward(b, fb, &sink);
  hs_.set_trace_sink(nullptr);
  if (minor >= 7)
    EXPECT_EQ(rec.calls, (std::vector<std::string>{R"(begin forward fake_phase {"layer":0,"tokens":6})", "end"}));
  else EXPECT_TRUE(rec.calls.empty());  // older plugins know no tracer

  zc_param_list acts{};
  ASSERT_TRUE(m.activations(&acts));
  ASSERT_EQ(acts.count, 2u);
  zc_named_tensor_list named{};
  // Before 1.4 the slot lies past struct_size: not called (its thunk would
  // throw), and the reader falls back to activations.
  ASSERT_EQ(m.named_activations(&named), minor >= 4);
  if (minor >= 4) {
    ASSERT_EQ(named.count, acts.count);
    for (size_t i = 0; i < acts.count; ++i) {
      EXPECT_STREQ(named.names[i], acts.params[i].name);
      EXPECT_EQ(named.tensors[i].data, acts.params[i].value->data);
    }
    // A caller's struct smaller than the list's first version is refused.
    zc_named_tensor_list small{};
    small.struct_size = 16;
    zcode::StatusPtr s(c_->as<zc_model_table>()->named_activations(inst.get(), &small));
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(zcode::status_code(s.get()), static_cast<zc_status_code>(ZC_ERR_VERSION));
    EXPECT_STREQ(zcode::status_message(s.get()),
                 "named_activations: out->struct_size 16 is smaller than zc_named_tensor_list's first version (32)");
    EXPECT_EQ(small.count, 0u);
  }

  // estimate_memory came with 1.3: a 1.2 model's part is unknown.
  const zc_create_args a = host_args(hs_);
  const zcode::MemoryEstimate e = zcode::estimate_run_memory(*c_, a, nullptr, a);
  if (minor >= 3) {
    EXPECT_EQ(e.parameters, 6u * sizeof(float));
    EXPECT_TRUE(e.unknown.empty());
  } else {
    EXPECT_FALSE(e.parameters.has_value());
    ASSERT_EQ(e.unknown.size(), 1u);
    EXPECT_NE(e.unknown[0].find("has no estimate_memory (built for ABI 1.2 or older)"), std::string::npos)
        << e.unknown[0];
  }
}

// The 1.4 plugin reads zc_create_args.stream through CreateContext::stream(),
// which looks at the field only when struct_size covers it: args built for
// 1.3 (80 bytes) give NULL even when the memory after them holds a pointer.
TEST(AbiCompatStream, ThePluginReadsTheStreamOnlyWhenStructSizeCoversIt) {
  zcode::PluginSearchOptions o;
  o.cli_paths = {ZCODE_TEST_ABI_FAKES_DIR};
  o.use_env = false;
  o.use_default = false;
  zcode::Registry reg(o);
  const zcode::Component* c = reg.find(ZC_KIND_MODEL, "fake_model_1_" + std::to_string(ZC_ABI_VERSION_MINOR));
  ASSERT_NE(c, nullptr);
  zcode::HostServices hs(7);
  zc_create_args a = host_args(hs);
  a.stream = kSentinelStream;
  zcode::StageInstance with(*c, a);
  EXPECT_EQ(stream_seen(zcode::sdk::ModelRef(hs.raw(), with.ref())), kSentinelStream);
  a.struct_size = offsetof(zc_create_args, stream);
  zcode::StageInstance without(*c, a);
  EXPECT_EQ(stream_seen(zcode::sdk::ModelRef(hs.raw(), without.ref())), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Minors, AbiCompat, ::testing::Values(2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u),
                         [](const ::testing::TestParamInfo<uint32_t>& p) {
                           return "abi_1_" + std::to_string(p.param);
                         });

}  // namespace
