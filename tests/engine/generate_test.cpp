// Generation strategies on hand-built bigram "models" whose outputs are
// derived by hand in the comments (see zcode/core/generate.h for the rules).
#include <zcode/core/generate.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using zcode::gen::GenerationOptions;
using zcode::gen::StopReason;

// Next-token logits depend only on the last token: row table[last]. The "KV
// cache" is the last token of each row, so reorder is a gather.
class Bigram : public zcode::gen::Decoder {
 public:
  explicit Bigram(std::vector<std::vector<float>> table) : table_(std::move(table)) {}
  int64_t vocab_size() const override { return static_cast<int64_t>(table_.size()); }
  void begin(int32_t batch, int32_t max_len) override {
    if (open_) throw std::logic_error("session already open");
    open_ = true;
    last_.assign(static_cast<size_t>(batch), -1);
    len_ = 0;
    max_len_ = max_len;
  }
  void step(const int32_t* tokens, float* logits) override {
    if (++len_ > max_len_) throw std::runtime_error("KV cache overflow");
    for (size_t b = 0; b < last_.size(); ++b) {
      last_[b] = tokens[b];
      seen.push_back(tokens[b]);
      const auto& row = table_.at(static_cast<size_t>(tokens[b]));
      std::copy(row.begin(), row.end(), logits + b * row.size());
    }
  }
  void reorder(const int32_t* src) override {
    std::vector<int32_t> n(last_.size());
    for (size_t b = 0; b < n.size(); ++b) n[b] = last_.at(static_cast<size_t>(src[b]));
    last_ = n;
  }
  void end() override {
    open_ = false;
    ++sessions_closed;
  }
  std::vector<int32_t> seen;
  int sessions_closed = 0;

 private:
  std::vector<std::vector<float>> table_;
  std::vector<int32_t> last_;
  int32_t len_ = 0, max_len_ = 0;
  bool open_ = false;
};

// V = 6, bos = 0, eos = 5.
//   after 0: argmax 2; after 2: 1 and 3 tie at 4 -> 1 (lowest id);
//   after 1: argmax 3; after 3: argmax 5 = <eos>.
// Greedy from [0] is therefore [2, 1, 3], stopping at <eos>.
Bigram greedy_table() {
  return Bigram({{0, 1, 3, 2, 0, -1},
                 {0, 0, 0, 5, 1, 2},
                 {0, 4, 1, 4, 0, 0},
                 {0, 0, 0, 0, 0, 9},
                 {0, 0, 0, 0, 0, 0},
                 {0, 0, 0, 0, 0, 0}});
}

TEST(Generate, GreedyFollowsArgmaxWithLowestIdOnTies) {
  Bigram m = greedy_table();
  GenerationOptions o;
  o.max_new_tokens = 10;
  auto r = zcode::gen::generate(m, std::vector<int32_t>{0}, o, 0, 5, 32);
  EXPECT_EQ(r.generated, (std::vector<int32_t>{2, 1, 3}));
  EXPECT_EQ(r.reason, StopReason::kEos);
  EXPECT_EQ(m.sessions_closed, 1);
}

TEST(Generate, TemperatureZeroIsGreedyAndTopK1IsGreedy) {
  for (int variant = 0; variant < 2; ++variant) {
    Bigram m = greedy_table();
    GenerationOptions o;
    o.strategy = "sample";
    o.max_new_tokens = 10;
    o.seed = 7;
    if (variant == 0) o.temperature = 0;
    else o.top_k = 1;
    auto r = zcode::gen::generate(m, std::vector<int32_t>{0}, o, 0, 5, 32);
    EXPECT_EQ(r.generated, (std::vector<int32_t>{2, 1, 3})) << "variant " << variant;
  }
}

TEST(Generate, MaxNewTokensAndStopHook) {
  Bigram m = greedy_table();
  GenerationOptions o;
  o.max_new_tokens = 2;
  auto r = zcode::gen::generate(m, std::vector<int32_t>{0}, o, 0, 5, 32);
  EXPECT_EQ(r.generated, (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(r.reason, StopReason::kMaxNewTokens);

  Bigram m2 = greedy_table();
  o.max_new_tokens = 10;
  zcode::gen::Hooks h;
  std::vector<int32_t> streamed;
  h.on_token = [&](int32_t id) { streamed.push_back(id); };
  h.should_stop = [](std::span<const int32_t> g) { return !g.empty() && g.back() == 1; };
  auto r2 = zcode::gen::generate(m2, std::vector<int32_t>{0}, o, 0, 5, 32, h);
  EXPECT_EQ(r2.generated, (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(r2.reason, StopReason::kStopString);
  EXPECT_EQ(streamed, r2.generated);
}

TEST(Generate, EmptyPromptStartsFromBosElseEos) {
  Bigram m = greedy_table();
  GenerationOptions o;
  o.max_new_tokens = 1;
  auto r = zcode::gen::generate(m, std::vector<int32_t>{}, o, 0, 5, 32);
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{0}));
  EXPECT_EQ(r.generated, (std::vector<int32_t>{2}));
  Bigram m2 = greedy_table();
  auto r2 = zcode::gen::generate(m2, std::vector<int32_t>{}, o, -1, 3, 32);
  EXPECT_EQ(r2.prompt, (std::vector<int32_t>{3}));
  EXPECT_EQ(r2.generated, (std::vector<int32_t>{5}));  // row 3's argmax
}

TEST(Generate, LongPromptKeepsTheLastTokensAndWarns) {
  Bigram m = greedy_table();
  GenerationOptions o;
  o.max_new_tokens = 3;
  std::vector<std::string> warnings;
  zcode::gen::Hooks h;
  h.warn = [&](const std::string& w) { warnings.push_back(w); };
  std::vector<int32_t> prompt{1, 2, 3, 4, 0, 1, 2, 4, 4, 0};  // 10 tokens, max_seq_len 8 -> keep 5
  auto r = zcode::gen::generate(m, prompt, o, 0, 5, 8, h);
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{1, 2, 4, 4, 0}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("keeping the last 5"), std::string::npos);
  EXPECT_EQ(r.generated, (std::vector<int32_t>{2, 1, 3}));  // continues from 0 as in the greedy test
}

TEST(Generate, BadOptionsAreOneLineErrors) {
  Bigram m = greedy_table();
  GenerationOptions o;
  o.top_p = 1.5;
  try {
    zcode::gen::generate(m, std::vector<int32_t>{0}, o, 0, 5, 32);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("generation.top_p"), std::string::npos);
  }
  o = {};
  o.strategy = "topk";
  EXPECT_THROW(zcode::gen::generate(m, std::vector<int32_t>{0}, o, 0, 5, 32), std::invalid_argument);
}

// Beam search, V = 6, eos = 5, logits = log p so the arithmetic is by hand:
//   p(.|0) = [.025 .5 .4 .025 .025 .025]
//   p(.|1) = [.1 .1 .1 .2 .2 .3]      greedy: 1 then <eos>: p = .5 * .3 = .15
//   p(.|2) = [.02 .02 .02 .02 .02 .9] [2, <eos>]: p = .4 * .9 = .36
// Step 0 keeps beams [1] and [2]. Step 1: the best candidates are (2,<eos>)
// .36 and (1,<eos>) .15, both within the first num_beams = 2, so both finish
// with length 2: scores ln(.36)/2 and ln(.15)/2; the live beams are at most
// ln(.1)/2 < ln(.15)/2, so search stops. Best: [2].
TEST(Generate, BeamSearchFindsTheMoreLikelySequence) {
  auto lg = [](std::vector<double> p) {
    std::vector<float> r;
    for (double x : p) r.push_back(static_cast<float>(std::log(x)));
    return r;
  };
  std::vector<std::vector<float>> t = {lg({.025, .5, .4, .025, .025, .025}), lg({.1, .1, .1, .2, .2, .3}),
                                       lg({.02, .02, .02, .02, .02, .9}),    lg({.2, .2, .2, .2, .1, .1}),
                                       lg({.2, .2, .2, .2, .1, .1}),         lg({.2, .2, .2, .2, .1, .1})};
  Bigram g(t);
  GenerationOptions o;
  o.max_new_tokens = 5;
  EXPECT_EQ(zcode::gen::generate(g, std::vector<int32_t>{0}, o, 0, 5, 32).generated, (std::vector<int32_t>{1}));
  Bigram b(t);
  o.strategy = "beam";
  o.num_beams = 2;
  o.length_penalty = 1.0;
  auto r = zcode::gen::generate(b, std::vector<int32_t>{0}, o, 0, 5, 32);
  EXPECT_EQ(r.generated, (std::vector<int32_t>{2}));
  EXPECT_EQ(r.reason, StopReason::kEos);
  EXPECT_NEAR(r.score, std::log(0.36) / 2.0, 1e-6);
  EXPECT_EQ(b.sessions_closed, 1);
}

// Contrastive search, V = 4, eos = 3, k = 2, alpha = 0.6.
//   L[0] = [0 2 1 -5], L[1] = L[0], L[2] = [1 0 5 1] (L[2]·L[0] = 0).
// Step 1: candidates 1 (p higher) and 2. rep(1) = L[1] = L[0]: cosine 1 with
// the context rep L[0]; rep(2) = L[2]: cosine 0. Scores 0.4·p1 − 0.6 vs
// 0.4·p2 > that, so 2 wins although greedy picks 1.
// Step 2: from L[2] the candidates are 2 (logit 5) and 0 (1, ties with 3 ->
// lower id). rep(2) = L[2] and rep(0) = L[0] are both already in the context
// (cosine 1), equal penalties, so the likelier 2 wins: output [2, 2].
TEST(Generate, ContrastiveSearchPenalisesRepeatedRepresentations) {
  std::vector<std::vector<float>> t = {{0, 2, 1, -5}, {0, 2, 1, -5}, {1, 0, 5, 1}, {0, 0, 0, 9}};
  GenerationOptions o;
  o.max_new_tokens = 2;
  Bigram g(t);
  EXPECT_EQ(zcode::gen::generate(g, std::vector<int32_t>{0}, o, 0, 3, 32).generated, (std::vector<int32_t>{1, 1}));
  Bigram c(t);
  o.strategy = "contrastive";
  o.top_k = 2;
  o.penalty_alpha = 0.6;
  EXPECT_EQ(zcode::gen::generate(c, std::vector<int32_t>{0}, o, 0, 3, 32).generated, (std::vector<int32_t>{2, 2}));
  Bigram c0(t);  // alpha 0 is greedy (eq. 5 reduces to argmax p)
  o.penalty_alpha = 0;
  EXPECT_EQ(zcode::gen::generate(c0, std::vector<int32_t>{0}, o, 0, 3, 32).generated, (std::vector<int32_t>{1, 1}));
}

// Step 0 (presence/frequency penalties, logit bias), by hand:
//   logits [1.0, 2.0, 3.0, 0.5], generated [2, 2, 1] -> counts c = [0, 1, 2, 0],
//   presence 0.5, frequency 0.25, bias {0: 1.5, 3: -100}:
//   id 0: 1.0 + 1.5 - 0*0.25 - 0   =   2.5
//   id 1: 2.0 + 0   - 1*0.25 - 0.5 =   1.25
//   id 2: 3.0 + 0   - 2*0.25 - 0.5 =   2.0
//   id 3: 0.5 - 100 - 0      - 0   = -99.5
// Every value is exact in binary, so the floats are equal, not near. Greedy
// on them picks 0 (2.5), where the raw logits pick 2.
TEST(Penalties, MatchTheHandDerivedLogits) {
  const std::vector<float> logits{1.0f, 2.0f, 3.0f, 0.5f};
  const std::vector<int32_t> generated{2, 2, 1};
  const std::vector<std::pair<int32_t, double>> bias{{0, 1.5}, {3, -100.0}};
  std::vector<float> out(4, -7.f);
  std::vector<int32_t> counts;
  zcode::gen::apply_penalties(logits.data(), 4, generated, 0.5, 0.25, bias, out.data(), &counts);
  EXPECT_EQ(out, (std::vector<float>{2.5f, 1.25f, 2.0f, -99.5f}));
  EXPECT_EQ(zcode::gen::argmax(out.data(), 4), 0);
  EXPECT_EQ(zcode::gen::argmax(logits.data(), 4), 2);
  // The scratch is left sized and all zero: the next call allocates nothing
  // (same buffer) and gives the same answer.
  EXPECT_EQ(counts, (std::vector<int32_t>{0, 0, 0, 0}));
  const int32_t* buf = counts.data();
  std::vector<float> again(4);
  zcode::gen::apply_penalties(logits.data(), 4, generated, 0.5, 0.25, bias, again.data(), &counts);
  EXPECT_EQ(again, out);
  EXPECT_EQ(counts.data(), buf);
  // In place: out may be the logits themselves.
  std::vector<float> inplace = logits;
  zcode::gen::apply_penalties(inplace.data(), 4, generated, 0.5, 0.25, bias, inplace.data(), &counts);
  EXPECT_EQ(inplace, out);
  // Nothing set: the logits bit for bit; a bias id outside [0, n) is refused.
  std::vector<float> same(4);
  zcode::gen::apply_penalties(logits.data(), 4, generated, 0, 0, {}, same.data(), &counts);
  EXPECT_EQ(same, logits);
  const std::vector<std::pair<int32_t, double>> outside{{4, 1.0}};
  EXPECT_THROW(zcode::gen::apply_penalties(logits.data(), 4, generated, 0, 0, outside, same.data(), &counts),
               std::invalid_argument);
}

// A bigram model whose greedy path repeats id 2 (V = 4, eos = 3):
//   L[0] = [0 1 2 -9], L[1] = [0 0 1.5 1], L[2] = [0 1.2 2 -9].
// Greedy from [0]: 2, 2, 2, 2 (max_new_tokens 4).
// frequency 0.5: step 1 from L[0], no counts: 2. Step 2 from L[2], c2 = 1:
//   id 2: 2 - 0.5 = 1.5 > id 1: 1.2 -> 2. Step 3, c2 = 2: id 2: 2 - 1 = 1.0 <
//   1.2 -> 1. Step 4 from L[1], c1 = 1, c2 = 2: id 1: -0.5, id 2: 1.5 - 1 = 0.5,
//   eos: 1 -> <eos>. Output [2, 2, 1].
// presence 0.9: step 2 from L[2], c2 = 1: id 2: 1.1 < 1.2 -> 1. Step 3 from
//   L[1], c1 = c2 = 1: id 2: 0.6, id 1: -0.9, eos 1 -> <eos>. Output [2, 1].
// logit_bias {0: 5}: id 0 wins every row (5 > 2): [0, 0, 0, 0].
std::vector<std::vector<float>> repeating_table() {
  return {{0, 1, 2, -9}, {0, 0, 1.5f, 1}, {0, 1.2f, 2, -9}, {0, 0, 0, 0}};
}

TEST(Penalties, ChangeGreedyAsDerivedByHand) {
  GenerationOptions o;
  o.max_new_tokens = 4;
  Bigram plain(repeating_table());
  EXPECT_EQ(zcode::gen::generate(plain, std::vector<int32_t>{0}, o, 0, 3, 32).generated,
            (std::vector<int32_t>{2, 2, 2, 2}));

  o.frequency_penalty = 0.5;
  Bigram f(repeating_table());
  auto rf = zcode::gen::generate(f, std::vector<int32_t>{0}, o, 0, 3, 32);
  EXPECT_EQ(rf.generated, (std::vector<int32_t>{2, 2, 1}));
  EXPECT_EQ(rf.reason, StopReason::kEos);
  // The score stays the model's: sum of log softmax of the raw rows.
  auto lsm = [](std::vector<double> row, int id) {
    double z = 0;
    for (double x : row) z += std::exp(x);
    return row[static_cast<size_t>(id)] - std::log(z);
  };
  const std::vector<double> l0{0, 1, 2, -9}, l2{0, 1.2f, 2, -9};
  EXPECT_NEAR(rf.score, lsm(l0, 2) + lsm(l2, 2) + lsm(l2, 1), 1e-9);

  o.frequency_penalty = 0;
  o.presence_penalty = 0.9;
  Bigram pr(repeating_table());
  EXPECT_EQ(zcode::gen::generate(pr, std::vector<int32_t>{0}, o, 0, 3, 32).generated, (std::vector<int32_t>{2, 1}));

  o.presence_penalty = 0;
  o.logit_bias = {{0, 5.0}};
  Bigram b(repeating_table());
  EXPECT_EQ(zcode::gen::generate(b, std::vector<int32_t>{0}, o, 0, 3, 32).generated,
            (std::vector<int32_t>{0, 0, 0, 0}));
  // Sampling runs on the adjusted logits too: +100 leaves every other id a
  // probability below e^-90, so every draw is the biased id.
  o.strategy = "sample";
  o.logit_bias = {{1, 100.0}};
  for (uint64_t seed = 0; seed < 5; ++seed) {
    o.seed = seed;
    Bigram sm(repeating_table());
    EXPECT_EQ(zcode::gen::generate(sm, std::vector<int32_t>{0}, o, 0, 3, 32).generated,
              (std::vector<int32_t>{1, 1, 1, 1}));
  }
}

std::string validate_error(const GenerationOptions& o) {
  try {
    zcode::gen::validate(o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "valid";
}

TEST(Penalties, ValidateNamesTheOption) {
  GenerationOptions o;
  o.presence_penalty = 2.5;
  EXPECT_EQ(validate_error(o), "generation.presence_penalty: 2.500000 is outside [-2, 2]");
  o = {};
  o.frequency_penalty = std::nan("");
  EXPECT_EQ(validate_error(o), "generation.frequency_penalty: nan is outside [-2, 2]");
  o = {};
  o.frequency_penalty = -2;
  o.presence_penalty = 2;
  EXPECT_EQ(validate_error(o), "valid");
  o = {};
  o.logit_bias = {{5, 150.0}};
  EXPECT_EQ(validate_error(o), "generation.logit_bias: the bias 150.000000 of token id 5 is outside [-100, 100]");
  o.logit_bias = {{5, 1.0}, {-1, 1.0}};
  EXPECT_EQ(validate_error(o), "generation.logit_bias: token id -1 is negative (expected an id >= 0)");
  o.logit_bias = {{5, 1.0}, {5, 2.0}};
  EXPECT_EQ(validate_error(o), "generation.logit_bias: token id 5 appears twice (expected each id once)");
  o.logit_bias.clear();
  for (int32_t i = 0; i < 301; ++i) o.logit_bias.emplace_back(i, 1.0);
  EXPECT_EQ(validate_error(o), "generation.logit_bias: 301 entries; at most 300 are allowed");
  o.logit_bias.pop_back();
  EXPECT_EQ(validate_error(o), "valid");
  for (const char* strategy : {"beam", "contrastive"}) {
    o = {};
    o.strategy = strategy;
    o.frequency_penalty = 0.5;
    EXPECT_EQ(validate_error(o), std::string("generation.frequency_penalty is used only by strategy greedy or "
                                             "sample, not by ") +
                                     strategy);
    o.frequency_penalty = 0;
    o.logit_bias = {{1, -3.0}};
    EXPECT_EQ(validate_error(o), std::string("generation.logit_bias is used only by strategy greedy or sample, "
                                             "not by ") +
                                     strategy);
  }
  // Ids are checked against the model's vocabulary when generation starts.
  Bigram m(repeating_table());
  o = {};
  o.logit_bias = {{4, 1.0}};
  try {
    zcode::gen::generate(m, std::vector<int32_t>{0}, o, 0, 3, 32);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "generation.logit_bias: token id 4 is outside the vocabulary [0, 4)");
  }
  EXPECT_EQ(m.sessions_closed, 0);  // refused before a session opened
}

TEST(Sample, TopPOneAndTopKAboveVocabChangeNothing) {
  std::vector<float> logits{0.3f, -1.f, 2.f, 0.7f, 0.7f, -0.2f};
  std::vector<std::pair<double, int32_t>> scratch;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    uint64_t a = seed, b = seed, c = seed;
    int32_t plain = zcode::gen::sample(logits.data(), 6, 0.8, 0, 1.0, &a, &scratch);
    int32_t big_k = zcode::gen::sample(logits.data(), 6, 0.8, 1000, 1.0, &b, &scratch);
    int32_t all_k = zcode::gen::sample(logits.data(), 6, 0.8, 6, 1.0, &c, &scratch);
    EXPECT_EQ(plain, big_k);
    EXPECT_EQ(plain, all_k);
  }
}

TEST(Sample, TinyTopPIsGreedy) {
  std::vector<float> logits{0.3f, -1.f, 2.f, 0.7f, 0.7f, -0.2f};
  std::vector<std::pair<double, int32_t>> scratch;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    uint64_t s = seed;
    EXPECT_EQ(zcode::gen::sample(logits.data(), 6, 1.0, 0, 1e-9, &s, &scratch), 2);
  }
}

// Ids drawn by sampling_reference.py (an independent Python version of the
// documented procedure) for a fixed logits vector over many settings/seeds.
TEST(SamplingReference, MatchesPython) {
  const char* script = std::getenv("ZCODE_SAMPLING_REF");
  const char* py = std::getenv("ZCODE_PYTHON");
  if (!script || !py) GTEST_SKIP() << "run through ctest (engine_sampling_reference) to get the Python reference";
  std::string cmd = std::string(py) + " " + script;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  // Each line: temperature top_k top_p seed id
  std::vector<float> logits{1.5f, -0.5f, 0.25f, 2.0f, 2.0f, -3.0f, 0.0f, 1.0f};
  std::istringstream in(out);
  double t, tp;
  int k, id;
  uint64_t seed;
  int lines = 0;
  std::vector<std::pair<double, int32_t>> scratch;
  while (in >> t >> k >> tp >> seed >> id) {
    uint64_t s = seed;
    EXPECT_EQ(zcode::gen::sample(logits.data(), 8, t, k, tp, &s, &scratch), id)
        << "t=" << t << " k=" << k << " p=" << tp << " seed=" << seed;
    ++lines;
  }
  EXPECT_GT(lines, 100);
}

// argmax against a strict left-to-right scan (ties: the lowest id; a NaN never
// wins, -inf counts as a value, and NaN everywhere gives 0), on lengths around
// its 16-lane groups and 512-element blocks. Every fourth row rises with noise,
// so its maximum sits in a late block, tied there and nowhere before.
TEST(Argmax, EqualsAStrictScan) {
  std::mt19937 rng(9);
  for (int64_t n : {1, 5, 15, 16, 17, 31, 32, 33, 511, 512, 513, 1025, 1537, 50257}) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = static_cast<float>(static_cast<int>(rng() % 7)) - 3.f;  // many ties
      if (rep % 4 == 0)
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i / 100 + rng() % 3);
      if (rep % 3 == 1) x[rng() % x.size()] = std::numeric_limits<float>::quiet_NaN();
      if (rep % 5 == 2) x[0] = std::numeric_limits<float>::quiet_NaN();
      if (rep % 7 == 3)  // only NaN and -inf: the first -inf is the scan's answer
        for (auto& v : x)
          v = rng() % 2 ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity();
      if (rep == 19) std::fill(x.begin(), x.end(), std::numeric_limits<float>::quiet_NaN());
      int64_t best = 0;  // the strict scan, from the first value that is not NaN
      while (best + 1 < n && std::isnan(x[static_cast<size_t>(best)])) ++best;
      for (int64_t i = best + 1; i < n; ++i)
        if (x[static_cast<size_t>(i)] > x[static_cast<size_t>(best)]) best = i;
      if (std::isnan(x[static_cast<size_t>(best)])) best = 0;
      EXPECT_EQ(zcode::gen::argmax(x.data(), n), best) << "n " << n << ", rep " << rep;
    }
  }
}

}  // namespace
