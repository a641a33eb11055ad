#include "shard_source.h"

#include <zcode/sdk/error.h>

#include <openssl/evp.h>
#include <zlib.h>
#include <zstd.h>

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace zcode::data {
namespace fs = std::filesystem;
using sdk::Error;

namespace {

bool stat_file(const std::string& path, Shard& out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  out.path = path;
  out.name = fs::path(path).filename().string();
  out.size = static_cast<uint64_t>(st.st_size);
  out.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return true;
}

bool is_jsonl_name(const std::string& name) {
  auto ends = [&](const char* suf) {
    size_t n = std::strlen(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  return ends(".jsonl") || ends(".jsonl.gz") || ends(".jsonl.zst");
}

bool has_suffix(const std::string& s, const char* suf) {
  size_t n = std::strlen(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

}  // namespace

std::string to_hex(const unsigned char* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[bytes[i] >> 4];
    s[2 * i + 1] = digits[bytes[i] & 15];
  }
  return s;
}

std::string format_shard_pattern(const std::string& pattern, uint64_t index, const std::string& option) {
  size_t open = pattern.find('{');
  size_t close = open == std::string::npos ? std::string::npos : pattern.find('}', open);
  auto bad = [&](const std::string& why) {
    throw Error(ZC_ERR_INVALID_ARGUMENT, option + ": pattern '" + pattern + "' " + why +
                                             " (expected one integer field such as {:05d}, {:d} or {})");
  };
  if (close == std::string::npos) bad("has no {} field");
  if (pattern.find('{', close) != std::string::npos) bad("has more than one field");
  std::string spec = pattern.substr(open + 1, close - open - 1);
  bool zero = false;
  unsigned width = 0;
  if (!spec.empty()) {
    if (spec[0] != ':') bad("has a field name or index");
    size_t i = 1;
    if (i < spec.size() && spec[i] == '0') {
      zero = true;
      ++i;
    }
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') width = width * 10 + unsigned(spec[i++] - '0');
    if (i < spec.size() && spec[i] == 'd') ++i;
    if (i != spec.size() || width > 40) bad("has an unsupported format spec '" + spec + "'");
  }
  std::string digits = std::to_string(index);
  if (digits.size() < width) digits.insert(0, width - digits.size(), zero ? '0' : ' ');
  return pattern.substr(0, open) + digits + pattern.substr(close + 1);
}

std::vector<Shard> resolve_shards(const std::string& path, const std::string& pattern, const std::string& option) {
  if (path.empty()) throw Error(ZC_ERR_INVALID_ARGUMENT, option + ": empty path");
  size_t scheme = path.find("://");
  if (scheme != std::string::npos) {
    throw Error(ZC_ERR_UNSUPPORTED, option + ": '" + path + "' uses the '" + path.substr(0, scheme) +
                                        "://' scheme, which needs a storage plugin; the jsonl loader reads local "
                                        "files only (download the data or mount it first)");
  }
  std::vector<Shard> out;
  std::error_code ec;
  if (!pattern.empty()) {
    if (!fs::is_directory(path, ec))
      throw Error(ZC_ERR_NOT_FOUND, option + ": '" + path + "' is not a folder (needed with train_shard_pattern)");
    for (uint64_t i = 0;; ++i) {
      std::string p = (fs::path(path) / format_shard_pattern(pattern, i, option + " (train_shard_pattern)")).string();
      Shard s;
      if (!stat_file(p, s)) {
        if (i == 0) throw Error(ZC_ERR_NOT_FOUND, option + ": no shard '" + p + "' for pattern '" + pattern + "'");
        break;
      }
      out.push_back(std::move(s));
    }
    return out;
  }
  if (path.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    int rc = ::glob(path.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        Shard s;
        if (stat_file(g.gl_pathv[i], s)) out.push_back(std::move(s));
      }
    }
    globfree(&g);
    if (out.empty()) throw Error(ZC_ERR_NOT_FOUND, option + ": no file matches '" + path + "'");
    std::sort(out.begin(), out.end(), [](const Shard& a, const Shard& b) { return a.path < b.path; });
    return out;
  }
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec)) {
      Shard s;
      if (is_jsonl_name(e.path().filename().string()) && stat_file(e.path().string(), s)) out.push_back(std::move(s));
    }
    if (ec) throw Error(ZC_ERR_IO, option + ": cannot list folder '" + path + "' (" + ec.message() + ")");
    if (out.empty())
      throw Error(ZC_ERR_NOT_FOUND, option + ": folder '" + path + "' has no *.jsonl, *.jsonl.gz or *.jsonl.zst file");
    std::sort(out.begin(), out.end(), [](const Shard& a, const Shard& b) { return a.path < b.path; });
    return out;
  }
  Shard s;
  if (!stat_file(path, s)) throw Error(ZC_ERR_NOT_FOUND, option + ": file '" + path + "' not found");
  out.push_back(std::move(s));
  return out;
}

namespace {

constexpr size_t kChunk = 1 << 20;

class FileStream : public ByteStream {
 public:
  FileStream(const std::string& path, const std::string& option) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      int e = errno;
      throw Error(e == ENOENT ? ZC_ERR_NOT_FOUND : ZC_ERR_IO, option + ": shard '" + path + "' " +
                                                                  (e == ENOENT ? "not found" : "cannot be opened") +
                                                                  " (" + std::strerror(e) + ")");
    }
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  ~FileStream() override {
    if (fd_ >= 0) ::close(fd_);
  }
  void seek(uint64_t offset) {
    if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0)
      throw Error(ZC_ERR_IO,
                  "'" + path_ + "': seek to byte " + std::to_string(offset) + " failed (" + std::strerror(errno) + ")");
  }
  size_t read(char* buf, size_t n) override {
    for (;;) {
      ssize_t r = ::read(fd_, buf, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno == EINTR) continue;
      throw Error(ZC_ERR_IO, "'" + path_ + "': read failed (" + std::strerror(errno) + ")");
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

class GzipStream : public ByteStream {
 public:
  GzipStream(const std::string& path, const std::string& option) : file_(path, option), path_(path), in_(kChunk) {
    if (inflateInit2(&z_, 15 + 32) != Z_OK) throw Error(ZC_ERR_OUT_OF_MEMORY, "zlib: inflateInit2 failed");
  }
  ~GzipStream() override { inflateEnd(&z_); }
  size_t read(char* buf, size_t n) override {
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    while (z_.avail_out > 0 && !done_) {
      if (z_.avail_in == 0) {
        size_t got = file_.read(in_.data(), in_.size());
        if (got == 0) {
          if (!member_ended_) throw Error(ZC_ERR_DATA, "'" + path_ + "': truncated gzip stream (ends inside a member)");
          done_ = true;
          break;
        }
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(got);
      }
      if (member_ended_) {  // another gzip member follows (concatenated .gz)
        inflateReset(&z_);
        member_ended_ = false;
      }
      int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_ended_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw Error(ZC_ERR_DATA, "'" + path_ + "': corrupt gzip stream (" + (z_.msg ? z_.msg : "zlib error") + ")");
      }
    }
    return static_cast<size_t>(reinterpret_cast<char*>(z_.next_out) - buf);
  }

 private:
  FileStream file_;
  std::string path_;
  std::vector<char> in_;
  z_stream z_{};
  bool member_ended_ = false;
  bool done_ = false;
};

class ZstdStream : public ByteStream {
 public:
  ZstdStream(const std::string& path, const std::string& option)
      : file_(path, option), path_(path), in_(ZSTD_DStreamInSize()) {
    ctx_ = ZSTD_createDCtx();
    if (!ctx_) throw Error(ZC_ERR_OUT_OF_MEMORY, "zstd: ZSTD_createDCtx failed");
  }
  ~ZstdStream() override { ZSTD_freeDCtx(ctx_); }
  size_t read(char* buf, size_t n) override {
    ZSTD_outBuffer out{buf, n, 0};
    while (out.pos < out.size && !done_) {
      if (inb_.pos == inb_.size) {
        size_t got = file_.read(in_.data(), in_.size());
        if (got == 0) {
          if (last_hint_ != 0) throw Error(ZC_ERR_DATA, "'" + path_ + "': truncated zstd stream (ends inside a frame)");
          done_ = true;
          break;
        }
        inb_ = ZSTD_inBuffer{in_.data(), got, 0};
      }
      size_t rc = ZSTD_decompressStream(ctx_, &out, &inb_);
      if (ZSTD_isError(rc))
        throw Error(ZC_ERR_DATA, "'" + path_ + "': corrupt zstd stream (" + ZSTD_getErrorName(rc) + ")");
      last_hint_ = rc;
    }
    return out.pos;
  }

 private:
  FileStream file_;
  std::string path_;
  std::vector<char> in_;
  ZSTD_DCtx* ctx_ = nullptr;
  ZSTD_inBuffer inb_{nullptr, 0, 0};
  size_t last_hint_ = 0;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<ByteStream> open_stream(const std::string& path, uint64_t offset, const std::string& option) {
  std::unique_ptr<ByteStream> s;
  if (has_suffix(path, ".gz")) {
    s = std::make_unique<GzipStream>(path, option);
  } else if (has_suffix(path, ".zst")) {
    s = std::make_unique<ZstdStream>(path, option);
  } else {
    auto f = std::make_unique<FileStream>(path, option);
    if (offset) f->seek(offset);
    return f;
  }
  std::vector<char> scratch(kChunk);
  while (offset > 0) {
    size_t got = s->read(scratch.data(), std::min<uint64_t>(offset, scratch.size()));
    if (got == 0)
      throw Error(ZC_ERR_DATA, option + ": shard '" + path + "' is shorter than the saved position (it changed?)");
    offset -= got;
  }
  return s;
}

std::string sha256_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ZC_ERR_IO, "'" + path + "': cannot open for hashing (" + std::strerror(errno) + ")");
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(kChunk);
  for (;;) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      ::close(fd);
      EVP_MD_CTX_free(ctx);
      throw Error(ZC_ERR_IO, "'" + path + "': read failed while hashing (" + std::strerror(e) + ")");
    }
    if (r == 0) break;
    EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(r));
  }
  ::close(fd);
  unsigned char md[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  return to_hex(md, 32);
}

}  // namespace zcode::data
