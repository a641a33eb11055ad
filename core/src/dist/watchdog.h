// core/src/dist/watchdog.h: distributed.timeout_s for the MPI communicator.
//
// A rank that dies ends the job through mpirun (it notices the exit and
// kills the others). A rank that hangs (stuck in I/O, a deadlock, a stopped
// process) does not: the others would wait in their next collective
// forever. The watchdog is one thread per rank that looks, four times a second,
// at how long the main thread has been inside one blocking collective; past
// the timeout it writes one line naming the call, the step, the timeout and
// the ranks that never reached that collective, and ends this process with
// exit code 1, which makes mpirun end every rank of the job. The main thread
// only writes atomics around each collective (no lock, no allocation).
//
// Naming the lost rank: every rank issues the same collectives in the same
// order, so the number of collectives a rank has issued says how far it got.
// Each rank's watchdog thread writes that number (with the call and the step)
// to `<run>/logs/rank_N.progress` whenever it changes, at most four times a
// second (an atomic rename; the run folder is shared by the ranks, as the
// checkpoints already require). On timeout a rank reads every rank's file:
// the ranks whose count is lower than its own are the ones that never
// arrived. A file lags its rank by up to a quarter second of progress, never
// leads it; a rank waiting in a collective has written its current count.
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
  /// Where this rank writes its progress and reads the others' (the run
  /// folder's logs/, once it exists; until then the message names no rank).
  void set_progress(const std::string& dir, int rank, int size);
  /// One more collective issued (blocking or not) by the main thread.
  void count(const char* call) {
    call_.store(call, std::memory_order_relaxed);
    issued_.fetch_add(1, std::memory_order_release);
  }
  /// While paused, no wait counts (a wait already running restarts its clock).
  void pause(bool paused) {
    paused_.store(paused, std::memory_order_release);
    if (!paused && since_ns_.load(std::memory_order_acquire) != 0) since_ns_.store(now_ns(), std::memory_order_release);
  }

  /// What the main thread marks around a blocking collective.
  class Busy {
   public:
    /// `issue`: this call issues the collective (a blocking one); false for
    /// the wait of a non-blocking one, counted when it was issued.
    Busy(Watchdog* w, const char* call, bool issue = true) : w_(w) {
      if (!w_) return;
      if (issue) w_->count(call);
      else w_->call_.store(call, std::memory_order_relaxed);
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
  void write_progress();           // on the watchdog thread, under mu_
  std::string lost_ranks() const;  // on the watchdog thread, under mu_

  std::atomic<int64_t> since_ns_{0};  // 0: not in a collective
  std::atomic<const char*> call_{""};
  std::atomic<uint64_t> step_{0};
  std::atomic<uint64_t> issued_{0};  // collectives issued so far
  std::atomic<bool> paused_{false};
  double timeout_s_ = 0;
  std::function<void(const std::string&)> report_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::string dir_;  // logs/ of the run folder, or empty
  int rank_ = 0, size_ = 1;
  uint64_t written_ = UINT64_MAX;  // the count in this rank's file
  std::thread thread_;
};

}  // namespace zcode::dist
