// zcode/core/suggest.h: "did you mean" hints for misspelt keys and names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zcode {

/// Optimal-string-alignment (restricted Damerau-Levenshtein) distance:
/// insertions, deletions, substitutions and adjacent transpositions each cost
/// 1 (Damerau 1964; Levenshtein 1966). Compared case-insensitively, with '-'
/// equal to '_'.
size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `input`: distance <= 2 (<= 1 for inputs of up to
/// 3 characters), or a prefix relation (one starts with the other, input at
/// least 3 characters). Ties go to the earlier candidate. nullopt when none
/// qualifies or when `input` equals a candidate.
std::optional<std::string> did_you_mean(std::string_view input, const std::vector<std::string>& candidates);

/// " (did you mean 'x'?)" or "" — ready to append to a message.
std::string did_you_mean_hint(std::string_view input, const std::vector<std::string>& candidates);

/// For a name that matched none of `candidates`: did_you_mean_hint when one
/// is close, else " (available: a, b, c)" with every candidate in sorted
/// order, or " (the plugin path has none of that kind)" when there are none. `input`
/// itself is never listed as a suggestion.
std::string did_you_mean_or_available(std::string_view input, std::vector<std::string> candidates);

}  // namespace zcode
