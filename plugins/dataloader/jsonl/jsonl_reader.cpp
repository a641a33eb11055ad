#include "jsonl_reader.h"

#include "order.h"

#include <zcode/sdk/error.h>
#include <zcode/sdk/json.h>
#include <zcode/sdk/utf8.h>

#include <rapidjson/memorystream.h>

#include <cstring>

namespace zcode::data {
using sdk::Error;

// ---------------------------------------------------------------------------
// LineReader

LineReader::LineReader(std::unique_ptr<ByteStream> stream, uint64_t offset, uint64_t line_no, size_t max_line_bytes)
    : stream_(std::move(stream)),
      buf_(size_t(1) << 20),
      offset_(offset),
      line_no_(line_no - 1),
      max_line_(max_line_bytes) {}

bool LineReader::next(std::string_view& line, const std::string& where) {
  size_t consumed = 0;
  for (size_t scanned = 0;;) {
    const char* base = buf_.data() + begin_;
    const void* nl = std::memchr(base + scanned, '\n', end_ - begin_ - scanned);
    if (nl) {
      size_t len = static_cast<size_t>(static_cast<const char*>(nl) - base);
      line = std::string_view(base, len);
      consumed = len + 1;
      break;
    }
    scanned = end_ - begin_;
    if (eof_) {
      if (begin_ == end_) return false;
      line = std::string_view(base, end_ - begin_);  // no final newline
      consumed = end_ - begin_;
      break;
    }
    if (end_ - begin_ > max_line_)
      throw Error(ZC_ERR_DATA, where + ":" + std::to_string(line_no_ + 1) + ":1: record longer than " +
                                   std::to_string(max_line_) + " bytes");
    if (begin_ > 0) {  // compact, so the buffer grows only for long lines
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
    size_t got = stream_->read(buf_.data() + end_, buf_.size() - end_);
    if (got == 0) eof_ = true;
    end_ += got;
  }
  bool at_start = offset_ == 0;
  offset_ += consumed;
  begin_ += consumed;
  ++line_no_;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (at_start && line.size() >= 3 && std::memcmp(line.data(), "\xEF\xBB\xBF", 3) == 0) line.remove_prefix(3);
  return true;
}

// ---------------------------------------------------------------------------
// RecordParser

namespace {

const char* kind_name(int kind) {
  static const char* names[] = {"null", "boolean", "number", "string", "object", "array"};
  return names[kind];
}
enum Kind { kNull, kBool, kNumber, kString, kObject, kArray };

/// SAX handler: follows the dotted path, copies the first string found at it.
struct FieldHandler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, FieldHandler> {
  const std::vector<std::string>* path = nullptr;
  const rapidjson::MemoryStream* stream = nullptr;
  std::string* text = nullptr;
  std::vector<int> frames;  // per open container: path level if on the path, else -1
  int next_level = -1;      // path level of the value that follows the last key
  size_t value_at = 0;      // offset where that value starts
  bool found = false;
  bool root_seen = false;
  // A bad record found by the handler (parsing stops): reason and offset.
  std::string reason;
  size_t reason_at = 0;

  bool value(Kind k, const char* s = nullptr, size_t len = 0) {
    if (!root_seen) {
      root_seen = true;
      if (k != kObject) {
        reason = std::string("expected a JSON object, found ") + (k == kArray ? "an array" : "a ") +
                 (k == kArray ? "" : kind_name(k));
        reason_at = 0;
        return false;
      }
      frames.push_back(0);
      return true;
    }
    int level = next_level;
    next_level = -1;
    if (level == static_cast<int>(path->size()) && !found) {
      if (k != kString) {
        reason = "field \"" + join() + "\" is " + (k == kArray || k == kObject ? "an " : "a ") + kind_name(k) +
                 ", expected a string";
        reason_at = value_at;
        return false;
      }
      text->assign(s, len);
      found = true;
    }
    if (k == kObject || k == kArray)
      frames.push_back(k == kObject && level > 0 && level < static_cast<int>(path->size()) ? level : -1);
    return true;
  }
  std::string join() const {
    std::string j;
    for (const auto& p : *path) j += (j.empty() ? "" : ".") + p;
    return j;
  }
  bool Default() { return value(kNumber); }
  bool Null() { return value(kNull); }
  bool Bool(bool) { return value(kBool); }
  bool String(const char* s, rapidjson::SizeType len, bool) { return value(kString, s, len); }
  bool StartObject() { return value(kObject); }
  bool StartArray() { return value(kArray); }
  bool EndObject(rapidjson::SizeType) {
    frames.pop_back();
    return true;
  }
  bool EndArray(rapidjson::SizeType) {
    frames.pop_back();
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType len, bool) {
    int level = frames.back();
    next_level = -1;
    if (level >= 0 && level < static_cast<int>(path->size()) && (*path)[level] == std::string_view(s, len)) {
      next_level = level + 1;
      // The value starts after the key's closing quote, blanks and ':'.
      size_t at = stream->Tell();
      const char* b = stream->begin_;
      size_t n = static_cast<size_t>(stream->end_ - b);
      while (at < n && (b[at] == ' ' || b[at] == '\t' || b[at] == '\r' || b[at] == '\n' || b[at] == ':')) ++at;
      value_at = at;
    }
    return true;
  }
};

}  // namespace

RecordParser::RecordParser(std::string_view dotted_field) : field_(dotted_field) {
  size_t start = 0;
  for (;;) {
    size_t dot = dotted_field.find('.', start);
    path_.emplace_back(
        dotted_field.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  for (const auto& p : path_)
    if (p.empty())
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data.text_field: '" + field_ + "' has an empty path component");
}

bool RecordParser::parse(std::string_view line, std::string& text, size_t& column, std::string& reason) {
  size_t bad = sdk::invalid_utf8_at(line);
  if (bad != std::string_view::npos) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(line[bad]));
    column = bad + 1;
    reason = std::string("invalid UTF-8 (byte ") + hex + ")";
    return false;
  }
  if (const void* nul = std::memchr(line.data(), '\0', line.size())) {
    column = static_cast<size_t>(static_cast<const char*>(nul) - line.data()) + 1;
    reason = "malformed JSON (NUL byte)";
    return false;
  }
  rapidjson::MemoryStream ms(line.data(), line.size());
  FieldHandler h;
  h.path = &path_;
  h.stream = &ms;
  h.text = &text;
  // Iterative and depth-bounded: a record nested 10^6 deep is a bad record, not a stack overflow.
  const sdk::json::Result r = sdk::json::parse_sax<rapidjson::kParseNoFlags>(ms, h);
  if (!h.reason.empty()) {
    size_t at = h.reason_at;
    if (!h.root_seen || at == 0) {  // the root value: its first non-blank byte
      at = 0;
      while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
    }
    column = at + 1;
    reason = h.reason;
    return false;
  }
  if (!r.ok()) {
    column = r.offset + 1;
    reason = r.too_deep ? r.message() : "malformed JSON (" + r.message() + ")";
    return false;
  }
  if (!h.found) {
    column = 1;
    reason = "missing field \"" + field_ + "\"";
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// DocReader

DocReader::DocReader(const std::vector<Shard>& shards, Options opt, sdk::Host host, std::vector<ShardCounts>* counts,
                     uint64_t* bad_logged)
    : shards_(shards),
      opt_(std::move(opt)),
      host_(host),
      counts_(counts),
      bad_logged_(bad_logged),
      parser_(opt_.text_field) {}

void DocReader::seek(const ReaderPos& pos) {
  pos_ = pos;
  lines_.reset();
}

void DocReader::open_current() {
  const Shard& s = shards_[pos_.shard];
  try {
    lines_ = std::make_unique<LineReader>(open_stream(s.path, pos_.offset, opt_.option), pos_.offset, pos_.line + 1,
                                          opt_.max_record_bytes);
  } catch (const Error& e) {
    if (e.code() == ZC_ERR_NOT_FOUND)
      throw Error(ZC_ERR_NOT_FOUND, opt_.option + ": shard '" + s.path +
                                        "' disappeared after the run started (it was listed at start-up)");
    throw;
  }
}

bool DocReader::next(std::string& text) {
  size_t column = 0;
  std::string reason;
  for (;;) {
    if ((++polled_ & 1023) == 0 && host_.stop_requested()) throw Error(ZC_ERR_CANCELLED, "data: stop requested");
    if (!lines_) {
      if (pos_.shard >= shards_.size()) return false;
      open_current();
    }
    const Shard& s = shards_[pos_.shard];
    std::string_view line;
    if (!lines_->next(line, s.path)) {
      lines_.reset();
      pos_ = ReaderPos{pos_.shard + 1, 0, 0, 0};
      continue;
    }
    pos_.line = lines_->line_no();
    pos_.offset = lines_->offset();
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank line
    uint64_t record = pos_.record++;
    if (opt_.filter != SplitFilter::kAll &&
        is_val_document(s.name, record, opt_.val_fraction) != (opt_.filter == SplitFilter::kValOnly))
      continue;
    if (!parser_.parse(line, text, column, reason)) {
      std::string msg = s.path + ":" + std::to_string(pos_.line) + ":" + std::to_string(column) + ": " + reason;
      if (!opt_.skip_bad) throw Error(ZC_ERR_DATA, msg);
      if (counts_) (*counts_)[pos_.shard].skipped++;
      if (bad_logged_) {
        uint64_t n = (*bad_logged_)++;
        if (n < 5) host_.warn("jsonl", "skipping bad record " + msg);
        if (n == 5) host_.warn("jsonl", "more bad records: counted in stats (bad_records), not logged");
      }
      continue;
    }
    if (counts_) (*counts_)[pos_.shard].records++;
    return true;
  }
}

}  // namespace zcode::data
