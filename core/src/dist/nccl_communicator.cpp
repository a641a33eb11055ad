// nccl_communicator.cpp: the Communicator over NCCL, for the CUDA backend's
// GPU collectives (distributed.backend: nccl). Built only when CMake finds
// the CUDA toolkit and nccl.h (ZCODE_HAVE_NCCL); tests/dist/nccl_test runs
// it on a GPU machine and skips, saying so, where there is none.
//
// It is its own library (zcode_dist_nccl), not part of zcode_core, so that a
// CPU run never loads the CUDA runtime or NCCL; the CUDA backend will load
// it when distributed.backend resolves to nccl.
//
// Bootstrap (NCCL 2.28 docs, "Creating a communicator"): rank 0 makes an
// ncclUniqueId, the MPI world broadcasts its bytes, and every rank calls
// ncclCommInitRank on the GPU of its local rank. Every collective runs on
// one NCCL stream owned here: the caller makes its inputs ready first (the
// Communicator interface takes no stream; the ABI's stream argument is for
// the CUDA backend to order its own stream against this one), a blocking
// call waits for its collective, and a non-blocking call returns a request
// whose wait() synchronizes an event recorded after it. Uneven reduce-scatter and all-gather (the flat layout's shards)
// are groups of ncclReduce / ncclBroadcast calls, one per rank's range, and alltoallv is a group of ncclSend/ncclRecv
// (ncclGroupStart/End), as NCCL's "Point-to-point communication" examples describe. Buffers of the typed collectives
// are device pointers; the byte collectives (config hashes, metrics, checkpoint bookkeeping) are host data and go over
// MPI.
#include "nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace zcode::dist {
namespace {

void check_nccl(ncclResult_t rc, const char* call, int rank) {
  if (rc == ncclSuccess) return;
  throw CommError(std::string(call) + " failed on rank " + std::to_string(rank) + ": " + ncclGetErrorString(rc));
}
void check_cuda(cudaError_t rc, const char* call, int rank) {
  if (rc == cudaSuccess) return;
  throw CommError(std::string(call) + " failed on rank " + std::to_string(rank) + ": " + cudaGetErrorString(rc));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kI64: return ncclInt64;
  }
  return ncclFloat32;
}
ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

// An event recorded on the NCCL stream after a started collective.
class NcclRequest final : public Request {
 public:
  NcclRequest(cudaEvent_t e, int rank) : event_(e), rank_(rank) {}
  ~NcclRequest() override {
    if (event_) {
      cudaEventSynchronize(event_);
      cudaEventDestroy(event_);
    }
  }
  void wait() override {
    if (!event_) return;
    cudaEvent_t e = event_;
    event_ = nullptr;
    const cudaError_t rc = cudaEventSynchronize(e);
    cudaEventDestroy(e);
    check_cuda(rc, "cudaEventSynchronize (NCCL collective)", rank_);
  }
  bool test() override {
    if (!event_) return true;
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    check_cuda(rc, "cudaEventQuery (NCCL collective)", rank_);
    return true;
  }

 private:
  cudaEvent_t event_;
  int rank_;
};

class NcclCommunicator final : public Communicator {
 public:
  // The world: `host` (the MPI world) carries the unique id and the bytes.
  NcclCommunicator(Communicator& host, int device) : host_(host), device_(device) {
    rank_ = host.rank();
    size_ = host.size();
    check_cuda(cudaSetDevice(device_), "cudaSetDevice", rank_);
    ncclUniqueId id{};
    if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", rank_);
    std::string bytes(reinterpret_cast<const char*>(&id), sizeof id);
    host_.broadcast_bytes(bytes, 0);
    if (bytes.size() != sizeof id) throw CommError("NCCL bootstrap: the unique id has the wrong size");
    std::memcpy(&id, bytes.data(), sizeof id);
    check_nccl(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank", rank_);
    init_stream();
  }
  // A group split from `parent` (ncclCommSplit), with its own split of the
  // MPI host, so that its byte collectives and barrier stay in the group.
  NcclCommunicator(const NcclCommunicator& parent, ncclComm_t comm, std::unique_ptr<Communicator> host)
      : own_host_(std::move(host)), host_(*own_host_), device_(parent.device_), comm_(comm) {
    check_nccl(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank", parent.rank_);
    check_nccl(ncclCommCount(comm_, &size_), "ncclCommCount", parent.rank_);
    init_stream();
  }
  ~NcclCommunicator() override {
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    if (scalar_) cudaFree(scalar_);
    if (comm_) ncclCommDestroy(comm_);
  }

  const LaunchInfo& launch() const override { return host_.launch(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    int v = 0;
    ncclGetVersion(&v);
    return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
           " over " + host_.describe();
  }

  void allreduce(void* data, size_t n, DType t, ReduceOp op) override { finish(iallreduce(data, n, t, op)); }
  void reduce_scatter(const void* send, void* recv, std::span<const size_t> counts, DType t, ReduceOp op) override {
    finish(ireduce_scatter(send, recv, counts, t, op));
  }
  void allgatherv(const void* mine, void* all, std::span<const size_t> counts, DType t) override {
    finish(iallgatherv(mine, all, counts, t));
  }
  void alltoallv(const void* send, std::span<const size_t> send_counts, void* recv, std::span<const size_t> recv_counts,
                 DType t) override {
    finish(ialltoallv(send, send_counts, recv, recv_counts, t));
  }
  void alltoall_ranges(const void* send, void* recv, std::span<const size_t> counts, DType t) override {
    std::vector<size_t> rc(counts.size(), counts[static_cast<size_t>(rank_)]);
    alltoallv(send, counts, recv, rc, t);
  }
  void broadcast(void* data, size_t n, DType t, int root) override { finish(ibroadcast(data, n, t, root)); }
  std::vector<std::string> allgather_bytes(const std::string& mine) override { return host_.allgather_bytes(mine); }
  std::vector<std::string> gather_bytes(const std::string& mine, int root) override {
    return host_.gather_bytes(mine, root);
  }
  void broadcast_bytes(std::string& bytes, int root) override { host_.broadcast_bytes(bytes, root); }
  void barrier() override {
    // A one-element all-reduce on the GPU (the queue of NCCL work drains),
    // then the host's barrier.
    allreduce(scalar_, 1, DType::kF32, ReduceOp::kSum);
    host_.barrier();
  }

  std::unique_ptr<Request> iallreduce(void* data, size_t n, DType t, ReduceOp op) override {
    check_nccl(ncclAllReduce(data, data, n, nccl_type(t), nccl_op(op), comm_, stream_), "ncclAllReduce", rank_);
    return started();
  }
  std::unique_ptr<Request> ireduce_scatter(const void* send, void* recv, std::span<const size_t> counts, DType t,
                                           ReduceOp op) override {
    need_counts(counts, "reduce_scatter");
    const size_t es = dtype_size(t);
    check_nccl(ncclGroupStart(), "ncclGroupStart", rank_);
    size_t at = 0;
    for (int q = 0; q < size_; ++q) {  // rank q's range reduced onto rank q
      const size_t c = counts[static_cast<size_t>(q)];
      if (c)
        check_nccl(ncclReduce(static_cast<const char*>(send) + at * es, recv, c, nccl_type(t),  // (written on q only)
                              nccl_op(op), q, comm_, stream_),
                   "ncclReduce", rank_);
      at += c;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd", rank_);
    return started();
  }
  std::unique_ptr<Request> iallgatherv(const void* mine, void* all, std::span<const size_t> counts, DType t) override {
    need_counts(counts, "allgatherv");
    const size_t es = dtype_size(t);
    check_nccl(ncclGroupStart(), "ncclGroupStart", rank_);
    size_t at = 0;
    for (int q = 0; q < size_; ++q) {  // rank q broadcasts its range into everyone's `all`
      const size_t c = counts[static_cast<size_t>(q)];
      char* dst = static_cast<char*>(all) + at * es;
      if (c)
        check_nccl(ncclBroadcast(q == rank_ ? mine : dst, dst, c, nccl_type(t), q, comm_, stream_), "ncclBroadcast",
                   rank_);
      at += c;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd", rank_);
    return started();
  }
  std::unique_ptr<Request> ialltoallv(const void* send, std::span<const size_t> send_counts, void* recv,
                                      std::span<const size_t> recv_counts, DType t) override {
    need_counts(send_counts, "alltoallv");
    need_counts(recv_counts, "alltoallv");
    const size_t es = dtype_size(t);
    check_nccl(ncclGroupStart(), "ncclGroupStart", rank_);
    size_t s_at = 0, r_at = 0;
    for (int q = 0; q < size_; ++q) {
      const size_t sc = send_counts[static_cast<size_t>(q)], rc = recv_counts[static_cast<size_t>(q)];
      if (sc)
        check_nccl(ncclSend(static_cast<const char*>(send) + s_at * es, sc, nccl_type(t), q, comm_, stream_),
                   "ncclSend", rank_);
      if (rc)
        check_nccl(ncclRecv(static_cast<char*>(recv) + r_at * es, rc, nccl_type(t), q, comm_, stream_), "ncclRecv",
                   rank_);
      s_at += sc;
      r_at += rc;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd", rank_);
    return started();
  }
  std::unique_ptr<Request> ibroadcast(void* data, size_t n, DType t, int root) override {
    check_nccl(ncclBroadcast(data, data, n, nccl_type(t), root, comm_, stream_), "ncclBroadcast", rank_);
    return started();
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    std::unique_ptr<Communicator> host = host_.split(color, key);  // the same groups on the MPI side
    ncclComm_t c = nullptr;
    check_nccl(ncclCommSplit(comm_, color, key, &c, nullptr), "ncclCommSplit", rank_);
    return std::make_unique<NcclCommunicator>(*this, c, std::move(host));
  }
  [[noreturn]] void abort(int code) override {
    if (comm_) ncclCommAbort(comm_);
    host_.abort(code);  // [[noreturn]] too
    std::_Exit(code);
  }

 private:
  void init_stream() {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice", rank_);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", rank_);
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&scalar_), sizeof(float)), "cudaMalloc", rank_);
    check_cuda(cudaMemset(scalar_, 0, sizeof(float)), "cudaMemset", rank_);
  }
  void need_counts(std::span<const size_t> counts, const char* what) const {
    if (counts.size() != static_cast<size_t>(size_))
      throw CommError(std::string(what) + ": " + std::to_string(counts.size()) + " counts for " +
                      std::to_string(size_) + " ranks");
  }
  std::unique_ptr<Request> started() {
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate", rank_);
    check_cuda(cudaEventRecord(e, stream_), "cudaEventRecord", rank_);
    return std::make_unique<NcclRequest>(e, rank_);
  }
  static void finish(std::unique_ptr<Request> r) { r->wait(); }

  std::unique_ptr<Communicator> own_host_;  // a split group's MPI side
  Communicator& host_;
  int device_ = 0;
  float* scalar_ = nullptr;  // barrier's one element
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host, int device) {
  return std::make_unique<NcclCommunicator>(host, device);
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

}  // namespace zcode::dist
