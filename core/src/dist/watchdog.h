// core/src/dist/watchdog.h: distributed.timeout_s for the MPI communicator.
//
// A rank that dies ends the job through mpirun (it notices the exit and
// kills the others). A rank that hangs (stuck in I/O, a deadlock, a stopped
// process) does not: the others would wait in their next collective
// forever. The watchdog is one thread per rank that looks, once a second,
// at how long the main thread has been inside one blocking collective; past
// the timeout it writes one line naming the call, the step and the timeout,
// and ends this process with exit code 1, which makes mpirun end every rank
// of the job. It only reads two atomics the main thread writes around each
// blocking call (no lock, no allocation on the main thread).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace zcode::dist {

class Watchdog {
 public:
  Watchdog() = default;
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() { stop(); }

  /// Starts (or re-arms) the thread: a blocking collective longer than
  /// `timeout_s` (> 0; 0 stops it) ends the process after `report(line)`
  /// (called on the watchdog's thread) with the line to log.
  void start(double timeout_s, std::function<void(const std::string&)> report);
  void stop();
  /// The optimizer step the main thread is in (for the message).
  void note_step(uint64_t step) { step_.store(step, std::memory_order_relaxed); }
  /// While paused, no wait counts (a wait already running restarts its clock).
  void pause(bool paused) {
    paused_.store(paused, std::memory_order_release);
    if (!paused && since_ns_.load(std::memory_order_acquire) != 0) since_ns_.store(now_ns(), std::memory_order_release);
  }

  /// What the main thread marks around a blocking collective.
  class Busy {
   public:
    Busy(Watchdog* w, const char* call) : w_(w) {
      if (!w_) return;
      w_->call_.store(call, std::memory_order_relaxed);
      w_->since_ns_.store(now_ns(), std::memory_order_release);
    }
    ~Busy() {
      if (w_) w_->since_ns_.store(0, std::memory_order_release);
    }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    Watchdog* w_;
  };

 private:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void run();

  std::atomic<int64_t> since_ns_{0};  // 0: not in a collective
  std::atomic<const char*> call_{""};
  std::atomic<uint64_t> step_{0};
  std::atomic<bool> paused_{false};
  double timeout_s_ = 0;
  std::function<void(const std::string&)> report_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace zcode::dist
