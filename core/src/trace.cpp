// The run's Chrome trace (see trace.h).
#include "trace.h"

#include <zcode/core/checkpoint.h>
#include <zcode/sdk/json.h>

#include <rapidjson/document.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace zcode::core {

Trace::Trace(const ProfilingConfig& pc, int profile_steps, Shapes shapes)
    : pc_(pc), every_step_(profile_steps > 0), enabled_(every_step_ || pc.enabled), shapes_(shapes) {
  // Reserved up front so that recording does not reallocate in the steps
  // being measured (a model adds about 12 spans per layer and direction).
  if (enabled_) {
    const int64_t steps =
        every_step_ ? profile_steps : std::max<int64_t>(1, pc.active * std::max<int64_t>(1, pc.repeat));
    events_.reserve(static_cast<size_t>(std::min<int64_t>(steps, 64)) * 256 + 64);
  }
  threads_.push_back({std::this_thread::get_id(), 1, {}});
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

double Trace::now_us() const { return std::chrono::duration<double, std::micro>(Clock::now() - origin_).count(); }

void Trace::begin_step(uint64_t update) {
  now_ = enabled_ && scheduled(update);
  uint32_t lv = ZC_TRACE_OFF;
  if (now_) {
    lv = ZC_TRACE_SPANS;
    if (pc_.profile_shapes) lv |= ZC_TRACE_SHAPES;
    if (pc_.profile_memory) lv |= ZC_TRACE_MEMORY;
  }
  level_ = lv;
}

Trace::Thread& Trace::thread_locked() {
  const auto id = std::this_thread::get_id();
  for (Thread& t : threads_)
    if (t.id == id) return t;
  threads_.push_back({id, static_cast<int>(threads_.size()) + 1, {}});
  return threads_.back();
}

void Trace::close_open_locked(double ts) {
  for (Thread& t : threads_) {
    for (size_t i : t.open) events_[i].dur_us = ts - events_[i].ts_us;
    t.open.clear();
  }
}

void Trace::record_step_span(std::string name, Clock::time_point t0, std::string args) {
  const double ts = std::chrono::duration<double, std::micro>(t0 - origin_).count(), end = now_us();
  std::lock_guard<std::mutex> lock(mu_);
  close_open_locked(end);
  events_.push_back({'X', 1, ts, end - ts, "step", std::move(name), std::move(args)});
}

void Trace::span(const char* name, Clock::time_point t0) {
  if (!now_) return;
  std::string args;
  if (pc_.profile_shapes && std::strcmp(name, "forward_backward") == 0) {
    sdk::json::Writer w;
    w.begin_object().key("micro_batches").integer(shapes_.micro_batches);
    w.key("batch_size").integer(shapes_.batch_size).key("seq").integer(shapes_.seq).end_object();
    args = w.str();
  }
  record_step_span(name, t0, std::move(args));
}

void Trace::span_named(const std::string& name, Clock::time_point t0) noexcept {
  if (!now_) return;
  try {
    record_step_span(name, t0, "");
  } catch (...) {  // out of memory: the span is lost
  }
}

void Trace::begin(const char* category, const char* name, const char* args_json) noexcept {
  if (!now_) return;
  try {
    const double ts = now_us();
    std::lock_guard<std::mutex> lock(mu_);
    Thread& t = thread_locked();
    t.open.push_back(events_.size());
    events_.push_back({'X', t.tid, ts, 0.0, category, name, args_json ? args_json : ""});
  } catch (...) {  // out of memory: the span is lost, the step goes on
  }
}

void Trace::end() noexcept {
  if (!now_) return;
  const double ts = now_us();
  std::lock_guard<std::mutex> lock(mu_);
  try {
    Thread& t = thread_locked();
    if (t.open.empty()) return;  // closed by the engine already, or never begun
    Event& e = events_[t.open.back()];
    e.dur_us = ts - e.ts_us;
    t.open.pop_back();
  } catch (...) {
  }
}

void Trace::counter(const char* name, const char* args_json) noexcept {
  if (!now_) return;
  try {
    const double ts = now_us();
    std::lock_guard<std::mutex> lock(mu_);
    const int tid = thread_locked().tid;
    events_.push_back({'C', tid, ts, 0.0, "", name, args_json ? args_json : "{}"});
  } catch (...) {
  }
}

void Trace::sample_memory() {
  if (!now_ || !pc_.profile_memory) return;
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  sdk::json::Writer w;
  w.begin_object();
  const auto put = [&](const char* key, const std::optional<uint64_t>& bytes) {
    if (bytes) w.key(key).fixed(static_cast<double>(*bytes) / kMiB, 3);
  };
  put("parameters_mib", estimate_.parameters);
  put("gradients_mib", estimate_.gradients);
  put("optimizer_state_mib", estimate_.optimizer_state);
  put("workspace_mib", estimate_.activations);
  w.key("rss_mib").fixed(static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / kMiB, 3);
  w.end_object();
  const std::string args = w.str();
  counter("memory", args.c_str());
}

void Trace::write(const std::filesystem::path& path) const {
  sdk::json::Writer w;
  w.begin_object().key("traceEvents").begin_array();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Event& e : events_) {
      w.begin_object().key("name").string(e.name);
      if (e.ph == 'X') w.key("cat").string(e.cat);
      w.key("ph").string(e.ph == 'X' ? "X" : "C").key("ts").fixed(e.ts_us, 3);
      if (e.ph == 'X') w.key("dur").fixed(e.dur_us, 3);
      w.key("pid").integer(1).key("tid").integer(e.tid);
      if (!e.args.empty()) {
        // A plugin's args are its own text: checked here, off the step, so
        // one bad object cannot make the whole trace unreadable.
        rapidjson::Document d;
        if (sdk::json::parse(d, e.args).ok() && d.IsObject()) w.key("args").raw(e.args);
        else w.key("args").begin_object().key("invalid_args").string(e.args).end_object();
      }
      w.end_object();
    }
    // Perfetto names the tracks from these metadata events.
    for (const Thread& t : threads_) {
      w.begin_object().key("name").string("thread_name").key("ph").string("M").key("pid").integer(1);
      w.key("tid").integer(t.tid).key("args").begin_object();
      w.key("name").string(t.tid == 1 ? "engine" : "worker " + std::to_string(t.tid)).end_object().end_object();
    }
  }
  w.end_array().key("displayTimeUnit").string("ms").end_object();
  ckpt::write_file_atomic(path, w.str() + "\n");
}

}  // namespace zcode::core
