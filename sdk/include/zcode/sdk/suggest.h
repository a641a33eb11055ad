// zcode/sdk/suggest.h: "did you mean" hints for misspelt keys and names
// (header-only), one rule for the host, the config checks and plugins.
//
// Distance: optimal string alignment (restricted Damerau-Levenshtein;
// Damerau 1964, Levenshtein 1966) over folded text, so "Zerosum-SGD" and
// "zerosum_sgd" are one name.
#pragma once

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zcode::sdk {

namespace detail {
// Case-folded (ASCII), '-' == '_'.
inline std::string fold_name(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == '-') c = '_';
  }
  return out;
}
}  // namespace detail

/// Optimal-string-alignment (restricted Damerau-Levenshtein) distance:
/// insertions, deletions, substitutions and adjacent transpositions each cost
/// 1 (Damerau 1964; Levenshtein 1966). Compared case-insensitively, with '-'
/// equal to '_'. O(|a|·|b|) time and memory: meant for names, not documents.
inline size_t edit_distance(std::string_view a_in, std::string_view b_in) {
  const std::string a = detail::fold_name(a_in), b = detail::fold_name(b_in);
  const size_t n = a.size(), m = b.size();
  // d[i][j] = distance between a[0..i) and b[0..j); three rows suffice for
  // the transposition term, but names are short, so keep the full table.
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

/// The candidate closest to `input`: distance <= 2 (<= 1 for inputs of up to
/// 3 characters), or a prefix relation (one starts with the other, input at
/// least 3 characters). Ties go to the earlier candidate. nullopt when none
/// qualifies, when `input` is empty, or when `input` equals a candidate.
inline std::optional<std::string> did_you_mean(std::string_view input, const std::vector<std::string>& candidates) {
  const std::string in = detail::fold_name(input);
  if (in.empty()) return std::nullopt;
  const size_t limit = in.size() <= 3 ? 1 : 2;
  std::optional<std::string> best;
  size_t best_score = std::numeric_limits<size_t>::max();
  for (const std::string& c : candidates) {
    const std::string fc = detail::fold_name(c);
    if (fc == in) return std::nullopt;  // not a misspelling (the caller's match was stricter)
    size_t dist = edit_distance(in, fc);
    // A prefix relation ("lear" / "learning_rate") counts as distance limit:
    // it ranks after true near-misses but still qualifies.
    const bool prefix = in.size() >= 3 && (fc.starts_with(in) || in.starts_with(fc));
    if (dist > limit && !prefix) continue;
    const size_t score = dist <= limit ? dist : limit + 1;
    if (score < best_score) {
      best_score = score;
      best = c;
    }
  }
  return best;
}

/// " (did you mean 'x'?)" or "" — ready to append to a message.
inline std::string did_you_mean_hint(std::string_view input, const std::vector<std::string>& candidates) {
  auto s = did_you_mean(input, candidates);
  return s ? " (did you mean '" + *s + "'?)" : std::string();
}

/// For a name that matched none of `candidates` (the components of one kind
/// on the plugin path): did_you_mean_hint when one is close, else
/// " (available: a, b, c)" with every candidate once, in sorted order, or
/// " (the plugin path has none of that kind)" when there are none. `input`
/// itself is never listed as a suggestion.
inline std::string did_you_mean_or_available(std::string_view input, std::vector<std::string> candidates) {
  if (std::string hint = did_you_mean_hint(input, candidates); !hint.empty()) return hint;
  if (candidates.empty()) return " (the plugin path has none of that kind)";
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::string list;
  for (const std::string& c : candidates) list += (list.empty() ? "" : ", ") + c;
  return " (available: " + list + ")";
}

}  // namespace zcode::sdk
