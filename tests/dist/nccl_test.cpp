// The NCCL communicator on real GPUs, one rank per GPU (ctest runs one rank;
// `mpirun -np N` with N GPUs runs more): every collective on device buffers
// against values worked out by hand from the ranks' inputs, as
// collectives_test.cpp does for Open MPI. Without a GPU (this project's
// development machines have none) it prints why and exits 77, which ctest
// shows as skipped.
#include <zcode/core/dist/communicator.h>

#include "dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

namespace {

using namespace zcode::dist;

Communicator* g_nccl = nullptr;

template <class T>
struct Device {
  T* p = nullptr;
  size_t n = 0;
  explicit Device(const std::vector<T>& host) : n(host.size()) {
    cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T) + 1);
    cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~Device() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

TEST(Nccl, AllreduceBroadcastAndBarrier) {
  Communicator& c = *g_nccl;
  const int n = c.size(), r = c.rank();
  Device<float> a(std::vector<float>{static_cast<float>(r + 1), -1.0f});
  c.allreduce(a.p, 2, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(a.get()[0], n * (n + 1) / 2.0f);
  EXPECT_EQ(a.get()[1], static_cast<float>(-n));
  Device<int64_t> m(std::vector<int64_t>{r});
  c.allreduce(m.p, 1, DType::kI64, ReduceOp::kMax);
  EXPECT_EQ(m.get()[0], n - 1);
  Device<double> b(std::vector<double>{r == 0 ? 2.5 : 0.0});
  c.broadcast(b.p, 1, DType::kF64, 0);
  EXPECT_EQ(b.get()[0], 2.5);
  c.barrier();
  EXPECT_NE(c.describe().find("NCCL"), std::string::npos) << c.describe();
}

TEST(Nccl, UnevenReduceScatterAllgatherAndAlltoallv) {
  Communicator& c = *g_nccl;
  const int n = c.size(), r = c.rank();
  // Rank q owns q + 1 of the elements 0 .. n(n+1)/2 - 1; rank r sends r·10 + i.
  std::vector<size_t> counts(static_cast<size_t>(n));
  size_t total = 0, at = 0;
  for (int q = 0; q < n; ++q) {
    counts[static_cast<size_t>(q)] = static_cast<size_t>(q + 1);
    if (q < r) at += static_cast<size_t>(q + 1);
    total += static_cast<size_t>(q + 1);
  }
  std::vector<float> send(total);
  for (size_t i = 0; i < total; ++i) send[i] = static_cast<float>(10 * r) + static_cast<float>(i);
  Device<float> s(send), part(std::vector<float>(counts[static_cast<size_t>(r)], -1.0f));
  c.reduce_scatter(s.p, part.p, counts, DType::kF32, ReduceOp::kSum);
  const auto got = part.get();
  for (size_t i = 0; i < got.size(); ++i)  // Σ_q (10q + i) = 10·n(n-1)/2 + n·i
    EXPECT_EQ(got[i], 10.0f * n * (n - 1) / 2 + static_cast<float>(n * (at + i))) << i;
  Device<float> all(std::vector<float>(total, -1.0f));
  c.allgatherv(part.p, all.p, counts, DType::kF32);
  const auto g = all.get();
  for (size_t i = 0; i < total; ++i) EXPECT_EQ(g[i], 10.0f * n * (n - 1) / 2 + static_cast<float>(n * i)) << i;
  // alltoallv: rank r sends q + 1 values 10r + q to rank q.
  std::vector<size_t> sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n), static_cast<size_t>(r + 1));
  std::vector<float> out;
  for (int q = 0; q < n; ++q) {
    sc[static_cast<size_t>(q)] = static_cast<size_t>(q + 1);
    for (int i = 0; i <= q; ++i) out.push_back(static_cast<float>(10 * r + q));
  }
  Device<float> o(out), in(std::vector<float>(static_cast<size_t>(n * (r + 1)), -1.0f));
  auto req = c.ialltoallv(o.p, sc, in.p, rc, DType::kF32);
  req->wait();
  const auto h = in.get();
  for (int q = 0; q < n; ++q)
    for (int i = 0; i <= r; ++i) EXPECT_EQ(h[static_cast<size_t>(q * (r + 1) + i)], static_cast<float>(10 * q + r));
}

}  // namespace

int main(int argc, char** argv) {
  Communicator& mpi = world();
  const int gpus = cuda_device_count();
  if (gpus < mpi.size()) {
    if (mpi.rank() == 0)
      std::printf(
          "SKIPPED: the NCCL collectives test needs one GPU per rank: %d rank(s), %d GPU(s) here "
          "(it runs on a GPU machine)\n",
          mpi.size(), gpus);
    shutdown();
    return 77;
  }
  std::unique_ptr<Communicator> nccl = make_nccl_communicator(mpi, mpi.launch().local_rank % gpus);
  g_nccl = nccl.get();
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  nccl.reset();
  shutdown();
  return rc;
}
