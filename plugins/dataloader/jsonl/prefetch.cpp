#include "prefetch.h"

#include <zcode/sdk/error.h>

#include <chrono>

namespace zcode::data {
using sdk::Error;

namespace {

// A slot with the buffers of one batch of `spec`'s shape.
std::unique_ptr<BatchSlot> make_slot(const PackSpec& spec) {
  const size_t cells = static_cast<size_t>(spec.batch) * spec.seq;
  auto s = std::make_unique<BatchSlot>();
  s->input.resize(cells);
  s->target.resize(cells);
  if (spec.doc_ids) s->doc.resize(cells);
  s->windows.resize(spec.batch);
  return s;
}

}  // namespace

Prefetcher::Prefetcher(BatchSource& source, PackSpec spec, int num_workers, int prefetch_factor, sdk::Host host,
                       std::string split)
    : source_(source), spec_(spec), workers_n_(num_workers), host_(host), split_(std::move(split)) {
  size_t n = num_workers == 0 ? 1 : static_cast<size_t>(num_workers) * prefetch_factor + 1;
  for (size_t i = 0; i < n; ++i) slots_.push_back(make_slot(spec));
  ready_.assign(n, nullptr);
}

Prefetcher::~Prefetcher() { stop(); }

bool Prefetcher::plan_mine(BatchSlot& s) {
  if (stride_size_ == 1) return source_.plan(s);
  for (uint64_t q = 0; q < stride_rank_; ++q)
    if (!source_.plan(*skip_)) return false;
  if (!source_.plan(s)) return false;
  for (uint64_t q = stride_rank_ + 1; q < stride_size_; ++q) {
    if (!source_.plan(*skip_)) break;  // a finite split ended inside the group: this batch stands
    s.after = skip_->after;            // the position after the whole group
  }
  return true;
}

void Prefetcher::set_stride(uint64_t rank, uint64_t size) {
  seek(consumed_);  // nothing planned under the old stride is handed out
  stride_rank_ = rank;
  stride_size_ = size;
  if (size > 1 && !skip_) skip_ = make_slot(spec_);
}

bool Prefetcher::plan_and_fill(BatchSlot& s) {
  s.error = nullptr;
  s.end = false;
  if (!plan_mine(s)) return false;
  source_.fill(s);
  return true;
}

void Prefetcher::start() {
  free_.clear();
  for (auto& s : slots_) free_.push_back(s.get());
  std::fill(ready_.begin(), ready_.end(), nullptr);
  next_plan_ = next_take_ = 0;
  planning_done_ = stopping_ = false;
  held_ = nullptr;
  running_ = true;
  for (int i = 0; i < workers_n_; ++i) threads_.emplace_back([this] { worker(); });
}

void Prefetcher::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  running_ = false;
  held_ = nullptr;
}

void Prefetcher::worker() {
  for (;;) {
    BatchSlot* s = nullptr;
    {
      std::unique_lock<std::mutex> lk(mu_);
      work_cv_.wait(lk, [&] { return stopping_ || (!planning_done_ && !free_.empty()); });
      if (stopping_) return;
      s = free_.back();
      free_.pop_back();
    }
    // Planning is sequential (plan_mu_) but does not hold mu_, so the
    // consumer can take ready batches while a streaming worker tokenizes.
    uint64_t seq = 0;
    bool planned = false;
    {
      std::lock_guard<std::mutex> plk(plan_mu_);
      if (planning_done_) {
        std::lock_guard<std::mutex> lk(mu_);
        free_.push_back(s);
        continue;
      }
      seq = next_plan_++;
      s->error = nullptr;
      s->end = false;
      try {
        planned = plan_mine(*s);
      } catch (...) {
        s->error = std::current_exception();
      }
      if (!planned) planning_done_ = true;  // end of a finite split, or an error
    }
    if (planned) {
      try {
        source_.fill(*s);  // concurrent across workers
      } catch (...) {
        s->error = std::current_exception();
        planning_done_ = true;
      }
    }
    if (!planned && !s->error) s->end = true;
    std::lock_guard<std::mutex> lk(mu_);
    ready_[seq % ready_.size()] = s;
    ready_cv_.notify_all();
  }
}

double Prefetcher::take_wait_ms() {
  double w = wait_ms_;
  wait_ms_ = 0;
  return w;
}

void Prefetcher::seek(const Cursor& c) {
  stop();
  source_.seek(c);
  consumed_ = c;
  ended_ = false;
  failed_ = nullptr;
}

const BatchSlot* Prefetcher::next() {
  if (failed_) std::rethrow_exception(failed_);
  if (ended_) return nullptr;
  auto t0 = std::chrono::steady_clock::now();
  BatchSlot* s = nullptr;
  if (workers_n_ == 0) {
    s = slots_[0].get();
    s->error = nullptr;
    s->end = false;
    try {
      if (!plan_and_fill(*s)) s->end = true;
    } catch (...) {
      s->error = std::current_exception();
    }
  } else {
    if (!running_) start();
    std::unique_lock<std::mutex> lk(mu_);
    if (held_) {  // the previous batch is no longer needed
      free_.push_back(held_);
      held_ = nullptr;
      work_cv_.notify_one();
    }
    const size_t k = next_take_ % ready_.size();
    while (!ready_[k]) {
      if (ready_cv_.wait_for(lk, std::chrono::milliseconds(100)) == std::cv_status::timeout && host_.stop_requested() &&
          !ready_[k])
        throw Error(ZC_ERR_CANCELLED, "data (" + split_ + "): stop requested while waiting for a batch");
    }
    s = ready_[k];
    ready_[k] = nullptr;
    ++next_take_;
    if (s->error || s->end) {
      free_.push_back(s);
    } else {
      held_ = s;
    }
  }
  wait_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (s->error) {
    // Sticky: the source stopped mid-batch, so every later call fails the
    // same way until seek() (reset or load_state) restarts it.
    std::string who = "data (" + split_ + (workers_n_ > 0 ? ") worker: " : "): ");
    try {
      std::rethrow_exception(s->error);
    } catch (const Error& err) {
      failed_ = std::make_exception_ptr(Error(err.code(), who + err.what()));
    } catch (const sdk::StatusError& err) {
      failed_ = std::make_exception_ptr(Error(err.code(), who + "tokenizer: " + err.what()));
    } catch (const std::bad_alloc&) {
      failed_ = std::make_exception_ptr(Error(ZC_ERR_OUT_OF_MEMORY, who + "out of memory"));
    } catch (const std::exception& err) {
      failed_ = std::make_exception_ptr(Error(ZC_ERR_INTERNAL, who + err.what()));
    }
    s->error = nullptr;
    std::rethrow_exception(failed_);
  }
  if (s->end) {
    ended_ = true;
    return nullptr;
  }
  consumed_ = s->after;
  return s;
}

}  // namespace zcode::data
