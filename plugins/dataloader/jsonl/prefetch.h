// prefetch.h: worker threads that prepare batches ahead of the training loop.
//
// num_workers = 0: next() plans and fills on the caller's thread.
// num_workers = N: N threads keep up to N * prefetch_factor batches ready in
// a bounded pool of preallocated slots (no allocation per step). Batches are
// numbered when planned and handed out strictly in that order, so the
// sequence is the same for any N. A worker's exception travels in its slot
// and is rethrown by next() with context; the host's stop flag ends waiting
// (ZC_ERR_CANCELLED); the destructor joins every worker.
#pragma once

#include "batch_source.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace zcode::data {

class Prefetcher {
 public:
  /// `split` names the loader in errors ("train", "val").
  Prefetcher(BatchSource& source, PackSpec spec, int num_workers, int prefetch_factor, sdk::Host host,
             std::string split);
  ~Prefetcher();

  /// The next batch (valid until the next call to next/seek), or nullptr at
  /// the end of a finite split. Adds the time spent blocked to wait_ms().
  /// Throws the worker's error prefixed with "data (<split>) worker: ".
  const BatchSlot* next();
  /// Stops the workers, drops prefetched batches and moves the source to
  /// `c`. The next next() continues from there.
  void seek(const Cursor& c);
  /// The cursor after the last batch next() returned.
  const Cursor& cursor() const { return consumed_; }
  /// Data parallelism (zc_dataloader_table.set_data_shard): of every `size`
  /// planned batches, hand out the one at `rank` and plan the others into a
  /// scratch slot without filling them; a batch's cursor is the one after
  /// its group. Stops the workers (a seek to the consumed cursor) so that
  /// nothing planned before applies. Needs 0 <= rank < size (the loader's
  /// set_data_shard checks it).
  void set_stride(uint64_t rank, uint64_t size);
  /// Milliseconds next() spent blocked since the last take_wait_ms().
  double take_wait_ms();

 private:
  void start();
  void stop();
  void worker();
  bool plan_and_fill(BatchSlot& s);  // false at the end of a finite split
  // source_.plan of the next batch this rank hands out (the stride's skips
  // before and after it planned into skip_); under plan_mu_ when threaded.
  bool plan_mine(BatchSlot& s);

  BatchSource& source_;
  PackSpec spec_;
  int workers_n_;
  sdk::Host host_;
  std::string split_;
  std::vector<std::unique_ptr<BatchSlot>> slots_;
  Cursor consumed_;
  double wait_ms_ = 0;
  BatchSlot* held_ = nullptr;
  bool ended_ = false;
  std::exception_ptr failed_;  // sticky error, cleared by seek()
  uint64_t stride_rank_ = 0, stride_size_ = 1;
  std::unique_ptr<BatchSlot> skip_;  // planned, never filled: the other ranks' batches

  // Threaded mode, guarded by mu_.
  std::mutex mu_;       // queue state below
  std::mutex plan_mu_;  // source_.plan and next_plan_: one planner at a time
  std::condition_variable work_cv_, ready_cv_;
  std::vector<std::thread> threads_;
  std::vector<BatchSlot*> free_;
  std::vector<BatchSlot*> ready_;  // ring indexed by seq % slots
  uint64_t next_plan_ = 0, next_take_ = 0;
  std::atomic<bool> planning_done_{false};  // end reached or an error: plan nothing more
  bool stopping_ = false;
  bool running_ = false;
};

}  // namespace zcode::data
