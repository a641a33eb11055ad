// core/src/trace.h: the run's Chrome trace (`zcode-host profile`, and
// profiling.enabled in a run): the engine's phases of each traced step and,
// through zc_host_services.tracer (ABI 1.7), the spans and counters of the
// plugins (the model's per-layer phases, forward and backward).
//
// trace.json is the Trace Event Format (chrome://tracing, Perfetto):
//   {"traceEvents":[<events>],"displayTimeUnit":"ms"}
// Spans are complete events,
//   {"name":"forward_backward","cat":"step","ph":"X","ts":<us>,"dur":<us>,"pid":1,"tid":1,"args":{...}}
// the engine's with cat "step" (data_wait, hessian, forward_backward,
// clip_grad_norm, optimizer_step, allgather_params, evaluation,
// checkpoint), a plugin's with the category it gave. The thread that runs
// the engine is tid 1, so a model's phases nest inside forward_backward;
// another thread that records spans gets the next tid. With
// profiling.profile_shapes forward_backward's args hold micro_batches,
// batch_size and seq, and plugins add shapes and FLOPs to theirs. Counters
// are {"name":..,"ph":"C","ts":..,"pid":1,"tid":1,"args":{...}}: with
// profiling.profile_memory one "memory" counter per traced step (the
// preflight estimate's parameters_mib, gradients_mib, optimizer_state_mib,
// workspace_mib, and rss_mib from /proc/self/statm), and whatever plugins
// add. Times are microseconds since the Trace was made, 3 decimals.
#pragma once

#include <zcode/core/config.h>
#include <zcode/core/host_services.h>
#include <zcode/core/preflight.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace zcode::core {

class Trace final : public TraceSink {
 public:
  using Clock = std::chrono::steady_clock;

  /// What forward_backward's args record (profiling.profile_shapes).
  struct Shapes {
    int64_t micro_batches = 0, batch_size = 0, seq = 0;
  };

  /// `profile_steps` > 0: `zcode-host profile`, every step is traced.
  /// Otherwise `pc.enabled` traces the active steps of torch.profiler's
  /// schedule; neither: the Trace records nothing (enabled() is false).
  /// The thread that makes the Trace is the engine's (tid 1).
  Trace(const ProfilingConfig& pc, int profile_steps, Shapes shapes);

  /// Whether this run writes a trace at all.
  bool enabled() const { return enabled_; }
  /// Whether the current step is traced.
  bool recording() const { return now_; }

  /// The memory counters' static parts (check_memory's estimate).
  void set_memory_estimate(const MemoryEstimate& m) { estimate_ = m; }

  /// Starts optimizer step `update` (counted from 1): the spans and the
  /// memory sample until the next begin_step belong to it when it is traced.
  void begin_step(uint64_t update);

  /// Records the engine's phase `name` (a string literal: it is kept, not
  /// copied) that began at `t0` and ends now, when the current step is
  /// traced. Closes the plugin spans still open (zc_tracer: a span left
  /// open when the host's call returns ends there).
  void span(const char* name, Clock::time_point t0);
  /// The same for a name made at run time (ProfilerStep#N); copied.
  void span_named(const std::string& name, Clock::time_point t0) noexcept;

  /// One "memory" counter when the current step is traced and
  /// profiling.profile_memory is set.
  void sample_memory();

  /// Writes the trace to `path` atomically. Throws CheckpointError naming the
  /// path (zcode/core/checkpoint.h's write_file_atomic).
  void write(const std::filesystem::path& path) const;

  // TraceSink (zc_tracer's calls; never throw).
  zc_trace_level level() const override { return level_; }
  void begin(const char* category, const char* name, const char* args_json) noexcept override;
  void end() noexcept override;
  void counter(const char* name, const char* args_json) noexcept override;

 private:
  // torch.profiler's schedule: cycles of `wait`, `warmup`, `active` steps,
  // `repeat` times (0 = for ever), counted from 1.
  bool scheduled(uint64_t update) const;
  double now_us() const;
  // The calling thread's track; under mu_.
  struct Thread {
    std::thread::id id;
    int tid;
    std::vector<size_t> open;  // indexes into events_ of its open spans
  };
  Thread& thread_locked();
  void close_open_locked(double ts);
  // An engine span (tid 1, cat "step") from t0 to now; closes open plugin spans.
  void record_step_span(std::string name, Clock::time_point t0, std::string args);

  struct Event {
    char ph;  // 'X' span, 'C' counter
    int tid;
    double ts_us, dur_us;
    std::string cat, name, args;  // args: "" or one JSON object
  };
  ProfilingConfig pc_;
  bool every_step_;
  bool enabled_;
  Shapes shapes_;
  MemoryEstimate estimate_;
  bool now_ = false;  // the current step is traced
  zc_trace_level level_ = ZC_TRACE_OFF;
  Clock::time_point origin_ = Clock::now();
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::vector<Thread> threads_;
};

/// Installs `trace` as `host`'s trace sink for the life of this object
/// (zc_host_services.tracer then records into it).
class TraceSinkScope {
 public:
  TraceSinkScope(HostServices& host, Trace& trace) : host_(host) { host_.set_trace_sink(&trace); }
  ~TraceSinkScope() { host_.set_trace_sink(nullptr); }
  TraceSinkScope(const TraceSinkScope&) = delete;
  TraceSinkScope& operator=(const TraceSinkScope&) = delete;

 private:
  HostServices& host_;
};

}  // namespace zcode::core
