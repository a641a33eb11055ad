// zcode/sdk/buffers.h: the growers keep abi.h's promise (never throw, NULL on
// failure, the buffer left as it was) and append as the protocol says.
#include <zcode/sdk/buffers.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;  // ASan aborts on a huge allocation instead of throwing bad_alloc
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

TEST(Buffers, BytesAppendThroughReserve) {
  std::string s;
  zc_bytes b = zcode::sdk::bytes_into(s);
  char* p = b.reserve(&b, 3);
  ASSERT_NE(p, nullptr);
  std::memcpy(p, "abc", 3);
  b.size += 3;
  p = b.reserve(&b, 2);
  ASSERT_NE(p, nullptr);
  std::memcpy(p, "de", 2);
  b.size += 2;
  s.resize(b.size);
  EXPECT_EQ(s, "abcde");
  EXPECT_EQ(b.data, s.data());
}

TEST(Buffers, IdsAppendThroughReserve) {
  std::vector<int32_t> v;
  zc_ids ids = zcode::sdk::ids_into(v);
  for (int32_t i = 0; i < 1000; ++i) {
    int32_t* p = ids.reserve(&ids, 1);
    ASSERT_NE(p, nullptr);
    *p = i;
    ++ids.size;
  }
  v.resize(ids.size);
  ASSERT_EQ(v.size(), 1000u);
  EXPECT_EQ(v[999], 999);
}

TEST(Buffers, ImpossibleSizesGiveNullNotAnException) {
  std::string s = "keep";
  zc_bytes b = zcode::sdk::bytes_into(s);
  b.size = 0;
  ASSERT_NE(b.reserve(&b, 4), nullptr);
  b.size = 4;
  static_assert(noexcept(zcode::sdk::detail::grow<zc_bytes, std::string>(nullptr, 0)));
  EXPECT_EQ(b.reserve(&b, SIZE_MAX), nullptr);      // size + extra wraps
  EXPECT_EQ(b.reserve(&b, SIZE_MAX - 4), nullptr);  // beyond max_size: length_error inside
  EXPECT_EQ(s, "keep");                             // left as it was
  EXPECT_EQ(b.size, 4u);

  std::vector<int32_t> v{7};
  zc_ids ids = zcode::sdk::ids_into(v);
  ASSERT_NE(ids.reserve(&ids, 1), nullptr);
  ids.size = 1;
  EXPECT_EQ(ids.reserve(&ids, SIZE_MAX), nullptr);
  EXPECT_EQ(ids.reserve(&ids, SIZE_MAX / 2), nullptr);  // beyond max_size
  if (!kAsan) {
    // Below max_size but more than any address space (2^60 bytes): bad_alloc inside.
    EXPECT_EQ(ids.reserve(&ids, size_t{1} << 58), nullptr);
    EXPECT_EQ(b.reserve(&b, size_t{1} << 60), nullptr);
  }
  EXPECT_EQ(v, std::vector<int32_t>{7});
  EXPECT_EQ(ids.size, 1u);
}

}  // namespace
