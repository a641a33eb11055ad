// The Chrome trace of the training loop (see trace.h).
#include "trace.h"

#include <zcode/core/checkpoint.h>
#include <zcode/sdk/json.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace zcode::core {

Trace::Trace(const ProfilingConfig& pc, int profile_steps, Shapes shapes)
    : pc_(pc), every_step_(profile_steps > 0), enabled_(every_step_ || pc.enabled), shapes_(shapes) {
  // Reserved up front so that recording a span does not allocate in the
  // steps being measured (about 8 spans a step).
  if (enabled_)
    spans_.reserve(static_cast<size_t>(every_step_
                                           ? profile_steps
                                           : std::max<int64_t>(1, pc.active * std::max<int64_t>(1, pc.repeat))) *
                       8 +
                   16);
}

bool Trace::scheduled(uint64_t update) const {
  if (every_step_) return true;
  if (!pc_.enabled) return false;
  const uint64_t cycle = static_cast<uint64_t>(pc_.wait + pc_.warmup + pc_.active);
  if (cycle == 0 || pc_.active <= 0) return false;
  const uint64_t i = update - 1;
  if (pc_.repeat > 0 && i / cycle >= static_cast<uint64_t>(pc_.repeat)) return false;
  return i % cycle >= static_cast<uint64_t>(pc_.wait + pc_.warmup);
}

void Trace::begin_step(uint64_t update) { now_ = enabled_ && scheduled(update); }

void Trace::span(const char* name, Clock::time_point t0) {
  if (now_)
    spans_.push_back({name, std::chrono::duration<double, std::micro>(t0 - origin_).count(),
                      std::chrono::duration<double, std::micro>(Clock::now() - t0).count()});
}

void Trace::sample_memory() {
  if (!now_ || !pc_.profile_memory) return;
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  rss_.emplace_back(std::chrono::duration<double, std::micro>(Clock::now() - origin_).count(),
                    static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20));
}

void Trace::write(const std::filesystem::path& path) const {
  sdk::json::Writer w;
  w.begin_object().key("traceEvents").begin_array();
  for (const Span& s : spans_) {
    w.begin_object().key("name").string(s.name).key("ph").string("X");
    w.key("ts").fixed(s.ts_us, 3).key("dur").fixed(s.dur_us, 3).key("pid").integer(1).key("tid").integer(1);
    if (pc_.profile_shapes && std::strcmp(s.name, "forward_backward") == 0) {
      w.key("args").begin_object();
      w.key("micro_batches").integer(shapes_.micro_batches).key("batch_size").integer(shapes_.batch_size);
      w.key("seq").integer(shapes_.seq).end_object();
    }
    w.end_object();
  }
  for (const auto& [ts, mib] : rss_) {
    w.begin_object().key("name").string("memory").key("ph").string("C").key("ts").fixed(ts, 3).key("pid").integer(1);
    w.key("args").begin_object().key("rss_mib").fixed(mib, 3).end_object().end_object();
  }
  w.end_array().key("displayTimeUnit").string("ms").end_object();
  ckpt::write_file_atomic(path, w.str() + "\n");
}

}  // namespace zcode::core
