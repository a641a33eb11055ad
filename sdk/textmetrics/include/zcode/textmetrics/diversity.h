// How varied generated text is, over a set of generations (token lists):
//   distinct-n (Li et al. 2016, "A Diversity-Promoting Objective Function for
//     Neural Conversation Models", section 4.3): distinct n-grams / all
//     n-grams, counted over every generation together;
//   entropy: Shannon entropy in bits of the unigram distribution of all
//     generated tokens, H = -sum p log2 p (Zhang et al. 2018, "Generating
//     Informative and Diverse Conversational Responses");
//   repetition: seq-rep-4 (Welleck et al. 2020, "Neural Text Generation with
//     Unlikelihood Training", section 6): per generation 1 - distinct 4-grams
//     / 4-grams, averaged over the generations that have a 4-gram.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zcode::textmetrics {

struct Diversity {
  double distinct_1 = 0, distinct_2 = 0;  ///< 0 when there is no n-gram
  double entropy_bits = 0;
  double repetition = 0;  ///< seq-rep-4; 0 when no generation has 4 tokens
  int64_t tokens = 0;     ///< generated tokens in all
  int64_t generations = 0;
};

/// The measures above over `generations` (each a list of tokens: words or
/// token ids as text).
Diversity diversity(const std::vector<std::vector<std::string>>& generations);

/// Whitespace tokens of a line (the command's unit for text files).
std::vector<std::string> whitespace_tokens(const std::string& line);

}  // namespace zcode::textmetrics
