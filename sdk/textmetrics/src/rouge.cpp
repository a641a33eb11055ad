// ROUGE (see rouge.h).
#include <zcode/textmetrics/rouge.h>

#include <unicode/brkiter.h>
#include <unicode/locid.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>

namespace zcode::textmetrics {

namespace {

std::vector<std::string> ascii_tokens(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : text) {
    char c = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      cur.push_back(c);
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::vector<std::string> unicode_tokens(std::string_view text) {
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  s.foldCase();
  UErrorCode err = U_ZERO_ERROR;
  std::unique_ptr<icu::BreakIterator> it(icu::BreakIterator::createWordInstance(icu::Locale::getRoot(), err));
  if (U_FAILURE(err)) throw std::runtime_error(std::string("rouge: ICU word break iterator: ") + u_errorName(err));
  it->setText(s);
  std::vector<std::string> out;
  int32_t start = it->first();
  for (int32_t end = it->next(); end != icu::BreakIterator::DONE; start = end, end = it->next()) {
    if (it->getRuleStatus() == UBRK_WORD_NONE) continue;  // spaces, punctuation, symbols
    std::string w;
    s.tempSubStringBetween(start, end).toUTF8String(w);
    out.push_back(w);
  }
  return out;
}

using Counts = std::map<std::vector<std::string>, int>;

Counts ngrams(const std::vector<std::string>& t, int n) {
  Counts c;
  for (size_t i = 0; i + static_cast<size_t>(n) <= t.size(); ++i)
    ++c[std::vector<std::string>(t.begin() + static_cast<std::ptrdiff_t>(i),
                                 t.begin() + static_cast<std::ptrdiff_t>(i) + n)];
  return c;
}

RougeScore score(double overlap, double hyp_count, double ref_count) {
  RougeScore s;
  s.precision = overlap / std::max(hyp_count, 1.0);
  s.recall = overlap / std::max(ref_count, 1.0);
  s.fmeasure = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0;
  return s;
}

}  // namespace

std::vector<std::string> rouge_tokenize(std::string_view text, bool unicode) {
  return unicode ? unicode_tokens(text) : ascii_tokens(text);
}

RougeScore rouge_n(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis, int n) {
  if (n < 1) throw std::invalid_argument("rouge_n: n must be >= 1");
  const Counts r = ngrams(reference, n), h = ngrams(hypothesis, n);
  double overlap = 0, hc = 0, rc = 0;
  for (const auto& [g, c] : h) {
    hc += c;
    if (auto it = r.find(g); it != r.end()) overlap += std::min(c, it->second);
  }
  for (const auto& [g, c] : r) rc += c;
  return score(overlap, hc, rc);
}

RougeScore rouge_l(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis) {
  if (reference.empty() || hypothesis.empty()) return {};
  // LCS by dynamic programming over two rows.
  std::vector<int> prev(hypothesis.size() + 1, 0), cur(hypothesis.size() + 1, 0);
  for (size_t i = 1; i <= reference.size(); ++i) {
    for (size_t j = 1; j <= hypothesis.size(); ++j)
      cur[j] = reference[i - 1] == hypothesis[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    std::swap(prev, cur);
  }
  return score(prev[hypothesis.size()], static_cast<double>(hypothesis.size()), static_cast<double>(reference.size()));
}

Rouge rouge(const std::string& hypothesis, const std::vector<std::string>& references, bool unicode) {
  if (references.empty()) throw std::invalid_argument("rouge: a hypothesis needs at least one reference");
  const auto h = rouge_tokenize(hypothesis, unicode);
  Rouge best;
  bool first = true;
  for (const std::string& ref : references) {
    const auto r = rouge_tokenize(ref, unicode);
    const RougeScore s1 = rouge_n(r, h, 1), s2 = rouge_n(r, h, 2), sl = rouge_l(r, h);
    if (first || s1.fmeasure > best.rouge1.fmeasure) best.rouge1 = s1;
    if (first || s2.fmeasure > best.rouge2.fmeasure) best.rouge2 = s2;
    if (first || sl.fmeasure > best.rougeL.fmeasure) best.rougeL = sl;
    first = false;
  }
  return best;
}

Rouge corpus_rouge(const std::vector<std::string>& hypotheses, const std::vector<std::vector<std::string>>& references,
                   bool unicode) {
  if (references.empty()) throw std::invalid_argument("rouge: no reference set");
  for (size_t r = 0; r < references.size(); ++r)
    if (references[r].size() != hypotheses.size())
      throw std::invalid_argument("rouge: reference set " + std::to_string(r + 1) + " has " +
                                  std::to_string(references[r].size()) + " segments, the hypotheses " +
                                  std::to_string(hypotheses.size()));
  Rouge mean;
  auto add = [](RougeScore& m, const RougeScore& s) {
    m.precision += s.precision;
    m.recall += s.recall;
    m.fmeasure += s.fmeasure;
  };
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    std::vector<std::string> refs;
    for (const auto& set : references) refs.push_back(set[i]);
    const Rouge s = rouge(hypotheses[i], refs, unicode);
    add(mean.rouge1, s.rouge1);
    add(mean.rouge2, s.rouge2);
    add(mean.rougeL, s.rougeL);
  }
  const double n = std::max<double>(1, static_cast<double>(hypotheses.size()));
  for (RougeScore* m : {&mean.rouge1, &mean.rouge2, &mean.rougeL}) {
    m->precision /= n;
    m->recall /= n;
    m->fmeasure /= n;
  }
  return mean;
}

}  // namespace zcode::textmetrics
