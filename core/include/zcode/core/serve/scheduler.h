// zcode/core/serve/scheduler.h: continuous batching over a model's slot KV
// cache (zc_model_table.decode_slots_*, ABI 1.6), the one generation loop of
// `zcode-host serve` and the Python Engine.
//
// One thread owns the model: the ABI's "one instance, one thread at a time"
// holds by construction. Between two decode steps, sequences that finished
// leave their slot and queued ones take the free slots; each step carries one
// decode token for every running sequence, then prompt chunks of the
// sequences still prefilling (at most prefill_chunk tokens each, within
// max_step_tokens). Because the model's slot decoding is batch-invariant (its
// promise in abi.h), a sequence's logits, and so its tokens, are those it
// would get alone: bit-identical to gen::generate with the same options.
//
// Token choice (zcode/generation/generate.h, so the ids match `generate`):
// when presence_penalty, frequency_penalty or logit_bias is set, the logits
// first go through gen::apply_penalties (step 0 of the documented procedure,
// counting the sequence's generated ids, not its prompt) into a scratch row;
// then temperature 0 is argmax (ties: lowest id), otherwise gen::sample with
// temperature, top_k, top_p and a SplitMix64 state starting at `seed`.
// Log-probabilities (TokenEvent) are always those of the model's raw logits,
// before any penalty or bias, as OpenAI reports them.
#pragma once

#include <zcode/core/inference_model.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace zcode::serve {

/// How one sequence picks its tokens.
struct SamplingParams {
  double temperature = 1.0;  ///< 0 = greedy
  int32_t top_k = 0;         ///< 0 = off
  double top_p = 1.0;        ///< (0, 1]
  uint64_t seed = 0;         ///< SplitMix64 start state (one draw per sampled token)
  int32_t max_new_tokens = 16;
  int32_t top_logprobs = -1;     ///< -1: no log-probabilities; k >= 0: the token's and the k most likely
  double presence_penalty = 0;   ///< [-2, 2]: subtracted once from every id generated so far
  double frequency_penalty = 0;  ///< [-2, 2]: subtracted per time an id was generated so far
  /// (token id, bias in [-100, 100]) added to that id's logit; at most 300, each id once.
  std::vector<std::pair<int32_t, double>> logit_bias;
};

struct TokenLogprob {
  int32_t id;
  double logprob;  ///< natural log, softmax of the model's raw logits at temperature 1 (no penalty, no bias)
};

/// One generated token (never <eos>: it ends the sequence unsent).
struct TokenEvent {
  int32_t id = 0;
  double logprob = 0;             ///< set when top_logprobs >= 0
  std::vector<TokenLogprob> top;  ///< the top_logprobs most likely, ties by lower id
};

enum class FinishReason {
  kStop,       ///< <eos>, or the sink ended it (a stop string)
  kLength,     ///< max_new_tokens
  kCancelled,  ///< the request's cancel flag (a client that went away)
  kTimeout,    ///< past its deadline
  kError,      ///< the model failed; the message says why
};
const char* finish_reason_name(FinishReason r);

/// A sequence's consumer, called on the scheduler's thread only: keep it
/// short. Every call falls inside a step, before that step's
/// SchedulerOptions::on_step_end.
class SequenceSink {
 public:
  virtual ~SequenceSink() = default;
  /// Each token as it is chosen; false ends the sequence (reason kStop).
  virtual bool on_token(const TokenEvent& t) = 0;
  /// The last call for the sequence.
  virtual void on_finish(FinishReason reason, const std::string& error) = 0;
};

struct SequenceRequest {
  std::vector<int32_t> prompt;  ///< 1 .. max_len − max_new_tokens ids in the vocabulary
  SamplingParams params;
  std::shared_ptr<SequenceSink> sink;
  std::shared_ptr<std::atomic<bool>> cancelled;  ///< may be shared by a request's n sequences; may be null
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

struct SchedulerOptions {
  int32_t slots = 32;           ///< sequences decoded together (KV-cache slots)
  int32_t max_len = 0;          ///< tokens per slot; 0 = the model's max_seq_len
  int32_t prefill_chunk = 64;   ///< prompt tokens of one sequence per step
  int32_t max_step_tokens = 0;  ///< entries per step; 0 = slots + 4 · prefill_chunk
  int32_t max_queue = 64;       ///< sequences waiting for a slot; submit refuses more
  /// Called on the scheduler's thread at the end of every step, after the
  /// step's sink calls (its tokens and finishes): where a consumer wakes its
  /// readers once per step instead of once per token (the server does).
  /// Empty: nothing is called.
  std::function<void()> on_step_end;
};

struct SchedulerStats {
  int64_t queued = 0, running = 0;
  uint64_t steps = 0, prompt_tokens = 0, generated_tokens = 0;
  uint64_t step_entries = 0;  ///< decode and prompt entries over all steps (÷ steps: the mean batch)
  double model_seconds = 0;   ///< in decode_slots_step
  double choose_seconds = 0;  ///< picking tokens, the sinks' work (detokenizing, events) and on_step_end
};

class Scheduler {
 public:
  /// Opens the slot session (memory: slots × max_len keys and values per
  /// layer, allocated once) and starts the thread. `model` must outlive the
  /// scheduler and is not used by anyone else meanwhile. Throws PluginError
  /// (no slot decoding in the model) or std::invalid_argument (options).
  Scheduler(const InferenceModel& model, const SchedulerOptions& opts);
  /// drain(), then closes the session.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Checks each sequence (std::invalid_argument naming the field: empty
  /// prompt, prompt + max_new_tokens over max_len, an id outside the
  /// vocabulary, bad sampling values) and queues all of them, or none:
  /// returns false when the queue has no room for all (or draining began).
  bool submit(std::vector<SequenceRequest> seqs);
  /// Refuses new sequences, runs everything queued and running to its end,
  /// joins the thread. Idempotent.
  void drain();

  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return opts_; }
  int64_t vocab_size() const { return vocab_; }

 private:
  struct Running;
  void loop();
  void step();            ///< step_sequences(), then opts_.on_step_end
  void step_sequences();  ///< one model step over the running sequences and their sink calls
  void finish(Running& r, FinishReason why, const std::string& error = {});
  void choose(Running& r, const float* logits);

  const InferenceModel& model_;
  const zc_model_table* table_;
  SchedulerOptions opts_;
  int64_t vocab_;
  int32_t eos_;
  void* session_ = nullptr;

  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<SequenceRequest> queue_;
  bool draining_ = false;
  SchedulerStats stats_;

  // Scheduler thread only.
  std::vector<std::unique_ptr<Running>> slots_;  ///< [slots]; null = free
  std::vector<int32_t> slot_of_, tokens_;
  std::vector<uint8_t> want_;
  std::vector<Running*> row_owner_;
  std::vector<float> logits_;
  std::vector<double> logp_;
  std::vector<std::pair<double, int32_t>> scratch_;
  std::vector<float> adjusted_;  ///< [vocab] the penalised row of the sequence being chosen for
  std::vector<int32_t> counts_;  ///< [vocab] gen::apply_penalties' scratch (all zero between calls)
  uint64_t admitted_ = 0;

  std::thread thread_;
};

}  // namespace zcode::serve
