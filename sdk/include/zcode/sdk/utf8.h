// zcode/sdk/utf8.h: UTF-8 validation, decoding and encoding (header-only), the one
// codec of the tokenizers, the text metrics and the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace zcode::sdk {

/// Offset of the first byte that is not well-formed UTF-8 (Unicode 15,
/// Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF), or npos.
inline size_t invalid_utf8_at(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    if (i + 8 <= n) {  // ASCII fast path, 8 bytes at a time
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return i;
    if (i + 1 >= n || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (i + k >= n || (p[i + k] & 0xC0) != 0x80) return i;
    i += len;
  }
  return std::string_view::npos;
}

/// Returned by utf8_decode for a byte that does not start a valid sequence.
inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFFu;

/// Decodes one UTF-8 sequence from s[0..n) (n >= 1) into *cp and returns its
/// length in bytes (1..4). Strict (RFC 3629; Unicode 15, Table 3-7): overlong
/// forms, surrogates (U+D800..U+DFFF), values above U+10FFFF and truncated
/// sequences are invalid; then *cp = kInvalidCodePoint and the length is 1, so
/// callers treat each bad byte as a character of its own.
inline size_t utf8_decode(const unsigned char* s, size_t n, char32_t* cp) {
  unsigned char c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  char32_t v, min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    v = c & 0x1F;
    min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    v = c & 0x0F;
    min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    v = c & 0x07;
    min = 0x10000;
  } else {
    *cp = kInvalidCodePoint;
    return 1;
  }
  if (n < len) {
    *cp = kInvalidCodePoint;
    return 1;
  }
  for (size_t k = 1; k < len; ++k) {
    if ((s[k] & 0xC0) != 0x80) {
      *cp = kInvalidCodePoint;
      return 1;
    }
    v = (v << 6) | (s[k] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    *cp = kInvalidCodePoint;
    return 1;
  }
  *cp = v;
  return len;
}

/// Appends the UTF-8 encoding of `cp` (at most U+10FFFF) to `out`.
inline void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace zcode::sdk
