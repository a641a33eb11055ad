// zcode/sdk/host.h: C++ views of the host services, sinks, state and tensors.
#pragma once

#include <zcode/abi.h>
#include <zcode/sdk/error.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace zcode::sdk {

/// The host services handed to the plugin. Cheap to copy (one pointer).
class Host {
 public:
  explicit Host(const zc_host_services* s = nullptr) : s_(s) {}
  const zc_host_services* raw() const { return s_; }
  explicit operator bool() const { return s_ != nullptr; }

  void log(zc_log_level level, std::string_view component, const std::string& msg) const {
    if (s_ && s_->log) s_->log(s_->host_ctx, level, std::string(component).c_str(), msg.c_str());
  }
  void info(std::string_view c, const std::string& m) const { log(ZC_LOG_INFO, c, m); }
  void warn(std::string_view c, const std::string& m) const { log(ZC_LOG_WARN, c, m); }
  void debug(std::string_view c, const std::string& m) const { log(ZC_LOG_DEBUG, c, m); }

  uint64_t seed() const { return s_ ? s_->seed : 0; }
  /// Independent 64-bit seed for a named stream (see zc_host_services).
  uint64_t derive_seed(const char* stream) const {
    return (s_ && s_->derive_seed) ? s_->derive_seed(s_->host_ctx, stream) : seed();
  }
  int num_threads() const { return (s_ && s_->num_threads > 0) ? s_->num_threads : 1; }
  bool stop_requested() const { return s_ && s_->stop_requested && s_->stop_requested(s_->host_ctx); }
  DLDevice device() const { return s_ ? s_->device : DLDevice{kDLCPU, 0}; }

 private:
  const zc_host_services* s_;
};

/// Appends ids to a caller-owned zc_ids buffer.
class IdSink {
 public:
  explicit IdSink(zc_ids* out) : out_(out) {}
  void append(const int32_t* ids, size_t n) {
    if (n == 0) return;
    int32_t* dst = out_->reserve(out_, n);
    if (!dst) throw Error(ZC_ERR_OUT_OF_MEMORY, "token buffer: out of memory");
    std::memcpy(dst, ids, n * sizeof(int32_t));
    out_->size += n;
  }
  void push(int32_t id) { append(&id, 1); }

 private:
  zc_ids* out_;
};

/// Appends bytes to a caller-owned zc_bytes buffer.
class ByteSink {
 public:
  explicit ByteSink(zc_bytes* out) : out_(out) {}
  void append(std::string_view s) {
    if (s.empty()) return;
    char* dst = out_->reserve(out_, s.size());
    if (!dst) throw Error(ZC_ERR_OUT_OF_MEMORY, "byte buffer: out of memory");
    std::memcpy(dst, s.data(), s.size());
    out_->size += s.size();
  }

 private:
  zc_bytes* out_;
};

/// Puts named scalars into a host sink (ignored when the sink is NULL).
class MetricsSink {
 public:
  explicit MetricsSink(const zc_metrics_sink* s) : s_(s) {}
  void put(const char* name, double v) const {
    if (s_ && s_->put) s_->put(s_->ctx, name, v);
  }
  void put(const std::string& name, double v) const { put(name.c_str(), v); }

 private:
  const zc_metrics_sink* s_;
};

/// Makes a CPU DLTensor view (not owning) of `data` with `shape`.
/// `shape` must outlive the view.
inline DLTensor make_view(void* data, DLDataType dtype, int32_t ndim, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}
constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr DLDataType kF64{kDLFloat, 64, 1};
constexpr DLDataType kI32{kDLInt, 32, 1};
constexpr DLDataType kI64{kDLInt, 64, 1};
constexpr DLDataType kU8{kDLUInt, 8, 1};

/// Number of elements of a tensor.
inline int64_t numel(const DLTensor& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}
inline bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}
/// Bytes of a contiguous tensor.
inline size_t nbytes(const DLTensor& t) {
  return static_cast<size_t>(numel(t)) * ((t.dtype.bits * t.dtype.lanes + 7) / 8);
}
/// Typed pointer to the first element (honours byte_offset).
template <class T>
T* data_ptr(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

/// Writes a stage's state (tensors and one JSON blob) through the host.
class StateWriter {
 public:
  StateWriter(const zc_host_services* host, const zc_state_writer* w) : host_(host), w_(w) {}
  void put_tensor(const std::string& name, const DLTensor& t) const {
    check(host_, w_->put_tensor(w_->ctx, name.c_str(), &t));
  }
  /// Convenience: a contiguous fp32/int buffer under `name`.
  void put(const std::string& name, const void* data, DLDataType dtype, std::span<const int64_t> shape) const {
    int64_t sh[8];
    for (size_t i = 0; i < shape.size() && i < 8; ++i) sh[i] = shape[i];
    DLTensor t = make_view(const_cast<void*>(data), dtype, static_cast<int32_t>(shape.size()), sh);
    put_tensor(name, t);
  }
  void put_json(const std::string& json) const { check(host_, w_->put_json(w_->ctx, json.data(), json.size())); }
  /// Elements [begin, begin + count) of the row-major order of the tensor
  /// `name` of shape `full_shape`, this rank's part (zc_state_writer.
  /// put_tensor_slice, ABI 1.5). Throws Error(ZC_ERR_UNSUPPORTED) under an
  /// older host, which cannot store parts.
  void put_slice(const std::string& name, const void* data, DLDataType dtype, std::span<const int64_t> full_shape,
                 int64_t begin, int64_t count) const {
    if (!ZC_STRUCT_HAS_FIELD(w_, zc_state_writer, put_tensor_slice) || !w_->put_tensor_slice)
      throw Error(ZC_ERR_UNSUPPORTED, "state: tensor '" + name +
                                          "' is held in parts (ZeRO-1), which this host cannot save (needs ABI 1.5)");
    int64_t n[1] = {count};
    DLTensor t = make_view(const_cast<void*>(data), dtype, 1, n);
    check(host_, w_->put_tensor_slice(w_->ctx, name.c_str(), &t, static_cast<int32_t>(full_shape.size()),
                                      full_shape.data(), begin));
  }

 private:
  const zc_host_services* host_;
  const zc_state_writer* w_;
};

/// Reads what StateWriter wrote.
class StateReader {
 public:
  explicit StateReader(const zc_state_reader* r, const zc_host_services* host = nullptr) : r_(r), host_(host) {}
  /// The tensor or nullptr.
  const DLTensor* find(const std::string& name) const { return r_->get_tensor(r_->ctx, name.c_str()); }
  /// The tensor; throws Error(ZC_ERR_NOT_FOUND) naming it when missing.
  const DLTensor& get(const std::string& name) const {
    const DLTensor* t = find(name);
    if (!t) throw Error(ZC_ERR_NOT_FOUND, "state: tensor '" + name + "' missing");
    return *t;
  }
  /// Copies tensor `name` into `dst` after checking dtype and element count.
  void copy_to(const std::string& name, void* dst, DLDataType dtype, int64_t count) const {
    const DLTensor& t = get(name);
    if (!same_dtype(t.dtype, dtype) || numel(t) != count)
      throw Error(ZC_ERR_DATA, "state: tensor '" + name + "' has " + std::to_string(numel(t)) +
                                   " elements of a different shape or dtype than expected (" + std::to_string(count) +
                                   ")");
    std::memcpy(dst, data_ptr<char>(t), nbytes(t));
  }
  /// Copies elements [begin, begin + count) of the row-major order of
  /// tensor `name` (whole: `full_numel` elements of `dtype`) into `dst`,
  /// whether it was saved whole or in parts (zc_state_reader.
  /// read_tensor_slice, ABI 1.5; an older host's whole tensor is sliced
  /// here). Throws Error naming the tensor when it is missing or has another
  /// size or dtype.
  void read_slice(const std::string& name, int64_t full_numel, int64_t begin, void* dst, DLDataType dtype,
                  int64_t count) const {
    if (ZC_STRUCT_HAS_FIELD(r_, zc_state_reader, read_tensor_slice) && r_->read_tensor_slice) {
      int64_t n[1] = {count};
      DLTensor t = make_view(dst, dtype, 1, n);
      check(host_, r_->read_tensor_slice(r_->ctx, name.c_str(), full_numel, begin, &t));
      return;
    }
    const DLTensor& t = get(name);
    if (!same_dtype(t.dtype, dtype) || numel(t) != full_numel || begin < 0 || count < 0 || begin + count > full_numel)
      throw Error(ZC_ERR_DATA, "state: tensor '" + name + "' has " + std::to_string(numel(t)) +
                                   " elements or another dtype; expected " + std::to_string(full_numel) +
                                   " (reading [" + std::to_string(begin) + ", " + std::to_string(begin + count) + "))");
    const size_t esize = (dtype.bits * dtype.lanes + 7) / 8;
    std::memcpy(dst, data_ptr<char>(t) + static_cast<size_t>(begin) * esize, static_cast<size_t>(count) * esize);
  }
  std::string_view json() const { return r_->json ? std::string_view(r_->json, r_->json_len) : std::string_view(); }
  size_t num_tensors() const { return r_->num_tensors(r_->ctx); }
  const char* tensor_name(size_t i) const { return r_->tensor_name(r_->ctx, i); }

 private:
  const zc_state_reader* r_;
  const zc_host_services* host_;
};

}  // namespace zcode::sdk
