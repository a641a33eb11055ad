// Host services: seeds against hand-computed values (the FNV-1a and
// SplitMix64 vectors are in tests/sdk/hash_test.cpp), status
// objects, aligned allocation, the stop flag.
#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/sdk/hash.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

TEST(Seeds, DeriveSeedIsSplitMixOfFnvXorSeed) {
  // Computed by hand with Python's big integers (mod 2^64):
  // splitmix64(fnv1a64("data")) = 0x93a77708b39d318e; ^ 42 = 0x93a77708b39d31a4.
  EXPECT_EQ(zcode::sdk::derive_seed(42, "data"), 0x93a77708b39d31a4ull);
  EXPECT_EQ(zcode::sdk::derive_seed(0xdeadbeef, "model.init"), 0xc3782c173076071cull);
  EXPECT_EQ(zcode::sdk::derive_seed(0, ""), 0xc3817c016ba4ff30ull);
  // Through the services table: same formula with the run's seed.
  zcode::HostServices hs(42, 2);
  const zc_host_services* s = hs.raw();
  EXPECT_EQ(s->seed, 42u);
  EXPECT_EQ(s->derive_seed(s->host_ctx, "data"), 0x93a77708b39d31a4ull);
  EXPECT_NE(s->derive_seed(s->host_ctx, "data"), s->derive_seed(s->host_ctx, "model.init"));
}

TEST(HostServices, TableHeaderAndFields) {
  zcode::HostServices hs(7, 0);
  const zc_host_services* s = hs.raw();
  EXPECT_EQ(s->struct_size, sizeof(zc_host_services));
  EXPECT_EQ(s->abi_major, ZC_ABI_VERSION_MAJOR);
  EXPECT_EQ(s->abi_minor, ZC_ABI_VERSION_MINOR);
  EXPECT_EQ(s->num_threads, 1);  // 0 is raised to 1
  EXPECT_EQ(s->device.device_type, kDLCPU);
  EXPECT_EQ(s->stream, nullptr);
  const zc_host_services* p = zcode::process_host_services();
  EXPECT_EQ(p, zcode::process_host_services());
  EXPECT_EQ(p->seed, 0u);
}

TEST(HostServices, StatusRoundTrip) {
  const zc_host_services* s = zcode::process_host_services();
  zc_status* st = s->status_create(s->host_ctx, ZC_ERR_DATA, "x.jsonl:17:3: missing field \"text\"");
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(s->status_code(s->host_ctx, st), static_cast<zc_status_code>(ZC_ERR_DATA));
  EXPECT_STREQ(s->status_message(s->host_ctx, st), "x.jsonl:17:3: missing field \"text\"");
  s->status_release(s->host_ctx, st);
  s->status_release(s->host_ctx, nullptr);  // accepted
  // Misuse: creating an OK status still gives a non-NULL error (NULL would mean success).
  zc_status* ok = s->status_create(s->host_ctx, ZC_OK, "odd");
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(zcode::status_code(ok), static_cast<zc_status_code>(ZC_ERR_INTERNAL));
  zcode::status_release(ok);
  EXPECT_EQ(zcode::status_code(nullptr), static_cast<zc_status_code>(ZC_OK));
  EXPECT_STREQ(zcode::status_message(nullptr), "");
}

TEST(HostServices, AllocIs64ByteAlignedOnCpu) {
  zcode::HostServices hs;
  const zc_host_services* s = hs.raw();
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{1} << 20}) {
    for (size_t align : {size_t{16}, size_t{64}, size_t{256}}) {
      void* p = s->alloc(s->host_ctx, bytes, align, DLDevice{kDLCPU, 0});
      ASSERT_NE(p, nullptr) << bytes << " bytes, alignment " << align;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (align < 64 ? 64 : align), 0u);
      if (bytes) static_cast<char*>(p)[bytes - 1] = 1;  // writable to the end (asan checks)
      s->free(s->host_ctx, p, DLDevice{kDLCPU, 0});
    }
  }
  EXPECT_EQ(s->alloc(s->host_ctx, 64, 48, DLDevice{kDLCPU, 0}), nullptr);  // not a power of two
}

TEST(HostServices, CudaAllocReturnsNullWithAClearLog) {
  std::vector<std::string> lines;
  int id = zcode::log::add_sink([&](zcode::log::Level, const std::string& l) { lines.push_back(l); });
  zcode::log::set_console_enabled(false);
  zcode::HostServices hs;
  const zc_host_services* s = hs.raw();
  EXPECT_EQ(s->alloc(s->host_ctx, 1024, 64, DLDevice{kDLCUDA, 0}), nullptr);
  zcode::log::set_console_enabled(true);
  zcode::log::remove_sink(id);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "[ERROR] host: alloc: device type 2 is not supported (the CUDA backend is not implemented yet); "
            "returning NULL");
}

TEST(HostServices, StopFlag) {
  zcode::HostServices hs;
  const zc_host_services* s = hs.raw();
  zcode::clear_stop_request();
  EXPECT_EQ(s->stop_requested(s->host_ctx), 0);
  zcode::request_stop();
  EXPECT_EQ(s->stop_requested(s->host_ctx), 1);
  EXPECT_TRUE(zcode::stop_requested());
  zcode::clear_stop_request();
  EXPECT_EQ(s->stop_requested(s->host_ctx), 0);
  // Deferred (an evaluation every rank must finish): plugins see no stop
  // while a StopDeferral lives, nested or not; the host still does.
  zcode::request_stop();
  {
    zcode::StopDeferral outer;
    {
      zcode::StopDeferral inner;
      EXPECT_EQ(s->stop_requested(s->host_ctx), 0);
    }
    EXPECT_EQ(s->stop_requested(s->host_ctx), 0);
    EXPECT_TRUE(zcode::stop_requested());
  }
  EXPECT_EQ(s->stop_requested(s->host_ctx), 1);
  zcode::clear_stop_request();
}

TEST(HostServices, LogServiceNamesTheComponent) {
  std::vector<std::string> lines;
  int id = zcode::log::add_sink([&](zcode::log::Level, const std::string& l) { lines.push_back(l); });
  zcode::log::set_console_enabled(false);
  const zc_host_services* s = zcode::process_host_services();
  s->log(s->host_ctx, ZC_LOG_WARN, "jsonl", "skipped 3 bad records");
  s->log(s->host_ctx, ZC_LOG_INFO, nullptr, nullptr);
  zcode::log::set_console_enabled(true);
  zcode::log::remove_sink(id);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "[WARN] jsonl: skipped 3 bad records");
  EXPECT_EQ(lines[1], "[INFO] plugin: ");
}

}  // namespace
