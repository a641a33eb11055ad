// communicator.cpp: the one-rank communicator and world(); the MPI one is in
// mpi_communicator.cpp.
#include <zcode/core/dist/communicator.h>

#include "mpi_communicator.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>

#include <unistd.h>

namespace zcode::dist {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kI64: return 8;
  }
  return 0;
}

namespace {

class SingleProcess final : public Communicator {
 public:
  explicit SingleProcess(LaunchInfo l = {}) : launch_(std::move(l)) {}
  const LaunchInfo& launch() const override { return launch_; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "single process"; }
  void allreduce(void*, size_t, DType, ReduceOp) override {}
  void reduce_scatter(const void* send, void* recv, std::span<const size_t> counts, DType t, ReduceOp) override {
    copy(send, recv, first(counts), t);
  }
  void allgatherv(const void* mine, void* all, std::span<const size_t> counts, DType t) override {
    copy(mine, all, first(counts), t);
  }
  void alltoallv(const void* send, std::span<const size_t> send_counts, void* recv, std::span<const size_t>,
                 DType t) override {
    copy(send, recv, first(send_counts), t);
  }
  void alltoall_ranges(const void* send, void* recv, std::span<const size_t> counts, DType t) override {
    copy(send, recv, first(counts), t);
  }
  void broadcast(void*, size_t, DType, int) override {}
  std::vector<std::string> allgather_bytes(const std::string& mine) override { return {mine}; }
  std::vector<std::string> gather_bytes(const std::string& mine, int) override { return {mine}; }
  void broadcast_bytes(std::string&, int) override {}
  void barrier() override {}
  std::unique_ptr<Request> iallreduce(void*, size_t, DType, ReduceOp) override { return std::make_unique<Done>(); }
  std::unique_ptr<Request> ireduce_scatter(const void* send, void* recv, std::span<const size_t> counts, DType t,
                                           ReduceOp op) override {
    reduce_scatter(send, recv, counts, t, op);
    return std::make_unique<Done>();
  }
  std::unique_ptr<Request> iallgatherv(const void* mine, void* all, std::span<const size_t> counts, DType t) override {
    allgatherv(mine, all, counts, t);
    return std::make_unique<Done>();
  }
  std::unique_ptr<Request> ialltoallv(const void* send, std::span<const size_t> send_counts, void* recv,
                                      std::span<const size_t> recv_counts, DType t) override {
    alltoallv(send, send_counts, recv, recv_counts, t);
    return std::make_unique<Done>();
  }
  std::unique_ptr<Request> ibroadcast(void*, size_t, DType, int) override { return std::make_unique<Done>(); }
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<SingleProcess>(launch_); }
  [[noreturn]] void abort(int code) override { _exit(code); }

 private:
  struct Done final : Request {
    void wait() override {}
    bool test() override { return true; }
  };
  static size_t first(std::span<const size_t> counts) { return counts.empty() ? 0 : counts[0]; }
  static void copy(const void* from, void* to, size_t n, DType t) {
    if (from != to && n) std::memmove(to, from, n * dtype_size(t));
  }
  LaunchInfo launch_;
};

std::mutex g_mu;
std::unique_ptr<Communicator> g_world;
bool g_atexit = false;

}  // namespace

std::unique_ptr<Communicator> make_single_process() { return std::make_unique<SingleProcess>(); }

Communicator& world() {
  std::lock_guard lock(g_mu);
  if (!g_world) {
    const LaunchInfo l = detect_launch();
    g_world = l.launched ? make_mpi_communicator(l) : make_single_process();
    if (l.launched && !g_atexit) {
      g_atexit = true;
      std::atexit([] { shutdown(); });
    }
  }
  return *g_world;
}

void shutdown() {
  std::lock_guard lock(g_mu);
  g_world.reset();  // the MPI communicator's destructor finalises MPI
}

}  // namespace zcode::dist
