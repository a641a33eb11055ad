// safetensors reader/writer: files built by hand from the format's
// specification, and every kind of lying header refused with a clear message.
#include <zcode/sdk/safetensors.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

namespace st = zcode::sdk::safetensors;

std::vector<uint8_t> file_with(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> f;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f.push_back(static_cast<uint8_t>(n >> (8 * i)));
  f.insert(f.end(), header.begin(), header.end());
  f.insert(f.end(), data.begin(), data.end());
  return f;
}

std::vector<uint8_t> floats(std::initializer_list<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

std::string error_of(const std::vector<uint8_t>& f) {
  try {
    st::Reader r(f, "m.safetensors");
    return "";
  } catch (const zcode::sdk::Error& e) {
    return e.what();
  }
}

TEST(Safetensors, ReadsAHandBuiltFile) {
  // Two tensors: b (I32 [2]) at [0,8), a (F32 [1,2]) at [8,16).
  std::vector<uint8_t> data{7, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  auto fl = floats({1.5f, -2.0f});
  data.insert(data.end(), fl.begin(), fl.end());
  auto f = file_with(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[1,2],"data_offsets":[8,16]},)"
                     R"("b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
                     data);
  st::Reader r(f, "m.safetensors");
  ASSERT_EQ(r.tensors().size(), 2u);
  EXPECT_EQ(r.metadata().at("format"), "pt");
  const auto& a = r.at("a");
  EXPECT_EQ(a.dtype, "F32");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 2}));
  float av[2];
  std::memcpy(av, a.data, 8);
  EXPECT_EQ(av[0], 1.5f);
  EXPECT_EQ(av[1], -2.0f);
  const auto& b = r.at("b");
  int32_t bv[2];
  std::memcpy(bv, b.data, 8);
  EXPECT_EQ(bv[0], 7);
  EXPECT_EQ(bv[1], -1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 4, 0u);
  EXPECT_EQ(r.find("c"), nullptr);
}

TEST(Safetensors, WriterProducesTheSpecLayout) {
  st::Writer w;
  float v[3] = {1, 2, 3};
  int64_t shape[1] = {3};
  w.add("w", "F32", shape, v, sizeof v);
  auto bytes = w.serialize();
  // Header: compact JSON padded with spaces so that 8 + N is a multiple of 8.
  const std::string expect = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  ASSERT_EQ((8 + n) % 8, 0u);
  std::string header(reinterpret_cast<const char*>(bytes.data() + 8), n);
  EXPECT_EQ(header.substr(0, expect.size()), expect);
  EXPECT_EQ(header.find_first_not_of(' ', expect.size()), std::string::npos);
  ASSERT_EQ(bytes.size(), 8 + n + 12);
  float back[3];
  std::memcpy(back, bytes.data() + 8 + n, 12);
  EXPECT_EQ(back[2], 3.0f);
  st::Reader r(bytes, "x");
  EXPECT_EQ(r.at("w").nbytes, 12u);
}

TEST(Safetensors, WriterRefusesBadInput) {
  st::Writer w;
  float v[2] = {1, 2};
  int64_t s2[1] = {2}, s3[1] = {3};
  w.add("a", "F32", s2, v, 8);
  EXPECT_THROW(w.add("a", "F32", s2, v, 8), zcode::sdk::Error);  // duplicate
  EXPECT_THROW(w.add("b", "F32", s3, v, 8), zcode::sdk::Error);  // size mismatch
  EXPECT_THROW(w.add("c", "Q4", s2, v, 8), zcode::sdk::Error);   // unknown dtype
}

TEST(Safetensors, RefusesLyingHeaders) {
  auto d8 = floats({1, 2});
  struct Case {
    std::vector<uint8_t> file;
    const char* expect;
  };
  std::vector<Case> cases = {
      {{1, 2, 3}, "shorter than the 8-byte header size"},
      {file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", {}), "exceeds the data buffer"},
      {file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", d8), "exceeds the data buffer"},
      {file_with(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d8), "do not match"},
      {file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", d8), "begin 8 > end 0"},
      {file_with(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d8), "non-negative"},
      {file_with(R"({"a":{"dtype":"X9","shape":[2],"data_offsets":[0,8]}})", d8), "unknown dtype"},
      {file_with(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", d8), "do not match"},
      {file_with(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
           d8),
       "overlaps"},
      {file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", d8), "hole"},
      {file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", d8), "trailing"},
      {file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", d8), "not valid JSON"},
      {file_with(R"([1,2])", d8), "does not start with '{'"},
      {file_with(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
           d8),
       "duplicate"},
  };
  // A header size larger than the file.
  auto big = file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d8);
  big[0] = 0xff;
  big[1] = 0xff;
  cases.push_back({big, "exceeds the file"});
  auto huge = big;
  huge[7] = 0x7f;
  cases.push_back({huge, "exceeds the limit"});
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string e = error_of(cases[i].file);
    EXPECT_NE(e.find(cases[i].expect), std::string::npos) << "case " << i << ": got '" << e << "'";
    EXPECT_EQ(e.rfind("m.safetensors", 0), 0u) << "case " << i << " must name the file: " << e;
  }
}

TEST(Safetensors, DeeplyNestedHeaderIsRefusedNotACrash) {
  // {"a": then n '[': the root object and n lists. The 256th '[' would be the
  // 257th level; the message names its path (80 characters of it).
  std::string shown = "a";
  for (int i = 0; i < 255; ++i) shown += "[0]";
  for (size_t n : {size_t{256}, size_t{1000000}}) {
    std::string e = error_of(file_with("{\"a\":" + std::string(n, '[') + std::string(n, ']') + "}", {}));
    EXPECT_EQ(e, "m.safetensors: safetensors: header: nesting deeper than 256 levels at " + shown.substr(0, 80) + "...")
        << n;
  }
}

TEST(Safetensors, EveryTruncationIsRefused) {
  st::Writer w;
  float v[4] = {1, 2, 3, 4};
  int64_t s[2] = {2, 2};
  w.add("x", "F32", s, v, sizeof v);
  w.add("y", "F32", s, v, sizeof v);
  auto bytes = w.serialize();
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_NE(error_of(cut), "") << "truncated to " << len << " bytes was accepted";
  }
  EXPECT_EQ(error_of(bytes), "");
}

}  // namespace
