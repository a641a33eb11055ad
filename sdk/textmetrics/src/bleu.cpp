// BLEU (see bleu.h). The tokenizer's rules are those of mteval-v13a.pl as
// sacreBLEU documents them, applied with std::regex in the same order and
// with the same left-to-right, non-overlapping replacement as Python's re.sub.
#include <zcode/textmetrics/bleu.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace zcode::textmetrics {

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

using Ngrams = std::map<std::vector<std::string>, int64_t>;

Ngrams ngrams(const std::vector<std::string>& t, size_t n) {
  Ngrams out;
  for (size_t i = 0; i + n <= t.size(); ++i) ++out[std::vector<std::string>(t.begin() + i, t.begin() + i + n)];
  return out;
}

double my_log(double x) { return x == 0 ? -9999999999.0 : std::log(x); }

}  // namespace

std::string tokenize_13a(std::string_view in) {
  std::string line(in);
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  static const std::regex punct(R"(([\{-\~\[-\` -\&\(-\+\:-\@\/]))");
  static const std::regex before(R"(([^0-9])([\.,]))");
  static const std::regex after(R"(([\.,])([^0-9]))");
  static const std::regex dash(R"(([0-9])(-))");
  line = " " + line + " ";
  line = std::regex_replace(line, punct, " $1 ");
  line = std::regex_replace(line, before, "$1 $2 ");
  line = std::regex_replace(line, after, " $1 $2");
  line = std::regex_replace(line, dash, "$1 $2 ");
  std::string out;
  for (const std::string& t : split_ws(line)) out += (out.empty() ? "" : " ") + t;
  return out;
}

BleuStats& BleuStats::operator+=(const BleuStats& o) {
  for (int n = 0; n < 4; ++n) {
    correct[static_cast<size_t>(n)] += o.correct[static_cast<size_t>(n)];
    total[static_cast<size_t>(n)] += o.total[static_cast<size_t>(n)];
  }
  sys_len += o.sys_len;
  ref_len += o.ref_len;
  return *this;
}

BleuStats bleu_stats(const std::string& hypothesis, const std::vector<std::string>& references) {
  if (references.empty()) throw std::invalid_argument("bleu: a hypothesis needs at least one reference");
  const std::vector<std::string> hyp = split_ws(hypothesis);
  BleuStats s;
  s.sys_len = static_cast<int64_t>(hyp.size());
  // The closest reference length; of two equally close, the shorter.
  int64_t best = -1, best_diff = 0;
  std::vector<std::vector<std::string>> refs;
  for (const std::string& r : references) {
    refs.push_back(split_ws(r));
    const int64_t len = static_cast<int64_t>(refs.back().size()), diff = std::llabs(len - s.sys_len);
    if (best < 0 || diff < best_diff || (diff == best_diff && len < best)) {
      best = len;
      best_diff = diff;
    }
  }
  s.ref_len = best;
  for (size_t n = 1; n <= 4; ++n) {
    Ngrams maxref;
    for (const auto& r : refs)
      for (const auto& [g, c] : ngrams(r, n)) maxref[g] = std::max(maxref[g], c);
    for (const auto& [g, c] : ngrams(hyp, n)) {
      s.total[n - 1] += c;
      auto it = maxref.find(g);
      if (it != maxref.end()) s.correct[n - 1] += std::min(c, it->second);
    }
  }
  return s;
}

Bleu compute_bleu(const BleuStats& s, bool effective_order) {
  Bleu b;
  b.sys_len = s.sys_len;
  b.ref_len = s.ref_len;
  b.ratio = s.ref_len > 0 ? static_cast<double>(s.sys_len) / static_cast<double>(s.ref_len) : 0;
  b.bp = 1.0;
  if (s.sys_len < s.ref_len)
    b.bp = s.sys_len > 0 ? std::exp(1.0 - static_cast<double>(s.ref_len) / static_cast<double>(s.sys_len)) : 0.0;
  bool any = false;
  for (int64_t c : s.correct) any = any || c > 0;
  if (!any) return b;  // no match of any order: 0 (sacreBLEU #141)
  double smooth = 1;
  size_t order = 4;
  for (size_t n = 1; n <= 4; ++n) {
    if (s.total[n - 1] == 0) break;
    if (effective_order) order = n;
    if (s.correct[n - 1] == 0) {
      smooth *= 2;  // mteval's "exp" smoothing: 1 / 2^k of an n-gram per order without matches
      b.precisions[n - 1] = 100.0 / (smooth * static_cast<double>(s.total[n - 1]));
    } else {
      b.precisions[n - 1] = 100.0 * static_cast<double>(s.correct[n - 1]) / static_cast<double>(s.total[n - 1]);
    }
  }
  double sum = 0;
  for (size_t n = 0; n < order; ++n) sum += my_log(b.precisions[n]);
  b.score = b.bp * std::exp(sum / static_cast<double>(order));
  return b;
}

Bleu corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::vector<std::string>>& references) {
  if (references.empty()) throw std::invalid_argument("bleu: no reference set");
  for (size_t r = 0; r < references.size(); ++r)
    if (references[r].size() != hypotheses.size())
      throw std::invalid_argument("bleu: reference set " + std::to_string(r + 1) + " has " +
                                  std::to_string(references[r].size()) + " segments, the hypotheses " +
                                  std::to_string(hypotheses.size()));
  BleuStats total;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    std::vector<std::string> refs;
    for (const auto& set : references) refs.push_back(tokenize_13a(set[i]));
    total += bleu_stats(tokenize_13a(hypotheses[i]), refs);
  }
  return compute_bleu(total, false);
}

Bleu sentence_bleu(const std::string& hypothesis, const std::vector<std::string>& references) {
  std::vector<std::string> refs;
  for (const auto& r : references) refs.push_back(tokenize_13a(r));
  return compute_bleu(bleu_stats(tokenize_13a(hypothesis), refs), true);
}

std::string format_bleu(const Bleu& b) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", b.score,
                b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.bp, b.ratio,
                static_cast<long long>(b.sys_len), static_cast<long long>(b.ref_len));
  return buf;
}

}  // namespace zcode::textmetrics
