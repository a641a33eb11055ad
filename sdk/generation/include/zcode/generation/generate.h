// zcode/generation/generate.h: text generation over a model's KV cache, the
// one implementation for `zcode-host generate`, the `samples` callback and the
// serving code (sdk/generation: a library plugins may link).
//
// Strategies (GenerationOptions::strategy):
//   greedy       argmax of the logits; ties go to the lowest id.
//   sample       temperature, then top-k, then top-p (nucleus; Holtzman et al.
//                2020, eq. 2), then one draw. temperature 0 means greedy.
//   beam         beam search with num_beams beams and HF's length penalty:
//                a finished hypothesis scores sum(log p) / len^length_penalty,
//                len = generated tokens including <eos> (not the prompt).
//   contrastive  contrastive search (Su et al. 2022, eq. 5):
//                x_t = argmax_{v in top-k} (1-α)·p(v|x<t) − α·max_j cos(h_v, h_j).
//                DEVIATION, stated honestly: the ABI exposes no hidden states,
//                so h is the model's next-token logit vector at that position
//                (the LM head applied to the hidden state: a fixed linear map
//                of it, tied to the embedding). The degeneration penalty is
//                therefore a cosine over logits, not over hidden states.
//
// Exact sampling procedure (so an independent reference can reproduce ids):
//   0. Penalties and bias (greedy and sample only; OpenAI's documented
//      formula): with c_j = how many times id j was generated so far in this
//      sequence (the prompt does not count) and b_j = logit_bias[j] (0 when
//      absent), the adjusted logit is
//        l'_j = float(l_j + b_j - c_j*frequency_penalty - [c_j > 0]*presence_penalty),
//      evaluated left to right in double and rounded once to float; ids with
//      neither a bias nor a count keep l_j bit for bit. Greedy (argmax) and
//      steps 1-5 below then run on l' instead of l. With every option at its
//      default l' = l, so ids are those of a run without them.
//      Scores (Result::score) and the server's logprobs stay those of the
//      model's raw logits l: they describe the model, not the steering.
//   1. z = logits / temperature (double precision).
//   2. Candidates are all ids ordered by (z desc, id asc). top_k > 0 keeps the
//      first min(top_k, vocab) of them.
//   3. p = softmax(z) over the kept candidates (max-subtracted, double).
//   4. top_p < 1 keeps the shortest prefix whose cumulative p >= top_p (at
//      least one id); p is renormalised over the prefix.
//   5. u = (splitmix64_next(state) >> 11) · 2^-53 in [0, 1) (zcode/sdk/hash.h);
//      the pick is the first candidate in order whose cumulative p exceeds u
//      (the last one if rounding leaves none). The state starts at `seed` and
//      advances by 0x9E3779B97F4A7C15 per draw (SplitMix64, Steele et al. 2014).
//
// Edge cases: a temperature so small that logits / temperature overflows
// (e.g. 1e-320) picks as temperature 0 does (argmax); top_p >= 1 disables the nucleus; top_k > vocab keeps the whole
// vocab; an empty prompt starts from <bos> (or <eos> when the tokenizer has no
// <bos>); a prompt longer than max_seq_len − max_new_tokens keeps its last
// max_seq_len − max_new_tokens tokens (with a warning), and max_new_tokens is
// clamped to max_seq_len − 1. Generation stops at <eos> (not printed), at a
// stop string (the text is cut before it), or after max_new_tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace zcode::gen {

/// Options of one generation (the config's `generation` section + CLI flags).
struct GenerationOptions {
  std::string strategy = "greedy";  // greedy | sample | beam | contrastive
  double temperature = 1.0;         // > 0; 0 = greedy
  int32_t top_k = 0;                // 0 = off (sample); candidates (contrastive, default 4)
  double top_p = 1.0;               // (0, 1]
  int32_t num_beams = 4;            // beam
  double length_penalty = 1.0;      // beam
  double penalty_alpha = 0.6;       // contrastive, [0, 1]
  int32_t max_new_tokens = 64;
  std::vector<std::string> stop;  // stop strings
  uint64_t seed = 0;
  double presence_penalty = 0;                         // greedy, sample; [-2, 2] (step 0 below)
  double frequency_penalty = 0;                        // greedy, sample; [-2, 2]
  std::vector<std::pair<int32_t, double>> logit_bias;  // greedy, sample; (id, bias in [-100, 100]), <= 300, ids once
};

/// Limits of the penalties and the bias (OpenAI's).
inline constexpr double kMaxPenalty = 2.0;
inline constexpr double kMaxLogitBias = 100.0;
inline constexpr size_t kMaxLogitBiasEntries = 300;

/// Checks `o` and throws std::invalid_argument with a one-line message naming
/// the option (`generation.top_p: 1.5 is outside (0, 1]`). Logit-bias ids are
/// checked against the vocabulary by generate(), which knows it.
void validate(const GenerationOptions& o);

/// The limits of step 0's options (validate(), generate() and the serving
/// scheduler all check with it): penalties in [-2, 2], at most 300 biases,
/// each in [-100, 100], ids >= 0, below vocab_size when it is > 0 (0: not
/// known yet), each once. Throws std::invalid_argument naming the option
/// after `prefix` (`generation.`, or "" for a request's field).
void check_penalties(double presence_penalty, double frequency_penalty,
                     std::span<const std::pair<int32_t, double>> logit_bias, int64_t vocab_size,
                     const std::string& prefix);

/// True when presence_penalty, frequency_penalty or logit_bias would change a
/// logit (step 0 is then needed; otherwise it is skipped, not run as a no-op).
bool has_penalties(double presence_penalty, double frequency_penalty,
                   std::span<const std::pair<int32_t, double>> logit_bias);

/// What generation needs from a model; implemented over zc_model_table's
/// decode_* slots (ModelDecoder in the .cpp) and by fakes in tests.
class Decoder {
 public:
  virtual ~Decoder() = default;
  /// Logit columns of decode_step (the tokenizer's vocab size).
  virtual int64_t vocab_size() const = 0;
  /// Opens a KV cache for `batch` sequences of up to `max_len` tokens.
  virtual void begin(int32_t batch, int32_t max_len) = 0;
  /// Appends tokens[batch] and writes next-token logits, float32 [batch, vocab].
  virtual void step(const int32_t* tokens, float* logits) = 0;
  /// Appends n tokens to each of the `batch` sequences (tokens [batch, n],
  /// row-major) and writes the logits after each one's last, float32
  /// [batch, vocab]: n step() calls' last logits, the same bits (the prefill
  /// of a prompt). Default: those n calls; a model decoder overrides it with
  /// zc_model_table.decode_extend (ABI 1.8), which runs the positions as one
  /// batch of rows.
  virtual void extend(int32_t batch, int32_t n, const int32_t* tokens, float* logits) {
    std::vector<int32_t> col(static_cast<size_t>(batch));
    for (int32_t t = 0; t < n; ++t) {
      for (int32_t i = 0; i < batch; ++i) col[static_cast<size_t>(i)] = tokens[static_cast<size_t>(i) * n + t];
      step(col.data(), logits);
    }
  }
  /// New sequence i takes old sequence src[i]'s cache.
  virtual void reorder(const int32_t* src) = 0;
  virtual void end() = 0;
};

/// Why generation stopped.
enum class StopReason { kEos, kStopString, kMaxNewTokens };
const char* stop_reason_name(StopReason r);

struct Result {
  std::vector<int32_t> prompt;     // the prompt actually used (after bos/truncation)
  std::vector<int32_t> generated;  // new ids, <eos> excluded
  StopReason reason = StopReason::kMaxNewTokens;
  double score = 0;  // beam: normalised score; else sum log p (greedy/sample/contrastive)
};

/// Hooks for streaming and stop strings.
struct Hooks {
  /// Called with each new id as soon as it is chosen (greedy, sample,
  /// contrastive; beam calls it for the final hypothesis only, at the end).
  std::function<void(int32_t id)> on_token;
  /// Returns true when the generated ids so far end in a stop string.
  std::function<bool(std::span<const int32_t> generated)> should_stop;
  /// Receives warnings (truncated prompt, clamped max_new_tokens).
  std::function<void(const std::string&)> warn;
};

/// Runs generation. `prompt` ids; `bos_id`/`eos_id` (-1 if absent);
/// `max_seq_len` of the model. Throws std::invalid_argument for bad options
/// and rethrows the decoder's errors. The Decoder session is always closed.
Result generate(Decoder& model, std::span<const int32_t> prompt, const GenerationOptions& opts, int32_t bos_id,
                int32_t eos_id, int32_t max_seq_len, const Hooks& hooks = {});

// ---- building blocks, exposed for tests ------------------------------------

/// argmax over logits[0..n); ties go to the lowest index; a NaN never wins (all NaN, or n = 0: 0).
/// n ≤ 2^31: the id is an int32 (a vocabulary index).
int32_t argmax(const float* logits, int64_t n);

/// One draw by the documented sampling procedure (steps 1-5 above);
/// `scratch` is reused across calls (no allocation once it is large enough).
/// Returns the id and, in *logprob, log p of it under the *untruncated*
/// softmax at temperature 1 (for scores).
int32_t sample(const float* logits, int64_t n, double temperature, int32_t top_k, double top_p, uint64_t* rng_state,
               std::vector<std::pair<double, int32_t>>* scratch, double* logprob = nullptr);

/// log-softmax of logits[0..n) into out[0..n) (double precision, max-subtracted).
void log_softmax(const float* logits, int64_t n, double* out);

/// Step 0 of the procedure: out[0..n) = the adjusted logits l' of logits[0..n)
/// given the ids generated so far (prompt excluded). `out` may be `logits`.
/// `counts` is caller-owned scratch, resized to n zeros on first use and left
/// all zero on return, so once sized a call allocates nothing and costs
/// O(n) for the copy plus O(generated + logit_bias) for the adjustment.
/// Throws std::invalid_argument for an id outside [0, n) (bias or generated).
void apply_penalties(const float* logits, int64_t n, std::span<const int32_t> generated, double presence_penalty,
                     double frequency_penalty, std::span<const std::pair<int32_t, double>> logit_bias, float* out,
                     std::vector<int32_t>* counts);

}  // namespace zcode::gen
