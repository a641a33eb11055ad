// shared_word_cache.h: a word -> ids cache that every encoder of one BpeModel
// shares across threads. Insert-only and fixed-size, so lookups take no lock:
// a word that one thread has merged is a hit for every other thread, and N
// threads do not each pay for the same cold misses (that is what kept batch
// encoding at 1.2-1.7x on 2 threads with per-thread caches).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

namespace zcode::tok {

/// Lock-free, insert-only hash map from a word's bytes to its token ids.
///
/// Layout: open addressing over `slots` (tag = the word's 64-bit hash, never
/// 0) and one byte arena of records `[key_len u32][n_ids u32][ids i32...]
/// [key bytes]`. An insert takes its record from its thread's reserved
/// block of the arena (Writer), writes it, claims a slot by CAS on the tag
/// and then publishes the record offset with a release store; a reader that
/// sees the tag but not yet the offset treats the slot as a miss. When the
/// arena or the entry budget (half the slots) is used up, insert() returns
/// false and the caller keeps the word in its private cache instead. Nothing
/// is ever removed, so a returned pointer stays valid for the cache's
/// lifetime. Memory is reserved up front but touched only as entries arrive.
class SharedWordCache {
 public:
  /// `max_entries` words, `arena_bytes` of records (keys and ids).
  /// The arena is capped at 4 GiB (record offsets are 32-bit).
  explicit SharedWordCache(size_t max_entries = size_t{1} << 17, size_t arena_bytes = size_t{8} << 20) {
    arena_bytes = std::min<size_t>(arena_bytes, UINT32_MAX);
    size_t cap = 16;
    while (cap < 2 * max_entries) cap <<= 1;
    slots_ = std::make_unique<Slot[]>(cap);
    mask_ = cap - 1;
    max_entries_ = max_entries;
    arena_ = std::make_unique_for_overwrite<std::byte[]>(arena_bytes);
    arena_cap_ = arena_bytes;
  }

  /// The ids of `word` (h = its nonzero hash), or false.
  bool find(std::string_view word, uint64_t h, const int32_t** ids, size_t* n) const {
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      const uint64_t tag = s.tag.load(std::memory_order_acquire);
      if (tag == 0) return false;
      if (tag != h) continue;
      const uint32_t off = s.rec.load(std::memory_order_acquire);
      if (off == 0) continue;  // being published by another thread
      const std::byte* r = arena_.get() + off;
      uint32_t key_len, n_ids;
      std::memcpy(&key_len, r, 4);
      std::memcpy(&n_ids, r + 4, 4);
      const auto* key = reinterpret_cast<const char*>(r + 8 + size_t{n_ids} * 4);
      if (key_len == word.size() && std::memcmp(key, word.data(), word.size()) == 0) {
        *ids = reinterpret_cast<const int32_t*>(r + 8);
        *n = n_ids;
        return true;
      }
    }
  }

  /// One inserting thread's reservations. Each thread reserves arena bytes
  /// and entries from the shared counters in blocks and fills them alone, so
  /// inserts do not bounce the counters' cache line between cores (one
  /// fetch_add per insert cost 2-thread encoding about a tenth of its speed).
  /// Blocks start small and double (short-lived encoders, e.g. one per
  /// encode_batch call, take little), and release() gives the unused tail
  /// back when it is still the newest reservation.
  struct Writer {
    size_t off = 0, end = 0;              // reserved arena bytes [off, end)
    size_t entries = 0, entries_end = 0;  // unused entries; end of the last entry block
    size_t arena_block = kArenaBlockMin, entry_block = kEntryBlockMin;
  };

  /// Adds `word` -> ids[0, n) through `w` (one Writer per thread). False when
  /// the cache is full (nothing added). Two threads inserting the same word
  /// both succeed; find() returns either.
  bool insert(Writer& w, std::string_view word, uint64_t h, const int32_t* ids, size_t n) {
    if (full_.load(std::memory_order_relaxed)) return false;
    if (w.entries == 0) {
      const size_t first = entries_.fetch_add(w.entry_block, std::memory_order_relaxed);
      if (first >= max_entries_) {
        full_.store(true, std::memory_order_relaxed);
        return false;
      }
      w.entries = std::min(w.entry_block, max_entries_ - first);
      w.entries_end = first + w.entry_block;
      w.entry_block = std::min(2 * w.entry_block, kEntryBlockMax);
    }
    const size_t bytes = (8 + n * 4 + word.size() + 3) & ~size_t{3};
    if (w.end - w.off < bytes) {
      // A new block: at least `bytes`, at most what is left; the rest of the
      // old block stays unused.
      size_t cur = used_.load(std::memory_order_relaxed), take = 0;
      do {
        take = std::min(arena_cap_ - cur, std::max(w.arena_block, bytes));
        if (take < bytes) {
          full_.store(true, std::memory_order_relaxed);
          return false;
        }
      } while (!used_.compare_exchange_weak(cur, cur + take, std::memory_order_relaxed));
      w.off = cur;
      w.end = cur + take;
      w.arena_block = std::min(2 * w.arena_block, kArenaBlockMax);
    }
    const size_t off = w.off;
    w.off += bytes;
    --w.entries;
    std::byte* r = arena_.get() + off;
    const auto key_len = static_cast<uint32_t>(word.size()), n_ids = static_cast<uint32_t>(n);
    std::memcpy(r, &key_len, 4);
    std::memcpy(r + 4, &n_ids, 4);
    std::memcpy(r + 8, ids, n * 4);
    std::memcpy(r + 8 + n * 4, word.data(), word.size());
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      uint64_t expected = 0;
      // Entries stay under half the slots, so an empty slot is always found.
      if (slots_[i].tag.compare_exchange_strong(expected, h, std::memory_order_acq_rel)) {
        slots_[i].rec.store(static_cast<uint32_t>(off), std::memory_order_release);
        return true;
      }
    }
  }

  /// Gives back what `w` reserved and did not use, where nobody reserved
  /// after it (otherwise the tail stays unused), and empties `w`.
  void release(Writer& w) {
    size_t end = w.end;
    used_.compare_exchange_strong(end, w.off, std::memory_order_relaxed);
    size_t eend = w.entries_end;
    if (w.entries > 0) entries_.compare_exchange_strong(eend, w.entries_end - w.entries, std::memory_order_relaxed);
    w = Writer{};
  }

 private:
  struct Slot {
    std::atomic<uint64_t> tag{0};
    std::atomic<uint32_t> rec{0};  // record offset in the arena; 0 = not yet published
  };
  std::unique_ptr<Slot[]> slots_;
  size_t mask_ = 0, max_entries_ = 0;
  std::unique_ptr<std::byte[]> arena_;
  size_t arena_cap_ = 0;
  static constexpr size_t kEntryBlockMin = 16, kEntryBlockMax = 256;
  static constexpr size_t kArenaBlockMin = size_t{2} << 10, kArenaBlockMax = size_t{64} << 10;
  // Offset 0 is reserved so that rec == 0 can mean "unpublished". The
  // counters sit on their own cache line, apart from the read-mostly fields.
  alignas(64) std::atomic<size_t> used_{8};
  std::atomic<size_t> entries_{0};
  std::atomic<bool> full_{false};
};

}  // namespace zcode::tok
