// bench_mpi_collectives: what one data-parallel gradient reduction costs on
// this machine's Open MPI transport, without the training around it: the
// call sequence of ZCode's gradient reducer (core/src/dist/gradient_reducer.cpp
// over mpi_communicator.cpp), timed alone. The flat gradient of --floats fp32
// values is cut into buckets of --bucket-mb MiB from its end (a multiple of
// ranks × 16 floats), each bucket split over the ranks in multiples of 16
// floats as the reducer splits it, and reduced as the communicator's
// reduce_scatter does (--reduce-scatter alltoall, the default: one
// MPI_Alltoallv of every rank's copy of each range, summed in rank order on
// the range's owner), or with MPI_Reduce_scatter (--reduce-scatter mpi, what
// the reducer used before 2026-12-07), then MPI_Allgatherv. Every iteration
// starts after an MPI_Barrier, so the time is the transfer and the sums, not
// one rank waiting for another (the engine's sync_wait_ms, apart from its
// comm_ms). Also times an 8-byte MPI_Allreduce (the latency term). The first
// reduction's sums are checked against the inputs (bit for bit with
// alltoall, whose order is fixed); a wrong one aborts.
//
// It is the "network" figure of docs/scaling.md's time model on this machine
// (shared memory between the ranks of one node), measured like nccl-tests
// measure a GPU fabric; bench/distributed/run.py runs it for 2 and 3 ranks.
// No peer: the figures feed the model, they are not a comparison.
//
//   mpirun -np N bench_mpi_collectives --floats N [--bucket-mb 25] [--iters 10] [--warmup 2]
//                                      [--reduce-scatter alltoall|mpi]
//
// Prints one JSON line (rank 0): ranks, floats, bucket_mb, buckets,
// bytes_per_rank (2·(N−1)/N·4·floats, what each rank sends and receives),
// median_ms / min_ms of the whole reduction, latency_us (median 8-byte
// allreduce). Exit status: 0 success, 1 an MPI failure, 2 usage.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr size_t kGranule = 16;  // floats; the flat layout's shard granule

// Splits [0, n) into `parts` counts, each a multiple of kGranule but the last
// non-empty one, the first (g mod parts) one granule longer.
std::vector<int> split(size_t n, int parts) {
  const size_t g = (n + kGranule - 1) / kGranule;
  const size_t per = g / static_cast<size_t>(parts), extra = g % static_cast<size_t>(parts);
  std::vector<int> out(static_cast<size_t>(parts));
  size_t left = n;
  for (size_t q = 0; q < out.size(); ++q) {
    const size_t want = (per + (q < extra ? 1 : 0)) * kGranule;
    const size_t c = std::min(want, left);
    out[q] = static_cast<int>(c);
    left -= c;
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int usage(int rank, const char* why) {
  if (rank == 0)
    std::fprintf(stderr,
                 "bench_mpi_collectives: %s\n"
                 "usage: mpirun -np N bench_mpi_collectives --floats N [--bucket-mb 25] [--iters 10] [--warmup 2]\n"
                 "                                            [--reduce-scatter alltoall|mpi]\n",
                 why);
  MPI_Finalize();
  return 2;
}

bool ok(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return true;
  std::fprintf(stderr, "bench_mpi_collectives: %s failed (MPI error %d)\n", call, rc);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  long long floats = 0;
  double bucket_mb = 25;
  int iters = 10, warmup = 2;
  std::string how = "alltoall";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(rank, ("missing value after " + a).c_str());
    const char* v = argv[++i];
    char* end = nullptr;
    if (a == "--floats") floats = std::strtoll(v, &end, 10);
    else if (a == "--bucket-mb") bucket_mb = std::strtod(v, &end);
    else if (a == "--iters") iters = static_cast<int>(std::strtol(v, &end, 10));
    else if (a == "--warmup") warmup = static_cast<int>(std::strtol(v, &end, 10));
    else if (a == "--reduce-scatter") {
      how = v;
      if (how != "alltoall" && how != "mpi")
        return usage(rank, ("--reduce-scatter: '" + how + "' is not alltoall or mpi").c_str());
      continue;
    } else return usage(rank, ("unknown option " + a).c_str());
    if (!end || *end) return usage(rank, (a + ": '" + v + "' is not a number").c_str());
  }
  if (floats < 1 || !(bucket_mb > 0) || iters < 1 || warmup < 0)
    return usage(rank, "--floats >= 1, --bucket-mb > 0, --iters >= 1 and --warmup >= 0 are required");

  const size_t total = static_cast<size_t>(floats);
  const size_t unit = kGranule * static_cast<size_t>(n);
  size_t per = static_cast<size_t>(std::llround(bucket_mb * 1024.0 * 1024.0 / sizeof(float)));
  per = std::max(unit, per / unit * unit);
  std::vector<std::pair<size_t, size_t>> buckets;
  std::vector<std::vector<int>> counts;
  size_t largest = 0;
  for (size_t end = total; end > 0;) {
    const size_t begin = end > per ? end - per : 0;
    buckets.emplace_back(begin, end);
    counts.push_back(split(end - begin, n));
    largest = std::max(largest, static_cast<size_t>(counts.back()[static_cast<size_t>(rank)]));
    end = begin;
  }
  std::vector<float> flat(total), shard(std::max<size_t>(largest, 1));
  std::vector<float> pieces(static_cast<size_t>(n) * std::max<size_t>(largest, 1));  // alltoall: every rank's copy
  std::vector<int> rcounts(static_cast<size_t>(n)), rdispls(static_cast<size_t>(n));
  for (size_t i = 0; i < total; ++i)
    flat[i] = static_cast<float>((i * 2654435761u + static_cast<size_t>(rank)) % 1000) * 1e-3f;

  std::vector<double> ms, lat_us;
  for (int it = 0; it < warmup + iters; ++it) {
    if (!ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier")) return 1;
    const double t0 = MPI_Wtime();
    for (size_t b = 0; b < buckets.size(); ++b) {
      float* base = flat.data() + buckets[b].first;
      const std::vector<int>& c = counts[b];
      std::vector<int> displs(c.size(), 0);
      for (size_t q = 1; q < c.size(); ++q) displs[q] = displs[q - 1] + c[q - 1];
      if (how == "mpi") {
        if (!ok(MPI_Reduce_scatter(base, shard.data(), c.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                "MPI_Reduce_scatter"))
          return 1;
      } else {
        const int mine = c[static_cast<size_t>(rank)];
        for (size_t q = 0; q < rcounts.size(); ++q) {
          rcounts[q] = mine;
          rdispls[q] = static_cast<int>(q) * mine;
        }
        if (!ok(MPI_Alltoallv(base, c.data(), displs.data(), MPI_FLOAT, pieces.data(), rcounts.data(), rdispls.data(),
                              MPI_FLOAT, MPI_COMM_WORLD),
                "MPI_Alltoallv"))
          return 1;
        std::memcpy(shard.data(), pieces.data(), sizeof(float) * static_cast<size_t>(mine));
        for (int q = 1; q < n; ++q) {
          const float* p = pieces.data() + static_cast<size_t>(q) * static_cast<size_t>(mine);
          for (int i = 0; i < mine; ++i) shard[static_cast<size_t>(i)] += p[i];
        }
      }
      if (!ok(MPI_Allgatherv(shard.data(), c[static_cast<size_t>(rank)], MPI_FLOAT, base, c.data(), displs.data(),
                             MPI_FLOAT, MPI_COMM_WORLD),
              "MPI_Allgatherv"))
        return 1;
    }
    const double t1 = MPI_Wtime();
    if (it == 0) {  // the first reduction's sums, against the ranks' inputs summed here in rank order
      size_t bad = 0;
      for (size_t i = 0; i < total; ++i) {
        float e = 0;
        for (int q = 0; q < n; ++q) e += static_cast<float>((i * 2654435761u + static_cast<size_t>(q)) % 1000) * 1e-3f;
        const bool same = how == "alltoall" ? flat[i] == e : std::fabs(flat[i] - e) <= 1e-5f * (1 + std::fabs(e));
        bad += same ? 0 : 1;
      }
      if (bad) {
        std::fprintf(stderr, "bench_mpi_collectives: rank %d: %zu of %zu sums are wrong\n", rank, bad, total);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
    double x = 1.0;
    if (!ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier")) return 1;
    const double t2 = MPI_Wtime();
    if (!ok(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce")) return 1;
    const double t3 = MPI_Wtime();
    // The slowest rank's time is the collective's.
    double mine[2] = {t1 - t0, t3 - t2}, worst[2] = {0, 0};
    if (!ok(MPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce")) return 1;
    if (it >= warmup) {
      ms.push_back(worst[0] * 1e3);
      lat_us.push_back(worst[1] * 1e6);
    }
  }
  if (rank == 0) {
    const double bytes = 2.0 * (n - 1) / n * 4.0 * static_cast<double>(total);
    std::printf(
        "{\"ranks\": %d, \"reduce_scatter\": \"%s\", \"floats\": %zu, \"bucket_mb\": %.3f, \"buckets\": %zu, "
        "\"bytes_per_rank\": %.0f, "
        "\"median_ms\": %.4f, \"min_ms\": %.4f, \"latency_us\": %.3f, \"iters\": %d}\n",
        n, how.c_str(), total, bucket_mb, buckets.size(), bytes, median(ms), *std::min_element(ms.begin(), ms.end()),
        median(lat_us), iters);
  }
  MPI_Finalize();
  return 0;
}
