// Diversity measures (see diversity.h).
#include <zcode/textmetrics/diversity.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>

namespace zcode::textmetrics {

namespace {

using Gram = std::vector<std::string>;

Gram gram(const std::vector<std::string>& t, size_t i, size_t n) {
  return Gram(t.begin() + static_cast<std::ptrdiff_t>(i), t.begin() + static_cast<std::ptrdiff_t>(i + n));
}

double distinct(const std::vector<std::vector<std::string>>& gens, size_t n) {
  std::set<Gram> seen;
  double all = 0;
  for (const auto& t : gens)
    for (size_t i = 0; i + n <= t.size(); ++i) {
      seen.insert(gram(t, i, n));
      ++all;
    }
  return all > 0 ? static_cast<double>(seen.size()) / all : 0;
}

}  // namespace

std::vector<std::string> whitespace_tokens(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

Diversity diversity(const std::vector<std::vector<std::string>>& generations) {
  Diversity d;
  d.generations = static_cast<int64_t>(generations.size());
  d.distinct_1 = distinct(generations, 1);
  d.distinct_2 = distinct(generations, 2);
  std::map<std::string, int64_t> counts;
  for (const auto& t : generations)
    for (const auto& w : t) ++counts[w];
  for (const auto& [w, c] : counts) d.tokens += c;
  for (const auto& [w, c] : counts) {
    const double p = static_cast<double>(c) / static_cast<double>(d.tokens);
    d.entropy_bits -= p * std::log2(p);
  }
  double rep = 0;
  int64_t with4 = 0;
  for (const auto& t : generations) {
    if (t.size() < 4) continue;
    std::set<Gram> g;
    for (size_t i = 0; i + 4 <= t.size(); ++i) g.insert(gram(t, i, 4));
    rep += 1.0 - static_cast<double>(g.size()) / static_cast<double>(t.size() - 3);
    ++with4;
  }
  d.repetition = with4 > 0 ? rep / static_cast<double>(with4) : 0;
  return d;
}

}  // namespace zcode::textmetrics
