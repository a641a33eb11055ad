// watchdog.cpp: see watchdog.h.
#include "watchdog.h"

#include <unistd.h>
#include <cinttypes>
#include <cstdio>

namespace zcode::dist {

namespace {
std::string progress_path(const std::string& dir, int rank) {
  return dir + "/rank_" + std::to_string(rank) + ".progress";
}
}  // namespace

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
  if (thread_.joinable()) {
    thread_.join();
    std::lock_guard lock(mu_);
    write_progress();  // the final count (every rank's is the same after a run that ended well)
  }
}

void Watchdog::set_progress(const std::string& dir, int rank, int size) {
  std::lock_guard lock(mu_);
  dir_ = dir;
  rank_ = rank;
  size_ = size;
  written_ = UINT64_MAX;
}

// "<collectives issued> <step in progress> <last call>\n", replaced atomically.
void Watchdog::write_progress() {
  const uint64_t n = issued_.load(std::memory_order_acquire);
  if (dir_.empty() || n == written_) return;
  const std::string path = progress_path(dir_, rank_), tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return;  // best effort: the message then says less
  const int ok = std::fprintf(f, "%" PRIu64 " %" PRIu64 " %s\n", n, step_.load(std::memory_order_relaxed) + 1,
                              call_.load(std::memory_order_relaxed));
  if (std::fclose(f) == 0 && ok > 0 && std::rename(tmp.c_str(), path.c_str()) == 0) written_ = n;
}

std::string Watchdog::lost_ranks() const {
  if (dir_.empty()) return "";
  const uint64_t mine = issued_.load(std::memory_order_acquire);
  std::string out;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    std::FILE* f = std::fopen(progress_path(dir_, q).c_str(), "r");
    uint64_t n = 0, step = 0;
    char call[64] = "";
    const int got = f ? std::fscanf(f, "%" SCNu64 " %" SCNu64 " %63s", &n, &step, call) : 0;
    if (f) std::fclose(f);
    std::string what;
    if (got != 3) what = "rank " + std::to_string(q) + " (no progress reported)";
    else if (n < mine)
      what = "rank " + std::to_string(q) + " (last reported: collective #" + std::to_string(n) + ", " + call +
             ", step " + std::to_string(step) + ")";
    if (what.empty()) continue;
    out += (out.empty() ? "" : ", ") + what;
  }
  return out.empty() ? "" : out + " never reached this collective (#" + std::to_string(mine) + ")";
}

void Watchdog::run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping_; })) {
    write_progress();
    const int64_t since = since_ns_.load(std::memory_order_acquire);
    if (since == 0 || paused_.load(std::memory_order_acquire)) continue;
    const double waited = static_cast<double>(now_ns() - since) / 1e9;
    if (waited <= timeout_s_) continue;
    char t[64];
    std::snprintf(t, sizeof t, " (distributed.timeout_s = %g)", timeout_s_);
    const std::string lost = lost_ranks();
    const std::string line =
        std::string(call_.load(std::memory_order_relaxed)) + " has waited " +
        std::to_string(static_cast<int64_t>(waited)) + " s for the other ranks at step " +
        std::to_string(step_.load(std::memory_order_relaxed) + 1) + t + ": a rank is lost or hung: " +
        (lost.empty() ? std::string("which one could not be told (no logs/rank_N.progress shows it behind; the "
                                    "ranks' logs, logs/rank_N.log, show which one stopped first)")
                      : lost) +
        "; ending this rank, and with it the job";
    if (report_) report_(line);
    std::fflush(nullptr);
    _exit(1);  // mpirun sees a rank end without MPI_Finalize and ends the job
  }
}

}  // namespace zcode::dist
