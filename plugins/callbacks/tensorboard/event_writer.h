// TensorBoard event files: TFRecord framing with masked CRC-32C around
// serialized `Event` messages (tensorboard.proto).
//
// Record layout (TensorFlow's record_writer.cc, as documented for TFRecord):
//   uint64  length         little-endian byte count of data
//   uint32  masked_crc32c(length's 8 bytes)
//   byte    data[length]   a serialized Event
//   uint32  masked_crc32c(data)
// masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32), with
// c = CRC-32C (Castagnoli, RFC 3720) of x.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "tensorboard.pb.h"

namespace zcode::tensorboard {

/// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected, initial value and
/// final xor 0xFFFFFFFF; RFC 3720 appendix B.4), computed by Boost.CRC.
uint32_t crc32c(const void* data, size_t n);

/// TFRecord's masked CRC of `data`: ((c >> 15) | (c << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t n);

/// One framed record around `data` (layout above).
std::string frame_record(std::string_view data);

/// Appends Events to `<dir>/events.out.tfevents.<unix seconds>.<hostname>`,
/// the name TensorBoard's loader looks for, each record flushed when written
/// (a crash loses at most the record being written; a reader stops at a
/// torn last record). Not thread-safe: one writer per file.
class EventWriter {
 public:
  /// Creates `dir` and the file, and writes the first event
  /// (file_version "brain.Event:2"). Throws sdk::Error(ZC_ERR_IO) naming the
  /// file when it cannot be created or written.
  EventWriter(const std::string& dir, double wall_time);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  /// Serializes `e`, frames it, appends and flushes. Throws sdk::Error(ZC_ERR_IO).
  void write(const Event& e);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

/// Seconds since the Unix epoch, as TensorBoard's wall_time.
double now_wall_time();

}  // namespace zcode::tensorboard
