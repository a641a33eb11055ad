// METEOR (see meteor.h).
#include <zcode/textmetrics/meteor.h>
#include <zcode/textmetrics/porter.h>

#include <unicode/locid.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace zcode::textmetrics {

std::string lower(const std::string& s) {
  bool ascii = true;
  for (unsigned char c : s) ascii = ascii && c < 0x80;
  if (ascii) {
    std::string out = s;
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

namespace {

using Enum = std::vector<std::pair<int, std::string>>;  // (position, word)
using Matches = std::vector<std::pair<int, int>>;       // (hypothesis position, reference position)

// One stage: hypothesis words from last to first; each takes the last
// remaining reference word for which `same` holds; matched words leave both lists.
template <class Same>
void align(Enum& hyp, Enum& ref, Matches& out, Same same) {
  for (size_t i = hyp.size(); i-- > 0;)
    for (size_t j = ref.size(); j-- > 0;)
      if (same(hyp[i].second, ref[j].second)) {
        out.emplace_back(hyp[i].first, ref[j].first);
        hyp.erase(hyp.begin() + static_cast<std::ptrdiff_t>(i));
        ref.erase(ref.begin() + static_cast<std::ptrdiff_t>(j));
        break;
      }
}

}  // namespace

double meteor(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis, WordNet& wordnet,
              const MeteorOptions& o) {
  Enum hyp, ref;
  for (size_t i = 0; i < hypothesis.size(); ++i) hyp.emplace_back(static_cast<int>(i), lower(hypothesis[i]));
  for (size_t j = 0; j < reference.size(); ++j) ref.emplace_back(static_cast<int>(j), lower(reference[j]));
  const double hyp_len = static_cast<double>(hyp.size()), ref_len = static_cast<double>(ref.size());
  Matches m;
  align(hyp, ref, m, [](const std::string& a, const std::string& b) { return a == b; });
  // The stem stage compares stems (the words are replaced by them, as NLTK does).
  for (auto& w : hyp) w.second = porter_stem(w.second);
  for (auto& w : ref) w.second = porter_stem(w.second);
  align(hyp, ref, m, [](const std::string& a, const std::string& b) { return a == b; });
  for (size_t i = hyp.size(); i-- > 0;) {
    const std::set<std::string> syn = wordnet.synonyms(hyp[i].second);
    for (size_t j = ref.size(); j-- > 0;)
      if (syn.count(ref[j].second)) {
        m.emplace_back(hyp[i].first, ref[j].first);
        hyp.erase(hyp.begin() + static_cast<std::ptrdiff_t>(i));
        ref.erase(ref.begin() + static_cast<std::ptrdiff_t>(j));
        break;
      }
  }
  if (m.empty() || hyp_len == 0 || ref_len == 0) return 0;
  std::sort(m.begin(), m.end());
  double chunks = 1;
  for (size_t k = 0; k + 1 < m.size(); ++k)
    if (!(m[k + 1].first == m[k].first + 1 && m[k + 1].second == m[k].second + 1)) ++chunks;
  const double n = static_cast<double>(m.size());
  const double p = n / hyp_len, r = n / ref_len;
  const double fmean = p * r / (o.alpha * p + (1 - o.alpha) * r);
  const double penalty = o.gamma * std::pow(chunks / n, o.beta);
  return (1 - penalty) * fmean;
}

double meteor(const std::vector<std::vector<std::string>>& references, const std::vector<std::string>& hypothesis,
              WordNet& wordnet, const MeteorOptions& o) {
  double best = 0;
  for (const auto& r : references) best = std::max(best, meteor(r, hypothesis, wordnet, o));
  return best;
}

}  // namespace zcode::textmetrics
