// The Communicator over Open MPI, run as 3 (or 2) ranks by mpirun (ctest
// label mpi): every collective against values worked out by hand from the
// ranks' inputs (rank r contributes r + 1, or r·10 + i), so a rank that got
// another rank's piece, a wrong count or a wrong order fails. Each rank runs
// the same gtest binary; a failure on any rank fails mpirun.
//
// The second half drives the plugins' view of the same collectives: the
// zc_collectives table (ABI 1.5) of a CollectivesService, through the SDK's
// typed wrapper (zcode/sdk/collectives.h), as a plugin built against the
// SDK calls it; and the groups of distributed.expert_parallel.
#include <zcode/core/dist/communicator.h>
#include <zcode/core/dist/gradient_reducer.h>
#include <zcode/core/dist/process_groups.h>
#include <zcode/core/host_services.h>
#include <zcode/sdk/collectives.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

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

// ZeRO-1's buckets: uneven ranges, several in flight at once, each finished
// either by test() (as the reducer's progress does) or by wait().
TEST(Collectives, NonBlockingReduceScatterWithUnevenCountsInFlightTogether) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<size_t> counts(static_cast<size_t>(n), 1);
  counts[static_cast<size_t>(n - 1)] = 9;  // the last rank owns most of it
  const size_t total = static_cast<size_t>(n - 1) + 9;
  size_t at = 0;
  for (int q = 0; q < r; ++q) at += counts[static_cast<size_t>(q)];
  const size_t mine = counts[static_cast<size_t>(r)];
  std::vector<float> fsend(total);
  std::vector<int64_t> isend(total);
  for (size_t i = 0; i < total; ++i) {
    fsend[i] = static_cast<float>(r * 100) + static_cast<float>(i);
    isend[i] = (r == 1 ? 1000 : r) + static_cast<int64_t>(i);  // rank 1 holds every maximum
  }
  std::vector<float> fsum(mine, -1.0f);
  std::vector<int64_t> imax(mine, -1);
  auto a = c.ireduce_scatter(fsend.data(), fsum.data(), counts, DType::kF32, ReduceOp::kSum);
  auto b = c.ireduce_scatter(isend.data(), imax.data(), counts, DType::kI64, ReduceOp::kMax);
  for (int spins = 0; !a->test(); ++spins) ASSERT_LT(spins, 100000000) << "test() never completed";
  b->wait();
  for (size_t i = 0; i < mine; ++i) {
    // Σ_q (100q + at + i) = 100·n(n-1)/2 + n·(at + i)
    EXPECT_EQ(fsum[i], 100.0f * n * (n - 1) / 2 + static_cast<float>(n) * static_cast<float>(at + i)) << i;
    EXPECT_EQ(imax[i], (n > 1 ? 1000 : 0) + static_cast<int64_t>(at + i)) << i;
  }
  // Done is done: later calls (the reducer's wait() after its progress()
  // saw the request complete) neither fold again nor touch the output.
  std::fill(fsum.begin(), fsum.end(), -7.0f);
  std::fill(imax.begin(), imax.end(), int64_t{-7});
  EXPECT_TRUE(a->test());
  a->wait();
  b->wait();
  EXPECT_TRUE(b->test());
  for (size_t i = 0; i < mine; ++i) {
    EXPECT_EQ(fsum[i], -7.0f) << i;
    EXPECT_EQ(imax[i], -7) << i;
  }
}

// Values whose float sum depends on the order (1e8 + 1 - 1e8 is 0 or 1):
// the blocking and non-blocking forms both fold in rank order, so their
// bits equal each other and an explicit fold ((p_0 + p_1) + p_2) ...; and
// min over doubles goes through the same path.
TEST(Collectives, ReduceScatterFormsFoldInRankOrder) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<size_t> counts(static_cast<size_t>(n), 3);
  const size_t total = 3 * static_cast<size_t>(n);
  auto value = [](int q, size_t i) {                // rank q's element i
    const float big[] = {1e8f, -1e8f, 1.0f, 3.0f};  // 3 ranks, i = 0: (1e8 - 1e8) + 1 = 1, reversed 0
    return big[(static_cast<size_t>(q) + i) % 4] * (i % 2 ? 1.0f : -1.0f);
  };
  std::vector<float> send(total);
  std::vector<double> dsend(total);
  for (size_t i = 0; i < total; ++i) {
    send[i] = value(r, i);
    dsend[i] = static_cast<double>(r) * 0.5 - static_cast<double>(i);
  }
  std::vector<float> blocking(3), nonblocking(3);
  std::vector<double> dmin(3);
  c.reduce_scatter(send.data(), blocking.data(), counts, DType::kF32, ReduceOp::kSum);
  auto rq = c.ireduce_scatter(send.data(), nonblocking.data(), counts, DType::kF32, ReduceOp::kSum);
  auto dq = c.ireduce_scatter(dsend.data(), dmin.data(), counts, DType::kF64, ReduceOp::kMin);
  rq->wait();
  dq->wait();
  for (size_t i = 0; i < 3; ++i) {
    const size_t at = 3 * static_cast<size_t>(r) + i;
    float fold = value(0, at);
    for (int q = 1; q < n; ++q) fold += value(q, at);
    EXPECT_EQ(std::memcmp(&blocking[i], &fold, sizeof(float)), 0) << i << ": " << blocking[i] << " vs " << fold;
    EXPECT_EQ(std::memcmp(&nonblocking[i], &fold, sizeof(float)), 0) << i << ": " << nonblocking[i] << " vs " << fold;
    EXPECT_EQ(dmin[i], -static_cast<double>(at)) << i;  // rank 0's, the smallest
  }
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
  // To one rank only (the last), each rank's bytes in rank order; nothing elsewhere.
  const auto at_root = c.gather_bytes(std::string(static_cast<size_t>(r + 1), 'g') + std::to_string(r), n - 1);
  if (r == n - 1) {
    ASSERT_EQ(at_root.size(), static_cast<size_t>(n));
    for (int q = 0; q < n; ++q)
      EXPECT_EQ(at_root[static_cast<size_t>(q)], std::string(static_cast<size_t>(q + 1), 'g') + std::to_string(q));
  } else {
    EXPECT_TRUE(at_root.empty());
  }
  std::string b = r == 1 ? std::string("from rank 1\0tail", 16) : std::string();
  c.broadcast_bytes(b, 1);
  EXPECT_EQ(b, std::string("from rank 1\0tail", 16));
  c.barrier();
}

// The gradient reducer splits a rank's blocked time in two: the wait for the
// last rank to arrive (take_wait_ms) and the collectives after it
// (take_comm_ms). Rank 0 arrives 300 ms late on purpose: the others' wait
// holds those 300 ms (less the start skew left after a barrier, a few ms),
// and nobody's communication does (1,000 floats move in microseconds; the
// bound is 150 ms for an oversubscribed rank descheduled meanwhile).
// Both paths: the fast one (buckets reduced after the backward) and the
// deterministic one (a barrier before each micro-batch's all-to-all).
void late_rank_zero(bool deterministic) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<float> g(1000, static_cast<float>(r + 1));
  std::vector<int64_t> shape{1000};
  DLTensor t{g.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape.data(), nullptr, 0};
  zc_param p{"w", nullptr, &t, 0, 0};
  const zc_param_list list{&p, 1};
  const FlatLayout layout(list);
  const ShardPlan plan = plan_shards(layout, n, {1});
  GradientReducer::Options o;
  o.deterministic = deterministic;
  GradientReducer red(c, list, layout, plan, o);
  if (deterministic) red.begin();
  else red.begin_fast();
  c.barrier();
  if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (deterministic) {
    red.add_micro();
    red.finish();
  } else {
    red.finish_fast();
  }
  for (float v : g) ASSERT_EQ(v, n * (n + 1) / 2.0f);  // 1 + 2 + ... + n
  const double wait = red.take_wait_ms(), comm = red.take_comm_ms();
  if (r == 0) EXPECT_LT(wait, 150.0) << "rank 0 came last: it should not wait";
  else EXPECT_GE(wait, 200.0) << "rank " << r << " waited for rank 0's 300 ms";
  EXPECT_LT(comm, 150.0) << "rank " << r;
  EXPECT_EQ(red.take_wait_ms(), 0.0);  // taken: the counts restart
  EXPECT_EQ(red.take_comm_ms(), 0.0);
}

TEST(Collectives, ReducerTimesTheWaitForALateRankApartFromTheTransfer) { late_rank_zero(false); }
TEST(Collectives, DeterministicReducerTimesTheWaitApartToo) { late_rank_zero(true); }

TEST(Collectives, CountsThatDoNotMatchTheWorldAreAnError) {
  Communicator& c = world();
  std::vector<size_t> counts(static_cast<size_t>(c.size()) + 1, 1);
  std::vector<float> a(counts.size()), b(1);
  EXPECT_THROW(c.reduce_scatter(a.data(), b.data(), counts, DType::kF32, ReduceOp::kSum), CommError);
}

// ---- the zc_collectives service, as a plugin sees it -------------------------

struct Service {
  ProcessGroups groups{world(), 1};
  CollectivesService service{groups};
  zcode::HostServices host{7};
  Service() { host.set_collectives(service.table()); }
  zcode::sdk::Collectives sdk() const { return zcode::sdk::Collectives(host.raw()); }
};

TEST(CollectiveService, RankSizeAndReductions) {
  Service s;
  const auto c = s.sdk();
  const int n = world().size(), r = world().rank();
  EXPECT_EQ(c.size(ZC_GROUP_WORLD), n);
  EXPECT_EQ(c.size(ZC_GROUP_DATA), n);
  EXPECT_EQ(c.rank(ZC_GROUP_DATA), r);
  EXPECT_EQ(c.size(ZC_GROUP_EXPERT), 1);  // expert_parallel 1: every rank holds all experts
  EXPECT_EQ(c.size(ZC_GROUP_EXPERT_DATA), n);
  std::vector<double> v = {r + 1.0, 2.0 * r};
  c.allreduce(std::span<double>(v), ZC_REDUCE_SUM, ZC_GROUP_WORLD);
  EXPECT_EQ(v[0], n * (n + 1) / 2.0);
  EXPECT_EQ(v[1], static_cast<double>(n * (n - 1)));
  std::vector<float> a = {static_cast<float>(r + 1)};
  c.allreduce(std::span<float>(a), ZC_REDUCE_AVG, ZC_GROUP_DATA);
  EXPECT_EQ(a[0], static_cast<float>(n + 1) / 2.0f);  // (1 + ... + n) / n
  std::vector<int64_t> m = {r, -r};
  c.allreduce(std::span<int64_t>(m), ZC_REDUCE_MAX, ZC_GROUP_WORLD);
  EXPECT_EQ(m[0], n - 1);
  EXPECT_EQ(m[1], 0);
  c.allreduce(std::span<int64_t>(m), ZC_REDUCE_MIN, ZC_GROUP_WORLD);
  EXPECT_EQ(m[0], n - 1);
}

TEST(CollectiveService, GatherScatterAlltoallvBroadcast) {
  Service s;
  const auto c = s.sdk();
  const int n = world().size(), r = world().rank();
  // allgather with counts: rank q sends q + 1 values 100q + i.
  std::vector<int64_t> counts(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) counts[static_cast<size_t>(q)] = q + 1;
  std::vector<int64_t> mine(static_cast<size_t>(r + 1));
  for (int i = 0; i <= r; ++i) mine[static_cast<size_t>(i)] = 100 * r + i;
  std::vector<int64_t> all(static_cast<size_t>(n * (n + 1) / 2), -1);
  c.allgather(std::span<const int64_t>(mine), std::span<int64_t>(all), std::span<const int64_t>(counts),
              ZC_GROUP_WORLD);
  size_t at = 0;
  for (int q = 0; q < n; ++q)
    for (int i = 0; i <= q; ++i) EXPECT_EQ(all[at++], 100 * q + i) << q << " " << i;
  // reduce_scatter with the same counts: element j summed over ranks is Σ_q (q + j) = n(n-1)/2 + n·j.
  std::vector<double> send(all.size());
  for (size_t j = 0; j < send.size(); ++j) send[j] = r + static_cast<double>(j);
  std::vector<double> part(static_cast<size_t>(r + 1));
  c.reduce_scatter(std::span<const double>(send), std::span<double>(part), std::span<const int64_t>(counts),
                   ZC_REDUCE_SUM, ZC_GROUP_DATA);
  const size_t first = static_cast<size_t>(r * (r + 1) / 2);
  for (size_t i = 0; i < part.size(); ++i)
    EXPECT_EQ(part[i], n * (n - 1) / 2.0 + n * static_cast<double>(first + i)) << i;
  // alltoallv, started and waited for: rank r sends q + 1 values 10r + q to rank q.
  std::vector<int64_t> sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n), r + 1);
  std::vector<float> out;
  for (int q = 0; q < n; ++q) {
    sc[static_cast<size_t>(q)] = q + 1;
    for (int i = 0; i <= q; ++i) out.push_back(static_cast<float>(10 * r + q));
  }
  std::vector<float> in(static_cast<size_t>(n * (r + 1)), -1.0f);
  zcode::sdk::CommRequest req;
  c.alltoallv(std::span<const float>(out), std::span<const int64_t>(sc), std::span<float>(in),
              std::span<const int64_t>(rc), ZC_GROUP_WORLD, &req);
  req.wait();
  for (int q = 0; q < n; ++q)
    for (int i = 0; i <= r; ++i) EXPECT_EQ(in[static_cast<size_t>(q * (r + 1) + i)], static_cast<float>(10 * q + r));
  // broadcast from the last rank.
  std::vector<double> b = {r == n - 1 ? 3.5 : 0.0, r == n - 1 ? -1.0 : 0.0};
  c.broadcast(std::span<double>(b), n - 1, ZC_GROUP_WORLD);
  EXPECT_EQ(b[0], 3.5);
  EXPECT_EQ(b[1], -1.0);
  c.barrier(ZC_GROUP_WORLD);
}

TEST(CollectiveService, BadArgumentsAreAStatusNamingTheCall) {
  Service s;
  const zc_collectives* t = s.service.table();
  const int n = world().size();
  // reduce_scatter of 1 element per... a send that the ranks cannot split evenly.
  std::vector<float> a(static_cast<size_t>(n) + 1), b(1);
  int64_t sa[1] = {static_cast<int64_t>(a.size())}, sb[1] = {1};
  DLTensor ta = zcode::sdk::make_view(a.data(), zcode::sdk::kF32, 1, sa);
  DLTensor tb = zcode::sdk::make_view(b.data(), zcode::sdk::kF32, 1, sb);
  zc_status* st = t->reduce_scatter(t->ctx, ZC_GROUP_WORLD, &ta, &tb, nullptr, ZC_REDUCE_SUM, nullptr, nullptr);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(zcode::status_code(st), static_cast<zc_status_code>(ZC_ERR_INVALID_ARGUMENT));
  EXPECT_NE(std::string(zcode::status_message(st)).find("collectives.reduce_scatter: send has"), std::string::npos)
      << zcode::status_message(st);
  zcode::status_release(st);
  // A dtype the collectives do not carry, and a root outside the group.
  DLTensor ti = ta;
  ti.dtype = zcode::sdk::kI32;
  st = t->allreduce(t->ctx, ZC_GROUP_WORLD, &ti, ZC_REDUCE_SUM, nullptr, nullptr);
  ASSERT_NE(st, nullptr);
  EXPECT_NE(std::string(zcode::status_message(st)).find("expected float32, float64 or int64"), std::string::npos);
  zcode::status_release(st);
  st = t->broadcast(t->ctx, ZC_GROUP_WORLD, &tb, n, nullptr, nullptr);
  ASSERT_NE(st, nullptr);
  EXPECT_NE(std::string(zcode::status_message(st)).find("is not a rank of the group"), std::string::npos);
  zcode::status_release(st);
  st = t->allreduce(t->ctx, 99, &tb, ZC_REDUCE_SUM, nullptr, nullptr);
  ASSERT_NE(st, nullptr);
  EXPECT_NE(std::string(zcode::status_message(st)).find("unknown process group 99"), std::string::npos);
  zcode::status_release(st);
}

// expert_parallel = K splits the world into W/K expert groups of K
// consecutive ranks and K expert-data groups of the ranks r mod K.
TEST(CollectiveService, ExpertGroupsSplitTheWorld) {
  const int n = world().size(), r = world().rank();
  EXPECT_THROW(ProcessGroups(world(), n + 1), std::invalid_argument);
  ProcessGroups g(world(), n);  // one expert group of every rank
  EXPECT_EQ(g.get(ZC_GROUP_EXPERT).size(), n);
  EXPECT_EQ(g.get(ZC_GROUP_EXPERT).rank(), r);
  EXPECT_EQ(g.get(ZC_GROUP_EXPERT_DATA).size(), 1);
  int64_t v = r + 1;
  g.get(ZC_GROUP_EXPERT).allreduce(&v, 1, DType::kI64, ReduceOp::kSum);
  EXPECT_EQ(v, int64_t{n} * (n + 1) / 2);
  v = r + 1;
  g.get(ZC_GROUP_EXPERT_DATA).allreduce(&v, 1, DType::kI64, ReduceOp::kSum);
  EXPECT_EQ(v, r + 1);  // alone in its group
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Every rank prints its own results (a failure names the rank's values).
  const int rc = RUN_ALL_TESTS();
  zcode::dist::shutdown();
  return rc;
}
