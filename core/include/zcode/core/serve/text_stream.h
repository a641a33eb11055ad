// zcode/core/serve/text_stream.h: from a growing sequence of generated ids'
// text to the pieces a client may be sent: never a partial UTF-8 character,
// never text a stop string could still claim, nothing from a stop string on.
// Used by `zcode-host generate --stream`, the server and the Python Engine.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zcode::serve {

/// Length of the longest prefix of s[0, n) that ends on a UTF-8 character
/// boundary: a lead byte whose sequence would run past n is cut off with what
/// follows it. Bytes that can never start a character are left as they are
/// (sanitize_utf8 handles them).
size_t utf8_complete_prefix(std::string_view s, size_t n);

/// `s` with every ill-formed UTF-8 byte sequence replaced by U+FFFD (Unicode
/// 15, §3.9 "U+FFFD substitution of maximal subparts"), so JSON can carry it.
std::string sanitize_utf8(std::string_view s);

/// Offset of the first occurrence of any of `stop` in `text`, or npos.
size_t first_stop(std::string_view text, const std::vector<std::string>& stop);

/// Incremental text of one generated sequence. The caller gives the decoded
/// text of all ids so far after each id (tokenizers decode prefixes to
/// prefixes); push() returns the new piece that is safe to send.
class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop = {});

  /// New safe text after `full` (the text of every generated id so far).
  /// When a stop string occurs, `*stopped` becomes true and the text ends
  /// just before its first occurrence.
  std::string push(std::string_view full, bool* stopped);
  /// The rest at the end of generation: held bytes (cut at a stop string);
  /// an incomplete last character becomes U+FFFD.
  std::string finish(std::string_view full);
  /// Everything sent so far (push and finish pieces joined).
  const std::string& text() const { return sent_; }
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stop_;
  std::string sent_;
  size_t sent_bytes_ = 0;  ///< bytes of `full` consumed (sent_ may differ by U+FFFD substitutions)
  bool stopped_ = false;
};

}  // namespace zcode::serve
