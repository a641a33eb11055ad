// zcode/sdk/json.h: bounded JSON parsing and JSON writing (header-only;
// RapidJSON). One home for JSON in and out: nothing in ZCode builds JSON by
// concatenating quoted fragments.
//
// Reading. Every JSON text that comes from a file (a config, tokenizer.json, a JSONL
// record, state.json, a safetensors header) is parsed through these helpers,
// so untrusted structure is bounded before anything walks it:
//   - the parse is iterative (RapidJSON's kParseIterativeFlag), so the parser
//     itself never recurses, however deep the input;
//   - nesting deeper than kMaxDepth containers stops the parse with a message
//     naming the path where it happened, so no tree deeper than that exists
//     for a later recursive walk (a validator, Writer::Accept) to overflow the
//     stack on.
// Width needs no separate bound: it is linear in the input, whose size each
// reader bounds where it matters (safetensors' kMaxHeaderBytes).
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace zcode::sdk::json {

/// Deepest nesting of objects and arrays accepted in any JSON (and YAML)
/// file ZCode reads. Real files nest a few levels (a config 3, tokenizer.json
/// 5); 256 leaves room for any hand-written file and keeps every recursive
/// walk over the tree far from the stack's end.
inline constexpr unsigned kMaxDepth = 256;

/// Longest path shown in a "nesting deeper than" message; a deep path is
/// mostly `[0][0]...`, and its start says where it is.
inline constexpr size_t kMaxShownPath = 80;

/// `path` as a message shows it: "the top level" when empty, else its first
/// kMaxShownPath characters, then "..." when it is longer.
inline std::string shown_path(std::string_view path) {
  if (path.empty()) return "the top level";
  if (path.size() <= kMaxShownPath) return std::string(path);
  return std::string(path.substr(0, kMaxShownPath)) + "...";
}

/// The outcome of a bounded parse.
struct Result {
  rapidjson::ParseErrorCode code = rapidjson::kParseErrorNone;
  size_t offset = 0;      ///< byte offset of the error in the text
  bool too_deep = false;  ///< stopped at the depth limit (code is kParseErrorTermination)
  unsigned max_depth = kMaxDepth;
  std::string path;  ///< dotted path of the value that opened one container too many (its start)

  bool ok() const { return code == rapidjson::kParseErrorNone; }
  /// One clause for a message: "nesting deeper than 256 levels at training.x[0]..."
  /// or RapidJSON's English text of the syntax error (the caller adds the
  /// file name and position).
  std::string message() const {
    if (too_deep) return "nesting deeper than " + std::to_string(max_depth) + " levels at " + shown_path(path);
    return rapidjson::GetParseError_En(code);
  }
};

/// "line:column" (both from 1) of byte `offset` in `text`.
inline std::string line_col(std::string_view text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') line += 1, col = 1;
    else ++col;
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

/// A SAX handler that forwards every event to `Handler` and refuses the
/// container that would be nested deeper than `max_depth`. It keeps the
/// path of the current value (one frame per open container, so its memory
/// is bounded by max_depth too) for the message.
template <typename Handler>
class DepthLimited {
 public:
  DepthLimited(Handler& inner, unsigned max_depth) : inner_(inner), max_depth_(max_depth) {}

  bool Null() { return value() && inner_.Null(); }
  bool Bool(bool b) { return value() && inner_.Bool(b); }
  bool Int(int i) { return value() && inner_.Int(i); }
  bool Uint(unsigned u) { return value() && inner_.Uint(u); }
  bool Int64(int64_t i) { return value() && inner_.Int64(i); }
  bool Uint64(uint64_t u) { return value() && inner_.Uint64(u); }
  bool Double(double d) { return value() && inner_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) { return value() && inner_.RawNumber(s, n, copy); }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return value() && inner_.String(s, n, copy); }
  bool StartObject() { return open(false) && inner_.StartObject(); }
  bool StartArray() { return open(true) && inner_.StartArray(); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    frames_.back().key.assign(s, n);
    return inner_.Key(s, n, copy);
  }
  bool EndObject(rapidjson::SizeType n) {
    frames_.pop_back();
    return inner_.EndObject(n);
  }
  bool EndArray(rapidjson::SizeType n) {
    frames_.pop_back();
    return inner_.EndArray(n);
  }

  bool too_deep() const { return too_deep_; }
  /// The path where the limit was hit (valid when too_deep()).
  const std::string& path() const { return path_; }

 private:
  struct Frame {
    bool array = false;
    size_t index = 0;  // arrays: index of the current element + 1
    std::string key;   // objects: the current member's name
  };
  bool value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return true;
  }
  bool open(bool array) {
    value();
    if (frames_.size() >= max_depth_) {
      too_deep_ = true;
      path_ = current_path();
      return false;
    }
    frames_.push_back(Frame{array, 0, {}});
    return true;
  }
  std::string current_path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (p.size() > kMaxShownPath) break;  // enough for shown_path
      if (f.array) p.append("[").append(std::to_string(f.index - 1)).append("]");
      else p.append(p.empty() ? "" : ".").append(f.key);
    }
    return p;
  }

  Handler& inner_;
  unsigned max_depth_;
  std::vector<Frame> frames_;
  bool too_deep_ = false;
  std::string path_;
};

/// Parses the JSON in `is` into SAX `handler`, iteratively and at most
/// `max_depth` containers deep. `Flags` are RapidJSON parse flags
/// (kParseIterativeFlag is always added).
template <unsigned Flags = rapidjson::kParseDefaultFlags, typename Stream, typename Handler>
Result parse_sax(Stream& is, Handler& handler, unsigned max_depth = kMaxDepth) {
  DepthLimited<Handler> limited(handler, max_depth);
  rapidjson::Reader reader;
  rapidjson::ParseResult r = reader.Parse<Flags | rapidjson::kParseIterativeFlag>(is, limited);
  Result out;
  out.max_depth = max_depth;
  out.code = r.Code();
  out.offset = r.Offset();
  if (limited.too_deep()) {
    out.too_deep = true;
    out.path = limited.path();
  }
  return out;
}

/// Parses `text` into `doc` (replacing its value), iteratively and at most
/// `max_depth` containers deep. On error `doc` is left null and the Result
/// says why; doc.HasParseError() is not set, so callers test Result::ok().
template <unsigned Flags = rapidjson::kParseDefaultFlags, typename Doc>
Result parse(Doc& doc, std::string_view text, unsigned max_depth = kMaxDepth) {
  Result out;
  doc.SetNull();
  auto generate = [&](Doc& handler) {
    rapidjson::MemoryStream ms(text.data(), text.size());
    out = parse_sax<Flags>(ms, handler, max_depth);
    return out.ok();
  };
  doc.Populate(generate);
  return out;
}

// ---- writing ---------------------------------------------------------------

/// Builds one compact JSON text (no spaces) through rapidjson::Writer, so
/// every string is escaped by one escaper: '"', '\\' and the controls below
/// 0x20 (\b \f \n \r \t, others \u00XX); other bytes, UTF-8 included, are
/// copied as they are.
///
/// Numbers: integers are exact; number(v) is the shortest text that reads
/// back as v; number(v, digits) and fixed(v, decimals) are printf's %.*g and
/// %.*f, for the files whose format predates this writer (metrics.json,
/// info_json) and must stay byte for byte. A non-finite double is written as
/// null (JSON has no NaN or infinity).
///
///   sdk::json::Writer w;
///   w.begin_object().key("step").integer(3).key("loss").number(2.5, 9).end_object();
///   w.str();  // {"step":3,"loss":2.5}
///
/// Calls must form one JSON value (keys only inside objects); like
/// rapidjson::Writer, a misuse is caught by RAPIDJSON_ASSERT in debug builds.
class Writer {
 public:
  Writer() : w_(sb_) {}
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  Writer& begin_object() { return done(w_.StartObject()); }
  Writer& end_object() { return done(w_.EndObject()); }
  Writer& begin_array() { return done(w_.StartArray()); }
  Writer& end_array() { return done(w_.EndArray()); }
  Writer& key(std::string_view k) { return done(w_.Key(k.data(), size(k), true)); }

  Writer& string(std::string_view s) { return done(w_.String(s.data(), size(s), true)); }
  Writer& boolean(bool b) { return done(w_.Bool(b)); }
  Writer& null() { return done(w_.Null()); }
  template <std::integral T>
  requires(!std::same_as<T, bool>) Writer& integer(T v) {
    if constexpr (std::is_signed_v<T>) return done(w_.Int64(static_cast<int64_t>(v)));
    else return done(w_.Uint64(static_cast<uint64_t>(v)));
  }
  /// Shortest round-trip text of `v` (RapidJSON's Grisu2: 0.1, 1.0, 1e-7).
  Writer& number(double v) { return std::isfinite(v) ? done(w_.Double(v)) : null(); }
  /// printf("%.*g", digits, v): 6 is iostream's default, 9 round-trips a
  /// float, 17 a double.
  Writer& number(double v, int digits) { return formatted("%.*g", digits, v); }
  /// printf("%.*f", decimals, v); 6 is std::to_string(double).
  Writer& fixed(double v, int decimals) { return formatted("%.*f", decimals, v); }

  /// Splices `json`, text that is already JSON (another stage's info_json, a
  /// metrics record), verbatim as the next value; inside an array it may be
  /// several values joined by ','. The caller vouches for it: it is not
  /// parsed here.
  Writer& raw(std::string_view json) { return done(w_.RawValue(json.data(), json.size(), rapidjson::kObjectType)); }

  /// The text so far (complete once every container is closed).
  std::string str() const { return std::string(sb_.GetString(), sb_.GetSize()); }
  /// True once one whole value has been written.
  bool complete() const { return w_.IsComplete(); }

 private:
  static rapidjson::SizeType size(std::string_view s) { return static_cast<rapidjson::SizeType>(s.size()); }
  Writer& done(bool) { return *this; }
  Writer& formatted(const char* format, int precision, double v) {
    if (!std::isfinite(v)) return null();
    char b[352];  // %.*f of 1e308 with a few decimals fits
    int n = std::snprintf(b, sizeof b, format, precision, v);
    if (n < 0 || static_cast<size_t>(n) >= sizeof b) return number(v);
    return done(w_.RawValue(b, static_cast<size_t>(n), rapidjson::kNumberType));
  }

  rapidjson::StringBuffer sb_;
  rapidjson::Writer<rapidjson::StringBuffer> w_;
};

/// `s` as a JSON string literal, quotes included, escaped as Writer does:
/// quote(R"(say "hi")") == R"("say \"hi\"")".
inline std::string quote(std::string_view s) {
  Writer w;
  w.string(s);
  return w.str();
}

}  // namespace zcode::sdk::json
