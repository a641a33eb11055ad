// The Communicator over Open MPI, run as 3 (or 2) ranks by mpirun (ctest
// label mpi): every collective against values worked out by hand from the
// ranks' inputs (rank r contributes r + 1, or r·10 + i), so a rank that got
// another rank's piece, a wrong count or a wrong order fails. Each rank runs
// the same gtest binary; a failure on any rank fails mpirun.
#include <zcode/core/dist/communicator.h>

#include <gtest/gtest.h>

#include <numeric>

namespace {

using namespace zcode::dist;

TEST(Collectives, WorldMatchesTheLauncher) {
  Communicator& c = world();
  const LaunchInfo l = detect_launch();
  ASSERT_TRUE(l.launched) << "run this test under mpirun";
  EXPECT_EQ(c.size(), l.size);
  EXPECT_EQ(c.rank(), l.rank);
  EXPECT_NE(c.describe().find("Open MPI"), std::string::npos) << c.describe();
}

TEST(Collectives, AllreduceSumMaxMin) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  double d[2] = {r + 1.0, -(r + 1.0)};
  c.allreduce(d, 2, DType::kF64, ReduceOp::kSum);
  EXPECT_EQ(d[0], n * (n + 1) / 2.0);  // 1 + 2 + ... + n
  EXPECT_EQ(d[1], -n * (n + 1) / 2.0);
  EXPECT_EQ(c.sum(int64_t{r}), int64_t{n} * (n - 1) / 2);
  EXPECT_EQ(c.max(int64_t{10 - r}), 10);
  float f[1] = {static_cast<float>(r)};
  c.allreduce(f, 1, DType::kF32, ReduceOp::kMin);
  EXPECT_EQ(f[0], 0.0f);
  EXPECT_EQ(c.max(0.5 * r), 0.5 * (n - 1));
}

TEST(Collectives, ReduceScatterThenAllgatherIsAnAllreduce) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  // 7 elements split unevenly: rank q owns counts[q].
  std::vector<size_t> counts(static_cast<size_t>(n), 1);
  counts[0] = 7 - static_cast<size_t>(n - 1);
  std::vector<float> send(7);
  for (int i = 0; i < 7; ++i) send[static_cast<size_t>(i)] = static_cast<float>(r * 10 + i);
  size_t mine = 0, at = 0;
  for (int q = 0; q < r; ++q) at += counts[static_cast<size_t>(q)];
  mine = counts[static_cast<size_t>(r)];
  std::vector<float> recv(mine);
  c.reduce_scatter(send.data(), recv.data(), counts, DType::kF32, ReduceOp::kSum);
  // Element i summed over ranks: Σ_q (10q + i) = 10·n(n-1)/2 + n·i.
  for (size_t i = 0; i < mine; ++i) EXPECT_EQ(recv[i], 10.0f * n * (n - 1) / 2 + static_cast<float>(n * (at + i))) << i;
  std::vector<float> all(7, -1.0f);
  c.allgatherv(recv.data(), all.data(), counts, DType::kF32);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(all[static_cast<size_t>(i)], 10.0f * n * (n - 1) / 2 + n * i) << i;
  // In place: this rank's range of `all` is its input.
  std::vector<float> inplace(7, 0.0f);
  for (size_t i = 0; i < mine; ++i) inplace[at + i] = static_cast<float>(r + 1);
  c.allgatherv(inplace.data() + at, inplace.data(), counts, DType::kF32);
  size_t k = 0;
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < counts[static_cast<size_t>(q)]; ++i) EXPECT_EQ(inplace[k++], q + 1.0f);
}

TEST(Collectives, NonBlockingFormsGiveTheSameValues) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<size_t> counts(static_cast<size_t>(n), 2);
  std::vector<double> send(static_cast<size_t>(2 * n), r + 1.0), recv(2);
  auto rq = c.ireduce_scatter(send.data(), recv.data(), counts, DType::kF64, ReduceOp::kSum);
  rq->wait();
  EXPECT_EQ(recv[0], n * (n + 1) / 2.0);
  std::vector<double> all(static_cast<size_t>(2 * n));
  auto ag = c.iallgatherv(recv.data(), all.data(), counts, DType::kF64);
  ag->wait();
  for (double v : all) EXPECT_EQ(v, n * (n + 1) / 2.0);
}

TEST(Collectives, AlltoallRangesDeliverEachRanksPieceInRankOrder) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<size_t> counts(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) counts[static_cast<size_t>(q)] = static_cast<size_t>(q + 1);  // rank q owns q+1
  const size_t total = static_cast<size_t>(n * (n + 1) / 2);
  std::vector<int64_t> send(total);
  for (size_t i = 0; i < total; ++i) send[i] = 1000 * r + static_cast<int64_t>(i);
  const size_t mine = counts[static_cast<size_t>(r)];
  std::vector<int64_t> recv(static_cast<size_t>(n) * mine, -1);
  c.alltoall_ranges(send.data(), recv.data(), counts, DType::kI64);
  const size_t at = static_cast<size_t>(r * (r + 1) / 2);  // start of this rank's range
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < mine; ++i)
      EXPECT_EQ(recv[static_cast<size_t>(q) * mine + i], 1000 * q + static_cast<int64_t>(at + i));
}

TEST(Collectives, BytesAndBarrier) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  const auto all = c.allgather_bytes(std::string(static_cast<size_t>(r), 'x') + std::to_string(r));
  ASSERT_EQ(all.size(), static_cast<size_t>(n));
  for (int q = 0; q < n; ++q)
    EXPECT_EQ(all[static_cast<size_t>(q)], std::string(static_cast<size_t>(q), 'x') + std::to_string(q));
  std::string b = r == 1 ? std::string("from rank 1\0tail", 16) : std::string();
  c.broadcast_bytes(b, 1);
  EXPECT_EQ(b, std::string("from rank 1\0tail", 16));
  c.barrier();
}

TEST(Collectives, CountsThatDoNotMatchTheWorldAreAnError) {
  Communicator& c = world();
  std::vector<size_t> counts(static_cast<size_t>(c.size()) + 1, 1);
  std::vector<float> a(counts.size()), b(1);
  EXPECT_THROW(c.reduce_scatter(a.data(), b.data(), counts, DType::kF32, ReduceOp::kSum), CommError);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Every rank prints its own results (a failure names the rank's values).
  const int rc = RUN_ALL_TESTS();
  zcode::dist::shutdown();
  return rc;
}
