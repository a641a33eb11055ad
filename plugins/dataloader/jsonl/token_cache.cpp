#include "token_cache.h"

#include <zcode/sdk/error.h>

#include <zlib.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace zcode::data {
namespace fs = std::filesystem;
using sdk::Error;

namespace {

uint32_t crc32_of(uint32_t crc, const void* data, size_t n) {
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), n));
}

}  // namespace

TokenCacheWriter::TokenCacheWriter(std::string final_path, uint32_t token_bytes, const unsigned char key[32])
    : final_path_(std::move(final_path)), token_bytes_(token_bytes), buf_(size_t(4) << 20) {
  std::memcpy(key_, key, 32);
  std::error_code ec;
  fs::create_directories(fs::path(final_path_).parent_path(), ec);
  file_ = std::make_unique<sdk::AtomicFile>(final_path_);
  CacheHeader zero{};
  file_->write(&zero, sizeof zero);  // the real header is written last
}

TokenCacheWriter::~TokenCacheWriter() = default;  // an uncommitted AtomicFile removes its temp file

void TokenCacheWriter::flush() {
  if (used_ == 0) return;
  crc_ = crc32_of(crc_, buf_.data(), used_);
  file_->write(buf_.data(), used_);
  written_ += used_;
  used_ = 0;
}

void TokenCacheWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (used_ == buf_.size()) flush();
    size_t k = std::min(n, buf_.size() - used_);
    std::memcpy(buf_.data() + used_, p, k);
    used_ += k;
    p += k;
    n -= k;
  }
}

void TokenCacheWriter::add_doc(const int32_t* ids, size_t n, int32_t eos) {
  if (token_bytes_ == 2) {
    uint16_t tmp[1024];
    size_t i = 0;
    while (i <= n) {
      size_t k = 0;
      for (; k < 1024 && i <= n; ++k, ++i) {
        int32_t id = i < n ? ids[i] : eos;
        if (id < 0 || id > 65535)
          throw Error(ZC_ERR_DATA, "token cache: id " + std::to_string(id) + " does not fit uint16 storage");
        tmp[k] = static_cast<uint16_t>(id);
      }
      write(tmp, k * 2);
    }
  } else {
    write(ids, n * 4);
    write(&eos, 4);
  }
  n_tokens_ += n + 1;
  offsets_.push_back(n_tokens_);
}

void TokenCacheWriter::finish(const std::string& meta_json) {
  CacheHeader h{};
  std::memcpy(h.magic, "ZCTOKMM", 8);
  h.version = kCacheVersion;
  h.token_bytes = token_bytes_;
  h.n_tokens = n_tokens_;
  h.n_docs = offsets_.size() - 1;
  h.tokens_offset = sizeof(CacheHeader);
  // Align the index to 8 bytes so it can be read as uint64 in place.
  uint64_t tok_end = sizeof(CacheHeader) + n_tokens_ * token_bytes_;
  static const char zeros[8] = {};
  write(zeros, static_cast<size_t>((8 - tok_end % 8) % 8));
  h.index_offset = (tok_end + 7) / 8 * 8;
  write(offsets_.data(), offsets_.size() * 8);
  h.meta_offset = h.index_offset + offsets_.size() * 8;
  h.meta_bytes = meta_json.size();
  write(meta_json.data(), meta_json.size());
  flush();
  h.file_size = sizeof(CacheHeader) + written_;
  std::memcpy(h.key, key_, 32);
  h.payload_crc = crc_;
  h.header_crc = crc32_of(0, &h, offsetof(CacheHeader, header_crc));
  file_->write_at(&h, sizeof h, 0);
  file_->commit();
}

TokenCache::~TokenCache() {
  if (base_) ::munmap(const_cast<char*>(base_), size_);
}

std::unique_ptr<TokenCache> TokenCache::open(const std::string& path, const unsigned char key[32], std::string& why,
                                             bool verify_payload) {
  why.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) why = std::string("cannot open (") + std::strerror(errno) + ")";
    return nullptr;
  }
  struct stat st {};
  ::fstat(fd, &st);
  size_t size = static_cast<size_t>(st.st_size);
  if (size < sizeof(CacheHeader)) {
    ::close(fd);
    why = "truncated (" + std::to_string(size) + " bytes, smaller than its header)";
    return nullptr;
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) {
    why = std::string("mmap failed (") + std::strerror(errno) + ")";
    return nullptr;
  }
  std::unique_ptr<TokenCache> c(new TokenCache());
  c->path_ = path;
  c->base_ = static_cast<const char*>(m);
  c->size_ = size;
  std::memcpy(&c->h_, m, sizeof(CacheHeader));
  const CacheHeader& h = c->h_;
  if (std::memcmp(h.magic, "ZCTOKMM", 8) != 0) why = "bad magic";
  else if (h.version != kCacheVersion)
    why = "version " + std::to_string(h.version) + ", expected " + std::to_string(kCacheVersion);
  else if (crc32_of(0, &h, offsetof(CacheHeader, header_crc)) != h.header_crc) why = "header checksum mismatch";
  else if (h.file_size != size)
    why = "truncated (" + std::to_string(size) + " bytes, header says " + std::to_string(h.file_size) + ")";
  else if (std::memcmp(h.key, key, 32) != 0) why = "key mismatch";
  else if ((h.token_bytes != 2 && h.token_bytes != 4) || h.tokens_offset != sizeof(CacheHeader) ||
           h.index_offset < h.tokens_offset + h.n_tokens * h.token_bytes || h.index_offset % 8 != 0 ||
           h.meta_offset != h.index_offset + (h.n_docs + 1) * 8 || h.meta_offset + h.meta_bytes != size)
    why = "inconsistent header";
  else if (verify_payload && crc32_of(0, c->base_ + sizeof(CacheHeader), size - sizeof(CacheHeader)) != h.payload_crc)
    why = "payload checksum mismatch (corrupt)";
  else if (c->doc_offsets()[0] != 0 || c->doc_offsets()[h.n_docs] != h.n_tokens) why = "inconsistent document index";
  if (!why.empty()) return nullptr;
  return c;
}

}  // namespace zcode::data
