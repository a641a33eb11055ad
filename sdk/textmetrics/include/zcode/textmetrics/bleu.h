// BLEU as sacreBLEU computes it (Post 2018, "A Call for Clarity in Reporting
// BLEU Scores"; Papineni et al. 2002): the mteval-v13a tokenizer, n-grams up to
// 4 clipped by the largest count in any reference, the closest reference
// length (ties: the shorter), the brevity penalty, and mteval's "exp"
// smoothing for an order without matches.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zcode::textmetrics {

/// The mteval-v13a tokenizer as sacreBLEU's "13a" applies it: drops
/// "<skipped>", joins "-\n" line breaks, unescapes &quot; &amp; &lt; &gt;,
/// then splits off ASCII punctuation other than ' - . , (the class
/// [{-~[-` -&(-+:-@/]), a period or comma not preceded by a digit, one not
/// followed by a digit, and a dash after a digit; tokens joined by one
/// space, no leading or trailing space.
std::string tokenize_13a(std::string_view line);

/// Sufficient statistics of a segment or a corpus (summed): matches and
/// candidates per n-gram order 1..4, hypothesis and closest-reference lengths.
struct BleuStats {
  std::array<int64_t, 4> correct{};
  std::array<int64_t, 4> total{};
  int64_t sys_len = 0;
  int64_t ref_len = 0;
  BleuStats& operator+=(const BleuStats& o);
};

/// Statistics of one tokenized hypothesis (tokens separated by spaces)
/// against its tokenized references (at least one).
BleuStats bleu_stats(const std::string& hypothesis, const std::vector<std::string>& references);

/// A BLEU score and its parts: score and precisions in percent (0..100),
/// the brevity penalty, ratio = sys_len / ref_len.
struct Bleu {
  double score = 0;
  std::array<double, 4> precisions{};
  double bp = 0;
  double ratio = 0;
  int64_t sys_len = 0;
  int64_t ref_len = 0;
};

/// The score from statistics. `effective_order`: the geometric mean runs
/// over the orders the hypothesis has n-grams of (sacreBLEU's sentence
/// level); otherwise over all four, so a missing order scores 0. No match of
/// any order scores 0.
Bleu compute_bleu(const BleuStats& s, bool effective_order);

/// Corpus BLEU: hypotheses[i] against references[r][i] for every reference
/// set r (all sets as long as the hypotheses; throws std::invalid_argument
/// otherwise); text is tokenized with tokenize_13a.
Bleu corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::vector<std::string>>& references);

/// Sentence BLEU (sacreBLEU's sentence_score: effective order, exp smoothing).
Bleu sentence_bleu(const std::string& hypothesis, const std::vector<std::string>& references);

/// sacreBLEU's one-line form: "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943
/// ratio = 0.944 hyp_len = 17 ref_len = 18)".
std::string format_bleu(const Bleu& b);

}  // namespace zcode::textmetrics
