// watchdog.cpp: see watchdog.h.
#include "watchdog.h"

#include <unistd.h>
#include <cstdio>

namespace zcode::dist {

void Watchdog::start(double timeout_s, std::function<void(const std::string&)> report) {
  stop();
  if (!(timeout_s > 0)) return;
  timeout_s_ = timeout_s;
  report_ = std::move(report);
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void Watchdog::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) {
    const int64_t since = since_ns_.load(std::memory_order_acquire);
    if (since == 0 || paused_.load(std::memory_order_acquire)) continue;
    const double waited = static_cast<double>(now_ns() - since) / 1e9;
    if (waited <= timeout_s_) continue;
    char t[64];
    std::snprintf(t, sizeof t, " (distributed.timeout_s = %g)", timeout_s_);
    const std::string line = std::string(call_.load(std::memory_order_relaxed)) + " has waited " +
                             std::to_string(static_cast<int64_t>(waited)) + " s for the other ranks at step " +
                             std::to_string(step_.load(std::memory_order_relaxed) + 1) + t +
                             ": a rank is lost or hung (the ranks' logs, logs/rank_N.log, show which one stopped "
                             "first); ending this rank, and with it the job";
    if (report_) report_(line);
    std::fflush(nullptr);
    _exit(1);  // mpirun sees a rank end without MPI_Finalize and ends the job
  }
}

}  // namespace zcode::dist
