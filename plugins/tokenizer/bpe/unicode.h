// unicode.h: the little Unicode the tokenizers need: strict UTF-8 decoding, the
// three character classes of the GPT-2 pre-tokenizer, and NFC/NFD.
//
// Tables are generated from the Unicode Character Database (Debian's
// unicode-data, version in unicode_tables.inc) by scripts/gen-unicode-tables.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zcode::tok {

/// Returned by utf8_decode for a byte that does not start a valid sequence.
inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFFu;

/// Decodes one UTF-8 sequence from s[0..n) (n >= 1) into *cp and returns its
/// length in bytes (1..4). Strict (RFC 3629): overlong forms, surrogates
/// (U+D800..U+DFFF), values above U+10FFFF and truncated sequences are
/// invalid; then *cp = kInvalidCodePoint and the length is 1, so callers treat
/// each bad byte as a character of its own.
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

/// Appends the UTF-8 encoding of `cp` (a valid scalar value) to `out`.
void utf8_append(std::string& out, char32_t cp);

/// True when `s` is valid UTF-8 throughout.
bool utf8_valid(std::string_view s);

/// Character classes of the GPT-2 split pattern
/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
/// (Radford et al. 2019, "Language Models are Unsupervised Multitask
/// Learners", section 2.2; the pattern of OpenAI's encoder.py).
enum CharClass : uint8_t {
  kOther = 0,   ///< neither letter, number nor space (punctuation, symbols, invalid bytes)
  kLetter = 1,  ///< general category L* (Lu Ll Lt Lm Lo)
  kNumber = 2,  ///< general category N* (Nd Nl No)
  kSpace = 3    ///< ECMAScript `\s`: TAB LF VT FF CR SP NBSP U+FEFF, Zs, U+2028, U+2029
};

/// Class of a code point; kInvalidCodePoint is kOther.
CharClass char_class(char32_t cp);

/// Class of an ASCII byte (< 0x80), inline for the pre-tokenizer's hot loop;
/// equal to char_class() there (checked against UnicodeData.txt in the tests).
inline CharClass ascii_class(unsigned char c) {
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return kLetter;
  if (c >= '0' && c <= '9') return kNumber;
  if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return kSpace;
  return kOther;
}

/// Unicode Normalization Form C (UAX #15: canonical decomposition, canonical
/// ordering, canonical composition). Invalid UTF-8 bytes are copied through
/// unchanged and block composition across them.
std::string nfc(std::string_view s);
/// Unicode Normalization Form D (UAX #15). Invalid bytes as for nfc().
std::string nfd(std::string_view s);

/// The Unicode version the tables were generated from (e.g. "15.0.0").
const char* unicode_tables_version();

}  // namespace zcode::tok
