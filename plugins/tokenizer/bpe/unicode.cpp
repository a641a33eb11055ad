// unicode.cpp: class lookup and normalization over the generated tables.
#include "unicode.h"

#include <algorithm>
#include <array>
#include <vector>

namespace zcode::tok {
namespace {

struct CodeRange {
  char32_t first, last;
};
struct CombiningClass {
  char32_t first, last;
  uint8_t ccc;
};
struct Decomposition {
  char32_t cp;
  uint16_t offset;
  uint8_t length;
};
struct Composition {
  char32_t first, second, composite;
};

#include "unicode_tables.inc"

template <size_t N>
bool in_ranges(const CodeRange (&r)[N], char32_t cp) {
  const CodeRange* it = std::upper_bound(r, r + N, cp, [](char32_t c, const CodeRange& x) { return c < x.first; });
  return it != r && cp <= (it - 1)->last;
}

uint8_t ccc_of(char32_t cp) {
  if (cp < 0x300) return 0;
  const CombiningClass* b = kCombiningClasses;
  const CombiningClass* e = b + sizeof(kCombiningClasses) / sizeof(kCombiningClasses[0]);
  const CombiningClass* it =
      std::upper_bound(b, e, cp, [](char32_t c, const CombiningClass& x) { return c < x.first; });
  return (it != b && cp <= (it - 1)->last) ? (it - 1)->ccc : 0;
}

// Hangul syllables: algorithmic (de)composition, The Unicode Standard 15.0, section 3.12.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  const Decomposition* b = kDecompositions;
  const Decomposition* e = b + sizeof(kDecompositions) / sizeof(kDecompositions[0]);
  const Decomposition* it = std::lower_bound(b, e, cp, [](const Decomposition& x, char32_t c) { return x.cp < c; });
  if (it != e && it->cp == cp) {
    out.insert(out.end(), kDecompositionData + it->offset, kDecompositionData + it->offset + it->length);
  } else {
    out.push_back(cp);
  }
}

char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const Composition* s = kCompositions;
  const Composition* e = s + sizeof(kCompositions) / sizeof(kCompositions[0]);
  const Composition* it =
      std::lower_bound(s, e, std::make_pair(a, b), [](const Composition& x, std::pair<char32_t, char32_t> k) {
        return x.first < k.first || (x.first == k.first && x.second < k.second);
      });
  return (it != e && it->first == a && it->second == b) ? it->composite : 0;
}

// Decomposes and canonically orders one run of valid UTF-8, optionally composes,
// and appends the result.
void normalize_run(std::string_view run, bool compose, std::string& out) {
  std::vector<char32_t> cps;
  const auto* p = reinterpret_cast<const unsigned char*>(run.data());
  for (size_t i = 0; i < run.size();) {
    char32_t cp;
    i += utf8_decode(p + i, run.size() - i, &cp);
    decompose(cp, cps);
  }
  // Canonical ordering: stable sort of every maximal run of non-starters by ccc.
  for (size_t i = 0; i < cps.size();) {
    if (ccc_of(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && ccc_of(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j, [](char32_t a, char32_t b) { return ccc_of(a) < ccc_of(b); });
    i = j;
  }
  if (compose && !cps.empty()) {
    // Canonical composition algorithm (UAX #15, section 1.3 / D117).
    size_t starter = SIZE_MAX;  // output index of the last starter
    int last_ccc = 0;           // ccc of the last character kept in the output
    size_t w = 0;
    for (size_t r = 0; r < cps.size(); ++r) {
      char32_t c = cps[r];
      int cc = ccc_of(c);
      // c is blocked from the starter when a kept character in between has ccc 0 or >= cc.
      if (starter != SIZE_MAX && (w == starter + 1 || (last_ccc != 0 && last_ccc < cc))) {
        if (char32_t comp = compose_pair(cps[starter], c)) {
          cps[starter] = comp;
          continue;
        }
      }
      if (cc == 0) starter = w;
      last_ccc = cc;
      cps[w++] = c;
    }
    cps.resize(w);
  }
  for (char32_t c : cps) utf8_append(out, c);
}

std::string normalize(std::string_view s, bool compose) {
  // Fast path: text below U+0300 is already in NFC (every combining mark is >= U+0300),
  // and ASCII is in NFD too.
  bool ascii = true, below300 = true;
  for (unsigned char c : s) {
    if (c >= 0x80) {
      ascii = false;
      if (c > 0xCB) {
        below300 = false;
        break;
      }
    }
  }
  if (ascii || (compose && below300 && utf8_valid(s))) return std::string(s);
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t run = 0;
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    size_t len = utf8_decode(p + i, s.size() - i, &cp);
    if (cp == kInvalidCodePoint) {
      normalize_run(s.substr(run, i - run), compose, out);
      out.push_back(s[i]);
      run = i + 1;
    }
    i += len;
  }
  normalize_run(s.substr(run), compose, out);
  return out;
}

}  // namespace

CharClass char_class(char32_t cp) {
  if (cp < 128) return ascii_class(static_cast<unsigned char>(cp));
  if (cp == kInvalidCodePoint) return kOther;
  if (in_ranges(kLetterRanges, cp)) return kLetter;
  if (in_ranges(kNumberRanges, cp)) return kNumber;
  if (in_ranges(kSpaceRanges, cp)) return kSpace;
  return kOther;
}

std::string nfc(std::string_view s) { return normalize(s, true); }
std::string nfd(std::string_view s) { return normalize(s, false); }

const char* unicode_tables_version() { return "15.0.0"; }

}  // namespace zcode::tok
