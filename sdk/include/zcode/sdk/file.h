// zcode/sdk/file.h: atomic file writing (header-only, POSIX).
//
// Every file ZCode replaces in place (a safetensors file, metrics.json, a
// token cache, a tokenizer model, a plugin index, `latest`) is written the
// same way, so a crash at any moment leaves either the old file or the whole
// new one, never a torn one:
//   1. a temporary file in the same folder (so the rename stays on one file
//      system): `<path>.tmp.<pid>.<n>`, created with O_EXCL, unique per
//      process and per call, so racing writers never share one;
//   2. the bytes, then fsync of the file (the data is on disk before any
//      name points at it);
//   3. rename over `path` (atomic on POSIX);
//   4. fsync of the folder (the rename itself survives a power loss).
// Step 4 is best effort: when the folder cannot be opened the file is still
// whole at `path`; only the durability of the rename is lost, which no
// caller can repair.
#pragma once

#include <zcode/sdk/error.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace zcode::sdk {

/// A file that appears at its final path whole or not at all (steps above).
/// Write to it with write()/write_at() (or fd()), then commit(); destroying
/// it uncommitted removes the temporary file. Errors throw Error(ZC_ERR_IO)
/// with a message naming the final path, the step and strerror.
class AtomicFile {
 public:
  /// Creates the temporary file next to `path` (the folder must exist).
  explicit AtomicFile(std::string path) : path_(std::move(path)) {
    static std::atomic<uint64_t> counter{0};
    tmp_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create the temporary file '" + tmp_ + "'", errno);
  }
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// Appends `n` bytes at the current end.
  void write(const void* data, size_t n) { write_impl(data, n, -1); }
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  /// Writes `n` bytes at byte `offset` (e.g. a header filled in last);
  /// the append position does not move.
  void write_at(const void* data, size_t n, off_t offset) { write_impl(data, n, offset); }

  /// fsync, close, rename over the final path, fsync of the folder. After
  /// it the file is at path(); calling it twice is an error.
  void commit() {
    if (fd_ < 0) fail("commit after commit or failure", EBADF);
    if (::fsync(fd_) != 0) fail("fsync failed", errno);
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail("close failed", errno);
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("rename failed", errno);
    committed_ = true;
    const size_t slash = path_.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

  /// The final path, the temporary path, and the open descriptor (-1 after
  /// commit) for callers that write through their own calls.
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }
  int fd() const { return fd_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err) {
    throw Error(ZC_ERR_IO, path_ + ": " + what + " (" + std::strerror(err) + ")");
  }
  void write_impl(const void* data, size_t n, off_t at) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = at >= 0 ? ::pwrite(fd_, p, n, at) : ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("write failed", w < 0 ? errno : EIO);
      p += w;
      n -= static_cast<size_t>(w);
      if (at >= 0) at += w;
    }
  }

  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Replaces `path` with `bytes` atomically (AtomicFile). Throws
/// Error(ZC_ERR_IO) naming `path`.
inline void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}
inline void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace zcode::sdk
