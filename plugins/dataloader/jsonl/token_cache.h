// token_cache.h: TokenMemmap, the tokenized corpus of one split as one
// memory-mapped file.
//
// File layout (little-endian; version 1):
//   [0, 128)            header (CacheHeader below)
//   [128, index)        token ids, uint16 when vocab <= 65536 else int32; each
//                       document is followed by <eos>
//   [index, meta)       uint64 [n_docs + 1]: start of each document (in tokens)
//   [meta, file_size)   JSON metadata (provenance, counts)
// payload_crc is CRC-32 (zlib) of [128, file_size); header_crc covers the
// header bytes before it. A file that fails any check is rebuilt.
//
// Creation is atomic (sdk::AtomicFile: a uniquely named temporary file in the
// same folder, fsync, rename over the final name, fsync of the folder). Two
// processes that build the same key race harmlessly: each rename installs a
// complete file.
#pragma once

#include <zcode/sdk/file.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zcode::data {

struct CacheHeader {
  char magic[8];         // "ZCTOKMM\0"
  uint32_t version;      // kCacheVersion
  uint32_t token_bytes;  // 2 (uint16) or 4 (int32)
  uint64_t n_tokens;     // <eos> included
  uint64_t n_docs;
  uint64_t tokens_offset;  // 128
  uint64_t index_offset;
  uint64_t meta_offset;
  uint64_t meta_bytes;
  uint64_t file_size;
  unsigned char key[32];  // SHA-256 cache key (see plugin.cpp: cache_key)
  uint32_t payload_crc;
  uint32_t header_crc;
  char reserved[16];
};
static_assert(sizeof(CacheHeader) == 128, "cache header is 128 bytes");
constexpr uint32_t kCacheVersion = 1;

/// Streams documents into a new cache file; nothing is visible at the final
/// path until finish().
class TokenCacheWriter {
 public:
  /// Creates the temporary file next to `final_path` (the folder is created
  /// when missing). Throws Error(ZC_ERR_IO) naming the path on failure.
  TokenCacheWriter(std::string final_path, uint32_t token_bytes, const unsigned char key[32]);
  ~TokenCacheWriter();  // removes the temporary file unless finish() ran
  TokenCacheWriter(const TokenCacheWriter&) = delete;
  TokenCacheWriter& operator=(const TokenCacheWriter&) = delete;

  /// Appends one document's ids [n] and then `eos`. Throws
  /// Error(ZC_ERR_DATA) when an id does not fit the token dtype.
  void add_doc(const int32_t* ids, size_t n, int32_t eos);
  /// Writes index, metadata and header, fsyncs and renames into place.
  void finish(const std::string& meta_json);
  uint64_t n_tokens() const { return n_tokens_; }
  uint64_t n_docs() const { return offsets_.size() - 1; }

 private:
  void write(const void* data, size_t n);
  void flush();

  std::string final_path_;
  std::unique_ptr<sdk::AtomicFile> file_;
  uint32_t token_bytes_;
  unsigned char key_[32];
  std::vector<char> buf_;
  size_t used_ = 0;
  uint64_t written_ = 0;  // bytes after the header
  uint32_t crc_ = 0;
  uint64_t n_tokens_ = 0;
  std::vector<uint64_t> offsets_{0};
};

/// A read-only mapping of a valid cache file.
class TokenCache {
 public:
  ~TokenCache();
  TokenCache(const TokenCache&) = delete;
  TokenCache& operator=(const TokenCache&) = delete;

  /// Maps `path` and checks magic, version, sizes, key and both CRCs.
  /// Returns nullptr when the file does not exist (`why` left empty) or is
  /// invalid (`why` says what failed: truncated, checksum mismatch, ...).
  /// `verify_payload` false skips the payload CRC (only right after this
  /// process wrote the file, whose CRC it computed while writing).
  static std::unique_ptr<TokenCache> open(const std::string& path, const unsigned char key[32], std::string& why,
                                          bool verify_payload = true);

  uint32_t token_bytes() const { return h_.token_bytes; }
  uint64_t n_tokens() const { return h_.n_tokens; }
  uint64_t n_docs() const { return h_.n_docs; }
  /// Token storage: uint16_t* or int32_t* by token_bytes().
  const void* tokens() const { return base_ + h_.tokens_offset; }
  /// uint64 [n_docs + 1] document starts.
  const uint64_t* doc_offsets() const { return reinterpret_cast<const uint64_t*>(base_ + h_.index_offset); }
  std::string meta_json() const { return std::string(base_ + h_.meta_offset, h_.meta_bytes); }
  const std::string& path() const { return path_; }

 private:
  TokenCache() = default;
  std::string path_;
  const char* base_ = nullptr;
  size_t size_ = 0;
  CacheHeader h_{};
};

}  // namespace zcode::data
