// SharedWordCache: exact contents after concurrent inserts, and what happens
// when it is full. Expected ids are computed from each key by a formula
// independent of the cache.
#include "shared_word_cache.h"
#include "flat_map.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace {

using zcode::tok::SharedWordCache;

// Key k's ids: k % 5 + 1 values k, k+1, ...
std::vector<int32_t> ids_of(int k) {
  std::vector<int32_t> v;
  for (int i = 0; i <= k % 5; ++i) v.push_back(k + i);
  return v;
}
std::string key_of(int k) {
  std::string s = "w";
  s += std::to_string(k);
  s.append(static_cast<size_t>(k % 7), 'x');
  return s;
}

TEST(SharedWordCache, ConcurrentInsertsAreAllFoundWithTheirIds) {
  SharedWordCache cache(1 << 14, 1 << 20);
  const int kKeys = 8000, kThreads = 4;
  std::vector<std::thread> pool;
  // Every thread inserts every key (in a different order), as encoders that
  // meet the same words do, and looks keys up meanwhile.
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      SharedWordCache::Writer w;
      for (int j = 0; j < kKeys; ++j) {
        const int k = (j * (2 * t + 1) + t * 977) % kKeys;
        const std::string key = key_of(k);
        const uint64_t h = zcode::tok::hash_bytes(key) | 1;
        const int32_t* ids = nullptr;
        size_t n = 0;
        if (cache.find(key, h, &ids, &n)) {
          ASSERT_EQ(std::vector<int32_t>(ids, ids + n), ids_of(k)) << key;
        } else {
          auto v = ids_of(k);
          ASSERT_TRUE(cache.insert(w, key, h, v.data(), v.size())) << key;
        }
      }
    });
  for (auto& th : pool) th.join();
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = key_of(k);
    const int32_t* ids = nullptr;
    size_t n = 0;
    ASSERT_TRUE(cache.find(key, zcode::tok::hash_bytes(key) | 1, &ids, &n)) << key;
    EXPECT_EQ(std::vector<int32_t>(ids, ids + n), ids_of(k)) << key;
  }
  EXPECT_FALSE(cache.find("absent", zcode::tok::hash_bytes("absent") | 1, nullptr, nullptr));
}

TEST(SharedWordCache, FullCacheRefusesInsertsAndKeepsWhatItHas) {
  SharedWordCache cache(/*max_entries=*/100, /*arena_bytes=*/1 << 20);
  SharedWordCache::Writer w;
  int accepted = 0;
  for (int k = 0; k < 150; ++k) {
    auto v = ids_of(k);
    const std::string key = key_of(k);
    accepted += cache.insert(w, key, zcode::tok::hash_bytes(key) | 1, v.data(), v.size()) ? 1 : 0;
  }
  EXPECT_EQ(accepted, 100);
  for (int k = 0; k < 150; ++k) {
    const std::string key = key_of(k);
    const int32_t* ids = nullptr;
    size_t n = 0;
    const bool hit = cache.find(key, zcode::tok::hash_bytes(key) | 1, &ids, &n);
    EXPECT_EQ(hit, k < 100) << key;
    if (hit) {
      EXPECT_EQ(std::vector<int32_t>(ids, ids + n), ids_of(k));
    }
  }
}

TEST(SharedWordCache, ArenaLimitRefusesInserts) {
  // 128 bytes of arena (8 reserved): one record of 8 + 4·5 + 40 = 68 bytes fits, a second does not.
  SharedWordCache cache(16, 128);
  std::vector<int32_t> v{1, 2, 3, 4, 5};
  std::string a(40, 'a'), b(40, 'b');
  SharedWordCache::Writer w;
  EXPECT_TRUE(cache.insert(w, a, zcode::tok::hash_bytes(a) | 1, v.data(), v.size()));
  EXPECT_FALSE(cache.insert(w, b, zcode::tok::hash_bytes(b) | 1, v.data(), v.size()));
  const int32_t* ids = nullptr;
  size_t n = 0;
  ASSERT_TRUE(cache.find(a, zcode::tok::hash_bytes(a) | 1, &ids, &n));
  EXPECT_EQ(n, 5u);
  EXPECT_FALSE(cache.find(b, zcode::tok::hash_bytes(b) | 1, &ids, &n));
}

// Encoders are often short-lived (encode_batch makes one per thread per call):
// each Writer's first blocks are small and release() returns the unused tail,
// so a thousand writers of ten words each fit where a thousand 2 KiB blocks
// (the smallest a writer takes) would not.
TEST(SharedWordCache, ShortLivedWritersGiveBackTheirBlocks) {
  SharedWordCache cache(1 << 14, 1 << 20);
  const int kWriters = 1000, kWords = 10;
  for (int i = 0; i < kWriters; ++i) {
    SharedWordCache::Writer w;
    for (int j = 0; j < kWords; ++j) {
      const int k = i * kWords + j;
      const std::string key = key_of(k);
      auto v = ids_of(k);
      ASSERT_TRUE(cache.insert(w, key, zcode::tok::hash_bytes(key) | 1, v.data(), v.size())) << "writer " << i;
    }
    cache.release(w);
  }
  for (int k = 0; k < kWriters * kWords; ++k) {
    const std::string key = key_of(k);
    const int32_t* ids = nullptr;
    size_t n = 0;
    ASSERT_TRUE(cache.find(key, zcode::tok::hash_bytes(key) | 1, &ids, &n)) << key;
    EXPECT_EQ(std::vector<int32_t>(ids, ids + n), ids_of(k));
  }
}

// A tail is only given back while it is the newest reservation: releasing an
// older writer must not hand out bytes that a newer one already holds.
TEST(SharedWordCache, ReleaseKeepsBytesReservedAfterIt) {
  SharedWordCache cache(1 << 10, 1 << 16);
  SharedWordCache::Writer a, b;
  std::vector<int32_t> v{1, 2, 3};
  ASSERT_TRUE(cache.insert(a, "alpha", zcode::tok::hash_bytes("alpha") | 1, v.data(), v.size()));
  for (int k = 0; k < 10; ++k) {
    const std::string key = "beta" + std::to_string(k);
    ASSERT_TRUE(cache.insert(b, key, zcode::tok::hash_bytes(key) | 1, v.data(), v.size()));
  }
  cache.release(a);  // not the newest: nothing given back
  SharedWordCache::Writer c;
  for (int k = 0; k < 200; ++k) {
    const std::string key = "gamma" + std::to_string(k);
    std::vector<int32_t> ids(5, k);
    ASSERT_TRUE(cache.insert(c, key, zcode::tok::hash_bytes(key) | 1, ids.data(), ids.size()));
  }
  const int32_t* ids = nullptr;
  size_t n = 0;
  ASSERT_TRUE(cache.find("alpha", zcode::tok::hash_bytes("alpha") | 1, &ids, &n));
  EXPECT_EQ(std::vector<int32_t>(ids, ids + n), v);
  for (int k = 0; k < 10; ++k) {
    const std::string key = "beta" + std::to_string(k);
    ASSERT_TRUE(cache.find(key, zcode::tok::hash_bytes(key) | 1, &ids, &n)) << key;
    EXPECT_EQ(std::vector<int32_t>(ids, ids + n), v) << key;
  }
  for (int k = 0; k < 200; ++k) {
    const std::string key = "gamma" + std::to_string(k);
    ASSERT_TRUE(cache.find(key, zcode::tok::hash_bytes(key) | 1, &ids, &n)) << key;
    EXPECT_EQ(std::vector<int32_t>(ids, ids + n), std::vector<int32_t>(5, k)) << key;
  }
}

}  // namespace
