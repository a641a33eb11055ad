// shard_source.h: which files a `data.*_path` names, and byte streams over
// them (plain, gzip, zstd) that never read a file whole into memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zcode::data {

/// One input file, as resolved at create.
struct Shard {
  std::string path;      // as opened (absolute or relative to the cwd)
  std::string name;      // file name only (keys the val_fraction split)
  uint64_t size = 0;     // bytes on disk
  int64_t mtime_ns = 0;  // modification time, ns since the epoch
};

/// Resolves `path` (config option `option`, e.g. "data.train_path") into the
/// ordered list of shards:
///   - a file;
///   - a folder: its *.jsonl, *.jsonl.gz and *.jsonl.zst files, by name;
///   - a glob (`*`, `?`, `[`): the matching files, by name;
///   - a folder plus `pattern` ("part-{:05d}.jsonl", Python format style with
///     one integer field): shards 0, 1, ... until the first missing index.
/// Throws zcode::sdk::Error with a one-line message naming `option`:
/// ZC_ERR_NOT_FOUND when nothing exists, ZC_ERR_UNSUPPORTED for any
/// `scheme://` URL (remote storage needs a storage plugin),
/// ZC_ERR_INVALID_ARGUMENT for a bad pattern.
std::vector<Shard> resolve_shards(const std::string& path, const std::string& pattern, const std::string& option);

/// Formats a Python-style index pattern ("part-{:05d}.jsonl", "{}", "{:d}",
/// "{:5d}") for `index`. Throws Error(ZC_ERR_INVALID_ARGUMENT) naming
/// `option` unless the pattern has exactly one integer field.
std::string format_shard_pattern(const std::string& pattern, uint64_t index, const std::string& option);

/// A forward-only stream of decompressed bytes.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  /// Reads up to `n` bytes into `buf`; returns 0 only at the end of the
  /// stream. Throws Error(ZC_ERR_IO / ZC_ERR_DATA) on a read failure or a
  /// corrupt or truncated compressed stream, naming the file.
  virtual size_t read(char* buf, size_t n) = 0;
};

/// Opens `path` by extension (.gz: zlib, gzip or zlib header, concatenated
/// members; .zst: zstd streaming API, concatenated frames; else plain) and
/// positions it at decompressed byte `offset` (plain files seek; compressed
/// streams decompress and discard). Throws Error(ZC_ERR_NOT_FOUND) when the
/// file does not exist, naming `option`, e.g.
/// `data.train_path: shard 'x.jsonl' not found (No such file or directory)`.
std::unique_ptr<ByteStream> open_stream(const std::string& path, uint64_t offset, const std::string& option);

/// SHA-256 (OpenSSL) of a file's raw bytes as 64 lowercase hex digits.
/// Throws Error(ZC_ERR_IO) when it cannot be read.
std::string sha256_file(const std::string& path);

/// Lowercase hex of `n` bytes.
std::string to_hex(const unsigned char* bytes, size_t n);

}  // namespace zcode::data
