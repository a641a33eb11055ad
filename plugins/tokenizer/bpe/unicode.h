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

#include <zcode/sdk/utf8.h>

namespace zcode::tok {

// The codec is the SDK's (zcode/sdk/utf8.h), under the names this plugin uses.
using sdk::kInvalidCodePoint;
using sdk::utf8_append;
using sdk::utf8_decode;

/// True when `s` is valid UTF-8 throughout.
inline bool utf8_valid(std::string_view s) { return sdk::invalid_utf8_at(s) == std::string_view::npos; }

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
