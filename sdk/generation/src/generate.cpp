// Generation strategies over a Decoder (see zcode/generation/generate.h).
#include <zcode/generation/generate.h>
#include <zcode/sdk/hash.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace zcode::gen {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kEos: return "eos";
    case StopReason::kStopString: return "stop_string";
    case StopReason::kMaxNewTokens: return "max_new_tokens";
  }
  return "?";
}

void validate(const GenerationOptions& o) {
  auto bad = [](const std::string& m) { throw std::invalid_argument(m); };
  if (o.strategy != "greedy" && o.strategy != "sample" && o.strategy != "beam" && o.strategy != "contrastive")
    bad("generation.strategy: '" + o.strategy + "' is not one of greedy, sample, beam, contrastive");
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    bad("generation.temperature: " + std::to_string(o.temperature) + " must be a finite number >= 0");
  if (o.top_k < 0) bad("generation.top_k: " + std::to_string(o.top_k) + " must be >= 0");
  if (!(o.top_p > 0 && o.top_p <= 1)) bad("generation.top_p: " + std::to_string(o.top_p) + " is outside (0, 1]");
  if (o.num_beams < 1) bad("generation.num_beams: " + std::to_string(o.num_beams) + " must be >= 1");
  if (!std::isfinite(o.length_penalty)) bad("generation.length_penalty: must be finite");
  if (!(o.penalty_alpha >= 0 && o.penalty_alpha <= 1))
    bad("generation.penalty_alpha: " + std::to_string(o.penalty_alpha) + " is outside [0, 1]");
  if (o.max_new_tokens < 0) bad("generation.max_new_tokens: " + std::to_string(o.max_new_tokens) + " must be >= 0");
  for (const auto& s : o.stop)
    if (s.empty()) bad("generation.stop: empty stop string");
  check_penalties(o.presence_penalty, o.frequency_penalty, o.logit_bias, 0, "generation.");
  // Beam and contrastive search rank whole continuations by the model's
  // probabilities; a per-token steering of them has no agreed meaning, so
  // it is refused rather than silently ignored.
  if ((o.strategy == "beam" || o.strategy == "contrastive") &&
      has_penalties(o.presence_penalty, o.frequency_penalty, o.logit_bias)) {
    const char* which = o.presence_penalty != 0    ? "generation.presence_penalty"
                        : o.frequency_penalty != 0 ? "generation.frequency_penalty"
                                                   : "generation.logit_bias";
    bad(std::string(which) + " is used only by strategy greedy or sample, not by " + o.strategy);
  }
}

void check_penalties(double presence_penalty, double frequency_penalty,
                     std::span<const std::pair<int32_t, double>> logit_bias, int64_t vocab_size,
                     const std::string& prefix) {
  auto bad = [](const std::string& m) { throw std::invalid_argument(m); };
  if (!(presence_penalty >= -kMaxPenalty && presence_penalty <= kMaxPenalty))
    bad(prefix + "presence_penalty: " + std::to_string(presence_penalty) + " is outside [-2, 2]");
  if (!(frequency_penalty >= -kMaxPenalty && frequency_penalty <= kMaxPenalty))
    bad(prefix + "frequency_penalty: " + std::to_string(frequency_penalty) + " is outside [-2, 2]");
  if (logit_bias.size() > kMaxLogitBiasEntries)
    bad(prefix + "logit_bias: " + std::to_string(logit_bias.size()) + " entries; at most " +
        std::to_string(kMaxLogitBiasEntries) + " are allowed");
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto& [id, b] = logit_bias[i];
    if (id < 0) bad(prefix + "logit_bias: token id " + std::to_string(id) + " is negative (expected an id >= 0)");
    if (vocab_size > 0 && id >= vocab_size)
      bad(prefix + "logit_bias: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
          std::to_string(vocab_size) + ")");
    if (!(b >= -kMaxLogitBias && b <= kMaxLogitBias))
      bad(prefix + "logit_bias: the bias " + std::to_string(b) + " of token id " + std::to_string(id) +
          " is outside [-100, 100]");
    for (size_t j = 0; j < i; ++j)
      if (logit_bias[j].first == id)
        bad(prefix + "logit_bias: token id " + std::to_string(id) + " appears twice (expected each id once)");
  }
}

bool has_penalties(double presence_penalty, double frequency_penalty,
                   std::span<const std::pair<int32_t, double>> logit_bias) {
  if (presence_penalty != 0 || frequency_penalty != 0) return true;
  for (const auto& e : logit_bias)
    if (e.second != 0) return true;
  return false;
}

void apply_penalties(const float* logits, int64_t n, std::span<const int32_t> generated, double presence_penalty,
                     double frequency_penalty, std::span<const std::pair<int32_t, double>> logit_bias, float* out,
                     std::vector<int32_t>* counts) {
  auto outside = [n](const char* what, int32_t id) {
    throw std::invalid_argument(std::string(what) + ": token id " + std::to_string(id) +
                                " is outside the vocabulary [0, " + std::to_string(n) + ")");
  };
  for (const auto& e : logit_bias)
    if (e.first < 0 || e.first >= n) outside("logit_bias", e.first);
  for (int32_t id : generated)
    if (id < 0 || id >= n) outside("apply_penalties: generated", id);
  auto& c = *counts;
  if (static_cast<int64_t>(c.size()) != n) c.assign(static_cast<size_t>(n), 0);
  if (out != logits) std::copy(logits, logits + n, out);
  for (int32_t id : generated) ++c[static_cast<size_t>(id)];
  // One formula for every touched id, so an id with both a bias and a count
  // gets the same left-to-right double expression as the documentation.
  auto adjust = [&](int32_t id, double bias) {
    const auto j = static_cast<size_t>(id);
    const double cj = c[j];
    out[j] = static_cast<float>(static_cast<double>(logits[j]) + bias - cj * frequency_penalty -
                                (cj > 0 ? presence_penalty : 0.0));
    c[j] = 0;  // done: the generated pass below skips it, and the scratch ends all zero
  };
  for (const auto& [id, bias] : logit_bias) adjust(id, bias);
  for (int32_t id : generated)
    if (c[static_cast<size_t>(id)] != 0) adjust(id, 0.0);
}

int32_t argmax(const float* logits, int64_t n) {
  // Blocks of 512: each block's max in 16 independent lanes (a branch-free
  // select per element; a serial compare-and-branch loop costs ~10x on a 50k
  // vocabulary, once per sequence per decode step), remembering the first
  // block whose max beats every earlier block's; then the first id holding
  // that max, in that block alone. That is a strict `>` scan's answer, ties to
  // the lowest id, and reads the row once: the former second pass over the
  // whole row (find the first id holding the max) doubled the reads, and a
  // version that kept each lane's id beside its max was not vectorized by
  // GCC 12 and slowed 3x on rows whose maximum keeps rising. 32 rows of
  // 50,257, 2-core AMD EPYC VM, 2026-12-07: 473-484 us (two passes), 235 us
  // (blocks), normal or rising logits alike.
  constexpr int64_t kLanes = 16, kBlock = 512;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float best = kNegInf;
  int64_t at = -1;  // the first block holding `best`; -1: nothing above -inf yet
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    float lane[kLanes];  // -inf, not the block's first values: a NaN there would stick to its lane
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = kNegInf;
    int64_t i = b;
    for (; i + kLanes <= e; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
    float m = lane[0];
    for (int64_t j = 1; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
    for (; i < e; ++i) m = logits[i] > m ? logits[i] : m;
    if (m > best) {
      best = m;
      at = b;
    }
  }
  if (at >= 0)
    for (int64_t k = at;; ++k)  // found within the block: its max is one of its values
      if (logits[k] == best) return static_cast<int32_t>(k);
  for (int64_t k = 0; k < n; ++k)  // nothing above -inf: the first -inf; NaN everywhere: 0
    if (logits[k] == kNegInf) return static_cast<int32_t>(k);
  return 0;
}

void log_softmax(const float* logits, int64_t n, double* out) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(logits[i]) - lse;
}

namespace {

// log p(id) under softmax(logits) at temperature 1.
double token_logprob(const float* logits, int64_t n, int32_t id) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return static_cast<double>(logits[id]) - mx - std::log(sum);
}

bool by_value_then_id(const std::pair<double, int32_t>& a, const std::pair<double, int32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

}  // namespace

int32_t sample(const float* logits, int64_t n, double temperature, int32_t top_k, double top_p, uint64_t* rng_state,
               std::vector<std::pair<double, int32_t>>* scratch, double* logprob) {
  if (n <= 0) throw std::invalid_argument("sample: empty vocabulary");
  if (temperature == 0) {
    int32_t id = argmax(logits, n);
    if (logprob) *logprob = token_logprob(logits, n, id);
    return id;
  }
  auto& c = *scratch;
  c.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) c[i] = {static_cast<double>(logits[i]) / temperature, static_cast<int32_t>(i)};
  size_t kept = static_cast<size_t>(n);
  if (top_k > 0 && static_cast<int64_t>(top_k) < n) {
    kept = static_cast<size_t>(top_k);
    std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(kept), c.end(), by_value_then_id);
  } else {
    std::sort(c.begin(), c.end(), by_value_then_id);
  }
  const double mx = c[0].first;
  if (!std::isfinite(mx)) {
    // logits / temperature overflowed (a temperature near 0): its limit, greedy.
    const int32_t id = argmax(logits, n);
    if (logprob) *logprob = token_logprob(logits, n, id);
    return id;
  }
  double sum = 0;
  for (size_t i = 0; i < kept; ++i) {
    c[i].first = std::exp(c[i].first - mx);
    sum += c[i].first;
  }
  for (size_t i = 0; i < kept; ++i) c[i].first /= sum;
  if (top_p < 1.0) {
    double cum = 0;
    size_t cut = kept;
    for (size_t i = 0; i < kept; ++i) {
      cum += c[i].first;
      if (cum >= top_p) {
        cut = i + 1;
        break;
      }
    }
    kept = cut;
    double s2 = 0;
    for (size_t i = 0; i < kept; ++i) s2 += c[i].first;
    for (size_t i = 0; i < kept; ++i) c[i].first /= s2;
  }
  const double u = sdk::u01(sdk::splitmix64_next(rng_state));
  int32_t pick = c[kept - 1].second;
  double cum = 0;
  for (size_t i = 0; i < kept; ++i) {
    cum += c[i].first;
    if (cum > u) {
      pick = c[i].second;
      break;
    }
  }
  if (logprob) *logprob = token_logprob(logits, n, pick);
  return pick;
}

namespace {

// Closes the decoder session on every exit path.
struct Session {
  Decoder& d;
  Session(Decoder& dec, int32_t batch, int32_t max_len) : d(dec) { d.begin(batch, max_len); }
  ~Session() {
    try {
      d.end();
    } catch (...) {
    }
  }
};

// Feeds the prompt to every row of a batch; leaves the last logits in
// `logits`. In one extend() (the positions as one batch of rows), unless
// `reps` wants every position's logits (contrastive search).
void prefill(Decoder& d, const std::vector<int32_t>& prompt, int32_t batch, std::vector<float>& logits,
             std::vector<std::vector<float>>* reps = nullptr) {
  if (!reps) {
    if (prompt.empty()) return;
    const auto n = static_cast<int32_t>(prompt.size());
    std::vector<int32_t> rows(static_cast<size_t>(batch) * prompt.size());
    for (int32_t i = 0; i < batch; ++i) std::copy(prompt.begin(), prompt.end(), rows.begin() + size_t(i) * n);
    d.extend(batch, n, rows.data(), logits.data());
    return;
  }
  std::vector<int32_t> toks(static_cast<size_t>(batch));
  for (int32_t t : prompt) {
    std::fill(toks.begin(), toks.end(), t);
    d.step(toks.data(), logits.data());
    reps->emplace_back(logits.begin(), logits.begin() + d.vocab_size());
  }
}

Result run_greedy_or_sample(Decoder& d, Result r, const GenerationOptions& o, int32_t eos, int32_t max_len,
                            const Hooks& h) {
  const int64_t V = d.vocab_size();
  std::vector<float> logits(static_cast<size_t>(V));
  Session s(d, 1, max_len);
  prefill(d, r.prompt, 1, logits);
  const bool greedy = o.strategy == "greedy" || o.temperature == 0;
  uint64_t rng = o.seed;
  std::vector<std::pair<double, int32_t>> scratch;
  const bool steer = has_penalties(o.presence_penalty, o.frequency_penalty, o.logit_bias);
  std::vector<float> adjusted(steer ? static_cast<size_t>(V) : 0);
  std::vector<int32_t> counts(steer ? static_cast<size_t>(V) : 0);
  if (steer) r.generated.reserve(static_cast<size_t>(o.max_new_tokens));
  for (int32_t i = 0; i < o.max_new_tokens; ++i) {
    const float* pick_from = logits.data();
    if (steer) {
      apply_penalties(logits.data(), V, r.generated, o.presence_penalty, o.frequency_penalty, o.logit_bias,
                      adjusted.data(), &counts);
      pick_from = adjusted.data();
    }
    const int32_t id =
        greedy ? argmax(pick_from, V) : sample(pick_from, V, o.temperature, o.top_k, o.top_p, &rng, &scratch, nullptr);
    // The score is the model's (raw logits), whatever steered the choice.
    const double lp = token_logprob(logits.data(), V, id);
    if (id == eos) {
      r.reason = StopReason::kEos;
      return r;
    }
    r.generated.push_back(id);
    r.score += lp;
    if (h.on_token) h.on_token(id);
    if (h.should_stop && h.should_stop(r.generated)) {
      r.reason = StopReason::kStopString;
      return r;
    }
    if (i + 1 < o.max_new_tokens) d.step(&id, logits.data());
  }
  r.reason = StopReason::kMaxNewTokens;
  return r;
}

double cosine(const float* a, const float* b, int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  if (aa == 0 || bb == 0) return 0;
  return ab / std::sqrt(aa * bb);
}

// Contrastive search (Su et al. 2022, eq. 5), batch = k candidates: all rows
// share the context; each step feeds the k candidates, scores them, and copies
// the winner's cache into every row.
Result run_contrastive(Decoder& d, Result r, const GenerationOptions& o, int32_t eos, int32_t max_len, const Hooks& h) {
  const int64_t V = d.vocab_size();
  const int32_t k = static_cast<int32_t>(std::min<int64_t>(o.top_k > 0 ? o.top_k : 4, V));
  const double alpha = o.penalty_alpha;
  std::vector<float> logits(static_cast<size_t>(k) * V);
  std::vector<std::vector<float>> reps;  // context representations (logit vectors)
  Session s(d, k, max_len);
  prefill(d, r.prompt, k, logits, &reps);
  std::vector<float> next(logits.begin(), logits.begin() + V);  // distribution for the next token
  std::vector<double> lsm(static_cast<size_t>(V));
  std::vector<std::pair<double, int32_t>> cand(static_cast<size_t>(V));
  std::vector<int32_t> toks(static_cast<size_t>(k)), src(static_cast<size_t>(k));
  for (int32_t step = 0; step < o.max_new_tokens; ++step) {
    log_softmax(next.data(), V, lsm.data());
    for (int64_t i = 0; i < V; ++i) cand[i] = {lsm[i], static_cast<int32_t>(i)};
    std::partial_sort(cand.begin(), cand.begin() + k, cand.end(), by_value_then_id);
    for (int32_t j = 0; j < k; ++j) toks[j] = cand[j].second;
    d.step(toks.data(), logits.data());
    int32_t best = 0;
    double best_score = -std::numeric_limits<double>::infinity();
    for (int32_t j = 0; j < k; ++j) {
      double penalty = 0;
      const float* hv = logits.data() + static_cast<size_t>(j) * V;
      for (const auto& hj : reps) penalty = std::max(penalty, cosine(hv, hj.data(), V));
      const double score = (1 - alpha) * std::exp(cand[j].first) - alpha * penalty;
      if (score > best_score) {  // strict: ties keep the higher-probability (lower rank) candidate
        best_score = score;
        best = j;
      }
    }
    const int32_t id = cand[best].second;
    if (id == eos) {
      r.reason = StopReason::kEos;
      return r;
    }
    r.generated.push_back(id);
    r.score += cand[best].first;
    if (h.on_token) h.on_token(id);
    const float* win = logits.data() + static_cast<size_t>(best) * V;
    reps.emplace_back(win, win + V);
    next.assign(win, win + V);
    std::fill(src.begin(), src.end(), best);
    d.reorder(src.data());
    if (h.should_stop && h.should_stop(r.generated)) {
      r.reason = StopReason::kStopString;
      return r;
    }
  }
  r.reason = StopReason::kMaxNewTokens;
  return r;
}

// Beam search as in HF transformers' BeamSearchScorer (early_stopping=False):
// 2·num_beams candidates per step; those ending in <eos> become finished
// hypotheses scored sum_logprobs / gen_len^length_penalty; done when
// num_beams hypotheses exist and the best running beam, normalised at the
// current length, cannot beat the worst of them.
Result run_beam(Decoder& d, Result r, const GenerationOptions& o, int32_t eos, int32_t max_len, const Hooks& h) {
  const int64_t V = d.vocab_size();
  const int32_t B = o.num_beams;
  const double lp = o.length_penalty;
  std::vector<float> logits(static_cast<size_t>(B) * V);
  Session s(d, B, max_len);
  prefill(d, r.prompt, B, logits);
  struct Beam {
    std::vector<int32_t> ids;
    double sum = 0;
  };
  std::vector<Beam> beams(static_cast<size_t>(B));
  // At the start every beam is the same; only beam 0 may expand, so the first
  // step does not pick the same token B times.
  for (int32_t b = 1; b < B; ++b) beams[b].sum = -std::numeric_limits<double>::infinity();
  struct Hyp {
    std::vector<int32_t> ids;
    double score;
  };
  std::vector<Hyp> done;
  auto add_hyp = [&](std::vector<int32_t> ids, double sum, size_t len) {
    const double score = sum / std::pow(static_cast<double>(std::max<size_t>(len, 1)), lp);
    done.push_back({std::move(ids), score});
    std::sort(done.begin(), done.end(), [](const Hyp& a, const Hyp& b) { return a.score > b.score; });
    if (done.size() > static_cast<size_t>(B)) done.pop_back();
  };
  std::vector<double> lsm(static_cast<size_t>(V));
  struct Cand {
    double sum;
    int32_t beam, id;
  };
  std::vector<Cand> cands;
  std::vector<int32_t> src(static_cast<size_t>(B)), toks(static_cast<size_t>(B));
  for (int32_t step = 0; step < o.max_new_tokens; ++step) {
    cands.clear();
    for (int32_t b = 0; b < B; ++b) {
      if (!std::isfinite(beams[b].sum)) continue;
      log_softmax(logits.data() + static_cast<size_t>(b) * V, V, lsm.data());
      for (int64_t v = 0; v < V; ++v) cands.push_back({beams[b].sum + lsm[v], b, static_cast<int32_t>(v)});
    }
    const size_t keep = std::min<size_t>(cands.size(), static_cast<size_t>(2 * B));
    std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(keep), cands.end(),
                      [](const Cand& a, const Cand& b) {
                        if (a.sum != b.sum) return a.sum > b.sum;
                        if (a.beam != b.beam) return a.beam < b.beam;
                        return a.id < b.id;
                      });
    std::vector<Beam> next;
    next.reserve(static_cast<size_t>(B));
    int32_t filled = 0;
    for (size_t c = 0; c < keep && filled < B; ++c) {
      const Cand& cd = cands[c];
      if (cd.id == eos) {
        // HF adds an <eos> candidate only if it ranks within the first B.
        if (c < static_cast<size_t>(B)) add_hyp(beams[cd.beam].ids, cd.sum, beams[cd.beam].ids.size() + 1);
        continue;
      }
      Beam nb{beams[cd.beam].ids, cd.sum};
      nb.ids.push_back(cd.id);
      next.push_back(std::move(nb));
      src[filled] = cd.beam;
      toks[filled] = cd.id;
      ++filled;
    }
    for (; filled < B; ++filled) {  // fewer live candidates than beams (tiny vocab)
      next.push_back({{}, -std::numeric_limits<double>::infinity()});
      src[filled] = 0;
      toks[filled] = 0;
    }
    beams = std::move(next);
    const size_t cur_len = static_cast<size_t>(step) + 1;
    bool any_live = false;
    double best_live = -std::numeric_limits<double>::infinity();
    for (const Beam& b : beams)
      if (std::isfinite(b.sum)) {
        any_live = true;
        best_live = std::max(best_live, b.sum);
      }
    if (!any_live) break;
    if (done.size() == static_cast<size_t>(B) &&
        done.back().score >= best_live / std::pow(static_cast<double>(cur_len), lp))
      break;
    if (step + 1 == o.max_new_tokens) {
      for (const Beam& b : beams)
        if (std::isfinite(b.sum)) add_hyp(b.ids, b.sum, b.ids.size());
      break;
    }
    d.reorder(src.data());
    d.step(toks.data(), logits.data());
    if (h.should_stop) {
      for (int32_t b = 0; b < B; ++b) {
        if (std::isfinite(beams[b].sum) && h.should_stop(beams[b].ids)) {
          add_hyp(beams[b].ids, beams[b].sum, beams[b].ids.size());
          beams[b].sum = -std::numeric_limits<double>::infinity();
        }
      }
    }
  }
  if (done.empty()) {
    r.reason = StopReason::kMaxNewTokens;
    return r;
  }
  const Hyp& best = done.front();
  r.generated = best.ids;
  r.score = best.score;
  const bool hit_max = static_cast<int32_t>(best.ids.size()) >= o.max_new_tokens;
  r.reason = hit_max                                      ? StopReason::kMaxNewTokens
             : (h.should_stop && h.should_stop(best.ids)) ? StopReason::kStopString
                                                          : StopReason::kEos;
  if (h.on_token)
    for (int32_t id : r.generated) h.on_token(id);
  return r;
}

}  // namespace

Result generate(Decoder& model, std::span<const int32_t> prompt, const GenerationOptions& opts_in, int32_t bos_id,
                int32_t eos_id, int32_t max_seq_len, const Hooks& hooks) {
  validate(opts_in);
  GenerationOptions o = opts_in;
  if (max_seq_len < 2)
    throw std::invalid_argument("model.max_seq_len: " + std::to_string(max_seq_len) + " is too small to generate");
  if (o.max_new_tokens > max_seq_len - 1) {
    if (hooks.warn)
      hooks.warn("generation.max_new_tokens: " + std::to_string(o.max_new_tokens) +
                 " clamped to max_seq_len - 1 = " + std::to_string(max_seq_len - 1));
    o.max_new_tokens = max_seq_len - 1;
  }
  Result r;
  r.prompt.assign(prompt.begin(), prompt.end());
  if (r.prompt.empty()) {
    const int32_t start = bos_id >= 0 ? bos_id : eos_id;
    if (start < 0) throw std::invalid_argument("generate: empty prompt and the tokenizer has neither <bos> nor <eos>");
    r.prompt.push_back(start);
  }
  const size_t room = static_cast<size_t>(max_seq_len - o.max_new_tokens);
  if (r.prompt.size() > room) {
    if (hooks.warn)
      hooks.warn("prompt has " + std::to_string(r.prompt.size()) + " tokens; keeping the last " + std::to_string(room) +
                 " (max_seq_len " + std::to_string(max_seq_len) + " - max_new_tokens " +
                 std::to_string(o.max_new_tokens) + ")");
    r.prompt.erase(r.prompt.begin(), r.prompt.end() - static_cast<std::ptrdiff_t>(room));
  }
  const int32_t max_len = max_seq_len;
  check_penalties(o.presence_penalty, o.frequency_penalty, o.logit_bias, model.vocab_size(), "generation.");
  if (o.max_new_tokens == 0) return r;
  for (int32_t id : r.prompt)
    if (id < 0 || id >= model.vocab_size())
      throw std::invalid_argument("generate: prompt id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(model.vocab_size()) + ")");
  if (o.strategy == "beam") return run_beam(model, std::move(r), o, eos_id, max_len, hooks);
  if (o.strategy == "contrastive") return run_contrastive(model, std::move(r), o, eos_id, max_len, hooks);
  return run_greedy_or_sample(model, std::move(r), o, eos_id, max_len, hooks);
}

}  // namespace zcode::gen
