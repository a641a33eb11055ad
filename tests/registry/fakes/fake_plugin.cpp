// Fake plugins for the registry tests, one MODULE library per FAKE_VARIANT
// (see CMakeLists.txt). Built in the test folder only: never installed,
// never put in the bundled plugin folder.
//   good          callbacks fake_echo, fake_fail_create, fake_throw; scheduler fake_half
//   major         claims ABI major + 1
//   minor         claims ABI minor + 1
//   noentry       exports no negotiation symbol
//   missing       references a symbol no library defines (dlopen RTLD_NOW fails)
//   badkind       a callback component whose table header says "model"
//   badsize       a callback component whose table header struct_size is 16
#include <zcode/sdk/plugin.h>

#include <stdexcept>
#include <string>

#define FAKE_GOOD 1
#define FAKE_MAJOR 2
#define FAKE_MINOR 3
#define FAKE_NOENTRY 4
#define FAKE_MISSING 5
#define FAKE_BADKIND 6
#define FAKE_BADSIZE 7

#if FAKE_VARIANT == FAKE_MISSING
extern "C" int zcode_fake_symbol_that_does_not_exist(void);
#endif

namespace {

using zcode::sdk::Callback;
using zcode::sdk::CreateContext;

constexpr const char* kEchoSchema =
    R"({"type":"object","properties":{"type":{"type":"string"},"greeting":{"type":"string","default":"hello"},)"
    R"("every":{"type":"integer","minimum":1,"default":1}},"additionalProperties":false})";

/// Logs its greeting at setup and counts STEP_END events.
class Echo : public Callback {
 public:
  explicit Echo(const CreateContext& ctx)
      : host_(ctx.host()), greeting_(ctx.options().get<std::string>("greeting", "hello")) {
#if FAKE_VARIANT == FAKE_MISSING
    steps_ = static_cast<uint64_t>(zcode_fake_symbol_that_does_not_exist());
#endif
  }
  uint32_t on_event(const zc_event& e) override {
    if (e.kind == ZC_EVENT_SETUP) host_.info("fake_echo", greeting_);
    if (e.kind == ZC_EVENT_STEP_END) ++steps_;
    if (e.kind == ZC_EVENT_TEARDOWN) host_.info("fake_echo", "steps=" + std::to_string(steps_));
    return steps_ >= 3 ? static_cast<uint32_t>(ZC_CALLBACK_REQUEST_STOP) : 0u;
  }

 private:
  zcode::sdk::Host host_;
  std::string greeting_;
  uint64_t steps_ = 0;
};

/// Its create always fails with the plugin's own message.
class FailCreate : public Callback {
 public:
  explicit FailCreate(const CreateContext&) {
    throw zcode::sdk::Error(ZC_ERR_INVALID_ARGUMENT, "fake_fail_create: refused on purpose");
  }
  uint32_t on_event(const zc_event&) override { return 0; }
};

/// Every call throws a std::exception, which the SDK maps to a status.
class Throw : public Callback {
 public:
  explicit Throw(const CreateContext&) {}
  uint32_t on_event(const zc_event& e) override { throw std::runtime_error("boom at step " + std::to_string(e.step)); }
};

/// lr = base_lr / 2.
class Half : public zcode::sdk::Scheduler {
 public:
  explicit Half(const CreateContext&) {}
  double lr(uint64_t, double base) const override { return base * 0.5; }
};

}  // namespace

#if FAKE_VARIANT == FAKE_GOOD || FAKE_VARIANT == FAKE_MISSING

ZCODE_PLUGIN("fake_good", "1.2.3", "MIT", "Fake plugin for the registry tests",
             ZCODE_COMPONENT(Echo, "fake_echo", "Logs a greeting, counts steps", kEchoSchema),
             ZCODE_COMPONENT(FailCreate, "fake_fail_create", "create always fails", R"({"type":"object"})"),
             ZCODE_COMPONENT(Throw, "fake_throw", "on_event always throws", R"({"type":"object"})"),
             ZCODE_COMPONENT(Half, "fake_half", "lr = base / 2", R"({"type":"object"})"))

#elif FAKE_VARIANT == FAKE_NOENTRY

// A shared object with code but without the negotiation symbol.
extern "C" ZC_EXPORT int zcode_fake_not_the_entry_point(void) { return 42; }

#else  // hand-written negotiation that lies about versions or tables

namespace {

constexpr zc_callback_table make_table() {
  zc_callback_table t = zcode::sdk::detail::CallbackThunks<Echo>::table;
#if FAKE_VARIANT == FAKE_BADKIND
  t.header.kind = ZC_KIND_MODEL;
#elif FAKE_VARIANT == FAKE_BADSIZE
  t.header.struct_size = 16;
#endif
  return t;
}
constexpr zc_callback_table kTable = make_table();

#if FAKE_VARIANT == FAKE_BADKIND
constexpr const char* kName = "fake_badkind";
#elif FAKE_VARIANT == FAKE_BADSIZE
constexpr const char* kName = "fake_badsize";
#elif FAKE_VARIANT == FAKE_MAJOR
constexpr const char* kName = "fake_major";
#else
constexpr const char* kName = "fake_minor";
#endif

constexpr zc_component kComponents[] = {
    {sizeof(zc_component), ZC_KIND_CALLBACK, kName, "fake", R"({"type":"object"})", &kTable}};
constexpr zc_manifest kManifest = {sizeof(zc_manifest), 1, kName, "0.0.1", "MIT", "fake", "{}", kComponents};

}  // namespace

extern "C" ZC_EXPORT zc_status_code zcode_plugin_negotiate(uint32_t host_major, uint32_t, const zc_host_services* s,
                                                           uint32_t* out_major, uint32_t* out_minor,
                                                           const zc_manifest** out_manifest) {
  zcode::sdk::detail::g_host = s;
#if FAKE_VARIANT == FAKE_MAJOR
  *out_major = ZC_ABI_VERSION_MAJOR + 1;
  *out_minor = 0;
#elif FAKE_VARIANT == FAKE_MINOR
  *out_major = ZC_ABI_VERSION_MAJOR;
  *out_minor = ZC_ABI_VERSION_MINOR + 1;
#else
  *out_major = ZC_ABI_VERSION_MAJOR;
  *out_minor = ZC_ABI_VERSION_MINOR;
#endif
  *out_manifest = &kManifest;
  return *out_major == host_major ? ZC_OK : ZC_ERR_VERSION;
}

#endif
