// zcode/core/host_services.h: the host side of zc_host_services (abi.h).
//
// Logging into the core logger, the opaque zc_status, aligned allocation,
// seeds, device/stream, thread count, the process-wide stop flag and (ABI
// 1.5) the job's collectives (zcode/core/dist/process_groups.h).
#pragma once

#include <zcode/abi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace zcode {

// ---- seeds -----------------------------------------------------------------
// fnv1a64, splitmix64 and derive_seed (the formula of
// zc_host_services.derive_seed) live in zcode/sdk/hash.h, shared with plugins.

// ---- stop flag ---------------------------------------------------------------

/// Asks the run to stop (what SIGINT/SIGTERM handlers call). Async-signal-safe:
/// it only stores to a lock-free atomic.
void request_stop() noexcept;
/// True once request_stop() was called (zc_host_services.stop_requested).
bool stop_requested() noexcept;
/// Clears the flag (tests; a tool that runs several jobs in one process).
void clear_stop_request() noexcept;

/// While one lives, plugins see no stop request (zc_host_services.
/// stop_requested answers 0) while the host's own stop_requested() still
/// does: for work every rank must finish together, such as an evaluation
/// whose forward is a collective (expert parallelism), where one rank
/// cancelling early would leave the others in a collective. The host acts
/// on the request after the work, as all ranks agree. Nests; one thread.
class StopDeferral {
 public:
  StopDeferral() noexcept;
  ~StopDeferral();
  StopDeferral(const StopDeferral&) = delete;
  StopDeferral& operator=(const StopDeferral&) = delete;
};

// ---- status ------------------------------------------------------------------

/// Creates a status (code != ZC_OK) with a copy of `message`. Never NULL.
zc_status* make_status(zc_status_code code, std::string_view message);
/// Code of a status; ZC_OK for NULL.
zc_status_code status_code(const zc_status* status);
/// Message of a status; "" for NULL. Valid until release.
const char* status_message(const zc_status* status);
/// Releases a status (NULL accepted).
void status_release(zc_status* status);
/// "INVALID_ARGUMENT", "NOT_FOUND", ... for messages.
const char* status_code_name(zc_status_code code);

struct StatusDeleter {
  void operator()(zc_status* s) const { status_release(s); }
};
/// Owning handle of a status returned by a plugin call.
using StatusPtr = std::unique_ptr<zc_status, StatusDeleter>;

// ---- host services -----------------------------------------------------------

/// The services handed to plugins at negotiation: seed 0, one thread, CPU.
/// Immortal (never destroyed), because a plugin may keep the pointer for the
/// life of the process (abi.h: "The services pointer outlives the plugin").
const zc_host_services* process_host_services();

/// Where a run's zc_host_services.tracer (ABI 1.7) sends its calls:
/// core::Trace (core/src/trace.h) while the engine trains. Called from any
/// thread (zc_tracer's threading contract); strings are borrowed per call.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual zc_trace_level level() const = 0;
  virtual void begin(const char* category, const char* name, const char* args_json) = 0;
  virtual void end() = 0;
  virtual void counter(const char* name, const char* args_json) = 0;
};

/// A zc_host_services table for one run (seed, device, num_threads), wired
/// to the core logger, the status functions and the stop flag. Instances
/// created with it must be destroyed before it (the Engine owns both).
class HostServices {
 public:
  /// `num_threads` < 1 is treated as 1. Devices other than kDLCPU are accepted
  /// here; alloc() on kDLCUDA logs an error and returns NULL until the CUDA
  /// backend exists.
  explicit HostServices(uint64_t seed = 0, int32_t num_threads = 1, DLDevice device = DLDevice{kDLCPU, 0});
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  /// The table to put into zc_create_args.host.
  const zc_host_services* raw() const { return &table_; }
  uint64_t seed() const { return table_.seed; }
  int32_t num_threads() const { return table_.num_threads; }
  DLDevice device() const { return table_.device; }
  /// The job's collectives (zc_host_services.collectives, ABI 1.5); NULL
  /// restores the one-rank service every table starts with. `c` must
  /// outlive the instances created with this table.
  void set_collectives(const zc_collectives* c);
  /// Where the table's tracer goes (ABI 1.7); NULL (the start): level() 0,
  /// every call a no-op. `sink` must stay valid until it is replaced.
  void set_trace_sink(TraceSink* sink) { sink_.store(sink, std::memory_order_release); }

 private:
  zc_host_services table_;
  zc_tracer tracer_;
  std::atomic<TraceSink*> sink_{nullptr};
};

/// 64-byte aligned CPU allocation as the `alloc` service does it: alignment
/// is raised to at least 64, `bytes` is rounded up to a multiple of it, and
/// 0 bytes still returns a unique pointer. NULL when alignment is not a
/// power of two or on failure. Release with aligned_free.
void* aligned_alloc_cpu(size_t bytes, size_t alignment);
void aligned_free_cpu(void* ptr);

}  // namespace zcode
