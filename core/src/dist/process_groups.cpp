// process_groups.cpp: see zcode/core/dist/process_groups.h.
#include <zcode/core/dist/process_groups.h>
#include <zcode/core/host_services.h>

#include <stdexcept>
#include <string>
#include <vector>

// A started collective (abi.h's opaque zc_comm_request).
struct zc_comm_request {
  std::unique_ptr<zcode::dist::Request> request;
  std::vector<size_t> counts_a, counts_b;  // what the Communicator's call reads until it completes
  void* avg_data = nullptr;                // AVG: divide these n elements by `divisor` once complete
  size_t avg_n = 0;
  zcode::dist::DType avg_type = zcode::dist::DType::kF32;
  int divisor = 1;
  const char* call = "";
  int rank = 0;
};

namespace zcode::dist {
namespace {

// ---- groups ---------------------------------------------------------------

const char* group_name(zc_group g) {
  switch (g) {
    case ZC_GROUP_WORLD: return "world";
    case ZC_GROUP_DATA: return "data";
    case ZC_GROUP_EXPERT: return "expert";
    case ZC_GROUP_EXPERT_DATA: return "expert_data";
    default: return "unknown";
  }
}

// ---- argument checks --------------------------------------------------------

struct Failure : std::runtime_error {
  zc_status_code code;
  Failure(zc_status_code c, const std::string& m) : std::runtime_error(m), code(c) {}
};

[[noreturn]] void bad(const char* call, const std::string& what) {
  throw Failure(ZC_ERR_INVALID_ARGUMENT, std::string("collectives.") + call + ": " + what);
}

size_t elements(const DLTensor& t, const char* call, const char* which) {
  if (t.device.device_type != kDLCPU)
    throw Failure(ZC_ERR_UNSUPPORTED, std::string("collectives.") + call + ": " + which +
                                          " is not on the CPU (the CUDA backend and its NCCL collectives are not "
                                          "implemented yet)");
  int64_t n = 1, want = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] < 0) bad(call, std::string(which) + " has a negative dimension");
    if (t.strides && t.shape[i] != 1 && t.strides[i] != want) bad(call, std::string(which) + " is not contiguous");
    want *= t.shape[i];
    n *= t.shape[i];
  }
  if (n > 0 && !t.data) bad(call, std::string(which) + " has no data");
  return static_cast<size_t>(n);
}

DType dtype(const DLTensor& t, const char* call, const char* which) {
  const DLDataType d = t.dtype;
  if (d.lanes == 1 && d.code == kDLFloat && d.bits == 32) return DType::kF32;
  if (d.lanes == 1 && d.code == kDLFloat && d.bits == 64) return DType::kF64;
  if (d.lanes == 1 && d.code == kDLInt && d.bits == 64) return DType::kI64;
  bad(call, std::string(which) + " has dtype (code " + std::to_string(d.code) + ", " + std::to_string(d.bits) +
                " bits); expected float32, float64 or int64");
}

void* ptr(const DLTensor& t) { return static_cast<char*>(t.data) + t.byte_offset; }

ReduceOp reduce_op(zc_reduce_op op, DType t, const char* call) {
  switch (op) {
    case ZC_REDUCE_SUM: return ReduceOp::kSum;
    case ZC_REDUCE_AVG:
      if (t == DType::kI64) bad(call, "AVG of int64 (use SUM and divide)");
      return ReduceOp::kSum;
    case ZC_REDUCE_MAX: return ReduceOp::kMax;
    case ZC_REDUCE_MIN: return ReduceOp::kMin;
    default: bad(call, "unknown reduce op " + std::to_string(op));
  }
}

// counts[size] as size_t (NULL: `each` for every rank).
std::vector<size_t> counts_of(const int64_t* counts, int size, size_t each, const char* call) {
  std::vector<size_t> c(static_cast<size_t>(size), each);
  if (counts)
    for (int q = 0; q < size; ++q) {
      if (counts[q] < 0) bad(call, "counts[" + std::to_string(q) + "] = " + std::to_string(counts[q]) + " < 0");
      c[static_cast<size_t>(q)] = static_cast<size_t>(counts[q]);
    }
  return c;
}

size_t total(const std::vector<size_t>& c) {
  size_t n = 0;
  for (size_t x : c) n += x;
  return n;
}

void divide(void* data, size_t n, DType t, int by) {
  if (by <= 1) return;
  if (t == DType::kF32)
    for (size_t i = 0; i < n; ++i) static_cast<float*>(data)[i] /= static_cast<float>(by);
  else if (t == DType::kF64)
    for (size_t i = 0; i < n; ++i) static_cast<double*>(data)[i] /= static_cast<double>(by);
}

// ---- the table's functions ----------------------------------------------------

const ProcessGroups& groups_of(void* ctx) { return *static_cast<const ProcessGroups*>(ctx); }

// Runs `body` (which returns a started Request or nullptr when it ran
// blocking) and maps exceptions to a status naming the call.
template <class F>
zc_status* run(void* ctx, zc_group g, const char* call, zc_comm_request** out, F&& body) {
  int rank = -1;
  try {
    Communicator& c = groups_of(ctx).get(g);
    rank = c.rank();
    if (out) {  // started: the request outlives the call
      auto req = std::make_unique<zc_comm_request>();
      req->call = call;
      req->rank = rank;
      body(c, *req, true);
      *out = req.release();
      return nullptr;
    }
    zc_comm_request req;  // blocking: nothing outlives the call
    req.call = call;
    req.rank = rank;
    body(c, req, false);
    if (req.avg_data) divide(req.avg_data, req.avg_n, req.avg_type, req.divisor);
    return nullptr;
  } catch (const Failure& e) {
    return make_status(e.code, e.what());
  } catch (const std::invalid_argument& e) {
    return make_status(ZC_ERR_INVALID_ARGUMENT, std::string("collectives.") + call + ": " + e.what());
  } catch (const std::exception& e) {
    return make_status(ZC_ERR_INTERNAL, std::string("collectives.") + call + " (group " + group_name(g) + ", rank " +
                                            std::to_string(rank) + "): " + e.what());
  }
}

int32_t rank_fn(void* ctx, zc_group g) {
  try {
    return groups_of(ctx).get(g).rank();
  } catch (...) {
    return -1;
  }
}
int32_t size_fn(void* ctx, zc_group g) {
  try {
    return groups_of(ctx).get(g).size();
  } catch (...) {
    return 0;
  }
}

zc_status* allreduce_fn(void* ctx, zc_group g, DLTensor* inout, zc_reduce_op op, void*, zc_comm_request** out) {
  return run(ctx, g, "allreduce", out, [&](Communicator& c, zc_comm_request& r, bool async) {
    if (!inout) bad("allreduce", "NULL tensor");
    const size_t n = elements(*inout, "allreduce", "inout");
    const DType t = dtype(*inout, "allreduce", "inout");
    const ReduceOp o = reduce_op(op, t, "allreduce");
    if (op == ZC_REDUCE_AVG) {
      r.avg_data = ptr(*inout);
      r.avg_n = n;
      r.avg_type = t;
      r.divisor = c.size();
    }
    if (async) r.request = c.iallreduce(ptr(*inout), n, t, o);
    else c.allreduce(ptr(*inout), n, t, o);
  });
}

zc_status* reduce_scatter_fn(void* ctx, zc_group g, const DLTensor* send, DLTensor* recv, const int64_t* counts,
                             zc_reduce_op op, void*, zc_comm_request** out) {
  return run(ctx, g, "reduce_scatter", out, [&](Communicator& c, zc_comm_request& r, bool async) {
    if (!send || !recv) bad("reduce_scatter", "NULL tensor");
    const size_t ns = elements(*send, "reduce_scatter", "send"), nr = elements(*recv, "reduce_scatter", "recv");
    const DType t = dtype(*send, "reduce_scatter", "send");
    if (dtype(*recv, "reduce_scatter", "recv") != t) bad("reduce_scatter", "send and recv differ in dtype");
    if (!counts && ns % static_cast<size_t>(c.size()) != 0)
      bad("reduce_scatter", "send has " + std::to_string(ns) + " elements, not a multiple of the group's " +
                                std::to_string(c.size()) + " ranks (pass counts)");
    r.counts_a = counts_of(counts, c.size(), ns / static_cast<size_t>(c.size()), "reduce_scatter");
    const size_t mine = r.counts_a[static_cast<size_t>(c.rank())];
    if (total(r.counts_a) != ns || mine != nr)
      bad("reduce_scatter", "counts sum to " + std::to_string(total(r.counts_a)) + " and give this rank " +
                                std::to_string(mine) + ", but send has " + std::to_string(ns) + " and recv " +
                                std::to_string(nr) + " elements");
    const ReduceOp o = reduce_op(op, t, "reduce_scatter");
    if (op == ZC_REDUCE_AVG) {
      r.avg_data = ptr(*recv);
      r.avg_n = nr;
      r.avg_type = t;
      r.divisor = c.size();
    }
    if (async) r.request = c.ireduce_scatter(ptr(*send), ptr(*recv), r.counts_a, t, o);
    else c.reduce_scatter(ptr(*send), ptr(*recv), r.counts_a, t, o);
  });
}

zc_status* allgather_fn(void* ctx, zc_group g, const DLTensor* send, DLTensor* recv, const int64_t* counts, void*,
                        zc_comm_request** out) {
  return run(ctx, g, "allgather", out, [&](Communicator& c, zc_comm_request& r, bool async) {
    if (!send || !recv) bad("allgather", "NULL tensor");
    const size_t ns = elements(*send, "allgather", "send"), nr = elements(*recv, "allgather", "recv");
    const DType t = dtype(*send, "allgather", "send");
    if (dtype(*recv, "allgather", "recv") != t) bad("allgather", "send and recv differ in dtype");
    r.counts_a = counts_of(counts, c.size(), ns, "allgather");
    if (r.counts_a[static_cast<size_t>(c.rank())] != ns || total(r.counts_a) != nr)
      bad("allgather", "counts give this rank " + std::to_string(r.counts_a[static_cast<size_t>(c.rank())]) +
                           " and sum to " + std::to_string(total(r.counts_a)) + ", but send has " + std::to_string(ns) +
                           " and recv " + std::to_string(nr) + " elements");
    if (async) r.request = c.iallgatherv(ptr(*send), ptr(*recv), r.counts_a, t);
    else c.allgatherv(ptr(*send), ptr(*recv), r.counts_a, t);
  });
}

zc_status* alltoallv_fn(void* ctx, zc_group g, const DLTensor* send, const int64_t* send_counts, DLTensor* recv,
                        const int64_t* recv_counts, void*, zc_comm_request** out) {
  return run(ctx, g, "alltoallv", out, [&](Communicator& c, zc_comm_request& r, bool async) {
    if (!send || !recv || !send_counts || !recv_counts) bad("alltoallv", "NULL argument");
    const size_t ns = elements(*send, "alltoallv", "send"), nr = elements(*recv, "alltoallv", "recv");
    const DType t = dtype(*send, "alltoallv", "send");
    if (dtype(*recv, "alltoallv", "recv") != t) bad("alltoallv", "send and recv differ in dtype");
    r.counts_a = counts_of(send_counts, c.size(), 0, "alltoallv");
    r.counts_b = counts_of(recv_counts, c.size(), 0, "alltoallv");
    if (total(r.counts_a) > ns || total(r.counts_b) > nr)
      bad("alltoallv", "the counts sum to " + std::to_string(total(r.counts_a)) + " sent and " +
                           std::to_string(total(r.counts_b)) + " received, more than send's " + std::to_string(ns) +
                           " or recv's " + std::to_string(nr) + " elements");
    if (async) r.request = c.ialltoallv(ptr(*send), r.counts_a, ptr(*recv), r.counts_b, t);
    else c.alltoallv(ptr(*send), r.counts_a, ptr(*recv), r.counts_b, t);
  });
}

zc_status* broadcast_fn(void* ctx, zc_group g, DLTensor* inout, int32_t root, void*, zc_comm_request** out) {
  return run(ctx, g, "broadcast", out, [&](Communicator& c, zc_comm_request& r, bool async) {
    if (!inout) bad("broadcast", "NULL tensor");
    if (root < 0 || root >= c.size())
      bad("broadcast",
          "root " + std::to_string(root) + " is not a rank of the group (size " + std::to_string(c.size()) + ")");
    const size_t n = elements(*inout, "broadcast", "inout");
    const DType t = dtype(*inout, "broadcast", "inout");
    if (async) r.request = c.ibroadcast(ptr(*inout), n, t, root);
    else c.broadcast(ptr(*inout), n, t, root);
  });
}

zc_status* barrier_fn(void* ctx, zc_group g) {
  return run(ctx, g, "barrier", nullptr, [&](Communicator& c, zc_comm_request&, bool) { c.barrier(); });
}

zc_status* wait_fn(void*, zc_comm_request* req) {
  if (!req) return nullptr;
  std::unique_ptr<zc_comm_request> r(req);
  try {
    if (r->request) r->request->wait();
    if (r->avg_data) divide(r->avg_data, r->avg_n, r->avg_type, r->divisor);
    return nullptr;
  } catch (const std::exception& e) {
    return make_status(ZC_ERR_INTERNAL, std::string("collectives.") + r->call + " (wait, rank " +
                                            std::to_string(r->rank) + "): " + e.what());
  }
}

zc_collectives make_table(const void* ctx) {
  zc_collectives t{};
  t.struct_size = sizeof(zc_collectives);
  t.ctx = const_cast<void*>(ctx);
  t.rank = &rank_fn;
  t.size = &size_fn;
  t.allreduce = &allreduce_fn;
  t.reduce_scatter = &reduce_scatter_fn;
  t.allgather = &allgather_fn;
  t.alltoallv = &alltoallv_fn;
  t.broadcast = &broadcast_fn;
  t.barrier = &barrier_fn;
  t.wait = &wait_fn;
  return t;
}

}  // namespace

ProcessGroups::ProcessGroups(Communicator& world, int expert_parallel) : world_(world), k_(expert_parallel) {
  const int w = world.size(), r = world.rank();
  if (k_ < 1 || w % k_ != 0)
    throw std::invalid_argument("distributed.expert_parallel: " + std::to_string(k_) +
                                " does not divide the world size " + std::to_string(w));
  // Both splits are collectives over the world: every rank makes them, in this order.
  expert_ = world.split(r / k_, r);
  expert_data_ = k_ == 1 ? nullptr : world.split(r % k_, r);
}

Communicator& ProcessGroups::get(zc_group g) const {
  switch (g) {
    case ZC_GROUP_WORLD:
    case ZC_GROUP_DATA: return world_;
    case ZC_GROUP_EXPERT: return *expert_;
    case ZC_GROUP_EXPERT_DATA: return expert_data_ ? *expert_data_ : world_;
    default: throw std::invalid_argument("unknown process group " + std::to_string(g));
  }
}

CollectivesService::CollectivesService(const ProcessGroups& groups) : groups_(groups), table_(make_table(&groups)) {}

const zc_collectives* CollectivesService::single_process() {
  // Never destroyed: plugins may keep the pointer for the life of the process.
  static Communicator* world = make_single_process().release();
  static ProcessGroups* groups = new ProcessGroups(*world, 1);
  static const zc_collectives table = make_table(groups);
  return &table;
}

}  // namespace zcode::dist
