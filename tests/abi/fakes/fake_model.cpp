// A model plugin as a plugin built for ABI 1.FAKE_ABI_MINOR looks to the
// host, one MODULE library per minor (see ../CMakeLists.txt), for
// compat_test.cpp. It is compiled against today's header, so its table is
// cut to the size that minor had (the header's struct_size and kind_version)
// and its negotiation reports that minor: exactly the bytes an older plugin
// hands over. The slots past the cut still point at thunks, which fail
// loudly when called, so a host that ignores struct_size fails the test.
//
// The fake keeps a 2x3 parameter "w" and, after forward_backward on a
// [B, T] batch, two activations: "layers.0.input" [B, T, 4] and
// "final_hidden" [B, T, 2]. info_json says which minor it is and which
// compute stream create saw ("stream": null or the pointer as an integer).
#include <zcode/sdk/json.h>
#include <zcode/sdk/plugin.h>
#include <zcode/sdk/trace.h>

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "fake_negotiate.h"

#ifndef FAKE_ABI_MINOR
#error "FAKE_ABI_MINOR (the ABI minor this fake pretends to be built for) must be defined"
#endif
#define FAKE_STR2(x) #x
#define FAKE_STR(x) FAKE_STR2(x)
#define FAKE_NAME "fake_model_1_" FAKE_STR(FAKE_ABI_MINOR)

namespace {

using zcode::sdk::CreateContext;
using zcode::sdk::Error;

constexpr uint32_t kMinor = FAKE_ABI_MINOR;
static_assert(kMinor >= 2 && kMinor <= ZC_ABI_VERSION_MINOR, "the fakes cover ABI 1.2 up to this header's minor");

// The model table at each minor: its size ends after the last slot that
// minor appended, and kind_version is the one the slot's comment names.
constexpr uint32_t kTableSize = kMinor >= 8   ? static_cast<uint32_t>(sizeof(zc_model_table))
                                : kMinor >= 6 ? static_cast<uint32_t>(offsetof(zc_model_table, decode_extend))
                                : kMinor >= 4 ? static_cast<uint32_t>(offsetof(zc_model_table, decode_slots_begin))
                                : kMinor == 3 ? static_cast<uint32_t>(offsetof(zc_model_table, named_activations))
                                              : static_cast<uint32_t>(offsetof(zc_model_table, estimate_memory));
constexpr uint32_t kKindVersion = kMinor >= 8 ? 7u : kMinor >= 6 ? 6u : kMinor >= 4 ? 5u : kMinor == 3 ? 4u : 3u;

[[noreturn]] void called_past_struct_size(const char* slot) {
  throw Error(ZC_ERR_INTERNAL, std::string(slot) + " called on a plugin built for ABI 1." + std::to_string(kMinor) +
                                   ", whose table ends before it: the reader ignored struct_size");
}

class FakeModel : public zcode::sdk::Model {
 public:
  explicit FakeModel(const CreateContext& ctx) : tracer_(kMinor >= 7 ? ctx.host().raw() : nullptr) {
    // A plugin older than 1.4 has no stream field to read.
    void* stream = kMinor >= 4 ? ctx.stream() : nullptr;
    zcode::sdk::json::Writer w;
    w.begin_object().key("abi_minor").integer(kMinor).key("stream");
    if (stream) w.integer(reinterpret_cast<uintptr_t>(stream));
    else w.null();
    w.end_object();
    info_ = w.str();
    value_ = zcode::sdk::make_view(w_.data(), zcode::sdk::kF32, 2, w_shape_.data());
    grad_ = zcode::sdk::make_view(g_.data(), zcode::sdk::kF32, 2, w_shape_.data());
    param_ = zc_param{"w", &value_, &grad_, 0, 0};
  }
  void num_params(uint64_t& total, uint64_t& active) const override { total = active = w_.size(); }
  zc_param_list params() override { return zc_param_list{&param_, 1}; }
  void zero_grad() override { g_.fill(0.0f); }
  // Activations filled from the batch's ids, so the test can tell them apart.
  void forward_backward(const zc_batch& b, const zc_fb_options&, const zcode::sdk::MetricsSink& m) override {
    const int64_t B = b.input_ids.shape[0], T = b.input_ids.shape[1];
    const int32_t* ids = zcode::sdk::data_ptr<int32_t>(b.input_ids);
    // 1.7: one span into the host's profiler (an older plugin has no tracer).
    const zc_trace_level lv = tracer_.level();
    auto span = tracer_.span_with(lv, "forward", "fake_phase", [&](zcode::sdk::json::Writer& w, zc_trace_level l) {
      w.key("layer").integer(0);
      if (l & ZC_TRACE_SHAPES) w.key("tokens").integer(B * T);
    });
    for (size_t a = 0; a < kActs; ++a) {
      shapes_[a] = {B, T, kWidths[a]};
      data_[a].assign(static_cast<size_t>(B * T * kWidths[a]), 0.0f);
      for (size_t k = 0; k < data_[a].size(); ++k)
        data_[a][k] = static_cast<float>(ids[k / static_cast<size_t>(kWidths[a])]) + static_cast<float>(a);
      tensors_[a] = zcode::sdk::make_view(data_[a].data(), zcode::sdk::kF32, 3, shapes_[a].data());
      list_[a] = zc_param{kNames[a], &tensors_[a], nullptr, 0, 0};
    }
    kept_ = true;
    m.put("loss", 1.0);
  }
  zc_param_list activations() override { return zc_param_list{list_.data(), kept_ ? kActs : 0}; }
  zc_named_tensor_list named_activations() override {
    if (kMinor < 4) called_past_struct_size("named_activations");
    zc_named_tensor_list l{};
    l.struct_size = sizeof l;
    l.count = kept_ ? kActs : 0;
    l.names = kNames.data();
    l.tensors = tensors_.data();
    return l;
  }
  static void estimate_memory(const CreateContext&, const zcode::sdk::ParamShapeSink& shapes, zc_memory_estimate& out) {
    if (kMinor < 3) called_past_struct_size("estimate_memory");
    shapes.put("w", {2, 3}, 0);
    out.parameter_bytes = out.gradient_bytes = 6 * sizeof(float);
  }
  const std::string& info_json() const override { return info_; }

 private:
  static constexpr size_t kActs = 2;
  static constexpr std::array<const char*, kActs> kNames = {"layers.0.input", "final_hidden"};
  static constexpr std::array<int64_t, kActs> kWidths = {4, 2};

  zcode::sdk::Tracer tracer_;
  std::string info_;
  std::array<float, 6> w_{}, g_{};
  std::array<int64_t, 2> w_shape_ = {2, 3};
  DLTensor value_{}, grad_{};
  zc_param param_{};
  bool kept_ = false;
  std::array<std::vector<float>, kActs> data_;
  std::array<std::array<int64_t, 3>, kActs> shapes_{};
  std::array<DLTensor, kActs> tensors_{};
  std::array<zc_param, kActs> list_{};
};

constexpr zc_model_table make_table() {
  zc_model_table t = zcode::sdk::detail::ModelThunks<FakeModel>::table;
  t.header.struct_size = kTableSize;
  t.header.kind_version = kKindVersion;
  return t;
}
constexpr zc_model_table kTable = make_table();

constexpr zc_component kComponents[] = {{sizeof(zc_component), ZC_KIND_MODEL, FAKE_NAME,
                                         "fake model of an older ABI minor", R"({"type":"object"})", &kTable}};
constexpr zc_manifest kManifest = {sizeof(zc_manifest), 1, FAKE_NAME, "0.0.1", "MIT", "fake", "{}", kComponents};

}  // namespace

extern "C" ZC_EXPORT zc_status_code zcode_plugin_negotiate(uint32_t host_major, uint32_t, const zc_host_services* s,
                                                           uint32_t* out_major, uint32_t* out_minor,
                                                           const zc_manifest** out_manifest) {
  return zcode_test::fake_negotiate(kMinor, &kManifest, host_major, s, out_major, out_minor, out_manifest);
}
