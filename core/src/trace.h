// core/src/trace.h: the Chrome trace of the training loop's phases
// (`zcode-host profile`, and profiling.enabled in a run).
//
// trace.json is the Chrome trace event format (chrome://tracing, Perfetto):
//   {"traceEvents":[<events>],"displayTimeUnit":"ms"}
// with one complete event per phase of a traced step,
//   {"name":"forward_backward","ph":"X","ts":<us>,"dur":<us>,"pid":1,"tid":1}
// (forward_backward gets "args":{"micro_batches","batch_size","seq"} with
// profiling.profile_shapes), then, with profiling.profile_memory, one counter
// event per traced step, {"name":"memory","ph":"C","ts":<us>,"pid":1,
// "args":{"rss_mib":<resident MiB>}}. Times are microseconds since the Trace
// was made, 3 decimals.
#pragma once

#include <zcode/core/config.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <vector>

namespace zcode::core {

class Trace {
 public:
  using Clock = std::chrono::steady_clock;

  /// What forward_backward's args record (profiling.profile_shapes).
  struct Shapes {
    int64_t micro_batches = 0, batch_size = 0, seq = 0;
  };

  /// `profile_steps` > 0: `zcode-host profile`, every step is traced.
  /// Otherwise `pc.enabled` traces the active steps of torch.profiler's
  /// schedule; neither: the Trace records nothing (enabled() is false).
  Trace(const ProfilingConfig& pc, int profile_steps, Shapes shapes);

  /// Whether this run writes a trace at all.
  bool enabled() const { return enabled_; }

  /// Starts optimizer step `update` (counted from 1): the spans and the
  /// memory sample until the next begin_step belong to it when it is traced.
  void begin_step(uint64_t update);

  /// Records the phase `name` (a string literal: it is kept, not copied)
  /// that began at `t0` and ends now, when the current step is traced.
  void span(const char* name, Clock::time_point t0);

  /// Samples the resident memory (/proc/self/statm) when the current step is
  /// traced and profiling.profile_memory is set.
  void sample_memory();

  /// Writes the trace to `path` atomically. Throws CheckpointError naming the
  /// path (zcode/core/checkpoint.h's write_file_atomic).
  void write(const std::filesystem::path& path) const;

 private:
  // torch.profiler's schedule: cycles of `wait`, `warmup`, `active` steps,
  // `repeat` times (0 = for ever), counted from 1.
  bool scheduled(uint64_t update) const;

  struct Span {
    const char* name;
    double ts_us, dur_us;
  };
  ProfilingConfig pc_;
  bool every_step_;
  bool enabled_;
  Shapes shapes_;
  bool now_ = false;  // the current step is traced
  Clock::time_point origin_ = Clock::now();
  std::vector<Span> spans_;
  std::vector<std::pair<double, double>> rss_;  // (ts_us, resident MiB)
};

}  // namespace zcode::core
