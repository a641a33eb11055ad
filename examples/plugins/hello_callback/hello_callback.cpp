// An out-of-tree ZCode plugin: a callback that logs one line per event and
// counts the steps it saw. Built against the installed SDK only:
//   cmake -S . -B build -DCMAKE_PREFIX_PATH=<prefix> && cmake --build build
#include <zcode/sdk/plugin.h>

#include <string>

namespace {

class HelloCallback : public zcode::sdk::Callback {
 public:
  explicit HelloCallback(const zcode::sdk::CreateContext& ctx)
      : host_(ctx.host()), greeting_(ctx.options().get<std::string>("greeting", "hello")) {}

  uint32_t on_event(const zc_event& e) override {
    switch (e.kind) {
      case ZC_EVENT_SETUP: host_.info("hello", greeting_ + " from an out-of-tree plugin"); break;
      case ZC_EVENT_STEP_END: ++steps_; break;
      case ZC_EVENT_TEARDOWN: host_.info("hello", greeting_ + ": saw " + std::to_string(steps_) + " steps"); break;
      default: break;  // unknown kinds are ignored (ABI rule)
    }
    return 0;
  }

  void save_state(const zcode::sdk::StateWriter& w) override {
    w.put_json("{\"steps\":" + std::to_string(steps_) + "}");
  }

 private:
  zcode::sdk::Host host_;
  std::string greeting_;
  uint64_t steps_ = 0;
};

}  // namespace

ZCODE_PLUGIN(
    "hello_callback", "1.0.0", "Apache-2.0", "Example out-of-tree callback plugin",
    ZCODE_COMPONENT(
        HelloCallback, "hello", "Logs a greeting at setup and a step count at teardown",
        R"({"type":"object","properties":{"greeting":{"type":"string","default":"hello"}},"additionalProperties":false})"))
