// mpi_communicator.cpp: the Communicator over Open MPI: MPI_COMM_WORLD, and
// the groups split from it (MPI_Comm_split). MPI-3.1 calls only (the
// non-blocking collectives MPI_I*); Debian 12's Open MPI is 4.1.
#include "mpi_communicator.h"
#include "watchdog.h"

// The C API only: Open MPI's mpi.h otherwise pulls in its deprecated C++
// bindings, which live in libmpi_cxx (not linked). The build defines these
// too (MPI_CXX_SKIP_MPICXX); they stay here so the file says it of itself.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace zcode::dist {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI64: return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

std::string error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(len));
}

int rank_or_minus_one() {
  int init = 0, r = -1;
  MPI_Initialized(&init);
  if (init) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  throw CommError(std::string(call) + " failed on rank " + std::to_string(rank_or_minus_one()) + ": " +
                  error_string(rc));
}

int as_int(size_t n, const char* what) {
  if (n > static_cast<size_t>(INT_MAX))
    throw CommError(std::string(what) + ": " + std::to_string(n) +
                    " elements in one message, more than MPI's int count holds (use smaller buckets)");
  return static_cast<int>(n);
}

// The ranks' byte strings of `sizes` laid end to end in one buffer, as the
// *v collectives take them: per rank its count and displacement.
struct ByteLayout {
  std::vector<int> counts, displs;
  size_t total = 0;
};
ByteLayout byte_layout(const std::vector<int64_t>& sizes, const char* call) {
  ByteLayout l;
  l.counts.resize(sizes.size());
  l.displs.resize(sizes.size());
  for (size_t q = 0; q < sizes.size(); ++q) {
    l.counts[q] = as_int(static_cast<size_t>(sizes[q]), call);
    l.displs[q] = as_int(l.total, call);
    l.total += static_cast<size_t>(sizes[q]);
  }
  return l;
}
// Each rank's string out of the buffer the *v collective filled.
std::vector<std::string> split_bytes(const std::string& all, const ByteLayout& l) {
  std::vector<std::string> out(l.counts.size());
  for (size_t q = 0; q < out.size(); ++q)
    out[q] = all.substr(static_cast<size_t>(l.displs[q]), static_cast<size_t>(l.counts[q]));
  return out;
}

class MpiRequest final : public Request {
 public:
  MpiRequest(Watchdog* watch, MPI_Request r, const char* call, std::vector<int> a, std::vector<int> b,
             std::vector<int> c = {}, std::vector<int> d = {})
      : watch_(watch), req_(r), call_(call), a_(std::move(a)), b_(std::move(b)), c_(std::move(c)), d_(std::move(d)) {}
  ~MpiRequest() override {
    if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }
  void wait() override {
    if (req_ == MPI_REQUEST_NULL) return;
    Watchdog::Busy busy(watch_, call_, /*issue=*/false);  // counted when issued
    check(MPI_Wait(&req_, MPI_STATUS_IGNORE), call_);
  }
  bool test() override {
    if (req_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    check(MPI_Test(&req_, &done, MPI_STATUS_IGNORE), call_);
    return done != 0;
  }

 private:
  Watchdog* watch_;
  MPI_Request req_;
  const char* call_;
  // MPI reads the count and displacement arrays of a non-blocking call until it completes.
  std::vector<int> a_, b_, c_, d_;
};

// out[i] = (((p_0[i] op p_1[i]) op p_2[i]) ...), p_q = pieces + q·n: every
// rank's piece of one range, folded in rank order (fixed bits on every run).
template <class T>
void fold_ranks_as(const T* pieces, T* out, size_t n, ReduceOp op, int ranks) {
  if (n == 0) return;
  std::memcpy(out, pieces, n * sizeof(T));
  for (int q = 1; q < ranks; ++q) {
    const T* p = pieces + static_cast<size_t>(q) * n;
    switch (op) {
      case ReduceOp::kSum:
        for (size_t i = 0; i < n; ++i) out[i] += p[i];
        break;
      case ReduceOp::kMax:
        for (size_t i = 0; i < n; ++i) out[i] = std::max(out[i], p[i]);
        break;
      case ReduceOp::kMin:
        for (size_t i = 0; i < n; ++i) out[i] = std::min(out[i], p[i]);
        break;
    }
  }
}
void fold_ranks(const void* pieces, void* out, size_t n, DType t, ReduceOp op, int ranks) {
  switch (t) {
    case DType::kF32: fold_ranks_as(static_cast<const float*>(pieces), static_cast<float*>(out), n, op, ranks); break;
    case DType::kF64: fold_ranks_as(static_cast<const double*>(pieces), static_cast<double*>(out), n, op, ranks); break;
    case DType::kI64:
      fold_ranks_as(static_cast<const int64_t*>(pieces), static_cast<int64_t*>(out), n, op, ranks);
      break;
  }
}

// Displacements q·n of the *v calls that receive n elements from every
// rank, checked against MPI's int (size × n may pass it where n does not).
void equal_displs(std::vector<int>& d, size_t ranks, int n, const char* call) {
  if (ranks > 0 && static_cast<size_t>(n) * (ranks - 1) > static_cast<size_t>(INT_MAX))
    throw CommError(std::string(call) + ": " + std::to_string(ranks) + " pieces of " + std::to_string(n) +
                    " elements, more than MPI's int count holds (use smaller buckets)");
  d.resize(ranks);
  for (size_t q = 0; q < ranks; ++q) d[q] = static_cast<int>(q) * n;
}

// Buffers that the non-blocking reduce-scatter's requests borrow and give
// back, so that a steady step's buckets reuse the ones of the step before:
// the smallest that fits, so that the pool holds about one buffer per
// bucket in flight, each of its own size (with distributed.overlap, every
// bucket: size() × this rank's part of the flat gradient in all). One
// thread calls the communicator (MPI_THREAD_FUNNELED): no lock.
class ScratchPool {
 public:
  std::vector<char> take(size_t bytes) {
    if (bytes == 0) return {};
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->size() >= bytes && (best == free_.end() || it->size() < best->size())) best = it;
    if (best == free_.end() && !free_.empty()) best = free_.begin();  // none fits: grow one
    std::vector<char> b;
    if (best != free_.end()) {
      b = std::move(*best);
      free_.erase(best);
    }
    if (b.size() < bytes) b.resize(bytes);
    return b;
  }
  void give(std::vector<char> b) {
    if (!b.empty()) free_.push_back(std::move(b));
  }

 private:
  std::vector<std::vector<char>> free_;
};

// ireduce_scatter: an MPI_Ialltoallv of the ranges into borrowed scratch,
// folded into the output when the exchange completes (in wait() or in the
// test() that sees it done), as the blocking reduce_scatter does.
class MpiFoldRequest final : public Request {
 public:
  MpiFoldRequest(std::shared_ptr<Watchdog> watch, std::shared_ptr<ScratchPool> pool, void* out, size_t n, DType t,
                 ReduceOp op, int ranks)
      : watch_(std::move(watch)), pool_(std::move(pool)), out_(out), n_(n), t_(t), op_(op), ranks_(ranks) {
    pieces_ = pool_->take(static_cast<size_t>(ranks) * n * dtype_size(t));
  }
  ~MpiFoldRequest() override {
    if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);
    pool_->give(std::move(pieces_));
  }
  // The arrays stay in this object until the exchange completes, as MPI requires.
  void start(const void* send, std::vector<int> sc, std::vector<int> sd, int rank, MPI_Comm comm) {
    sc_ = std::move(sc);
    sd_ = std::move(sd);
    rc_.assign(sc_.size(), sc_[static_cast<size_t>(rank)]);
    equal_displs(rd_, sc_.size(), sc_[static_cast<size_t>(rank)], "MPI_Ialltoallv");
    check(MPI_Ialltoallv(send, sc_.data(), sd_.data(), mpi_type(t_), pieces_.data(), rc_.data(), rd_.data(),
                         mpi_type(t_), comm, &req_),
          "MPI_Ialltoallv");
  }
  void wait() override {
    if (folded_) return;
    rethrow_failure();
    {
      Watchdog::Busy busy(watch_.get(), kCall, /*issue=*/false);  // counted when issued
      checked(MPI_Wait(&req_, MPI_STATUS_IGNORE));
    }
    finish();
  }
  bool test() override {
    if (folded_) return true;
    rethrow_failure();
    int done = 0;
    checked(MPI_Test(&req_, &done, MPI_STATUS_IGNORE));
    if (done) finish();
    return folded_;
  }

 private:
  static constexpr const char* kCall = "MPI_Ialltoallv (ireduce_scatter)";
  // A failed exchange stays failed: its pieces must never be folded.
  void checked(int rc) {
    if (rc == MPI_SUCCESS) return;
    failed_ = true;
    check(rc, kCall);
  }
  void rethrow_failure() const {
    if (failed_) throw CommError(std::string(kCall) + " failed earlier on this request");
  }
  void finish() {
    fold_ranks(pieces_.data(), out_, n_, t_, op_, ranks_);
    folded_ = true;
  }
  std::shared_ptr<Watchdog> watch_;
  std::shared_ptr<ScratchPool> pool_;
  std::vector<char> pieces_;
  void* out_;
  size_t n_;
  DType t_;
  ReduceOp op_;
  int ranks_;
  bool folded_ = false, failed_ = false;
  MPI_Request req_ = MPI_REQUEST_NULL;
  std::vector<int> sc_, sd_, rc_, rd_;
};

class MpiCommunicator final : public Communicator {
 public:
  // The world: initialises MPI when nobody did.
  explicit MpiCommunicator(const LaunchInfo& l) : launch_(l), comm_(MPI_COMM_WORLD) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      int provided = 0;
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      if (rc != MPI_SUCCESS) throw CommError("MPI_Init_thread failed: " + error_string(rc));
      owns_mpi_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    read_rank_size();
    if (rank_ != l.rank || size_ != l.size)
      throw CommError("MPI_COMM_WORLD is rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " but " +
                      l.launcher + "'s environment says rank " + std::to_string(l.rank) + " of " +
                      std::to_string(l.size));
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    library_.assign(version, static_cast<size_t>(len));
    if (const size_t cut = library_.find(','); cut != std::string::npos) library_.resize(cut);
  }
  // A group split from `parent` (owns `comm`, freed with it).
  MpiCommunicator(const MpiCommunicator& parent, MPI_Comm comm)
      : launch_(parent.launch_), comm_(comm), owns_comm_(true), library_(parent.library_), watch_(parent.watch_) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    read_rank_size();
  }
  ~MpiCommunicator() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    if (owns_comm_) MPI_Comm_free(&comm_);
    if (owns_mpi_) {
      watch_->stop();
      MPI_Finalize();
    }
  }

  const LaunchInfo& launch() const override { return launch_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return library_ + " (" + launch_.launcher + ")"; }

  void allreduce(void* data, size_t n, DType t, ReduceOp op) override {
    Watchdog::Busy busy(watch_.get(), "MPI_Allreduce");
    check(MPI_Allreduce(MPI_IN_PLACE, data, as_int(n, "MPI_Allreduce"), mpi_type(t), mpi_op(op), comm_),
          "MPI_Allreduce");
  }
  // Every rank's copy of this rank's range by one MPI_Alltoallv, folded in
  // rank order here: ((r_0 op r_1) op r_2) ... Open MPI 4.1's
  // MPI_Reduce_scatter is slower on shared memory, and far slower when the
  // counts are uneven, as ZeRO-1's are (a bucket inside one rank's shard):
  // 2 ranks, 6.55 M floats, on the 2-core AMD EPYC VM (2026-12-07):
  // 11-29 ms even, 42-52 ms all to one rank, 142-149 ms 3/4 to one;
  // MPI_Alltoallv and the sum: 5.4-6.8, 8.7-9.0 and 6.7-7.2 ms. The same
  // bits on every run (a fixed order), and each element is reduced once, on
  // its owner. Scratch: size() × counts[rank()] elements, grown, never shrunk.
  void reduce_scatter(const void* send, void* recv, std::span<const size_t> counts, DType t, ReduceOp op) override {
    Watchdog::Busy busy(watch_.get(), "MPI_Alltoallv");
    const size_t mine = counts.size() > static_cast<size_t>(rank_) ? counts[static_cast<size_t>(rank_)] : 0;
    const size_t bytes = dtype_size(t);
    if (fold_.size() < static_cast<size_t>(size_) * mine * bytes)
      fold_.resize(static_cast<size_t>(size_) * mine * bytes);
    alltoall_ranges_unwatched(send, fold_.data(), counts, t);
    fold_ranks(fold_.data(), recv, mine, t, op, size_);
  }
  void allgatherv(const void* mine, void* all, std::span<const size_t> counts, DType t) override {
    Watchdog::Busy busy(watch_.get(), "MPI_Allgatherv");
    const std::vector<int>& c = ints_into(sc_, counts, "MPI_Allgatherv");
    const std::vector<int>& d = displs_into(sd_, c);
    const void* in = in_place(mine, all, d, t) ? MPI_IN_PLACE : mine;
    check(MPI_Allgatherv(in, c[static_cast<size_t>(rank_)], mpi_type(t), all, c.data(), d.data(), mpi_type(t), comm_),
          "MPI_Allgatherv");
  }
  void alltoallv(const void* send, std::span<const size_t> send_counts, void* recv, std::span<const size_t> recv_counts,
                 DType t) override {
    Watchdog::Busy busy(watch_.get(), "MPI_Alltoallv");
    const std::vector<int>& sc = ints_into(sc_, send_counts, "MPI_Alltoallv");
    const std::vector<int>& sd = displs_into(sd_, sc);
    const std::vector<int>& rc = ints_into(rc_, recv_counts, "MPI_Alltoallv");
    const std::vector<int>& rd = displs_into(rd_, rc);
    check(MPI_Alltoallv(send, sc.data(), sd.data(), mpi_type(t), recv, rc.data(), rd.data(), mpi_type(t), comm_),
          "MPI_Alltoallv");
  }
  void alltoall_ranges(const void* send, void* recv, std::span<const size_t> counts, DType t) override {
    Watchdog::Busy busy(watch_.get(), "MPI_Alltoallv");
    alltoall_ranges_unwatched(send, recv, counts, t);
  }

  void broadcast(void* data, size_t n, DType t, int root) override {
    Watchdog::Busy busy(watch_.get(), "MPI_Bcast");
    check(MPI_Bcast(data, as_int(n, "MPI_Bcast"), mpi_type(t), root, comm_), "MPI_Bcast");
  }
  std::vector<std::string> allgather_bytes(const std::string& mine) override {
    Watchdog::Busy busy(watch_.get(), "MPI_Allgatherv");
    int64_t n = static_cast<int64_t>(mine.size());
    std::vector<int64_t> sizes(static_cast<size_t>(size_));
    check(MPI_Allgather(&n, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, comm_), "MPI_Allgather");
    const ByteLayout l = byte_layout(sizes, "MPI_Allgatherv");
    std::string all(l.total, '\0');
    check(MPI_Allgatherv(mine.data(), l.counts[static_cast<size_t>(rank_)], MPI_CHAR, all.data(), l.counts.data(),
                         l.displs.data(), MPI_CHAR, comm_),
          "MPI_Allgatherv");
    return split_bytes(all, l);
  }
  std::vector<std::string> gather_bytes(const std::string& mine, int root) override {
    Watchdog::Busy busy(watch_.get(), "MPI_Gatherv");
    int64_t n = static_cast<int64_t>(mine.size());
    std::vector<int64_t> sizes(static_cast<size_t>(size_));
    check(MPI_Gather(&n, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, root, comm_), "MPI_Gather");
    // The sizes are only root's (the others' stay 0: an empty layout).
    const ByteLayout l = byte_layout(sizes, "MPI_Gatherv");
    std::string all(l.total, '\0');
    check(MPI_Gatherv(mine.data(), as_int(mine.size(), "MPI_Gatherv"), MPI_CHAR, all.data(), l.counts.data(),
                      l.displs.data(), MPI_CHAR, root, comm_),
          "MPI_Gatherv");
    if (rank_ != root) return {};
    return split_bytes(all, l);
  }
  void broadcast_bytes(std::string& bytes, int root) override {
    Watchdog::Busy busy(watch_.get(), "MPI_Bcast");
    int64_t n = static_cast<int64_t>(bytes.size());
    check(MPI_Bcast(&n, 1, MPI_INT64_T, root, comm_), "MPI_Bcast");
    bytes.resize(static_cast<size_t>(n));
    check(MPI_Bcast(bytes.data(), as_int(static_cast<size_t>(n), "MPI_Bcast"), MPI_CHAR, root, comm_), "MPI_Bcast");
  }
  void barrier() override {
    Watchdog::Busy busy(watch_.get(), "MPI_Barrier");
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }

  std::unique_ptr<Request> iallreduce(void* data, size_t n, DType t, ReduceOp op) override {
    MPI_Request r = MPI_REQUEST_NULL;
    if (watch_) watch_->count("MPI_Iallreduce");
    check(MPI_Iallreduce(MPI_IN_PLACE, data, as_int(n, "MPI_Iallreduce"), mpi_type(t), mpi_op(op), comm_, &r),
          "MPI_Iallreduce");
    return std::make_unique<MpiRequest>(watch_.get(), r, "MPI_Iallreduce (wait)", std::vector<int>{},
                                        std::vector<int>{});
  }
  // The non-blocking form of reduce_scatter above (same exchange, same
  // fold, same bits) instead of MPI_Ireduce_scatter: with it, overlapped
  // steps were slower than blocking ones on the 2-core VM (2026-12-05, README).
  std::unique_ptr<Request> ireduce_scatter(const void* send, void* recv, std::span<const size_t> counts, DType t,
                                           ReduceOp op) override {
    std::vector<int> sc = ints(counts, "MPI_Ialltoallv"), sd = displs(sc);
    const size_t mine = static_cast<size_t>(sc[static_cast<size_t>(rank_)]);
    auto r = std::make_unique<MpiFoldRequest>(watch_, pool_, recv, mine, t, op, size_);
    if (watch_) watch_->count("MPI_Ialltoallv (ireduce_scatter)");
    r->start(send, std::move(sc), std::move(sd), rank_, comm_);
    return r;
  }
  std::unique_ptr<Request> iallgatherv(const void* mine, void* all, std::span<const size_t> counts, DType t) override {
    std::vector<int> c = ints(counts, "MPI_Iallgatherv"), d = displs(c);
    const void* in = in_place(mine, all, d, t) ? MPI_IN_PLACE : mine;
    MPI_Request r = MPI_REQUEST_NULL;
    if (watch_) watch_->count("MPI_Iallgatherv");
    check(MPI_Iallgatherv(in, c[static_cast<size_t>(rank_)], mpi_type(t), all, c.data(), d.data(), mpi_type(t), comm_,
                          &r),
          "MPI_Iallgatherv");
    return std::make_unique<MpiRequest>(watch_.get(), r, "MPI_Iallgatherv (wait)", std::move(c), std::move(d));
  }
  std::unique_ptr<Request> ialltoallv(const void* send, std::span<const size_t> send_counts, void* recv,
                                      std::span<const size_t> recv_counts, DType t) override {
    std::vector<int> sc = ints(send_counts, "MPI_Ialltoallv"), sd = displs(sc);
    std::vector<int> rc = ints(recv_counts, "MPI_Ialltoallv"), rd = displs(rc);
    MPI_Request r = MPI_REQUEST_NULL;
    if (watch_) watch_->count("MPI_Ialltoallv");
    check(MPI_Ialltoallv(send, sc.data(), sd.data(), mpi_type(t), recv, rc.data(), rd.data(), mpi_type(t), comm_, &r),
          "MPI_Ialltoallv");
    return std::make_unique<MpiRequest>(watch_.get(), r, "MPI_Ialltoallv (wait)", std::move(sc), std::move(sd),
                                        std::move(rc), std::move(rd));
  }
  std::unique_ptr<Request> ibroadcast(void* data, size_t n, DType t, int root) override {
    MPI_Request r = MPI_REQUEST_NULL;
    if (watch_) watch_->count("MPI_Ibcast");
    check(MPI_Ibcast(data, as_int(n, "MPI_Ibcast"), mpi_type(t), root, comm_, &r), "MPI_Ibcast");
    return std::make_unique<MpiRequest>(watch_.get(), r, "MPI_Ibcast (wait)", std::vector<int>{}, std::vector<int>{});
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm c = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &c), "MPI_Comm_split");
    return std::make_unique<MpiCommunicator>(*this, c);
  }
  void set_timeout(double timeout_s, std::function<void(const std::string&)> report) override {
    watch_->start(timeout_s, std::move(report));
  }
  void note_step(uint64_t step) override { watch_->note_step(step); }
  void set_progress_dir(const std::string& dir) override { watch_->set_progress(dir, rank_, size_); }
  void pause_timeout(bool paused) override { watch_->pause(paused); }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
  }

 private:
  void read_rank_size() {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  // The blocking calls' count arrays, kept here so that a steady step does
  // not allocate them (the non-blocking calls' live in their requests).
  const std::vector<int>& ints_into(std::vector<int>& buf, std::span<const size_t> counts, const char* call) const {
    if (counts.size() != static_cast<size_t>(size_))
      throw CommError(std::string(call) + ": " + std::to_string(counts.size()) + " counts for " +
                      std::to_string(size_) + " ranks");
    buf.resize(counts.size());
    for (size_t q = 0; q < buf.size(); ++q) buf[q] = as_int(counts[q], call);
    return buf;
  }
  static const std::vector<int>& displs_into(std::vector<int>& buf, const std::vector<int>& c) {
    buf.resize(c.size());
    long long at = 0;
    for (size_t q = 0; q < c.size(); ++q) {
      buf[q] = static_cast<int>(at);
      at += c[q];
    }
    if (at > INT_MAX) throw CommError("a collective of " + std::to_string(at) + " elements: more than MPI's int holds");
    return buf;
  }
  std::vector<int> ints(std::span<const size_t> counts, const char* call) const {
    if (counts.size() != static_cast<size_t>(size_))
      throw CommError(std::string(call) + ": " + std::to_string(counts.size()) + " counts for " +
                      std::to_string(size_) + " ranks");
    std::vector<int> c(counts.size());
    for (size_t q = 0; q < c.size(); ++q) c[q] = as_int(counts[q], call);
    return c;
  }
  static std::vector<int> displs(const std::vector<int>& c) {
    std::vector<int> d(c.size());
    long long at = 0;
    for (size_t q = 0; q < c.size(); ++q) {
      d[q] = static_cast<int>(at);
      at += c[q];
    }
    if (at > INT_MAX) throw CommError("a collective of " + std::to_string(at) + " elements: more than MPI's int holds");
    return d;
  }
  // `mine` is this rank's own range of `all`: MPI_IN_PLACE (MPI forbids
  // aliased send and receive buffers otherwise).
  bool in_place(const void* mine, const void* all, const std::vector<int>& d, DType t) const {
    return static_cast<const char*>(mine) ==
           static_cast<const char*>(all) + static_cast<size_t>(d[static_cast<size_t>(rank_)]) * dtype_size(t);
  }

  LaunchInfo launch_;
  MPI_Comm comm_;
  bool owns_mpi_ = false, owns_comm_ = false;
  int rank_ = 0, size_ = 1;
  std::string library_;
  std::shared_ptr<Watchdog> watch_ = std::make_shared<Watchdog>();  // shared with the groups split from it
  std::vector<int> sc_, sd_, rc_, rd_;                              // scratch of the blocking calls
  // alltoall_ranges without the watchdog's mark (reduce_scatter makes its own).
  void alltoall_ranges_unwatched(const void* send, void* recv, std::span<const size_t> counts, DType t) {
    const std::vector<int>& sc = ints_into(sc_, counts, "MPI_Alltoallv");
    const std::vector<int>& sd = displs_into(sd_, sc);
    const int mine = sc[static_cast<size_t>(rank_)];
    rc_.assign(sc.size(), mine);
    equal_displs(rd_, sc.size(), mine, "MPI_Alltoallv");
    const std::vector<int>&rc = rc_, &rd = rd_;
    check(MPI_Alltoallv(send, sc.data(), sd.data(), mpi_type(t), recv, rc.data(), rd.data(), mpi_type(t), comm_),
          "MPI_Alltoallv");
  }
  std::vector<char> fold_;  // reduce_scatter: every rank's piece of this rank's range
  std::shared_ptr<ScratchPool> pool_ = std::make_shared<ScratchPool>();  // ireduce_scatter's pieces
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const LaunchInfo& launch) {
  return std::make_unique<MpiCommunicator>(launch);
}

}  // namespace zcode::dist
