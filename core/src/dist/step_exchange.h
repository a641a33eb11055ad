// core/src/dist/step_exchange.h: what the ranks of a data-parallel step tell
// each other after forward/backward, in one all-gather: each rank's data wait,
// compute time and wait for the other ranks at the gradient reduction, and
// every metric its model put, micro-batch by micro-batch. Replaying the metrics in global micro-batch order
// (micro-batch m of rank r is global m·N + r) into the step's StepSink gives the values one process with
// gradient_accumulation × N computes: the loss is the same left-to-right double sum of the same per-micro-batch terms.
#pragma once

#include <zcode/abi.h>
#include <zcode/core/dist/communicator.h>

#include "step_metrics.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zcode::dist {

class StepExchange {
 public:
  /// A metrics sink recording this rank's puts (pass to the accumulator).
  const zc_metrics_sink* sink() const { return &sink_; }
  /// Starts a step (keeps the buffer's capacity).
  void begin() {
    record_.clear();
    open_micro();
  }
  /// Closes the current micro-batch's record and opens the next.
  void end_micro() {
    close_micro();
    open_micro();
  }

  struct Result {
    double loss = 0;              ///< Σ "loss" in global order
    double max_data_wait_ms = 0;  ///< the slowest rank's wait for data, ms
    double max_compute_ms = 0;    ///< the slowest rank's forward/backward, ms
    int slowest_rank = 0;         ///< whose forward/backward that was (lowest rank on ties)
    double max_sync_wait_ms = 0;  ///< the longest wait of a rank for the others at the reduction, ms
  };
  /// The all-gather (every rank calls it; `micro_batches` per rank, the same
  /// on every rank). Replays into `out` (reset first by the caller).
  /// Throws CommError on a malformed record (a rank that put a different
  /// number of micro-batches).
  Result exchange(Communicator& comm, size_t micro_batches, double data_wait_ms, double compute_ms, double sync_wait_ms,
                  core::StepSink& out);

 private:
  static void put_thunk(void* ctx, const char* name, double v);
  void open_micro();
  void close_micro();

  std::string record_;      // per micro-batch: u32 count, then count × (u16 len, name, f64)
  size_t micro_start_ = 0;  // offset of the open micro-batch's count
  uint32_t micro_count_ = 0;
  zc_metrics_sink sink_{this, &StepExchange::put_thunk};
};

}  // namespace zcode::dist
