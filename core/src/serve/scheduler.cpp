// Continuous batching over the model's slot KV cache (serve/scheduler.h).
#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/core/serve/scheduler.h>
#include <zcode/generation/generate.h>

#include "openmp_team.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace zcode::serve {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kTimeout: return "timeout";
    case FinishReason::kError: return "error";
  }
  return "?";
}

struct Scheduler::Running {
  SequenceRequest req;
  int32_t slot = -1;
  uint64_t admit_no = 0;
  size_t prefilled = 0;  ///< prompt tokens in the cache
  int32_t next = -1;     ///< the last chosen token, fed at the next step (-1: still prefilling)
  int32_t generated = 0;
  uint64_t rng = 0;
  bool steer = false;           ///< a penalty or a bias is set: logits go through gen::apply_penalties
  std::vector<int32_t> so_far;  ///< generated ids when steering (reserved at admission: no growth per token)
};

Scheduler::Scheduler(const InferenceModel& model, const SchedulerOptions& opts)
    : model_(model), table_(model.model_table()), opts_(opts), vocab_(model.vocab_size()), eos_(model.eos_id()) {
  if (opts_.max_len <= 0) opts_.max_len = model.max_seq_len();
  if (opts_.max_step_tokens <= 0) opts_.max_step_tokens = opts_.slots + 4 * opts_.prefill_chunk;
  if (opts_.slots < 1 || opts_.prefill_chunk < 1 || opts_.max_queue < 0 || opts_.max_len < 2 ||
      opts_.max_len > model.max_seq_len() || opts_.max_step_tokens < opts_.slots)
    throw std::invalid_argument("serve: slots " + std::to_string(opts_.slots) + ", prefill_chunk " +
                                std::to_string(opts_.prefill_chunk) + ", max_len " + std::to_string(opts_.max_len) +
                                " (model.max_seq_len " + std::to_string(model.max_seq_len()) + "), max_step_tokens " +
                                std::to_string(opts_.max_step_tokens) + ", max_queue " +
                                std::to_string(opts_.max_queue) +
                                ": expected slots, prefill_chunk >= 1, 2 <= max_len <= max_seq_len, "
                                "max_step_tokens >= slots, max_queue >= 0");
  if (!ZC_TABLE_HAS_SLOT(table_, zc_model_table, decode_slot_reset) || !table_->decode_slots_begin)
    throw PluginError("model '" + model.config().model().type +
                      "' has no slot decoding (zc_model_table.decode_slots_begin, ABI 1.6): it cannot be served");
  check_plugin_call(
      *model.model().component(), "decode_slots_begin",
      table_->decode_slots_begin(model.model().get(), opts_.slots, opts_.max_len, opts_.max_step_tokens, &session_));
  const auto n = static_cast<size_t>(opts_.max_step_tokens);
  slots_.resize(static_cast<size_t>(opts_.slots));
  slot_of_.resize(n);
  tokens_.resize(n);
  want_.resize(n);
  row_owner_.resize(n);
  logits_.resize(n * static_cast<size_t>(vocab_));
  logp_.resize(static_cast<size_t>(vocab_));
  scratch_.reserve(static_cast<size_t>(vocab_));
  adjusted_.resize(static_cast<size_t>(vocab_));
  counts_.assign(static_cast<size_t>(vocab_), 0);
  // Decoding runs on thread_ from here on: this thread's OpenMP team (it
  // loaded and packed the model) would otherwise make libgomp park thread_'s
  // workers between every parallel region of a step (openmp_team.h).
  release_openmp_team();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  drain();
  if (session_) table_->decode_end(model_.model().get(), session_);
}

bool Scheduler::submit(std::vector<SequenceRequest> seqs) {
  if (static_cast<int64_t>(seqs.size()) > int64_t{opts_.slots} + opts_.max_queue)
    throw std::invalid_argument(
        "n: " + std::to_string(seqs.size()) + " sequences (prompts x n) exceed what this server holds at once (" +
        std::to_string(opts_.slots) + " slots + a queue of " + std::to_string(opts_.max_queue) + ")");
  for (const auto& s : seqs) {
    const SamplingParams& p = s.params;
    if (!s.sink) throw std::invalid_argument("serve: a sequence without a sink");
    if (s.prompt.empty()) throw std::invalid_argument("prompt: empty (give at least one token)");
    if (p.max_new_tokens < 1)
      throw std::invalid_argument("max_tokens: " + std::to_string(p.max_new_tokens) + " must be >= 1");
    if (static_cast<int64_t>(s.prompt.size()) + p.max_new_tokens > opts_.max_len)
      throw std::invalid_argument("prompt: " + std::to_string(s.prompt.size()) + " tokens + max_tokens " +
                                  std::to_string(p.max_new_tokens) + " exceed the context of " +
                                  std::to_string(opts_.max_len) + " tokens");
    for (int32_t id : s.prompt)
      if (id < 0 || id >= vocab_)
        throw std::invalid_argument("prompt: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                    std::to_string(vocab_) + ")");
    if (!(p.temperature >= 0) || !std::isfinite(p.temperature))
      throw std::invalid_argument("temperature: must be a finite number >= 0");
    if (!(p.top_p > 0 && p.top_p <= 1)) throw std::invalid_argument("top_p: must be in (0, 1]");
    if (p.top_k < 0) throw std::invalid_argument("top_k: must be >= 0");
    gen::check_penalties(p.presence_penalty, p.frequency_penalty, p.logit_bias, vocab_, "");
  }
  // The submitting thread waits while thread_ decodes: its own idle team (a
  // Python thread that trained since its last generate()) would make libgomp
  // park thread_'s workers between regions (openmp_team.h).
  release_openmp_team();
  {
    std::lock_guard<std::mutex> lk(m_);
    if (draining_) return false;
    // Room: free slots now plus the queue's bound.
    const int64_t free_slots = opts_.slots - stats_.running;
    if (stats_.queued + static_cast<int64_t>(seqs.size()) > opts_.max_queue + std::max<int64_t>(free_slots, 0))
      return false;
    for (auto& s : seqs) queue_.push_back(std::move(s));
    stats_.queued = static_cast<int64_t>(queue_.size());
  }
  cv_.notify_all();
  return true;
}

void Scheduler::drain() {
  {
    std::lock_guard<std::mutex> lk(m_);
    draining_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lk(m_);
  return stats_;
}

void Scheduler::loop() {
  bool computed = false;  // a step ran since this thread last gave its OpenMP team back
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(m_);
      if (computed && !draining_ && queue_.empty() && stats_.running == 0) {
        // Idle: give the team back, so that a thread computing meanwhile
        // (the Python thread training between generate() calls) does not
        // run its regions beside a second team (openmp_team.h).
        lk.unlock();
        release_openmp_team();
        computed = false;
        continue;
      }
      cv_.wait(lk, [&] { return draining_ || !queue_.empty() || stats_.running > 0; });
      if (draining_ && queue_.empty() && stats_.running == 0) return;
      for (size_t s = 0; s < slots_.size() && !queue_.empty(); ++s) {
        if (slots_[s]) continue;
        auto r = std::make_unique<Running>();
        r->req = std::move(queue_.front());
        queue_.pop_front();
        r->slot = static_cast<int32_t>(s);
        r->admit_no = admitted_++;
        r->rng = r->req.params.seed;
        const SamplingParams& p = r->req.params;
        r->steer = gen::has_penalties(p.presence_penalty, p.frequency_penalty, p.logit_bias);
        if (r->steer) r->so_far.reserve(static_cast<size_t>(p.max_new_tokens));
        slots_[s] = std::move(r);
        ++stats_.running;
      }
      stats_.queued = static_cast<int64_t>(queue_.size());
    }
    step();
    computed = true;
  }
}

void Scheduler::finish(Running& r, FinishReason why, const std::string& error) {
  try {
    r.req.sink->on_finish(why, error);
  } catch (const std::exception& e) {
    log::warn(std::string("serve: a sequence's finish handler failed: ") + e.what());
  }
  const int32_t slot = r.slot;
  zc_status* st = table_->decode_slot_reset(model_.model().get(), session_, slot);
  if (st) status_release(st);  // a reset of a valid slot does not fail; the slot is reused either way
  slots_[static_cast<size_t>(slot)].reset();
  {
    std::lock_guard<std::mutex> lk(m_);
    --stats_.running;
  }
}

void Scheduler::choose(Running& r, const float* logits) {
  const SamplingParams& p = r.req.params;
  const int64_t V = vocab_;
  const float* pick_from = logits;
  if (r.steer) {
    // Into a scratch row: `logits` stays the model's, for the logprobs below.
    gen::apply_penalties(logits, V, r.so_far, p.presence_penalty, p.frequency_penalty, p.logit_bias, adjusted_.data(),
                         &counts_);
    pick_from = adjusted_.data();
  }
  const int32_t id = p.temperature == 0
                         ? gen::argmax(pick_from, V)
                         : gen::sample(pick_from, V, p.temperature, p.top_k, p.top_p, &r.rng, &scratch_, nullptr);
  if (id == eos_) return finish(r, FinishReason::kStop);
  if (r.steer) r.so_far.push_back(id);
  TokenEvent ev;
  ev.id = id;
  if (p.top_logprobs >= 0) {
    gen::log_softmax(logits, V, logp_.data());
    ev.logprob = logp_[static_cast<size_t>(id)];
    const auto k = static_cast<size_t>(std::min<int64_t>(p.top_logprobs, V));
    if (k > 0) {
      scratch_.resize(static_cast<size_t>(V));
      for (int64_t v = 0; v < V; ++v)
        scratch_[static_cast<size_t>(v)] = {logp_[static_cast<size_t>(v)], static_cast<int32_t>(v)};
      std::partial_sort(
          scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(k), scratch_.end(),
          [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
      ev.top.reserve(k);
      for (size_t i = 0; i < k; ++i) ev.top.push_back({scratch_[i].second, scratch_[i].first});
    }
  }
  ++r.generated;
  {
    std::lock_guard<std::mutex> lk(m_);
    ++stats_.generated_tokens;
  }
  bool go_on = true;
  try {
    go_on = r.req.sink->on_token(ev);
  } catch (const std::exception& e) {
    return finish(r, FinishReason::kError, std::string("token handler failed: ") + e.what());
  }
  if (!go_on) return finish(r, FinishReason::kStop);
  if (r.generated >= p.max_new_tokens) return finish(r, FinishReason::kLength);
  r.next = id;
}

void Scheduler::step() {
  step_sequences();
  if (!opts_.on_step_end) return;
  // Part of the step's token handling (the server wakes its readers here):
  // counted with it, in choose_seconds.
  const auto t0 = std::chrono::steady_clock::now();
  opts_.on_step_end();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lk(m_);
  stats_.choose_seconds += s;
}

void Scheduler::step_sequences() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& r : slots_) {
    if (!r) continue;
    if (r->req.cancelled && r->req.cancelled->load()) finish(*r, FinishReason::kCancelled);
    else if (now >= r->req.deadline) finish(*r, FinishReason::kTimeout);
  }
  // Decode entries first (one per running sequence), then prompt chunks in
  // admission order within the step's budget.
  int32_t n = 0, rows = 0;
  const int32_t budget = opts_.max_step_tokens;
  for (auto& r : slots_) {
    if (!r || r->next < 0) continue;
    slot_of_[n] = r->slot;
    tokens_[n] = r->next;
    want_[n] = 1;
    row_owner_[static_cast<size_t>(rows++)] = r.get();
    ++n;
  }
  uint64_t prompt_tokens = 0;
  for (;;) {
    Running* first = nullptr;  // the earliest admitted sequence with prompt left and nothing in this step yet
    for (auto& r : slots_)
      if (r && r->next < 0 && r->prefilled < r->req.prompt.size() && (!first || r->admit_no < first->admit_no)) {
        bool in_step = false;
        for (int32_t i = 0; i < n && !in_step; ++i) in_step = slot_of_[i] == r->slot;
        if (!in_step) first = r.get();
      }
    if (!first || n >= budget) break;
    const size_t left = first->req.prompt.size() - first->prefilled;
    const auto take = static_cast<int32_t>(
        std::min<size_t>({left, static_cast<size_t>(opts_.prefill_chunk), static_cast<size_t>(budget - n)}));
    for (int32_t j = 0; j < take; ++j) {
      slot_of_[n] = first->slot;
      tokens_[n] = first->req.prompt[first->prefilled + static_cast<size_t>(j)];
      want_[n] = 0;
      ++n;
    }
    first->prefilled += static_cast<size_t>(take);
    prompt_tokens += static_cast<uint64_t>(take);
    if (first->prefilled == first->req.prompt.size()) {
      want_[n - 1] = 1;
      row_owner_[static_cast<size_t>(rows++)] = first;
    }
  }
  if (n == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  zc_status* st = table_->decode_slots_step(model_.model().get(), session_, n, slot_of_.data(), tokens_.data(),
                                            want_.data(), logits_.data());
  if (st) {
    const std::string msg =
        std::string("model '") + model_.config().model().type + "': decode_slots_step: " + status_message(st);
    status_release(st);
    log::error("serve: " + msg);
    for (auto& r : slots_)
      if (r) finish(*r, FinishReason::kError, msg);
    return;
  }
  const auto t1 = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < rows; ++i)
    choose(*row_owner_[static_cast<size_t>(i)], logits_.data() + static_cast<size_t>(i) * static_cast<size_t>(vocab_));
  const auto t2 = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lk(m_);
  ++stats_.steps;
  stats_.step_entries += static_cast<uint64_t>(n);
  stats_.prompt_tokens += prompt_tokens;
  stats_.model_seconds += std::chrono::duration<double>(t1 - t0).count();
  stats_.choose_seconds += std::chrono::duration<double>(t2 - t1).count();
}

}  // namespace zcode::serve
