// TensorBoard event files (see event_writer.h).
#include "event_writer.h"

#include <zcode/sdk/error.h>

#include <unistd.h>
#include <boost/crc.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace zcode::tensorboard {

uint32_t crc32c(const void* data, size_t n) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, n);
  return crc.checksum();
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace

std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out.append(data);
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

double now_wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventWriter::EventWriter(const std::string& dir, double wall_time) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char host[256] = "localhost";
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof host - 1] = '\0';
  path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(std::floor(wall_time))) + "." + host;
  // Append: a run resumed within the same second adds to the file it wrote.
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) throw sdk::Error(ZC_ERR_IO, "tensorboard: cannot create " + path_ + ": " + std::strerror(errno));
  Event first;
  first.set_wall_time(wall_time);
  first.set_file_version("brain.Event:2");
  write(first);
}

EventWriter::~EventWriter() {
  if (file_) std::fclose(file_);
}

void EventWriter::write(const Event& e) {
  const std::string rec = frame_record(e.SerializeAsString());
  if (std::fwrite(rec.data(), 1, rec.size(), file_) != rec.size() || std::fflush(file_) != 0)
    throw sdk::Error(ZC_ERR_IO, "tensorboard: cannot write " + path_ + ": " + std::strerror(errno));
}

}  // namespace zcode::tensorboard
