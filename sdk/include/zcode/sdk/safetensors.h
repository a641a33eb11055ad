// zcode/sdk/safetensors.h: a bounds-checked reader and writer of the
// safetensors format (header-only; RapidJSON for the header).
//
// Format (https://huggingface.co/docs/safetensors, "Format"):
//   [8 bytes]  N, little-endian uint64: size of the JSON header
//   [N bytes]  JSON object, UTF-8, may be right-padded with spaces:
//              {"__metadata__": {"k": "v", ...},
//               "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   [rest]     the byte buffer; offsets are relative to its start.
//
// The reader trusts nothing in the file. It refuses, with one message naming
// the file, a header larger than the file or than kMaxHeaderBytes, invalid
// JSON, JSON nested deeper than json::kMaxDepth (parsed iteratively), unknown
// dtypes, negative or overflowing shapes, offsets outside the
// buffer, a byte size that disagrees with dtype x shape, overlapping tensors,
// holes in the buffer, and duplicate names. After Reader construction every
// TensorView points inside memory the Reader owns, so no later access can go
// out of bounds. Tensor data is copied into a 64-byte-aligned buffer, so
// views are always aligned for their dtype.
//
// The writer emits tensors in name order (so a file's bytes depend only on
// its contents), pads the header with spaces to a multiple of 8 bytes as the
// reference implementation does, and `save` writes atomically
// (sdk/file.h: temp file, fsync, rename, fsync of the folder).
#pragma once

#include <zcode/sdk/error.h>
#include <zcode/sdk/file.h>
#include <zcode/sdk/host.h>
#include <zcode/sdk/json.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zcode::sdk::safetensors {

/// Largest JSON header accepted (the reference implementation's limit).
inline constexpr uint64_t kMaxHeaderBytes = 100u * 1000u * 1000u;
/// Largest rank accepted.
inline constexpr size_t kMaxRank = 16;

/// Bytes per element of a safetensors dtype string, or 0 when unknown.
inline size_t dtype_size(std::string_view dt) {
  if (dt == "F64" || dt == "I64" || dt == "U64") return 8;
  if (dt == "F32" || dt == "I32" || dt == "U32") return 4;
  if (dt == "F16" || dt == "BF16" || dt == "I16" || dt == "U16") return 2;
  if (dt == "I8" || dt == "U8" || dt == "BOOL" || dt == "F8_E4M3" || dt == "F8_E5M2") return 1;
  return 0;
}

/// DLPack dtype of a safetensors dtype string. BOOL maps to uint8 (DLPack 0.6
/// has no bool code); F8 types map to uint8 bit patterns. Throws on unknown.
inline DLDataType to_dlpack(std::string_view dt) {
  auto make = [](uint8_t code, uint8_t bits) { return DLDataType{code, bits, 1}; };
  if (dt == "F64") return make(kDLFloat, 64);
  if (dt == "F32") return make(kDLFloat, 32);
  if (dt == "F16") return make(kDLFloat, 16);
  if (dt == "BF16") return make(kDLBfloat, 16);
  if (dt == "I64") return make(kDLInt, 64);
  if (dt == "I32") return make(kDLInt, 32);
  if (dt == "I16") return make(kDLInt, 16);
  if (dt == "I8") return make(kDLInt, 8);
  if (dt == "U64") return make(kDLUInt, 64);
  if (dt == "U32") return make(kDLUInt, 32);
  if (dt == "U16") return make(kDLUInt, 16);
  if (dt == "U8" || dt == "BOOL" || dt == "F8_E4M3" || dt == "F8_E5M2") return make(kDLUInt, 8);
  throw Error(ZC_ERR_DATA, "safetensors: unknown dtype \"" + std::string(dt) + "\"");
}

/// safetensors dtype string of a DLPack dtype; throws ZC_ERR_INVALID_ARGUMENT
/// for vector lanes or a dtype safetensors cannot name.
inline const char* from_dlpack(DLDataType t) {
  if (t.lanes != 1) throw Error(ZC_ERR_INVALID_ARGUMENT, "safetensors: vector dtypes (lanes != 1) are not supported");
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 64) return "F64";
      if (t.bits == 32) return "F32";
      if (t.bits == 16) return "F16";
      break;
    case kDLBfloat:
      if (t.bits == 16) return "BF16";
      break;
    case kDLInt:
      if (t.bits == 64) return "I64";
      if (t.bits == 32) return "I32";
      if (t.bits == 16) return "I16";
      if (t.bits == 8) return "I8";
      break;
    case kDLUInt:
      if (t.bits == 64) return "U64";
      if (t.bits == 32) return "U32";
      if (t.bits == 16) return "U16";
      if (t.bits == 8) return "U8";
      break;
    default: break;
  }
  throw Error(ZC_ERR_INVALID_ARGUMENT, "safetensors: dtype code " + std::to_string(t.code) + " bits " +
                                           std::to_string(t.bits) + " has no safetensors name");
}

/// One tensor inside a Reader. `data` points into the Reader's aligned buffer
/// and is valid for the Reader's life.
struct TensorView {
  std::string name;
  std::string dtype;  // "F32", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  /// A borrowed CPU DLTensor over this view (shape points into this object,
  /// so the view lives as long as the TensorView).
  DLTensor dltensor() const {
    DLTensor t{};
    t.data = const_cast<uint8_t*>(data);
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = to_dlpack(dtype);
    t.shape = const_cast<int64_t*>(shape.data());
    t.strides = nullptr;
    t.byte_offset = 0;
    return t;
  }
};

namespace detail {

struct AlignedFree {
  void operator()(uint8_t* p) const noexcept { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedFree>;

inline AlignedBytes aligned_bytes(size_t n) {
  size_t rounded = ((n + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw Error(ZC_ERR_OUT_OF_MEMORY, "safetensors: out of memory allocating " + std::to_string(n) + " bytes");
  return AlignedBytes(static_cast<uint8_t*>(p));
}

inline uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace detail

/// A parsed, fully validated safetensors file held in memory.
class Reader {
 public:
  /// Parses `bytes` (the whole file). `source` names it in errors (a path).
  /// Throws Error(ZC_ERR_DATA, "<source>: safetensors: ...") on any
  /// inconsistency; never reads outside `bytes`.
  Reader(std::span<const uint8_t> bytes, std::string source) : source_(std::move(source)) { parse(bytes); }

  /// Reads and parses the file at `path`. Throws Error(ZC_ERR_NOT_FOUND) when
  /// it cannot be opened, Error(ZC_ERR_IO) on a read error, and the parse
  /// errors above.
  static Reader open(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw Error(ZC_ERR_NOT_FOUND, path + ": cannot open (" + std::strerror(errno) + ")");
    std::vector<uint8_t> buf;
    uint8_t chunk[1 << 16];
    size_t got = 0;
    while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) buf.insert(buf.end(), chunk, chunk + got);
    bool err = std::ferror(f) != 0;
    std::fclose(f);
    if (err) throw Error(ZC_ERR_IO, path + ": read error");
    return Reader(buf, path);
  }

  const std::string& source() const { return source_; }
  /// The `__metadata__` string map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// All tensors, in file order of their offsets.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  /// The tensor named `name`, or nullptr.
  const TensorView* find(std::string_view name) const {
    auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &tensors_[it->second];
  }
  /// The tensor named `name`; throws Error(ZC_ERR_NOT_FOUND) naming the file.
  const TensorView& at(std::string_view name) const {
    const TensorView* t = find(name);
    if (!t) throw Error(ZC_ERR_NOT_FOUND, source_ + ": tensor '" + std::string(name) + "' not found");
    return *t;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ZC_ERR_DATA, source_ + ": safetensors: " + what);
  }

  void parse(std::span<const uint8_t> bytes) {
    if (bytes.size() < 8)
      fail("file is " + std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header size");
    const uint64_t n = detail::read_le64(bytes.data());
    if (n > kMaxHeaderBytes)
      fail("header size " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeaderBytes));
    if (n > bytes.size() - 8)
      fail("header size " + std::to_string(n) + " exceeds the file (" + std::to_string(bytes.size() - 8) +
           " bytes after the size field)");
    if (n < 2) fail("header is " + std::to_string(n) + " bytes, too short for a JSON object");
    std::string header(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<size_t>(n));
    if (header[0] != '{') fail("header does not start with '{'");
    const size_t data_size = bytes.size() - 8 - static_cast<size_t>(n);

    rapidjson::Document doc;
    const json::Result parsed = json::parse(doc, header);
    if (parsed.too_deep) fail("header: " + parsed.message());
    if (!parsed.ok()) fail("header is not valid JSON (at byte " + std::to_string(parsed.offset) + ")");
    if (!doc.IsObject()) fail("header is not a JSON object");

    struct Span {
      uint64_t begin, end;
      size_t index;
    };
    std::vector<Span> spans;
    for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
      std::string name(it->name.GetString(), it->name.GetStringLength());
      const rapidjson::Value& v = it->value;
      if (name == "__metadata__") {
        if (!v.IsObject()) fail("__metadata__ is not an object");
        for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
          if (!m->value.IsString())
            fail("__metadata__ value of '" + std::string(m->name.GetString()) + "' is not a string");
          metadata_[std::string(m->name.GetString(), m->name.GetStringLength())] =
              std::string(m->value.GetString(), m->value.GetStringLength());
        }
        continue;
      }
      if (index_.count(name)) fail("duplicate tensor name '" + name + "'");
      if (!v.IsObject()) fail("entry '" + name + "' is not an object");
      auto dt = v.FindMember("dtype");
      auto sh = v.FindMember("shape");
      auto off = v.FindMember("data_offsets");
      if (dt == v.MemberEnd() || !dt->value.IsString()) fail("tensor '" + name + "': missing string field \"dtype\"");
      if (sh == v.MemberEnd() || !sh->value.IsArray()) fail("tensor '" + name + "': missing array field \"shape\"");
      if (off == v.MemberEnd() || !off->value.IsArray() || off->value.Size() != 2)
        fail("tensor '" + name + "': \"data_offsets\" must be an array of 2 integers");
      TensorView t;
      t.name = name;
      t.dtype = dt->value.GetString();
      const size_t esize = dtype_size(t.dtype);
      if (esize == 0) fail("tensor '" + name + "': unknown dtype \"" + t.dtype + "\"");
      if (sh->value.Size() > kMaxRank)
        fail("tensor '" + name + "': rank " + std::to_string(sh->value.Size()) + " exceeds " +
             std::to_string(kMaxRank));
      uint64_t count = 1;
      bool overflow = false;
      for (const auto& d : sh->value.GetArray()) {
        if (!d.IsUint64() || d.GetUint64() > static_cast<uint64_t>(INT64_MAX))
          fail("tensor '" + name + "': shape entries must be non-negative integers");
        uint64_t dim = d.GetUint64();
        t.shape.push_back(static_cast<int64_t>(dim));
        if (dim != 0 && count > UINT64_MAX / dim) overflow = true;
        else count *= dim;
      }
      const rapidjson::Value& b = off->value[0];
      const rapidjson::Value& e = off->value[1];
      if (!b.IsUint64() || !e.IsUint64()) fail("tensor '" + name + "': data_offsets must be non-negative integers");
      const uint64_t begin = b.GetUint64(), end = e.GetUint64();
      if (begin > end)
        fail("tensor '" + name + "': data_offsets begin " + std::to_string(begin) + " > end " + std::to_string(end));
      if (end > data_size)
        fail("tensor '" + name + "': data_offsets end " + std::to_string(end) + " exceeds the data buffer (" +
             std::to_string(data_size) + " bytes; file truncated?)");
      if (overflow || (count != 0 && esize > UINT64_MAX / count) || count * esize != end - begin)
        fail("tensor '" + name + "': " + std::to_string(end - begin) + " bytes do not match dtype " + t.dtype +
             " x shape");
      t.nbytes = static_cast<size_t>(end - begin);
      index_[name] = tensors_.size();
      spans.push_back({begin, end, tensors_.size()});
      tensors_.push_back(std::move(t));
    }
    // The buffer must be covered exactly: sorted spans, no overlap, no hole.
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    uint64_t cursor = 0;
    for (const Span& s : spans) {
      if (s.begin < cursor) fail("tensor '" + tensors_[s.index].name + "' overlaps the previous tensor");
      if (s.begin > cursor) fail("hole in the data buffer before tensor '" + tensors_[s.index].name + "'");
      cursor = s.end;
    }
    if (cursor != data_size)
      fail("data buffer is " + std::to_string(data_size) + " bytes but the tensors cover " + std::to_string(cursor) +
           " (trailing bytes)");

    data_ = detail::aligned_bytes(data_size);
    if (data_size) std::memcpy(data_.get(), bytes.data() + 8 + n, data_size);
    for (const Span& s : spans) tensors_[s.index].data = data_.get() + s.begin;
    // Reorder tensors_ into offset order, and rebuild the index.
    std::vector<TensorView> ordered;
    ordered.reserve(tensors_.size());
    for (const Span& s : spans) ordered.push_back(std::move(tensors_[s.index]));
    tensors_ = std::move(ordered);
    index_.clear();
    for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  }

  std::string source_;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> index_;
  detail::AlignedBytes data_;
};

/// Collects tensors (copied) and metadata, then serializes them.
class Writer {
 public:
  /// Copies `nbytes` bytes of a tensor. Throws ZC_ERR_INVALID_ARGUMENT on a
  /// duplicate or empty name, a negative dim, or a size mismatch.
  void add(const std::string& name, const char* dtype, std::span<const int64_t> shape, const void* data,
           size_t nbytes) {
    if (name.empty()) throw Error(ZC_ERR_INVALID_ARGUMENT, "safetensors: empty tensor name");
    if (name == "__metadata__") throw Error(ZC_ERR_INVALID_ARGUMENT, "safetensors: '__metadata__' is reserved");
    if (tensors_.count(name)) throw Error(ZC_ERR_INVALID_ARGUMENT, "safetensors: duplicate tensor '" + name + "'");
    size_t esize = dtype_size(dtype);
    if (esize == 0) throw Error(ZC_ERR_INVALID_ARGUMENT, "safetensors: unknown dtype \"" + std::string(dtype) + "\"");
    uint64_t count = 1;
    for (int64_t d : shape) {
      if (d < 0) throw Error(ZC_ERR_INVALID_ARGUMENT, "safetensors: tensor '" + name + "' has a negative dim");
      count *= static_cast<uint64_t>(d);
    }
    if (count * esize != nbytes)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "safetensors: tensor '" + name + "': " + std::to_string(nbytes) +
                                               " bytes do not match its dtype and shape");
    Entry e;
    e.dtype = dtype;
    e.shape.assign(shape.begin(), shape.end());
    e.bytes.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + nbytes);
    tensors_.emplace(name, std::move(e));
  }
  /// Copies a contiguous CPU DLTensor (strides NULL or compact row-major).
  void add(const std::string& name, const DLTensor& t) {
    if (t.device.device_type != kDLCPU)
      throw Error(ZC_ERR_UNSUPPORTED, "safetensors: tensor '" + name + "' is not on the CPU");
    if (t.strides) {
      int64_t expect = 1;
      for (int32_t i = t.ndim - 1; i >= 0; --i) {
        if (t.shape[i] != 1 && t.strides[i] != expect)
          throw Error(ZC_ERR_INVALID_ARGUMENT, "safetensors: tensor '" + name + "' is not contiguous");
        expect *= t.shape[i];
      }
    }
    add(name, from_dlpack(t.dtype), std::span<const int64_t>(t.shape, static_cast<size_t>(t.ndim)),
        static_cast<const char*>(t.data) + t.byte_offset, nbytes(t));
  }
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  size_t size() const { return tensors_.size(); }

  /// The whole file as bytes.
  std::vector<uint8_t> serialize() const {
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    w.StartObject();
    if (!metadata_.empty()) {
      w.Key("__metadata__");
      w.StartObject();
      for (const auto& [k, v] : metadata_) {
        w.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
        w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
      }
      w.EndObject();
    }
    uint64_t offset = 0;
    for (const auto& [name, e] : tensors_) {
      w.Key(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
      w.StartObject();
      w.Key("dtype");
      w.String(e.dtype.c_str());
      w.Key("shape");
      w.StartArray();
      for (int64_t d : e.shape) w.Uint64(static_cast<uint64_t>(d));
      w.EndArray();
      w.Key("data_offsets");
      w.StartArray();
      w.Uint64(offset);
      w.Uint64(offset + e.bytes.size());
      w.EndArray();
      w.EndObject();
      offset += e.bytes.size();
    }
    w.EndObject();
    std::string header(sb.GetString(), sb.GetSize());
    while ((8 + header.size()) % 8 != 0) header.push_back(' ');
    std::vector<uint8_t> out;
    out.reserve(8 + header.size() + offset);
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    for (const auto& kv : tensors_) out.insert(out.end(), kv.second.bytes.begin(), kv.second.bytes.end());
    return out;
  }

  /// Writes the file atomically (sdk::write_file_atomic: temp file, fsync,
  /// rename over `path`, fsync of the folder). Throws Error(ZC_ERR_IO)
  /// naming the path.
  void save(const std::string& path) const { sdk::write_file_atomic(path, serialize()); }

  /// Kept for callers not yet moved to sdk::write_file_atomic (file.h),
  /// the one implementation.
  static void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
    sdk::write_file_atomic(path, bytes);
  }

 private:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace zcode::sdk::safetensors
