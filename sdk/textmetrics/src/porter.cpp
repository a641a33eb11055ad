// The Porter stemmer, NLTK's default variant (see porter.h). Each step is
// the paper's rule list: the first rule whose suffix matches decides, and
// when its condition fails the word is left as it is.
#include <zcode/sdk/utf8.h>
#include <zcode/textmetrics/porter.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace zcode::textmetrics {

namespace {

// The rules count characters (NLTK works on Python str): code points here.
// An invalid UTF-8 byte b becomes U+DC00 + b (Python's surrogateescape), so
// that it round-trips.
std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    const size_t len = sdk::utf8_decode(p + i, s.size() - i, &cp);
    out.push_back(cp == sdk::kInvalidCodePoint ? char32_t{0xDC00} + p[i] : cp);
    i += len;
  }
  return out;
}

std::string encode_utf8(const std::u32string& s) {
  std::string out;
  for (char32_t cp : s) {
    if (cp >= 0xDC80 && cp <= 0xDCFF) out.push_back(static_cast<char>(cp - 0xDC00));
    else sdk::utf8_append(out, cp);
  }
  return out;
}

using Str = std::u32string;
using View = std::u32string_view;

bool consonant(const Str& w, size_t i) {
  const char32_t c = w[i];
  if (c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u') return false;
  if (c == 'y') return i == 0 ? true : !consonant(w, i - 1);
  return true;
}

// m of [C](VC)^m[V]: the number of vowel-consonant transitions.
int measure(const Str& s) {
  int m = 0;
  for (size_t i = 1; i < s.size(); ++i)
    if (!consonant(s, i - 1) && consonant(s, i)) ++m;
  return m;
}

bool has_vowel(const Str& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (!consonant(s, i)) return true;
  return false;
}

bool double_consonant(const Str& w) {
  return w.size() >= 2 && w[w.size() - 1] == w[w.size() - 2] && consonant(w, w.size() - 1);
}

bool cvc(const Str& w) {
  const size_t n = w.size();
  if (n >= 3 && consonant(w, n - 3) && !consonant(w, n - 2) && consonant(w, n - 1) && w[n - 1] != 'w' &&
      w[n - 1] != 'x' && w[n - 1] != 'y')
    return true;
  return n == 2 && !consonant(w, 0) && consonant(w, 1);
}

bool ends(const Str& w, View s) { return w.size() >= s.size() && w.ends_with(s); }
Str cut(const Str& w, size_t n) { return w.substr(0, w.size() - n); }

struct Rule {
  View suffix;  // "*d": a double consonant
  Str replacement;
  std::function<bool(const Str&)> condition;  // on the stem; empty: always
};

Str apply(const Str& w, const std::vector<Rule>& rules) {
  for (const Rule& r : rules) {
    if (r.suffix == U"*d") {
      if (!double_consonant(w)) continue;
      const Str stem = cut(w, 2);
      return !r.condition || r.condition(stem) ? stem + r.replacement : w;
    }
    if (!ends(w, r.suffix)) continue;
    const Str stem = cut(w, r.suffix.size());
    return !r.condition || r.condition(stem) ? stem + r.replacement : w;
  }
  return w;
}

bool m_pos(const Str& s) { return measure(s) > 0; }
bool m_gt1(const Str& s) { return measure(s) > 1; }

Str step1a(const Str& w) {
  if (ends(w, U"ies") && w.size() == 4) return cut(w, 3) + U"ie";
  return apply(w, {{U"sses", U"ss", {}}, {U"ies", U"i", {}}, {U"ss", U"ss", {}}, {U"s", U"", {}}});
}

Str step1b(const Str& w) {
  if (ends(w, U"ied")) return cut(w, 3) + (w.size() == 4 ? U"ie" : U"i");
  if (ends(w, U"eed")) {
    const Str stem = cut(w, 3);
    return measure(stem) > 0 ? stem + U"ee" : w;
  }
  Str stem;
  bool found = false;
  for (View suffix : {View(U"ed"), View(U"ing")})
    if (ends(w, suffix) && has_vowel(cut(w, suffix.size()))) {
      stem = cut(w, suffix.size());
      found = true;
      break;
    }
  if (!found) return w;
  const char32_t last = stem.back();
  return apply(stem, {{U"at", U"ate", {}},
                      {U"bl", U"ble", {}},
                      {U"iz", U"ize", {}},
                      {U"*d", Str(1, last), [last](const Str&) { return last != 'l' && last != 's' && last != 'z'; }},
                      {U"", U"e", [](const Str& s) { return measure(s) == 1 && cvc(s); }}});
}

Str step1c(const Str& w) {
  return apply(w, {{U"y", U"i", [](const Str& s) { return s.size() > 1 && consonant(s, s.size() - 1); }}});
}

Str step2(const Str& w) {
  if (ends(w, U"alli") && m_pos(cut(w, 4))) return step2(cut(w, 4) + U"al");
  return apply(w, {{U"ational", U"ate", m_pos},
                   {U"tional", U"tion", m_pos},
                   {U"enci", U"ence", m_pos},
                   {U"anci", U"ance", m_pos},
                   {U"izer", U"ize", m_pos},
                   {U"bli", U"ble", m_pos},
                   {U"alli", U"al", m_pos},
                   {U"entli", U"ent", m_pos},
                   {U"eli", U"e", m_pos},
                   {U"ousli", U"ous", m_pos},
                   {U"ization", U"ize", m_pos},
                   {U"ation", U"ate", m_pos},
                   {U"ator", U"ate", m_pos},
                   {U"alism", U"al", m_pos},
                   {U"iveness", U"ive", m_pos},
                   {U"fulness", U"ful", m_pos},
                   {U"ousness", U"ous", m_pos},
                   {U"aliti", U"al", m_pos},
                   {U"iviti", U"ive", m_pos},
                   {U"biliti", U"ble", m_pos},
                   {U"fulli", U"ful", m_pos},
                   // The U"l" stays with the stem, so that short stems (geo, theo) count.
                   {U"logi", U"log", [&w](const Str&) { return m_pos(cut(w, 3)); }}});
}

Str step3(const Str& w) {
  return apply(w, {{U"icate", U"ic", m_pos},
                   {U"ative", U"", m_pos},
                   {U"alize", U"al", m_pos},
                   {U"iciti", U"ic", m_pos},
                   {U"ical", U"ic", m_pos},
                   {U"ful", U"", m_pos},
                   {U"ness", U"", m_pos}});
}

Str step4(const Str& w) {
  return apply(w, {{U"al", U"", m_gt1},
                   {U"ance", U"", m_gt1},
                   {U"ence", U"", m_gt1},
                   {U"er", U"", m_gt1},
                   {U"ic", U"", m_gt1},
                   {U"able", U"", m_gt1},
                   {U"ible", U"", m_gt1},
                   {U"ant", U"", m_gt1},
                   {U"ement", U"", m_gt1},
                   {U"ment", U"", m_gt1},
                   {U"ent", U"", m_gt1},
                   {U"ion", U"",
                    [](const Str& s) { return measure(s) > 1 && !s.empty() && (s.back() == 's' || s.back() == 't'); }},
                   {U"ou", U"", m_gt1},
                   {U"ism", U"", m_gt1},
                   {U"ate", U"", m_gt1},
                   {U"iti", U"", m_gt1},
                   {U"ous", U"", m_gt1},
                   {U"ive", U"", m_gt1},
                   {U"ize", U"", m_gt1}});
}

Str step5a(const Str& w) {
  if (ends(w, U"e")) {
    const Str stem = cut(w, 1);
    if (measure(stem) > 1) return stem;
    if (measure(stem) == 1 && !cvc(stem)) return stem;
  }
  return w;
}

Str step5b(const Str& w) {
  return apply(w, {{U"ll", U"l", [&w](const Str&) { return measure(cut(w, 1)) > 1; }}});
}

}  // namespace

std::string porter_stem(std::string_view word) {
  static const std::map<std::string, std::string, std::less<>> kIrregular = {
      {"sky", "sky"},        {"skies", "sky"},       {"dying", "die"},        {"lying", "lie"},
      {"tying", "tie"},      {"news", "news"},       {"innings", "inning"},   {"inning", "inning"},
      {"outings", "outing"}, {"outing", "outing"},   {"cannings", "canning"}, {"canning", "canning"},
      {"howe", "howe"},      {"proceed", "proceed"}, {"exceed", "exceed"},    {"succeed", "succeed"}};
  if (auto it = kIrregular.find(word); it != kIrregular.end()) return it->second;
  const Str w = decode_utf8(word);
  if (w.size() <= 2) return std::string(word);  // one or two characters: left alone
  return encode_utf8(step5b(step5a(step4(step3(step2(step1c(step1b(step1a(w)))))))));
}

}  // namespace zcode::textmetrics
