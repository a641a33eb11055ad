// TextStream: UTF-8-safe, stop-string-aware incremental text (text_stream.h).
#include <zcode/core/serve/text_stream.h>
#include <zcode/sdk/utf8.h>

#include <algorithm>

namespace zcode::serve {

namespace {

// Bytes of the character a lead byte starts (1 for ASCII), 0 for a byte
// that cannot start one (a continuation byte, C0, C1, F5..FF).
size_t utf8_length(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

}  // namespace

size_t utf8_complete_prefix(std::string_view s, size_t n) {
  n = std::min(n, s.size());
  // The last lead byte among the last 4 bytes decides.
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t len = utf8_length(c);
    return len > back ? n - back : n;  // the character would run past n: cut before it
  }
  return n;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const size_t bad = zcode::sdk::invalid_utf8_at(s);
    if (bad == std::string_view::npos) {
      out.append(s);
      break;
    }
    out.append(s.substr(0, bad));
    // A maximal subpart: the lead byte and the continuation bytes that fit it.
    const auto lead = static_cast<unsigned char>(s[bad]);
    const size_t len = utf8_length(lead);
    size_t skip = 1;
    while (skip < len && bad + skip < s.size()) {
      const auto c = static_cast<unsigned char>(s[bad + skip]);
      // Table 3-7: the second byte's range depends on the lead byte.
      unsigned char lo = 0x80, hi = 0xBF;
      if (skip == 1 && lead == 0xE0) lo = 0xA0;
      if (skip == 1 && lead == 0xED) hi = 0x9F;
      if (skip == 1 && lead == 0xF0) lo = 0x90;
      if (skip == 1 && lead == 0xF4) hi = 0x8F;
      if (c < lo || c > hi) break;
      ++skip;
    }
    out.append("\xEF\xBF\xBD");
    s.remove_prefix(bad + skip);
  }
  return out;
}

TextStream::TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {
  stop_.erase(std::remove(stop_.begin(), stop_.end(), std::string()), stop_.end());
}

size_t first_stop(std::string_view text, const std::vector<std::string>& stop) {
  size_t at = std::string_view::npos;
  for (const auto& s : stop) at = std::min(at, text.find(s));
  return at;
}

std::string TextStream::push(std::string_view full, bool* stopped) {
  if (stopped_) {
    if (stopped) *stopped = true;
    return {};
  }
  size_t safe = full.size();
  // A stop string cannot start more than its length before what was sent
  // (the tail that could begin one is held, below): search from there, so
  // a token costs O(new text), not O(all text).
  size_t longest = 0;
  for (const auto& s : stop_) longest = std::max(longest, s.size());
  const size_t from = sent_bytes_ > longest ? sent_bytes_ - longest : 0;
  size_t at = first_stop(full.substr(from), stop_);
  if (at != std::string_view::npos) at += from;
  if (at != std::string_view::npos) {
    safe = at;
    stopped_ = true;
  } else {
    // Hold the longest tail that is a proper prefix of some stop string.
    for (const auto& s : stop_)
      for (size_t k = std::min(s.size() - 1, full.size()); k > 0; --k)
        if (full.substr(full.size() - k) == std::string_view(s).substr(0, k)) {
          safe = std::min(safe, full.size() - k);
          break;
        }
    safe = utf8_complete_prefix(full, safe);
  }
  if (stopped) *stopped = stopped_;
  if (safe <= sent_bytes_) return {};
  std::string piece = sanitize_utf8(full.substr(sent_bytes_, safe - sent_bytes_));
  sent_bytes_ = safe;
  sent_ += piece;
  return piece;
}

std::string TextStream::finish(std::string_view full) {
  size_t end = full.size();
  if (const size_t at = first_stop(full, stop_); at != std::string_view::npos) {
    end = at;
    stopped_ = true;
  }
  if (end <= sent_bytes_) return {};
  std::string piece = sanitize_utf8(full.substr(sent_bytes_, end - sent_bytes_));
  sent_bytes_ = end;
  sent_ += piece;
  return piece;
}

}  // namespace zcode::serve
