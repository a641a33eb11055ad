// Host side of zc_host_services: status objects, logging, allocation,
// seeds and the stop flag.
#include <zcode/core/dist/process_groups.h>
#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/sdk/hash.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

// The opaque status of abi.h. Created only by the host (make_status, or a
// plugin through status_create), released only by the host.
struct zc_status {
  zc_status_code code;
  std::string message;
};

namespace zcode {

namespace {
std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free, "the stop flag is set from a signal handler");
std::atomic<int> g_stop_deferred{0};  // live StopDeferral scopes
}  // namespace

void request_stop() noexcept { g_stop.store(1, std::memory_order_relaxed); }
bool stop_requested() noexcept { return g_stop.load(std::memory_order_relaxed) != 0; }
void clear_stop_request() noexcept { g_stop.store(0, std::memory_order_relaxed); }

StopDeferral::StopDeferral() noexcept { g_stop_deferred.fetch_add(1, std::memory_order_relaxed); }
StopDeferral::~StopDeferral() { g_stop_deferred.fetch_sub(1, std::memory_order_relaxed); }

namespace {
// Out of memory while reporting an error: make_status hands out this static
// status instead of NULL (NULL would mean success); status_release skips it.
zc_status* static_oom() {
  static zc_status* oom = new zc_status{ZC_ERR_OUT_OF_MEMORY, "out of memory (while creating a status)"};
  return oom;
}
}  // namespace

zc_status* make_status(zc_status_code code, std::string_view message) {
  try {
    return new zc_status{code, std::string(message)};
  } catch (...) {
    return static_oom();
  }
}

zc_status_code status_code(const zc_status* status) {
  return status ? status->code : static_cast<zc_status_code>(ZC_OK);
}
const char* status_message(const zc_status* status) { return status ? status->message.c_str() : ""; }
void status_release(zc_status* status) {
  if (!status || status == static_oom()) return;
  delete status;
}

const char* status_code_name(zc_status_code code) {
  switch (code) {
    case ZC_OK: return "OK";
    case ZC_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case ZC_ERR_NOT_FOUND: return "NOT_FOUND";
    case ZC_ERR_IO: return "IO";
    case ZC_ERR_DATA: return "DATA";
    case ZC_ERR_UNSUPPORTED: return "UNSUPPORTED";
    case ZC_ERR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case ZC_ERR_INTERNAL: return "INTERNAL";
    case ZC_ERR_CANCELLED: return "CANCELLED";
    case ZC_ERR_VERSION: return "VERSION";
    default: return "UNKNOWN";
  }
}

void* aligned_alloc_cpu(size_t bytes, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return nullptr;
  if (alignment < 64) alignment = 64;
  size_t rounded = bytes == 0 ? alignment : (bytes + alignment - 1) / alignment * alignment;
  if (rounded < bytes) return nullptr;  // overflow
  return std::aligned_alloc(alignment, rounded);
}

void aligned_free_cpu(void* ptr) { std::free(ptr); }

// ---- the C thunks of the table ----------------------------------------------
// host_ctx is unused: every service is process-wide, so the negotiation table
// and per-run tables behave the same and a plugin may use either.
namespace {

void svc_log(void*, zc_log_level level, const char* component, const char* message) {
  try {
    if (component && component == log::kRecordComponent) {
      log::write_record(message ? message : "");  // a console callback's JSON event, not a line
      return;
    }
    log::Level l = level > ZC_LOG_ERROR ? log::Level::Error : static_cast<log::Level>(level);
    log::write(l, component ? component : "plugin", message ? message : "");
  } catch (...) {
  }
}

zc_status* svc_status_create(void*, zc_status_code code, const char* message) {
  if (code == ZC_OK) code = ZC_ERR_INTERNAL;  // "never returns NULL for code != OK"; OK is a misuse
  return make_status(code, message ? message : "");
}

void* svc_alloc(void*, size_t bytes, size_t alignment, DLDevice device) {
  if (device.device_type == kDLCPU) return aligned_alloc_cpu(bytes, alignment);
  log::write(log::Level::Error, "host",
             "alloc: device type " + std::to_string(device.device_type) +
                 " is not supported (the CUDA backend is not implemented yet); returning NULL");
  return nullptr;
}

void svc_free(void*, void* ptr, DLDevice device) {
  if (!ptr) return;
  if (device.device_type == kDLCPU) aligned_free_cpu(ptr);
}

uint64_t svc_derive_seed_impl(const zc_host_services* s, const char* name) {
  return sdk::derive_seed(s ? s->seed : 0, name ? std::string_view(name) : std::string_view());
}

int32_t svc_stop_requested(void*) {
  return stop_requested() && g_stop_deferred.load(std::memory_order_relaxed) == 0 ? 1 : 0;
}
zc_status_code svc_status_code(void*, const zc_status* s) { return status_code(s); }
const char* svc_status_message(void*, const zc_status* s) { return status_message(s); }
void svc_status_release(void*, zc_status* s) { status_release(s); }

// derive_seed needs the table's seed: host_ctx points at the table itself.
uint64_t svc_derive_seed(void* ctx, const char* name) {
  return svc_derive_seed_impl(static_cast<const zc_host_services*>(ctx), name);
}

// A run's tracer: its ctx is HostServices::sink_.
TraceSink* sink_of(void* ctx) { return static_cast<std::atomic<TraceSink*>*>(ctx)->load(std::memory_order_acquire); }

// The negotiation table's tracer: records nothing.
zc_trace_level tracer_off_level(void*) { return ZC_TRACE_OFF; }
void tracer_off_begin(void*, const char*, const char*, const char*) {}
void tracer_off_end(void*) {}
void tracer_off_counter(void*, const char*, const char*) {}
const zc_tracer kTracerOff{sizeof(zc_tracer),  0, nullptr, &tracer_off_level, &tracer_off_begin, &tracer_off_end,
                           &tracer_off_counter};

void fill(zc_host_services& t, uint64_t seed, int32_t num_threads, DLDevice device) {
  t = zc_host_services{};
  t.struct_size = sizeof(zc_host_services);
  t.abi_major = ZC_ABI_VERSION_MAJOR;
  t.abi_minor = ZC_ABI_VERSION_MINOR;
  t.host_ctx = &t;
  t.log = &svc_log;
  t.status_create = &svc_status_create;
  t.alloc = &svc_alloc;
  t.free = &svc_free;
  t.seed = seed;
  t.derive_seed = &svc_derive_seed;
  t.device = device;
  t.stream = nullptr;
  t.num_threads = num_threads < 1 ? 1 : num_threads;
  t.stop_requested = &svc_stop_requested;
  t.status_code = &svc_status_code;
  t.status_message = &svc_status_message;
  t.status_release = &svc_status_release;
  t.collectives = dist::CollectivesService::single_process();
  t.tracer = &kTracerOff;
}

}  // namespace

const zc_host_services* process_host_services() {
  // Immortal: plugins keep this pointer for the life of the process.
  static zc_host_services* table = [] {
    auto* t = new zc_host_services;
    fill(*t, 0, 1, DLDevice{kDLCPU, 0});
    return t;
  }();
  return table;
}

HostServices::HostServices(uint64_t seed, int32_t num_threads, DLDevice device) {
  fill(table_, seed, num_threads, device);
  // ctx is the sink slot, so a plugin that kept the tracer pointer from
  // create sees whichever Trace the engine installs later.
  tracer_ = zc_tracer{sizeof(zc_tracer),
                      0,
                      &sink_,
                      [](void* ctx) -> zc_trace_level {
                        TraceSink* s = sink_of(ctx);
                        return s ? s->level() : static_cast<zc_trace_level>(ZC_TRACE_OFF);
                      },
                      [](void* ctx, const char* cat, const char* name, const char* args) {
                        if (TraceSink* s = sink_of(ctx)) s->begin(cat ? cat : "", name ? name : "", args);
                      },
                      [](void* ctx) {
                        if (TraceSink* s = sink_of(ctx)) s->end();
                      },
                      [](void* ctx, const char* name, const char* args) {
                        if (TraceSink* s = sink_of(ctx)) s->counter(name ? name : "", args);
                      }};
  table_.tracer = &tracer_;
}

void HostServices::set_collectives(const zc_collectives* c) {
  table_.collectives = c ? c : dist::CollectivesService::single_process();
}

}  // namespace zcode
