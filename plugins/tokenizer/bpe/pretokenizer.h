// pretokenizer.h: the GPT-2 split pattern as a hand-written state machine.
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (OpenAI GPT-2 encoder.py; Radford et al. 2019, section 2.2.) Semantics are
// those of the ECMAScript engine that runs the reference `gpt-3-encoder`:
// leftmost alternative wins, `\s` is ECMAScript whitespace (see unicode.h),
// contractions are lower-case only. Invalid UTF-8 bytes are single characters
// of class kOther (the references cannot express them; see README).
#pragma once

#include "unicode.h"

#include <cstddef>
#include <string_view>

namespace zcode::tok {

/// Calls emit(offset, length) for each pre-token of `text`, in order; the
/// pieces tile the input exactly (their concatenation is `text`). O(n), no
/// allocation.
template <class Emit>
void gpt2_split(std::string_view text, Emit&& emit) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  auto cls_at = [&](size_t i, size_t* len) -> CharClass {
    if (s[i] < 0x80) {
      *len = 1;
      return ascii_class(s[i]);
    }
    char32_t cp;
    *len = utf8_decode(s + i, n - i, &cp);
    return char_class(cp);
  };
  size_t i = 0;
  while (i < n) {
    const size_t start = i;
    if (s[i] == '\'' && i + 1 < n) {  // contractions (lower case only, as in the pattern)
      unsigned char a = s[i + 1];
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(start, size_t{2});
        i += 2;
        continue;
      }
      if (i + 2 < n) {
        unsigned char b = s[i + 2];
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
          emit(start, size_t{3});
          i += 3;
          continue;
        }
      }
    }
    size_t len;
    CharClass c = cls_at(i, &len);
    if (s[i] == ' ' && i + 1 < n) {  // ` ?` prefix of the letter/number/other alternatives
      size_t len2;
      CharClass c2 = cls_at(i + 1, &len2);
      if (c2 != kSpace) {
        i += 1;
        c = c2;
        len = len2;
      }
    }
    if (c != kSpace) {
      i += len;
      while (i < n) {
        size_t l;
        if (cls_at(i, &l) != c) break;
        i += l;
      }
      emit(start, i - start);
      continue;
    }
    // Whitespace run [start, end); `last` is where its last character begins.
    size_t end = i + len, last = i, chars = 1;
    while (end < n) {
      size_t l;
      if (cls_at(end, &l) != kSpace) break;
      last = end;
      end += l;
      ++chars;
    }
    if (end == n || chars == 1) {
      emit(start, end - start);  // \s+(?!\S) at the end, or \s+ for a lone character before \S
      i = end;
    } else {
      emit(start, last - start);  // \s+(?!\S): leave the last space to prefix the next token
      i = last;
    }
  }
}

}  // namespace zcode::tok
