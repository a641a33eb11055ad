// ChangeSignal: futex(2) wait and wake on a counter (change_signal.h).
#include "change_signal.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace zcode::serve {

namespace {

uint32_t* word(const std::atomic<uint32_t>& a) {
  // The futex word is the atomic's own storage (layout checked in the header).
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(&a));
}

}  // namespace

void ChangeSignal::bump() {
  v_.fetch_add(1, std::memory_order_seq_cst);
  // seq_cst on both sides (here and in wait_change): either this load sees
  // the waiter's increment, or the waiter's FUTEX_WAIT sees the new value
  // and does not sleep.
  if (waiters_.load(std::memory_order_seq_cst) > 0)
    syscall(SYS_futex, word(v_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

void ChangeSignal::wait_change(uint32_t seen, std::chrono::nanoseconds timeout) const {
  if (timeout.count() <= 0) return;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  // FUTEX_WAIT compares the word with `seen` atomically with going to sleep:
  // a bump in between makes it return EAGAIN at once. The timeout is relative.
  if (v_.load(std::memory_order_seq_cst) == seen)
    syscall(SYS_futex, word(v_), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace zcode::serve
