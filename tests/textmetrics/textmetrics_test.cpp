// zcode_textmetrics against values that do not come from it: sacreBLEU's
// published example, the mteval-v13a rules applied by hand, and ROUGE and
// diversity figures worked by hand in the comments.
#include <zcode/textmetrics/bleu.h>
#include <zcode/textmetrics/diversity.h>
#include <zcode/textmetrics/meteor.h>
#include <zcode/textmetrics/porter.h>
#include <zcode/textmetrics/rouge.h>

#include <gtest/gtest.h>

#include <cmath>

namespace {

namespace tm = zcode::textmetrics;

// The 13a rules one by one: ASCII punctuation other than ' - . , is split
// off; a period or comma next to a non-digit is split off; a dash after a
// digit is split off; entities are unescaped first.
TEST(Bleu, Tokenizer13aAppliesTheMtevalRules) {
  EXPECT_EQ(tm::tokenize_13a("Hello, world! 3.14 and 1,000 people; e-mail 2-3 wasn't end."),
            "Hello , world ! 3.14 and 1,000 people ; e-mail 2 - 3 wasn't end .");
  EXPECT_EQ(tm::tokenize_13a("&quot;Quoted&quot; &amp; (parens) [x]{y}"), "\" Quoted \" & ( parens ) [ x ] { y }");
  EXPECT_EQ(tm::tokenize_13a("  a   b  "), "a b");
  EXPECT_EQ(tm::tokenize_13a(""), "");
  EXPECT_EQ(tm::tokenize_13a("line-\nbreak<skipped>"), "linebreak");
}

// sacreBLEU's README: corpus_score of these three segments against two
// reference sets prints
// "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)".
TEST(Bleu, SacreBleusPublishedExample) {
  const std::vector<std::string> sys = {"The dog bit the man.", "It wasn't surprising.",
                                        "The man had just bitten him."};
  const std::vector<std::vector<std::string>> refs = {
      {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
      {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};
  const tm::Bleu b = tm::corpus_bleu(sys, refs);
  EXPECT_EQ(tm::format_bleu(b),
            "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
  // By hand from the 13a tokens: 14 of 17 unigrams match, 7/14, 5/11, 3/8;
  // BP = exp(1 - 18/17).
  EXPECT_EQ(b.sys_len, 17);
  EXPECT_EQ(b.ref_len, 18);
  EXPECT_DOUBLE_EQ(b.precisions[0], 100.0 * 14 / 17);
  EXPECT_DOUBLE_EQ(b.precisions[1], 100.0 * 7 / 14);
  EXPECT_DOUBLE_EQ(b.precisions[2], 100.0 * 5 / 11);
  EXPECT_DOUBLE_EQ(b.precisions[3], 100.0 * 3 / 8);
  EXPECT_NEAR(b.score, std::exp(1.0 - 18.0 / 17) * std::pow(14.0 / 17 * 7 / 14 * 5 / 11 * 3 / 8, 0.25) * 100, 1e-9);
}

TEST(Bleu, EdgeCases) {
  // An empty hypothesis scores 0 (and never borrows the next segment).
  const tm::Bleu e = tm::corpus_bleu({"", "a b c d"}, {{"x y z", "a b c d"}});
  EXPECT_EQ(e.sys_len, 4);
  EXPECT_EQ(e.ref_len, 7);
  EXPECT_DOUBLE_EQ(e.precisions[0], 100.0);
  EXPECT_NEAR(e.bp, std::exp(1 - 7.0 / 4), 1e-15);
  EXPECT_EQ(tm::sentence_bleu("", {"a b"}).score, 0.0);
  // Identical: 100. No match at all: 0.
  EXPECT_NEAR(tm::sentence_bleu("the cat sat on the mat", {"the cat sat on the mat"}).score, 100.0, 1e-9);
  EXPECT_EQ(tm::sentence_bleu("x y z w", {"a b c d"}).score, 0.0);
  // Sentence level, effective order: "a b" vs "a b c": 2/2 unigrams, 1/1
  // bigram, no 3- or 4-grams, so the mean runs over two orders: BP =
  // exp(1 - 3/2) and the score exp(1 - 1.5) * 100.
  EXPECT_NEAR(tm::sentence_bleu("a b", {"a b c"}).score, std::exp(-0.5) * 100, 1e-9);
  // exp smoothing: "a b c d" vs "a b x d": unigrams 3/4, bigrams 1/3, trigrams
  // 0/2 -> 100 / (2 * 2), 4-grams 0/1 -> 100 / (4 * 1).
  const tm::Bleu s = tm::sentence_bleu("a b c d", {"a b x d"});
  EXPECT_DOUBLE_EQ(s.precisions[2], 25.0);
  EXPECT_DOUBLE_EQ(s.precisions[3], 25.0);
  EXPECT_NEAR(s.score, std::pow(75.0 * (100.0 / 3) * 25.0 * 25.0, 0.25), 1e-9);
  EXPECT_THROW(tm::corpus_bleu({"a"}, {{"a", "b"}}), std::invalid_argument);
}

// Reference "The quick brown fox jumps over the lazy dog" (9 tokens),
// hypothesis "The quick brown dog jumps on the log." (8 tokens).
//   ROUGE-1: overlap the×2 quick brown dog jumps = 6: P 6/8, R 6/9, F 12/17.
//   ROUGE-2: overlap the-quick quick-brown = 2 of 7 and 8: P 2/7, R 1/4, F 4/15.
//   ROUGE-L: LCS "the quick brown jumps the" = 5: P 5/8, R 5/9, F 10/17.
TEST(Rouge, WorkedByHand) {
  const tm::Rouge r =
      tm::rouge("The quick brown dog jumps on the log.", {"The quick brown fox jumps over the lazy dog"});
  EXPECT_DOUBLE_EQ(r.rouge1.precision, 6.0 / 8);
  EXPECT_DOUBLE_EQ(r.rouge1.recall, 6.0 / 9);
  EXPECT_NEAR(r.rouge1.fmeasure, 12.0 / 17, 1e-15);
  EXPECT_DOUBLE_EQ(r.rouge2.precision, 2.0 / 7);
  EXPECT_DOUBLE_EQ(r.rouge2.recall, 2.0 / 8);
  EXPECT_NEAR(r.rouge2.fmeasure, 4.0 / 15, 1e-15);
  EXPECT_DOUBLE_EQ(r.rougeL.precision, 5.0 / 8);
  EXPECT_DOUBLE_EQ(r.rougeL.recall, 5.0 / 9);
  EXPECT_NEAR(r.rougeL.fmeasure, 10.0 / 17, 1e-15);
  // Several references: the best F per type.
  const tm::Rouge m = tm::rouge("a b c", {"x y z", "a b c"});
  EXPECT_EQ(m.rouge1.fmeasure, 1.0);
  EXPECT_EQ(m.rougeL.fmeasure, 1.0);
}

TEST(Rouge, TokenizerAndTheUnicodeMode) {
  // rouge-score's rule: lower case, runs outside [a-z0-9] are separators.
  EXPECT_EQ(tm::rouge_tokenize("Don't STOP-now, 2day!"), (std::vector<std::string>{"don", "t", "stop", "now", "2day"}));
  // Hindi disappears under that rule (F 0), and not in the Unicode mode (F 1).
  const std::string hi = "नमस्ते दुनिया, यह एक परीक्षण है।";
  EXPECT_TRUE(tm::rouge_tokenize(hi).empty());
  EXPECT_EQ(tm::rouge(hi, {hi}).rouge1.fmeasure, 0.0);
  EXPECT_EQ(tm::rouge_tokenize(hi, true), (std::vector<std::string>{"नमस्ते", "दुनिया", "यह", "एक", "परीक्षण", "है"}));
  const tm::Rouge u = tm::rouge(hi, {hi}, true);
  EXPECT_EQ(u.rouge1.fmeasure, 1.0);
  EXPECT_EQ(u.rouge2.fmeasure, 1.0);
  EXPECT_EQ(u.rougeL.fmeasure, 1.0);
  // Case folding beyond ASCII: "Straße" and "STRASSE" fold to the same word.
  EXPECT_EQ(tm::rouge_tokenize("Straße", true), tm::rouge_tokenize("STRASSE", true));
}

// Generations {a b a b a b} and {c}: 7 tokens a3 b3 c1.
//   distinct-1 = 3 distinct / 7; distinct-2 = {ab, ba} / 5 bigrams;
//   entropy = -(2 · 3/7 log2 3/7 + 1/7 log2 1/7);
//   seq-rep-4 of the first (abab baba abab: 2 distinct of 3) = 1/3, the
//   second has no 4-gram: mean 1/3.
TEST(Diversity, WorkedByHand) {
  const tm::Diversity d = tm::diversity({{"a", "b", "a", "b", "a", "b"}, {"c"}});
  EXPECT_DOUBLE_EQ(d.distinct_1, 3.0 / 7);
  EXPECT_DOUBLE_EQ(d.distinct_2, 2.0 / 5);
  EXPECT_NEAR(d.entropy_bits, -(2 * 3.0 / 7 * std::log2(3.0 / 7) + 1.0 / 7 * std::log2(1.0 / 7)), 1e-15);
  EXPECT_NEAR(d.repetition, 1.0 / 3, 1e-15);
  EXPECT_EQ(d.tokens, 7);
  EXPECT_EQ(d.generations, 2);
  const tm::Diversity empty = tm::diversity({});
  EXPECT_EQ(empty.distinct_1, 0.0);
  EXPECT_EQ(empty.entropy_bits, 0.0);
}

// METEOR by hand (exact matches only; WordNet from wordnet-base is loaded
// but finds nothing more to match):
//   "the cat sat" vs itself: m 3, P = R = 1, Fmean 1, one chunk:
//     1 - 0.5 (1/3)^3 = 1 - 1/54.
//   hypothesis "a b c d", reference "c d a b": pairs (0,2) (1,3) (2,0) (3,1),
//     two chunks: 1 - 0.5 (2/4)^3 = 0.9375.
//   P 2/3, R 2/4 ("x b c" vs "b c y z"): Fmean = PR / (0.9 P + 0.1 R) =
//     (1/3) / (0.6 + 0.05), one chunk of 2: penalty 0.5 (1/2)^3 = 1/16.
TEST(Meteor, WorkedByHand) {
  using W = std::vector<std::string>;
  tm::WordNet wn;
  EXPECT_NEAR(tm::meteor(W{"the", "cat", "sat"}, W{"the", "cat", "sat"}, wn), 1 - 1.0 / 54, 1e-15);
  EXPECT_NEAR(tm::meteor(W{"c", "d", "a", "b"}, W{"a", "b", "c", "d"}, wn), 0.9375, 1e-15);
  EXPECT_NEAR(tm::meteor(W{"b", "c", "y", "z"}, W{"x", "b", "c"}, wn), (1.0 / 3) / 0.65 * (1 - 1.0 / 16), 1e-15);
  EXPECT_EQ(tm::meteor(W{"a"}, W{"b"}, wn), 0.0);
  // Upper case is lowered; a stem match ("cats" / "cat": 2 matches, one chunk)
  // and a WordNet synonym ("car" / "auto", car.n.01) count as matches: one
  // match, one chunk, penalty 0.5 (1/1)^3. The synonym stage compares the
  // stems the stem stage left (as NLTK does), so "automobile" (stem
  // "automobil") does not match "car".
  EXPECT_NEAR(tm::meteor(W{"The", "Cats"}, W{"the", "cat"}, wn), 1 - 1.0 / 2 * std::pow(1.0 / 2, 3), 1e-15);
  EXPECT_NEAR(tm::meteor(W{"auto"}, W{"car"}, wn), 0.5, 1e-15);
  EXPECT_EQ(tm::meteor(W{"automobile"}, W{"car"}, wn), 0.0);
  EXPECT_THROW(tm::WordNet("/nonexistent"), std::runtime_error);
}

}  // namespace
