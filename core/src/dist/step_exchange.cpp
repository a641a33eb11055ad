// step_exchange.cpp: see step_exchange.h.
#include "step_exchange.h"

#include <algorithm>
#include <cstring>

namespace zcode::dist {
namespace {

template <class T>
void append(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}

struct Reader {
  const std::string& s;
  size_t at = 0;
  int rank;
  template <class T>
  T get() {
    if (at + sizeof(T) > s.size()) fail();
    T v;
    std::memcpy(&v, s.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  [[noreturn]] void fail() const {
    throw CommError("data-parallel step: rank " + std::to_string(rank) +
                    "'s metrics record is malformed (the ranks disagree on the step)");
  }
};

}  // namespace

void StepExchange::put_thunk(void* ctx, const char* name, double v) {
  auto* x = static_cast<StepExchange*>(ctx);
  const size_t len = std::min<size_t>(std::strlen(name), 0xffff);
  append<uint16_t>(x->record_, static_cast<uint16_t>(len));
  x->record_.append(name, len);
  append<double>(x->record_, v);
  ++x->micro_count_;
}

void StepExchange::open_micro() {
  micro_start_ = record_.size();
  micro_count_ = 0;
  append<uint32_t>(record_, 0);
}

void StepExchange::close_micro() { std::memcpy(record_.data() + micro_start_, &micro_count_, sizeof(uint32_t)); }

StepExchange::Result StepExchange::exchange(Communicator& comm, size_t micro_batches, double data_wait_ms,
                                            double compute_ms, double sync_wait_ms, core::StepSink& out) {
  // The open (empty) micro-batch after the last end_micro() is dropped.
  record_.resize(micro_start_);
  std::string mine;
  append<double>(mine, data_wait_ms);
  append<double>(mine, compute_ms);
  append<double>(mine, sync_wait_ms);
  append<uint64_t>(mine, micro_batches);
  mine += record_;
  const std::vector<std::string> all = comm.allgather_bytes(mine);
  Result r;
  std::vector<Reader> readers;
  readers.reserve(all.size());
  for (size_t q = 0; q < all.size(); ++q) {
    readers.push_back(Reader{all[q], 0, static_cast<int>(q)});
    r.max_data_wait_ms = std::max(r.max_data_wait_ms, readers.back().get<double>());
    const double compute = readers.back().get<double>();
    if (compute > r.max_compute_ms) r.max_compute_ms = compute, r.slowest_rank = static_cast<int>(q);
    r.max_sync_wait_ms = std::max(r.max_sync_wait_ms, readers.back().get<double>());
    if (readers.back().get<uint64_t>() != micro_batches) readers.back().fail();
  }
  std::string name;
  for (size_t m = 0; m < micro_batches; ++m)
    for (Reader& rd : readers) {
      const uint32_t n = rd.get<uint32_t>();
      for (uint32_t i = 0; i < n; ++i) {
        const uint16_t len = rd.get<uint16_t>();
        if (rd.at + len > rd.s.size()) rd.fail();
        name.assign(rd.s.data() + rd.at, len);
        rd.at += len;
        const double v = rd.get<double>();
        if (name == "loss") r.loss += v;
        out.put(name.c_str(), v);
      }
    }
  for (const Reader& rd : readers)
    if (rd.at != rd.s.size()) rd.fail();
  begin();
  return r;
}

}  // namespace zcode::dist
