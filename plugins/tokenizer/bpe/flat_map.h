// flat_map.h: open-addressing hash tables for the BPE hot path (merge ranks by
// pair, the per-word result cache). Linear probing, power-of-two capacity,
// no per-insert allocation once sized.
#pragma once

#include <zcode/sdk/hash.h>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace zcode::tok {

/// Hash of a byte string: 8 bytes at a time through the SplitMix64 finalizer
/// (sdk::mix64). Never returns 0.
inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = sdk::kSplitMix64Gamma ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = sdk::mix64(h ^ w);
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h = sdk::mix64(h ^ w ^ (uint64_t{s.size() - i} << 56));
  return h ? h : 1;
}

/// Map from a non-zero 64-bit key to a small value. Fixed capacity after reserve().
template <class V>
class U64Map {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    keys_.assign(cap, 0);
    vals_.assign(cap, V{});
    mask_ = cap - 1;
  }
  /// Inserts or overwrites; key must be non-zero and reserve() large enough.
  void put(uint64_t key, V v) {
    for (size_t i = sdk::mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == key || keys_[i] == 0) {
        if (keys_[i] == 0) ++size_;
        keys_[i] = key;
        vals_[i] = v;
        return;
      }
    }
  }
  const V* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (size_t i = sdk::mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &vals_[i];
      if (keys_[i] == 0) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  std::vector<uint64_t> keys_;
  std::vector<V> vals_;
  size_t mask_ = 0, size_ = 0;
};

/// Cache from a word's bytes to its token ids. Keys and values live in two
/// arenas; when either the table or the arenas reach their limit the cache is
/// cleared (memory stays reserved, so the steady state allocates nothing).
/// Memory is reserved on the first insert: an encoder whose words all hit the
/// model's shared cache never pays for it.
class WordCache {
 public:
  explicit WordCache(size_t max_entries = size_t{1} << 18) : max_entries_(max_entries) {}
  /// The cached ids of `word` (hash h = hash_bytes(word)), or false.
  bool find(std::string_view word, uint64_t h, const int32_t** ids, size_t* n) const {
    if (slots_.empty()) return false;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.hash == 0) return false;
      if (s.hash == h && s.key_len == word.size() &&
          std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0) {
        *ids = ids_.data() + s.ids_off;
        *n = s.ids_len;
        return true;
      }
    }
  }
  void insert(std::string_view word, uint64_t h, const int32_t* ids, size_t n) {
    if (slots_.empty()) {
      size_t cap = 16;
      while (cap < 2 * max_entries_) cap <<= 1;
      slots_.assign(cap, Slot{});
      mask_ = cap - 1;
      keys_.reserve(max_entries_ * 8);
      ids_.reserve(max_entries_ * 2);
    }
    if (size_ >= max_entries_ || keys_.size() + word.size() > keys_.capacity() || ids_.size() + n > ids_.capacity())
      clear();
    if (word.size() > keys_.capacity() || n > ids_.capacity()) return;
    size_t i = h & mask_;
    while (slots_[i].hash != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(word.size()),
                     static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n)};
    keys_.insert(keys_.end(), word.begin(), word.end());
    ids_.insert(ids_.end(), ids, ids + n);
    ++size_;
  }
  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});  // empty before the first insert: a no-op
    keys_.clear();
    ids_.clear();
    size_ = 0;
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = 0, ids_off = 0, ids_len = 0;
  };
  std::vector<Slot> slots_;
  std::vector<char> keys_;
  std::vector<int32_t> ids_;
  size_t mask_ = 0, size_ = 0, max_entries_ = 0;
};

}  // namespace zcode::tok
