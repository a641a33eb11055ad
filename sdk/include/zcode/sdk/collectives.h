// zcode/sdk/collectives.h: the job's collectives (zc_collectives, ABI 1.5)
// as typed C++ calls on spans, for plugins (the optimizers' ZeRO-1
// reductions, a model's expert dispatch).
//
// The rules are the ABI's (abi.h, "Collectives"): every rank of a group makes
// the same calls in the same order, only on the thread the host called the
// plugin on, during that call. A failed collective throws Error with the
// host's message; the SDK's thunks turn it into the call's status, and the
// host then ends the job.
//
// Under a host older than 1.5 (no zc_host_services.collectives) every group
// has one rank and the calls are local copies, so a plugin written against
// this header runs unchanged in one process.
#pragma once

#include <zcode/abi.h>
#include <zcode/sdk/error.h>
#include <zcode/sdk/host.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace zcode::sdk {

namespace detail {
template <class T>
constexpr DLDataType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return kF32;
  else if constexpr (std::is_same_v<T, double>) return kF64;
  else {
    static_assert(std::is_same_v<T, int64_t>, "collectives carry float, double or int64_t");
    return kI64;
  }
}
}  // namespace detail

/// A started non-blocking collective: wait() completes it (throws Error when
/// it failed). Move-only; destroying a request that was not waited for waits
/// (and swallows an error: call wait() to see it).
class CommRequest {
 public:
  CommRequest() = default;
  CommRequest(const zc_host_services* host, const zc_collectives* c, zc_comm_request* r) : h_(host), c_(c), r_(r) {}
  CommRequest(CommRequest&& o) noexcept : h_(o.h_), c_(o.c_), r_(o.r_) { o.r_ = nullptr; }
  CommRequest& operator=(CommRequest&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      h_ = o.h_;
      c_ = o.c_;
      r_ = o.r_;
      o.r_ = nullptr;
    }
    return *this;
  }
  CommRequest(const CommRequest&) = delete;
  CommRequest& operator=(const CommRequest&) = delete;
  ~CommRequest() { finish_quietly(); }

  /// True until wait() (a local copy under an older host is done at once).
  bool pending() const { return r_ != nullptr; }
  void wait() {
    if (!r_) return;
    zc_comm_request* r = r_;
    r_ = nullptr;
    check(h_, c_->wait(c_->ctx, r));
  }

 private:
  void finish_quietly() {
    if (!r_) return;
    zc_status* s = c_->wait(c_->ctx, r_);
    r_ = nullptr;
    if (s && h_ && h_->status_release) h_->status_release(h_->host_ctx, s);
  }
  const zc_host_services* h_ = nullptr;
  const zc_collectives* c_ = nullptr;
  zc_comm_request* r_ = nullptr;
};

/// The collectives of the host that created the instance. Cheap to copy.
class Collectives {
 public:
  explicit Collectives(const zc_host_services* host = nullptr)
      : h_(host), c_(host && ZC_STRUCT_HAS_FIELD(host, zc_host_services, collectives) ? host->collectives : nullptr) {}

  /// This process's rank in `g`, and the group's size (0 and 1 without a 1.5 host).
  int rank(zc_group g = ZC_GROUP_WORLD) const { return c_ ? c_->rank(c_->ctx, g) : 0; }
  int size(zc_group g = ZC_GROUP_WORLD) const { return c_ ? c_->size(c_->ctx, g) : 1; }

  /// v becomes the elementwise reduction over `g`.
  template <class T>
  void allreduce(std::span<T> v, zc_reduce_op op, zc_group g, void* stream = nullptr) const {
    if (!c_) return;  // one rank: SUM, MAX, MIN and AVG of one value are the value
    int64_t n[1];
    DLTensor t = view(v.data(), v.size(), n);
    check(h_, c_->allreduce(c_->ctx, g, &t, op, stream, nullptr));
  }
  /// Every rank's `mine` (counts[rank] elements; counts[size]) concatenated
  /// in rank order into `all` (Σ counts elements).
  template <class T>
  void allgather(std::span<const T> mine, std::span<T> all, std::span<const int64_t> counts, zc_group g,
                 void* stream = nullptr) const {
    if (!c_) {
      copy_local(mine, all);
      return;
    }
    need(counts.size() == static_cast<size_t>(size(g)), "allgather: one count per rank");
    int64_t ns[1], nr[1];
    DLTensor s = view(mine.data(), mine.size(), ns), r = view(all.data(), all.size(), nr);
    check(h_, c_->allgather(c_->ctx, g, &s, &r, counts.data(), stream, nullptr));
  }
  /// send (Σ counts) reduced over `g`; this rank receives counts[rank] elements.
  template <class T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv, std::span<const int64_t> counts, zc_reduce_op op,
                      zc_group g, void* stream = nullptr) const {
    if (!c_) {
      copy_local(send, recv);
      return;
    }
    need(counts.size() == static_cast<size_t>(size(g)), "reduce_scatter: one count per rank");
    int64_t ns[1], nr[1];
    DLTensor s = view(send.data(), send.size(), ns), r = view(recv.data(), recv.size(), nr);
    check(h_, c_->reduce_scatter(c_->ctx, g, &s, &r, counts.data(), op, stream, nullptr));
  }
  /// send_counts[q] consecutive elements go to rank q; recv_counts[q] arrive
  /// from rank q (see zc_collectives.alltoallv). Blocking, or started when
  /// `request` is given.
  template <class T>
  void alltoallv(std::span<const T> send, std::span<const int64_t> send_counts, std::span<T> recv,
                 std::span<const int64_t> recv_counts, zc_group g, CommRequest* request = nullptr,
                 void* stream = nullptr) const {
    if (!c_) {
      copy_local(send, recv);
      return;
    }
    need(send_counts.size() == static_cast<size_t>(size(g)) && recv_counts.size() == send_counts.size(),
         "alltoallv: one send and one receive count per rank");
    int64_t ns[1], nr[1];
    DLTensor s = view(send.data(), send.size(), ns), r = view(recv.data(), recv.size(), nr);
    zc_comm_request* req = nullptr;
    check(h_,
          c_->alltoallv(c_->ctx, g, &s, send_counts.data(), &r, recv_counts.data(), stream, request ? &req : nullptr));
    if (request) *request = CommRequest(h_, c_, req);
  }
  /// Root's v to every rank of `g`.
  template <class T>
  void broadcast(std::span<T> v, int root, zc_group g, void* stream = nullptr) const {
    if (!c_) return;
    int64_t n[1];
    DLTensor t = view(v.data(), v.size(), n);
    check(h_, c_->broadcast(c_->ctx, g, &t, root, stream, nullptr));
  }
  void barrier(zc_group g) const {
    if (c_) check(h_, c_->barrier(c_->ctx, g));
  }

 private:
  // A 1-D view of n elements; `shape` (one int64) holds n and must outlive it.
  template <class T>
  static DLTensor view(T* data, size_t n, int64_t* shape) {
    shape[0] = static_cast<int64_t>(n);
    return make_view(const_cast<std::remove_const_t<T>*>(data), detail::dtype_of<std::remove_const_t<T>>(), 1, shape);
  }
  template <class T>
  static void copy_local(std::span<const T> from, std::span<T> to) {
    need(from.size() == to.size(), "a one-rank collective's input and output differ in size");
    if (!from.empty() && from.data() != to.data()) std::memmove(to.data(), from.data(), from.size() * sizeof(T));
  }
  static void need(bool ok, const char* what) {
    if (!ok) throw Error(ZC_ERR_INVALID_ARGUMENT, std::string("collectives: ") + what);
  }
  const zc_host_services* h_;
  const zc_collectives* c_;
};

}  // namespace zcode::sdk
