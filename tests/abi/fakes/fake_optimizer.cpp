// An optimizer plugin as one built for ABI 1.FAKE_ABI_MINOR (>= 1.5, so it
// has shard_granularity and may be asked to shard) looks to the host: its
// negotiation reports that minor. Before 1.9 an optimizer reads one
// zc_param_shard.group for every parameter, so the host must refuse it for
// ZeRO-1 with expert parallelism (core/src/engine_setup.cpp, plan_shards);
// tests/dist/dp_e2e_test.cpp checks that refusal. Should a host accept it
// anyway, its step throws: the run fails with this file's message instead of
// training with the experts' statistics reduced over the wrong ranks.
#include <zcode/sdk/plugin.h>

#include <cstdint>
#include <span>
#include <string>

#include "fake_negotiate.h"

#ifndef FAKE_ABI_MINOR
#error "FAKE_ABI_MINOR (the ABI minor this fake pretends to be built for) must be defined"
#endif
#define FAKE_STR2(x) #x
#define FAKE_STR(x) FAKE_STR2(x)
#define FAKE_NAME "fake_optimizer_1_" FAKE_STR(FAKE_ABI_MINOR)

namespace {

constexpr uint32_t kMinor = FAKE_ABI_MINOR;
static_assert(kMinor >= 5 && kMinor <= ZC_ABI_VERSION_MINOR, "shard_granularity came with ABI 1.5");

class FakeOptimizer : public zcode::sdk::Optimizer {
 public:
  static constexpr bool kShards = true;
  explicit FakeOptimizer(const zcode::sdk::CreateContext&) {}
  static void shard_granularity(const zcode::sdk::CreateContext&, std::span<int64_t>) {}
  void step(double, uint64_t) override {
    throw zcode::sdk::Error(ZC_ERR_INTERNAL, std::string(FAKE_NAME) +
                                                 " stepped: a host should refuse an optimizer built before ABI 1.9 "
                                                 "for ZeRO-1 with expert parallelism");
  }
};

constexpr zc_component kComponents[] = {{sizeof(zc_component), ZC_KIND_OPTIMIZER, FAKE_NAME,
                                         "fake optimizer of an older ABI minor", R"({"type":"object"})",
                                         &zcode::sdk::detail::OptimizerThunks<FakeOptimizer>::table}};
constexpr zc_manifest kManifest = {sizeof(zc_manifest), 1, FAKE_NAME, "0.0.1", "MIT", "fake", "{}", kComponents};

}  // namespace

extern "C" ZC_EXPORT zc_status_code zcode_plugin_negotiate(uint32_t host_major, uint32_t, const zc_host_services* s,
                                                           uint32_t* out_major, uint32_t* out_minor,
                                                           const zc_manifest** out_manifest) {
  return zcode_test::fake_negotiate(kMinor, &kManifest, host_major, s, out_major, out_minor, out_manifest);
}
