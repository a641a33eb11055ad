// zcode/core/dist/communicator.h: the processes of one training job and the
// collectives the engine runs among them.
//
// One Communicator per process, `world()`, made on first use from the
// launcher's environment (zcode/core/dist/launch.h): a plain process gets the
// one-rank communicator, whose collectives are copies and which never loads
// MPI; a rank started by mpirun or srun gets Open MPI's MPI_COMM_WORLD
// (MPI_Init_thread with MPI_THREAD_FUNNELED: only the thread that made it
// calls it).
//
// Ordering contract: every rank issues the same collectives, with the same
// counts and types, in the same order, unconditionally (a collective that
// only some ranks reach is a hang). Callers decide from values every rank
// holds (an agreed flag, an allreduced count), never from a rank's own state.
//
// Results: every rank receives the same bits. reduce_scatter reduces each
// element once, on the rank that owns it, so an allgather after it hands
// every rank that rank's value (MPI does not promise that MPI_Allreduce gives
// the same bits on every rank; MPI-4.0 §6.9.1, "Advice to implementors").
//
// Errors: a failed MPI call throws CommError naming the call, the rank and
// MPI's error string. abort() ends every rank of the job (MPI_Abort): what a
// rank that failed calls so that the others do not wait for it forever.
#pragma once

#include <zcode/core/dist/launch.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace zcode::dist {

/// A collective failed (message: call, rank, MPI's error string).
struct CommError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Element types of the collectives.
enum class DType { kF32, kF64, kI64 };
/// Reductions (elementwise).
enum class ReduceOp { kSum, kMax, kMin };

/// Bytes of one element of `t`.
size_t dtype_size(DType t);

/// A non-blocking collective in flight; wait() completes it (and throws
/// CommError when it failed, and again on every later wait() or test()).
/// Destroying an unfinished request waits for the transfer, but its output
/// is then unspecified (a reduce-scatter's sum is made by wait() or test()).
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  /// Progresses it without blocking; true once complete (then wait()
  /// returns at once). Throws CommError when it failed.
  virtual bool test() = 0;
};

/// A group of processes of the job (the world, or a group split from it)
/// and its collectives. Not thread-safe: one thread calls it.
class Communicator {
 public:
  virtual ~Communicator() = default;
  /// How the job was launched (a group split from the world reports the
  /// world's launch).
  virtual const LaunchInfo& launch() const = 0;
  /// This process's rank in the group, and the group's size.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "single process", or "Open MPI 4.1.4 (mpirun)": for the log.
  virtual std::string describe() const = 0;

  /// In place: data[0..n) becomes the reduction over ranks.
  virtual void allreduce(void* data, size_t n, DType t, ReduceOp op) = 0;
  /// send[Σ counts] reduced over ranks; this rank receives its range,
  /// recv[counts[rank()]], the ranges following each other in rank order.
  /// counts.size() == size(); each count <= INT32_MAX.
  virtual void reduce_scatter(const void* send, void* recv, std::span<const size_t> counts, DType t, ReduceOp op) = 0;
  /// Every rank's mine[counts[rank()]] concatenated in rank order into
  /// all[Σ counts]. `mine` may alias its own range of `all`.
  virtual void allgatherv(const void* mine, void* all, std::span<const size_t> counts, DType t) = 0;
  /// send_counts[q] consecutive elements of `send` (rank order) go to rank
  /// q; recv_counts[q] elements from rank q land consecutively in `recv`.
  virtual void alltoallv(const void* send, std::span<const size_t> send_counts, void* recv,
                         std::span<const size_t> recv_counts, DType t) = 0;
  /// Rank q's send range q' (send[offset_q' .. + counts[q']], offsets the
  /// prefix sums of counts) goes to rank q'; recv[size() * counts[rank()]]
  /// receives rank q's piece of this rank's range at q * counts[rank()].
  virtual void alltoall_ranges(const void* send, void* recv, std::span<const size_t> counts, DType t) = 0;
  /// Root's data[0..n) to every rank.
  virtual void broadcast(void* data, size_t n, DType t, int root) = 0;
  /// Every rank's bytes, in rank order.
  virtual std::vector<std::string> allgather_bytes(const std::string& mine) = 0;
  /// Every rank's bytes to `root`, in rank order (empty elsewhere): what only
  /// one rank needs, without a copy on every rank.
  virtual std::vector<std::string> gather_bytes(const std::string& mine, int root) = 0;
  /// Root's bytes to every rank.
  virtual void broadcast_bytes(std::string& bytes, int root) = 0;
  virtual void barrier() = 0;
  /// Non-blocking forms (same arguments; the buffers must stay valid and
  /// untouched until wait()).
  virtual std::unique_ptr<Request> iallreduce(void* data, size_t n, DType t, ReduceOp op) = 0;
  virtual std::unique_ptr<Request> ireduce_scatter(const void* send, void* recv, std::span<const size_t> counts,
                                                   DType t, ReduceOp op) = 0;
  virtual std::unique_ptr<Request> iallgatherv(const void* mine, void* all, std::span<const size_t> counts,
                                               DType t) = 0;
  virtual std::unique_ptr<Request> ialltoallv(const void* send, std::span<const size_t> send_counts, void* recv,
                                              std::span<const size_t> recv_counts, DType t) = 0;
  virtual std::unique_ptr<Request> ibroadcast(void* data, size_t n, DType t, int root) = 0;
  /// A new group of the ranks that pass the same `color`, ranked by `key`
  /// (MPI_Comm_split). A collective over this group: every rank calls it.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  /// Ends every process of the job with `code` (never returns).
  [[noreturn]] virtual void abort(int code) = 0;
  /// distributed.timeout_s: a blocking collective that waits longer than
  /// `timeout_s` (> 0; 0 turns it off) means a rank is lost or hung; this
  /// rank then calls `report(line)` from a watchdog thread and exits with
  /// code 1, which ends the job (core/src/dist/watchdog.h). `step` tells it
  /// where the run is, for that line. A one-process communicator never waits.
  virtual void set_timeout(double /*timeout_s*/, std::function<void(const std::string&)> /*report*/) {}
  virtual void note_step(uint64_t /*step*/) {}
  /// The folder (the run folder's logs/, shared by the ranks) where the
  /// watchdog keeps each rank's progress, so that the line it writes on
  /// timeout names the ranks that never reached the collective.
  virtual void set_progress_dir(const std::string& /*dir*/) {}
  /// While paused, waits do not count: the ranks that wait for rank 0's
  /// evaluation or checkpoint wait as long as it takes.
  virtual void pause_timeout(bool /*paused*/) {}

  // Typed conveniences.
  int64_t sum(int64_t v) {
    allreduce(&v, 1, DType::kI64, ReduceOp::kSum);
    return v;
  }
  int64_t max(int64_t v) {
    allreduce(&v, 1, DType::kI64, ReduceOp::kMax);
    return v;
  }
  double max(double v) {
    allreduce(&v, 1, DType::kF64, ReduceOp::kMax);
    return v;
  }
};

/// The one-rank communicator of a plain process: collectives are copies.
std::unique_ptr<Communicator> make_single_process();

/// This process's communicator (made on first call from detect_launch();
/// MPI only when launched). Throws std::invalid_argument for a malformed
/// launcher environment and CommError when MPI cannot start.
Communicator& world();

/// Finalises MPI when world() started it (idempotent; an atexit handler
/// calls it, and a program may call it earlier, as the collectives test does).
void shutdown();

}  // namespace zcode::dist
