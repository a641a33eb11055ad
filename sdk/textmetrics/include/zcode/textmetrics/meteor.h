// METEOR (Banerjee and Lavie 2005, "METEOR: An Automatic Metric for MT
// Evaluation with Improved Correlation with Human Judgments") as NLTK's
// meteor_score computes it (nltk.translate.meteor_score, NLTK 3.8):
//   tokens lower-cased; words aligned in three stages, each over the words
//   the earlier stages left: exact, Porter stem (porter.h), WordNet synonym
//   (wordnet.h; it looks up the stems the stem stage left, as NLTK does); in
//   each stage, hypothesis words from last to first, each
//   taking the last remaining reference word that matches;
//   P = m / |hyp|, R = m / |ref|, Fmean = P R / (alpha P + (1 - alpha) R),
//   penalty = gamma (chunks / m)^beta, chunks = runs of matches adjacent in
//   both, score = (1 - penalty) Fmean (0 without matches);
//   several references: the best score.
// Defaults alpha 0.9, beta 3, gamma 0.5.
#pragma once

#include <string>
#include <vector>

#include "wordnet.h"

namespace zcode::textmetrics {

struct MeteorOptions {
  double alpha = 0.9, beta = 3.0, gamma = 0.5;
};

/// METEOR of tokenized text (tokens as given; lower-cased here).
double meteor(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis, WordNet& wordnet,
              const MeteorOptions& o = {});
/// Best over several references.
double meteor(const std::vector<std::vector<std::string>>& references, const std::vector<std::string>& hypothesis,
              WordNet& wordnet, const MeteorOptions& o = {});

/// Lower case as Python's str.lower (ICU's root-locale lower-casing).
std::string lower(const std::string& s);

}  // namespace zcode::textmetrics
