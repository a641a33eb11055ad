// ROUGE-1, ROUGE-2 and ROUGE-L (Lin 2004, "ROUGE: A Package for Automatic
// Evaluation of Summaries") as Google's rouge-score computes them: per pair,
// precision = overlap / hypothesis count, recall = overlap / reference count,
// F = 2PR / (P + R) (0 when P + R = 0); n-gram overlap is the clipped count
// (the smaller count of each n-gram); ROUGE-L's overlap is the length of the
// longest common subsequence; with several references, the reference with
// the best F counts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zcode::textmetrics {

/// rouge-score's tokenizer: lower-case, every run of characters other than
/// [a-z0-9] becomes a space, split on spaces (so text in other scripts
/// disappears). `unicode`: our mode for every script instead: ICU's default
/// case folding, then the words of ICU's word break iterator (UAX #29) that
/// are letters, numbers, kana or ideographs (punctuation and spaces go).
std::vector<std::string> rouge_tokenize(std::string_view text, bool unicode = false);

struct RougeScore {
  double precision = 0, recall = 0, fmeasure = 0;
};

/// ROUGE-N of tokenized text (n >= 1).
RougeScore rouge_n(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis, int n);
/// ROUGE-L (sentence level: one LCS) of tokenized text.
RougeScore rouge_l(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis);

/// The three scores of one hypothesis against its references (best F per
/// type, as rouge-score's score_multi), and their means over a corpus.
struct Rouge {
  RougeScore rouge1, rouge2, rougeL;
};
Rouge rouge(const std::string& hypothesis, const std::vector<std::string>& references, bool unicode = false);
/// Means of P, R and F over segments; references[r][i] is reference set r's
/// segment i (throws std::invalid_argument when a set's length differs).
Rouge corpus_rouge(const std::vector<std::string>& hypotheses, const std::vector<std::vector<std::string>>& references,
                   bool unicode = false);

}  // namespace zcode::textmetrics
