// jsonl_reader.h: JSON Lines records from a sequence of shards.
//
// LineReader splits a ByteStream into lines (UTF-8 BOM, CRLF, a missing final
// newline and multi-MB lines handled); RecordParser pulls the text field out
// of one line with RapidJSON's SAX reader; DocReader ties them to the shard
// list, the bad-record policy and the split filter.
#pragma once

#include "shard_source.h"

#include <zcode/sdk/host.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zcode::data {

/// Lines of one stream. The returned view is valid until the next call.
class LineReader {
 public:
  /// `offset` / `line_no`: the stream's decompressed byte offset and the
  /// 1-based number of the first line it will return (a resumed reader starts
  /// mid-file). `max_line_bytes` bounds one record (the buffer grows to it).
  LineReader(std::unique_ptr<ByteStream> stream, uint64_t offset, uint64_t line_no, size_t max_line_bytes);
  /// Next line without its "\n" / "\r\n" and, at offset 0, without a UTF-8
  /// BOM. False at the end. Throws Error(ZC_ERR_DATA) `file:line: record
  /// longer than N bytes` via `where` when a line exceeds the bound.
  bool next(std::string_view& line, const std::string& where);
  /// 1-based number of the line last returned.
  uint64_t line_no() const { return line_no_; }
  /// Byte offset (decompressed) just after the last returned line.
  uint64_t offset() const { return offset_; }

 private:
  std::unique_ptr<ByteStream> stream_;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  uint64_t offset_;
  uint64_t line_no_;
  size_t max_line_;
};

/// Extracts the string at a dotted path ("text", "meta.body") from one
/// JSON object per line. Not thread-safe; one per reader.
class RecordParser {
 public:
  explicit RecordParser(std::string_view dotted_field);
  /// Parses `line`. On success fills `text` (unescaped UTF-8) and returns
  /// true. On a bad record returns false with `column` (1-based byte column
  /// within the line) and a `reason`: malformed JSON, not an object, missing
  /// field, non-string field, invalid UTF-8, nesting deeper than
  /// sdk::json::kMaxDepth (256) levels.
  bool parse(std::string_view line, std::string& text, size_t& column, std::string& reason);

 private:
  std::vector<std::string> path_;
  std::string field_;
};

/// Per-shard counts for provenance.
/// Atomic, because a streaming worker counts while the host reads stats.
struct ShardCounts {
  std::atomic<uint64_t> records{0};  // documents delivered for this split
  std::atomic<uint64_t> skipped{0};  // bad records skipped (on_bad_record: skip)
};

/// Where a DocReader stands: enough to reopen and continue exactly.
struct ReaderPos {
  uint64_t shard = 0;   // index into the shard list
  uint64_t offset = 0;  // decompressed byte offset of the next line
  uint64_t line = 0;    // lines consumed in this shard
  uint64_t record = 0;  // non-blank lines consumed in this shard
};

/// Which documents of a shard a split keeps.
enum class SplitFilter { kAll, kTrainOnly, kValOnly };

/// Documents of a shard list in order, one pass.
class DocReader {
 public:
  struct Options {
    std::string text_field = "text";
    bool skip_bad = false;  // on_bad_record: skip
    SplitFilter filter = SplitFilter::kAll;
    double val_fraction = 0.0;
    std::string option = "data.train_path";  // names errors about the files
    size_t max_record_bytes = size_t(1) << 30;
  };
  /// `bad_logged` counts bad records already logged by this loader (the
  /// first 5 are logged with their location, then one line says the rest are
  /// only counted). `counts` (size = shards) receives records/skipped.
  DocReader(const std::vector<Shard>& shards, Options opt, sdk::Host host, std::vector<ShardCounts>* counts,
            uint64_t* bad_logged);
  /// Moves to `pos` (reopens the shard there).
  void seek(const ReaderPos& pos);
  /// Next document's text; false after the last shard. Throws
  /// Error(ZC_ERR_DATA) "file:line:col: reason" for a bad record in error
  /// mode, Error(ZC_ERR_NOT_FOUND) when a shard vanished.
  bool next(std::string& text);
  /// Position after the last returned document.
  const ReaderPos& pos() const { return pos_; }
  /// Where later records/skipped counts go (nullptr: not counted).
  void set_counts(std::vector<ShardCounts>* counts) { counts_ = counts; }

 private:
  void open_current();

  const std::vector<Shard>& shards_;
  Options opt_;
  sdk::Host host_;
  std::vector<ShardCounts>* counts_;
  uint64_t* bad_logged_;
  RecordParser parser_;
  std::unique_ptr<LineReader> lines_;
  ReaderPos pos_;
  uint64_t polled_ = 0;  // lines seen, to poll the host's stop flag now and then
};

}  // namespace zcode::data
