// fake_host.h: the smallest zc_host_services a model plugin needs, for tests
// that load a plugin directly (no core/ registry): statuses that keep code and
// message, log to stderr, aligned CPU allocation, derived seeds.
#pragma once

#include <zcode/abi.h>
#include <zcode/sdk/hash.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

struct zc_status {
  zc_status_code code;
  std::string message;
};

namespace zcode::testing {

/// Host services with `num_threads` compute threads and global seed `seed`.
/// Status objects are heap-allocated here and freed by `status_release`
/// (or take_message below), as the host would.
class FakeHost {
 public:
  explicit FakeHost(int32_t num_threads = 2, uint64_t seed = 1) {
    s_.struct_size = sizeof(zc_host_services);
    s_.abi_major = ZC_ABI_VERSION_MAJOR;
    s_.abi_minor = ZC_ABI_VERSION_MINOR;
    s_.host_ctx = this;
    s_.log = [](void*, zc_log_level level, const char* component, const char* message) {
      std::fprintf(stderr, "[fake-host %u] %s: %s\n", static_cast<unsigned>(level), component ? component : "",
                   message ? message : "");
    };
    s_.status_create = [](void*, zc_status_code code, const char* message) -> zc_status* {
      return new zc_status{code, message ? message : ""};
    };
    s_.alloc = [](void*, size_t bytes, size_t alignment, DLDevice device) -> void* {
      if (device.device_type != kDLCPU || alignment < 16 || (alignment & (alignment - 1))) return nullptr;
      size_t rounded = (bytes + alignment - 1) / alignment * alignment;
      return std::aligned_alloc(alignment, rounded ? rounded : alignment);
    };
    s_.free = [](void*, void* ptr, DLDevice) { std::free(ptr); };
    s_.seed = seed;
    s_.derive_seed = [](void* ctx, const char* name) -> uint64_t {
      // SplitMix64 of (FNV-1a of the stream name XOR the run seed): not abi.h's
      // order (sdk::derive_seed XORs after mixing); kept bit-identical so the
      // seeds these tests run with do not change.
      const uint64_t h = zcode::sdk::fnv1a64(name ? std::string_view(name) : std::string_view());
      return zcode::sdk::splitmix64(h ^ static_cast<FakeHost*>(ctx)->s_.seed);
    };
    s_.device = DLDevice{kDLCPU, 0};
    s_.stream = nullptr;
    s_.num_threads = num_threads;
    s_.stop_requested = [](void*) -> int32_t { return 0; };
    s_.status_code = [](void*, const zc_status* st) { return st ? st->code : static_cast<zc_status_code>(ZC_OK); };
    s_.status_message = [](void*, const zc_status* st) { return st ? st->message.c_str() : ""; };
    s_.status_release = [](void*, zc_status* st) { delete st; };
  }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  const zc_host_services* services() const { return &s_; }

  /// "" for success; otherwise "code N: message", releasing the status.
  static std::string take_message(zc_status* st) {
    if (!st) return "";
    std::string m = "code " + std::to_string(st->code) + ": " + st->message;
    delete st;
    return m;
  }

 private:
  zc_host_services s_{};
};

}  // namespace zcode::testing
