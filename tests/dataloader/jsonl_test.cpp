// Tests of the jsonl data loader through its C ABI (dlopen of the built
// plugin) with a byte-level test tokenizer. Expected windows, messages and
// counts are derived by hand or by tokenizing the documents directly here.
#include "harness.h"

#include <gtest/gtest.h>

#include <zlib.h>
#include <zstd.h>

#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>

namespace fs = std::filesystem;
using namespace zt;

namespace {

std::string g_self;  // this binary, for the helper processes

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/zc_data_test_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

std::string config(int seq) { return "{\"model\":{\"max_seq_len\":" + std::to_string(seq) + "}}"; }

/// Options JSON from key/value pairs (values are raw JSON).
std::string opts(std::initializer_list<std::pair<std::string, std::string>> kv) {
  std::string s = "{";
  for (auto& [k, v] : kv) s += (s.size() > 1 ? "," : "") + jstr(k) + ":" + v;
  return s + "}";
}

/// Every window of every batch, in order, until the split ends or `max_batches`.
std::vector<std::vector<int32_t>> windows(Loader& l, size_t max_batches = 100000) {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < max_batches; ++i) {
    auto b = l.next();
    if (!b) break;
    for (int64_t r = 0; r < b->rows; ++r) {
      auto w = b->window(r);
      if (!w.empty()) out.push_back(w);
    }
  }
  return out;
}
std::vector<int32_t> concat(const std::vector<std::vector<int32_t>>& ws) {
  std::vector<int32_t> v;
  for (auto& w : ws) v.insert(v.end(), w.begin(), w.end());
  return v;
}
/// The error message of creating a loader (fails the test when it succeeds).
std::string create_error(FakeHost& host, const std::string& o, const std::string& cfg,
                         const std::string& split = "train") {
  Plugin p(host);
  try {
    Loader l(p, host, o, cfg, split);
  } catch (const zt::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "create succeeded";
  return "";
}

std::string gzip(const std::string& s) {
  std::string out(compressBound(s.size()) + 64, '\0');
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // gzip header
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  z.avail_in = static_cast<uInt>(s.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}
std::string zstd(const std::string& s) {
  std::string out(ZSTD_compressBound(s.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), s.data(), s.size(), 3));
  return out;
}

std::vector<std::string> random_docs(size_t n, uint32_t seed, size_t max_len = 40) {
  std::mt19937 rng(seed);
  std::vector<std::string> docs;
  for (size_t i = 0; i < n; ++i) {
    std::string d;
    size_t len = 1 + rng() % max_len;
    for (size_t k = 0; k < len; ++k) d += static_cast<char>('a' + rng() % 26);
    docs.push_back(d);
  }
  return docs;
}

}  // namespace

// ------------------------------------------------------------------ packing

TEST(JsonlPacking, WindowsEosAndDocIds) {
  TempDir t;
  write_file(t / "a.jsonl", jsonl_of({"ab", "cde"}));
  FakeHost host;
  Plugin p(host);
  // Stream: a b <eos> c d e <eos> = 101 102 2 103 104 105 2 (id = byte + 4).
  // max_seq_len 6: one window of 7 tokens.
  Loader l(p, host,
           opts({{"train_path", jstr(t / "a.jsonl")},
                 {"cache_dir", jstr(t / "c")},
                 {"num_workers", "0"},
                 {"batch_size", "2"},
                 {"cross_document_attention", "false"},
                 {"shuffle", "false"}}),
           config(6));
  auto b = l.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->input, (std::vector<int32_t>{101, 102, 2, 103, 104, 105, /*pad row*/ 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b->target, (std::vector<int32_t>{102, 2, 103, 104, 105, 2, -1, -1, -1, -1, -1, -1}));
  ASSERT_TRUE(b->has_doc);
  EXPECT_EQ(b->doc, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b->tokens, 6);
  EXPECT_EQ(b->bytes, 4);  // b, c, d, e; <eos> counts no bytes
  EXPECT_EQ(b->chars, 4);
  EXPECT_EQ(b->epoch, 0u);
  auto b2 = l.next();  // train cycles: epoch 1 starts with the same window
  ASSERT_TRUE(b2);
  EXPECT_EQ(b2->epoch, 1u);
  EXPECT_EQ(b2->input, b->input);
}

// data.mask_document_boundary: the target of each <eos> input becomes -1 and
// leaves the target-token count (the loss denominator), bytes and chars.
TEST(JsonlPacking, MaskDocumentBoundaryIgnoresTheTargetAfterEachEos) {
  for (const char* streaming : {"false", "true"}) {
    TempDir t;
    write_file(t / "a.jsonl", jsonl_of({"ab", "cde", "f"}));
    FakeHost host;
    Plugin p(host);
    // Stream: a b <eos> c d e <eos> f <eos> = 101 102 2 103 104 105 2 106 2.
    // max_seq_len 8: one window of all 9 tokens; <eos> inputs at 2 and 6.
    auto load = [&](const char* mask) {
      Loader l(p, host,
               opts({{"train_path", jstr(t / "a.jsonl")},
                     {"cache_dir", jstr(t / "c")},
                     {"num_workers", "0"},
                     {"batch_size", "1"},
                     {"shuffle", "false"},
                     {"streaming", streaming},
                     {"mask_document_boundary", mask}}),
               config(8));
      auto b = l.next();
      EXPECT_TRUE(b) << streaming;
      return b ? *b : Batch{};
    };
    const Batch off = load("false"), on = load("true");
    EXPECT_EQ(off.input, (std::vector<int32_t>{101, 102, 2, 103, 104, 105, 2, 106})) << streaming;
    EXPECT_EQ(off.target, (std::vector<int32_t>{102, 2, 103, 104, 105, 2, 106, 2})) << streaming;
    EXPECT_EQ(on.input, off.input) << streaming;
    EXPECT_EQ(on.target, (std::vector<int32_t>{102, 2, -1, 104, 105, 2, -1, 2})) << streaming;
    EXPECT_EQ(off.tokens, 8) << streaming;
    EXPECT_EQ(on.tokens, 6) << streaming;  // two <eos> inputs, two targets fewer
    EXPECT_EQ(off.bytes, 5) << streaming;  // b c d e f
    EXPECT_EQ(on.bytes, 3) << streaming;   // c and f were the masked targets
    EXPECT_EQ(on.chars, 3) << streaming;
  }
}

TEST(JsonlPacking, ShortTailIsPaddedWithMinusOneTargets) {
  TempDir t;
  write_file(t / "a.jsonl", jsonl_of({"ab", "cde"}));
  FakeHost host;
  Plugin p(host);
  // max_seq_len 3: windows [101 102 2 103] and the tail [104 105 2].
  Loader l(p, host,
           opts({{"train_path", jstr(t / "a.jsonl")},
                 {"val_path", jstr(t / "a.jsonl")},
                 {"cache_dir", jstr(t / "c")},
                 {"num_workers", "0"},
                 {"batch_size", "1"},
                 {"cross_document_attention", "false"}}),
           config(3), "val");
  auto b1 = l.next();
  auto b2 = l.next();
  ASSERT_TRUE(b1 && b2);
  EXPECT_EQ(b1->input, (std::vector<int32_t>{101, 102, 2}));
  EXPECT_EQ(b1->target, (std::vector<int32_t>{102, 2, 103}));
  EXPECT_EQ(b1->doc, (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(b2->input, (std::vector<int32_t>{104, 105, 0}));
  EXPECT_EQ(b2->target, (std::vector<int32_t>{105, 2, -1}));
  EXPECT_EQ(b2->doc, (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(b2->tokens, 2);
  EXPECT_FALSE(l.next());  // val is finite
  EXPECT_FALSE(l.next());
  l.reset();
  auto again = l.next();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->input, b1->input);
}

TEST(JsonlPacking, BytesAndCharsOfMultibyteText) {
  TempDir t;
  // "aé": é is 2 UTF-8 bytes (C3 A9), 1 code point. Targets: C3, A9, <eos>.
  write_file(t / "a.jsonl", "{\"text\":\"a\xC3\xA9\"}\n");
  FakeHost host;
  Plugin p(host);
  Loader l(p, host,
           opts({{"train_path", jstr(t / "a.jsonl")},
                 {"cache_dir", jstr(t / "c")},
                 {"num_workers", "0"},
                 {"batch_size", "1"}}),
           config(8));
  auto b = l.next();
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->has_doc);  // cross_document_attention defaults to true
  EXPECT_EQ(b->tokens, 3);
  EXPECT_EQ(b->bytes, 2);
  EXPECT_EQ(b->chars, 1);
}

// ------------------------------------------------------------------ jsonl format

TEST(JsonlFormat, BomCrlfBlankLinesNoFinalNewline) {
  TempDir t;
  write_file(t / "a.jsonl", "\xEF\xBB\xBF{\"text\":\"a\"}\r\n\r\n   \n{\"text\":\"b\"}\r\n\n{\"text\":\"c\"}");
  FakeHost host;
  Plugin p(host);
  Loader l(p, host,
           opts({{"train_path", jstr(t / "x")},
                 {"val_path", jstr(t / "a.jsonl")},
                 {"cache_dir", jstr(t / "c")},
                 {"num_workers", "0"},
                 {"batch_size", "1"}}),
           config(64), "val");
  EXPECT_EQ(concat(windows(l)), stream_of({"a", "b", "c"}));
}

TEST(JsonlFormat, MultiMegabyteRecordAndDottedField) {
  TempDir t;
  std::string big(5 << 20, 'x');
  big[12345] = 'y';
  write_file(t / "a.jsonl", "{\"id\":1,\"meta\":{\"text\":\"no\",\"body\":" + jstr(big) +
                                "},\"body\":\"top\"}\n{\"meta\":{\"body\":\"hi\\n\\u00e9\"}}\n");
  FakeHost host;
  Plugin p(host);
  Loader l(p, host,
           opts({{"train_path", jstr(t / "x")},
                 {"val_path", jstr(t / "a.jsonl")},
                 {"cache_dir", jstr(t / "c")},
                 {"num_workers", "0"},
                 {"batch_size", "4"},
                 {"text_field", "\"meta.body\""}}),
           config(1000), "val");
  EXPECT_EQ(concat(windows(l)), stream_of({big, "hi\n\xC3\xA9"}));
}

struct BadCase {
  const char* line;
  const char* expect;  // ":line:col: reason" after the path
};

TEST(JsonlFormat, BadRecordsInErrorModeGiveFileLineColumn) {
  // Columns are 1-based bytes within the line, counted by hand.
  const BadCase cases[] = {
      {"{\"text\": \"a\"", ":2:13: malformed JSON (Missing a comma or '}' after an object member.)"},
      {"[1,2]", ":2:1: expected a JSON object, found an array"},
      {"{\"body\":\"x\"}", ":2:1: missing field \"text\""},
      {"{\"id\": 1, \"text\": 42}", ":2:19: field \"text\" is a number, expected a string"},
      {"{\"text\": \"a\xFF\"}", ":2:12: invalid UTF-8 (byte 0xFF)"},
      {"{\"text\": \"a\xC0\xAF\"}", ":2:12: invalid UTF-8 (byte 0xC0)"},  // overlong '/'
      {"{\"text\": \"a\"} x", ":2:15: malformed JSON (The document root must not be followed by other values.)"},
  };
  for (const auto& c : cases) {
    TempDir t;
    write_file(t / "a.jsonl", std::string("{\"text\":\"ok\"}\n") + c.line + "\n");
    FakeHost host;
    std::string err =
        create_error(host, opts({{"train_path", jstr(t / "a.jsonl")}, {"cache_dir", jstr(t / "c")}}), config(8));
    EXPECT_EQ(err, t / "a.jsonl" + c.expect) << c.line;
  }
}

TEST(JsonlFormat, DeeplyNestedRecordIsABadRecordNotACrash) {
  // {"text":"a","meta": then n '[': the root object and n lists. 256 levels
  // are read (the text field is found); the 257th container is the 256th
  // '[', at byte 19 + 255 of the line, and is refused.
  auto record = [](size_t n) { return "{\"text\":\"a\",\"meta\":" + std::string(n, '[') + std::string(n, ']') + "}"; };
  std::string shown = "meta";  // and the [0] of its 255 lists; the message shows 80 characters
  for (int i = 0; i < 255; ++i) shown += "[0]";
  shown = shown.substr(0, 80);
  {
    TempDir t;
    write_file(t / "a.jsonl", record(255) + "\n" + "{\"text\":\"cd\"}\n");
    FakeHost host;
    Plugin p(host);
    Loader l(p, host,
             opts({{"train_path", jstr(t / "x")},
                   {"val_path", jstr(t / "a.jsonl")},
                   {"cache_dir", jstr(t / "c")},
                   {"num_workers", "0"},
                   {"batch_size", "1"}}),
             config(16), "val");
    EXPECT_EQ(concat(windows(l)), stream_of({"a", "cd"}));
  }
  for (size_t n : {size_t{256}, size_t{1000000}}) {
    TempDir t;
    write_file(t / "a.jsonl", std::string("{\"text\":\"ok\"}\n") + record(n) + "\n");
    FakeHost host;
    std::string err =
        create_error(host, opts({{"train_path", jstr(t / "a.jsonl")}, {"cache_dir", jstr(t / "c")}}), config(8));
    EXPECT_EQ(err, t / "a.jsonl" + ":2:" + std::to_string(19 + 255 + 1) + ": nesting deeper than 256 levels at " +
                       shown + "...")
        << n;
  }
}

TEST(JsonlFormat, BadRecordsInSkipModeAreCountedAndFirstFiveLogged) {
  TempDir t;
  std::string s = "{\"text\":\"ab\"}\n";
  s += "{\"text\": \"a\"\n[1]\n{\"x\":1}\n{\"text\":5}\n{\"text\":\"\xFF\"}\n{bad\n{\"text\":null}\n";
  s += "{\"text\":\"cd\"}\n";
  write_file(t / "a.jsonl", s);
  for (const char* streaming : {"false", "true"}) {
    FakeHost host;
    Plugin p(host);
    Loader l(p, host,
             opts({{"train_path", jstr(t / "x")},
                   {"val_path", jstr(t / "a.jsonl")},
                   {"cache_dir", jstr(t / "c")},
                   {"num_workers", "0"},
                   {"batch_size", "1"},
                   {"on_bad_record", "\"skip\""},
                   {"streaming", streaming}}),
             config(16), "val");
    EXPECT_EQ(concat(windows(l)), stream_of({"ab", "cd"})) << streaming;
    EXPECT_EQ(l.stats()["bad_records"], 7) << streaming;
    auto warns = host.messages(ZC_LOG_WARN);
    ASSERT_EQ(warns.size(), 6u) << streaming;  // five located, then one summary line
    EXPECT_EQ(warns[0], "skipping bad record " + (t / "a.jsonl") +
                            ":2:13: malformed JSON (Missing a comma or '}' after an object member.)");
    EXPECT_EQ(warns[4], "skipping bad record " + (t / "a.jsonl") + ":6:10: invalid UTF-8 (byte 0xFF)");
    EXPECT_NE(warns[5].find("more bad records"), std::string::npos);
    std::string prov = l.provenance();
    EXPECT_NE(prov.find("\"records\":2,\"skipped\":7"), std::string::npos) << prov;
  }
}

// ------------------------------------------------------------------ shards

TEST(JsonlShards, FolderGlobPatternGzipZstd) {
  TempDir t;
  std::vector<std::vector<std::string>> parts = {random_docs(5, 1), random_docs(7, 2), random_docs(3, 3)};
  fs::create_directories(t / "dir");
  for (int i = 0; i < 3; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "part-%05d.jsonl", i);
    write_file(t / "dir/" + name, jsonl_of(parts[i]));
  }
  write_file(t / "dir/part-00004.jsonl", jsonl_of({"after the gap"}));  // not reached by the pattern
  write_file(t / "dir/notes.txt", "not a shard");
  std::vector<std::string> first3;
  for (int i = 0; i < 3; ++i) first3.insert(first3.end(), parts[i].begin(), parts[i].end());
  // The folder holds part-00004 too; the pattern stops at the first gap (3).
  std::vector<std::string> all4 = first3;
  all4.push_back("after the gap");
  // Compressed copies: gzip (two concatenated members) and zstd.
  fs::create_directories(t / "z");
  std::string whole = jsonl_of(parts[0]);
  write_file(t / "z/a.jsonl.gz", gzip(whole.substr(0, 10)) + gzip(whole.substr(10)));
  write_file(t / "z/b.jsonl.zst", zstd(jsonl_of(parts[1])));
  std::vector<std::string> z2 = parts[0];
  z2.insert(z2.end(), parts[1].begin(), parts[1].end());

  struct Case {
    std::string path, pattern;
    std::vector<std::string> docs;
  } cases[] = {{t / "dir", "", all4},
               {t / "dir/part-0000[0-2].jsonl", "", first3},
               {t / "dir", "part-{:05d}.jsonl", first3},
               {t / "z", "", z2},
               {t / "z/a.jsonl.gz", "", parts[0]}};
  for (const auto& c : cases) {
    for (const char* streaming : {"false", "true"}) {
      FakeHost host;
      Plugin p(host);
      std::string o = opts({{"train_path", jstr(c.path)},
                            {"cache_dir", jstr(t / "c")},
                            {"num_workers", "0"},
                            {"batch_size", "3"},
                            {"shuffle", "false"},
                            {"streaming", streaming}});
      if (!c.pattern.empty()) o.insert(o.size() - 1, ",\"train_shard_pattern\":" + jstr(c.pattern));
      Loader l(p, host, o, config(16));
      auto expect = stream_of(c.docs);
      std::vector<int32_t> got;
      while (got.size() < expect.size()) {
        auto b = l.next();
        ASSERT_TRUE(b);
        ASSERT_EQ(b->epoch, 0u);
        for (int64_t r = 0; r < b->rows; ++r) {
          auto w = b->window(r);
          got.insert(got.end(), w.begin(), w.end());
        }
      }
      EXPECT_EQ(got, expect) << c.path << " " << c.pattern << " streaming " << streaming;
    }
  }
}

TEST(JsonlShards, ClearErrors) {
  TempDir t;
  FakeHost host;
  EXPECT_EQ(
      create_error(host, opts({{"train_path", "\"s3://bucket/train.jsonl\""}}), config(8)),
      "data.train_path: 's3://bucket/train.jsonl' uses the 's3://' scheme, which needs a storage plugin; the jsonl "
      "loader reads local files only (download the data or mount it first)");
  EXPECT_EQ(create_error(host, opts({{"train_path", jstr(t / "x.jsonl")}}), config(8)),
            "data.train_path: file '" + (t / "x.jsonl") + "' not found");
  EXPECT_EQ(create_error(host, opts({{"train_path", jstr(t / "*.jsonl")}}), config(8)),
            "data.train_path: no file matches '" + (t / "*.jsonl") + "'");
  EXPECT_EQ(
      create_error(host, opts({{"train_path", jstr(t.path)}, {"train_shard_pattern", "\"part.jsonl\""}}), config(8)),
      "data.train_path (train_shard_pattern): pattern 'part.jsonl' has no {} field (expected one integer field "
      "such as {:05d}, {:d} or {})");
  EXPECT_EQ(
      create_error(host, opts({{"train_path", jstr(t.path)}, {"train_shard_pattern", "\"p{:03d}.jsonl\""}}), config(8)),
      "data.train_path: no shard '" + (t / "p000.jsonl") + "' for pattern 'p{:03d}.jsonl'");
  write_file(t / "a.jsonl", jsonl_of({"x"}));
  EXPECT_EQ(create_error(host, opts({{"train_path", jstr(t / "a.jsonl")}, {"batch_sise", "3"}}), config(8)),
            "data.batch_sise: unknown option for the jsonl loader");
  EXPECT_EQ(create_error(host, opts({{"train_path", jstr(t / "a.jsonl")}, {"on_bad_record", "\"ignore\""}}), config(8)),
            "data.on_bad_record: 'ignore', expected error or skip");
  EXPECT_EQ(create_error(host, opts({{"train_path", jstr(t / "a.jsonl")}}), "{}"),
            "model.max_seq_len: missing or < 1 (the jsonl loader cuts windows of max_seq_len + 1 tokens)");
  EXPECT_EQ(create_error(host, opts({{"train_path", jstr(t / "a.jsonl")}}), config(8), "val"),
            "data.val_path: not set and data.val_fraction is 0, so there is no validation split");
}

// ------------------------------------------------------------------ epochs and splits

class JsonlModes : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(JsonlModes, EveryTokenOncePerEpochAndNewOrderEachEpoch) {
  auto [streaming, workers] = GetParam();
  TempDir t;
  auto docs = random_docs(300, 7);
  write_file(t / "a.jsonl", jsonl_of(docs));
  FakeHost host;
  Plugin p(host);
  Loader l(p, host,
           opts({{"train_path", jstr(t / "a.jsonl")},
                 {"cache_dir", jstr(t / "c")},
                 {"num_workers", std::to_string(workers)},
                 {"batch_size", "4"},
                 {"streaming", streaming ? "true" : "false"},
                 {"shuffle_block", "8"}}),
           config(15));
  // Independent count: the multiset of the stream's ids.
  std::map<int32_t, int64_t> expect;
  for (int32_t id : stream_of(docs)) expect[id]++;
  std::map<uint64_t, std::map<int32_t, int64_t>> seen;
  std::map<uint64_t, std::vector<std::vector<int32_t>>> order;
  for (;;) {
    auto b = l.next();
    ASSERT_TRUE(b);
    if (b->epoch == 3) break;
    for (int64_t r = 0; r < b->rows; ++r) {
      auto w = b->window(r);
      for (int32_t id : w) seen[b->epoch][id]++;
      if (!w.empty()) order[b->epoch].push_back(w);
    }
  }
  for (uint64_t e = 0; e < 3; ++e) EXPECT_EQ(seen[e], expect) << "epoch " << e;
  EXPECT_NE(order[0], order[1]);
  EXPECT_NE(order[1], order[2]);
  EXPECT_EQ(g_tok_overlaps.load(), 0);
  auto st = l.stats();
  EXPECT_TRUE(st.count("data_wait_ms"));
  EXPECT_GE(st["data_wait_ms"], 0.0);
}

INSTANTIATE_TEST_SUITE_P(All, JsonlModes, ::testing::Combine(::testing::Values(false, true), ::testing::Values(0, 2)),
                         [](const auto& i) {
                           return std::string(std::get<0>(i.param) ? "streaming" : "memmap") + "_workers" +
                                  std::to_string(std::get<1>(i.param));
                         });

TEST(JsonlSplits, ValFractionIsStableAndDisjoint) {
  TempDir t;
  auto docs = random_docs(400, 11);
  write_file(t / "a.jsonl", jsonl_of(docs));
  auto split_docs = [&](uint64_t seed, const char* split, const char* streaming) {
    FakeHost host(seed);
    Plugin p(host);
    // One window per document (max_seq_len >= 40 + 1): val order is sequential.
    Loader l(p, host,
             opts({{"train_path", jstr(t / "a.jsonl")},
                   {"cache_dir", jstr(t / "c")},
                   {"num_workers", "0"},
                   {"batch_size", "8"},
                   {"val_fraction", "0.25"},
                   {"streaming", streaming},
                   {"shuffle", "false"}}),
             config(1000), split);
    std::vector<int32_t> s;
    if (std::string(split) == "val") return concat(windows(l));
    for (;;) {
      auto b = l.next();
      if (b->epoch > 0) break;
      for (int64_t r = 0; r < b->rows; ++r) {
        auto w = b->window(r);
        s.insert(s.end(), w.begin(), w.end());
      }
    }
    return s;
  };
  auto val = split_docs(1, "val", "false");
  EXPECT_EQ(val, split_docs(99, "val", "false"));  // another seed, same split
  EXPECT_EQ(val, split_docs(5, "val", "true"));    // streaming agrees
  auto train = split_docs(1, "train", "false");
  // Rebuild each split's documents from the streams: every document is in
  // exactly one of them, in file order.
  auto docs_of = [](const std::vector<int32_t>& s) {
    std::vector<std::string> d(1);
    for (int32_t id : s) {
      if (id == 2) d.emplace_back();
      else d.back() += static_cast<char>(id - 4);
    }
    d.pop_back();
    return d;
  };
  auto vd = docs_of(val), td = docs_of(train);
  EXPECT_GT(vd.size(), 60u);  // ~100 of 400 expected at 0.25
  EXPECT_LT(vd.size(), 140u);
  std::vector<std::string> merged;
  size_t vi = 0, ti = 0;
  for (const auto& d : docs) {
    if (vi < vd.size() && vd[vi] == d) merged.push_back(vd[vi++]);
    else if (ti < td.size() && td[ti] == d) merged.push_back(td[ti++]);
  }
  EXPECT_EQ(merged, docs);
  EXPECT_EQ(vi + ti, docs.size());
}

// ------------------------------------------------------------------ token cache

TEST(JsonlCache, ReusedThenRebuiltWhenCorruptOrTruncated) {
  TempDir t;
  auto docs = random_docs(50, 3);
  write_file(t / "a.jsonl", jsonl_of(docs));
  std::string o = opts(
      {{"train_path", jstr(t / "a.jsonl")}, {"cache_dir", jstr(t / "c")}, {"num_workers", "0"}, {"batch_size", "2"}});
  auto first_batches = [&](FakeHost& host) {
    Plugin p(host);
    Loader l(p, host, o, config(20));
    std::vector<Batch> v;
    for (int i = 0; i < 5; ++i) v.push_back(*l.next());
    return v;
  };
  FakeHost h1;
  auto ref = first_batches(h1);
  EXPECT_TRUE(h1.logged("tokenizing 1 shard(s) into token cache"));
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(t / "c")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  std::string cache = files[0].string();
  size_t n_tokens = stream_of(docs).size();
  FakeHost h2;
  EXPECT_EQ(first_batches(h2), ref);
  EXPECT_TRUE(h2.logged("reusing token cache " + cache + " (" + std::to_string(n_tokens) + " tokens, 50 docs)"));
  // Corrupt one payload byte: the CRC catches it.
  std::string bytes = read_file(cache);
  bytes[200] ^= 0x5a;
  write_file(cache, bytes);
  FakeHost h3;
  EXPECT_EQ(first_batches(h3), ref);
  EXPECT_TRUE(h3.logged("token cache " + cache + " is invalid (payload checksum mismatch (corrupt)); rebuilding it"));
  // Truncate it.
  fs::resize_file(cache, fs::file_size(cache) - 7);
  FakeHost h4;
  EXPECT_EQ(first_batches(h4), ref);
  EXPECT_TRUE(h4.logged("is invalid (truncated"));
  // Editing the source changes the key: a new cache, not a stale one.
  write_file(t / "a.jsonl", jsonl_of({"changed"}));
  FakeHost h5;
  Plugin p(h5);
  Loader l(p, h5, o, config(20));
  EXPECT_EQ(l.next()->window(0), stream_of({"changed"}));
}

// A vocabulary with unassigned ids (a tokenizer trained with marker version
// 1: learned pieces, then a gap up to the guide's special ids) loads and packs;
// the gap ids count 0 bytes and the loader says how many there are. The
// tokenizer declares them (info_json "unassigned_ids"), so none is decoded
// (a decode of one would fail the load here).
TEST(JsonlPacking, VocabularyWithUnassignedIdsLoads) {
  TempDir t;
  write_file(t / "a.jsonl", jsonl_of({"ab", "cde"}));
  g_tok_options.vocab = 250001;
  g_tok_options.gap_from = 260;
  g_tok_options.declare_gaps = true;
  FakeHost host;
  Plugin p(host);
  std::optional<Batch> b;
  {
    Loader l(p, host,
             opts({{"train_path", jstr(t / "a.jsonl")},
                   {"cache_dir", jstr(t / "c")},
                   {"num_workers", "0"},
                   {"batch_size", "1"},
                   {"shuffle", "false"}}),
             config(6));
    b = l.next();
  }
  g_tok_options = TokOptions{};
  ASSERT_TRUE(b);
  EXPECT_EQ(b->input, (std::vector<int32_t>{101, 102, 2, 103, 104, 105}));
  EXPECT_EQ(b->tokens, 6);
  EXPECT_EQ(b->bytes, 4);
  EXPECT_TRUE(host.logged("249741 of the tokenizer's 250001 ids are unassigned"));
}

// A tokenizer that does not declare its gaps: they are found by the failing
// decode (ZC_ERR_INVALID_ARGUMENT) of each id alone.
TEST(JsonlPacking, UndeclaredUnassignedIdsAreFoundByDecode) {
  TempDir t;
  write_file(t / "a.jsonl", jsonl_of({"ab", "cde"}));
  g_tok_options.vocab = 300;
  g_tok_options.gap_from = 260;
  FakeHost host;
  Plugin p(host);
  std::optional<Batch> b;
  {
    Loader l(p, host,
             opts({{"train_path", jstr(t / "a.jsonl")},
                   {"cache_dir", jstr(t / "c")},
                   {"num_workers", "0"},
                   {"batch_size", "1"},
                   {"shuffle", "false"}}),
             config(6));
    b = l.next();
  }
  g_tok_options = TokOptions{};
  ASSERT_TRUE(b);
  EXPECT_EQ(b->tokens, 6);
  EXPECT_EQ(b->bytes, 4);
  EXPECT_TRUE(host.logged("40 of the tokenizer's 300 ids are unassigned"));
}

TEST(JsonlCache, LargeVocabUsesInt32Storage) {
  TempDir t;
  write_file(t / "a.jsonl", jsonl_of({"hello", "world"}));
  g_tok_options.offset = 70000;
  g_tok_options.vocab = 70256;
  FakeHost host;
  Plugin p(host);
  Loader l(p, host,
           opts({{"train_path", jstr(t / "x")},
                 {"val_path", jstr(t / "a.jsonl")},
                 {"cache_dir", jstr(t / "c")},
                 {"num_workers", "0"}}),
           config(64), "val");
  auto got = concat(windows(l));
  g_tok_options = TokOptions{};
  EXPECT_EQ(got, stream_of({"hello", "world"}, 70000));
  for (auto& e : fs::directory_iterator(t / "c"))  // header (128) + 12 int32 tokens + index + meta
    EXPECT_GT(fs::file_size(e.path()), 128u + 12 * 4);
}

// ------------------------------------------------------------------ workers

TEST(JsonlWorkers, TokenizerErrorReachesNextBatch) {
  TempDir t;
  auto docs = random_docs(200, 5);
  docs[150] = "xxBOOMxx";
  write_file(t / "a.jsonl", jsonl_of(docs));
  g_tok_options.fail_on = "BOOM";
  for (int workers : {0, 2}) {
    FakeHost host;
    Plugin p(host);
    Loader l(p, host,
             opts({{"train_path", jstr(t / "a.jsonl")},
                   {"num_workers", std::to_string(workers)},
                   {"batch_size", "2"},
                   {"streaming", "true"},
                   {"shuffle_block", "4"}}),
             config(15));
    std::string err;
    for (int i = 0; i < 1000 && err.empty(); ++i) {
      try {
        ASSERT_TRUE(l.next());
      } catch (const zt::Error& e) {
        err = e.what();
      }
    }
    EXPECT_EQ(err,
              std::string("data (train)") + (workers ? " worker" : "") + ": tokenizer: test tokenizer refuses 'BOOM'");
    EXPECT_THROW(l.next(), zt::Error);  // sticky, never a silent end
  }
  // Memmap mode tokenizes at create: the error is create's.
  FakeHost host;
  std::string err =
      create_error(host, opts({{"train_path", jstr(t / "a.jsonl")}, {"cache_dir", jstr(t / "c")}}), config(15));
  g_tok_options = TokOptions{};
  EXPECT_EQ(err, "test tokenizer refuses 'BOOM'");
}

TEST(JsonlWorkers, ShardDisappearingMidRunIsAClearError) {
  TempDir t;
  for (int i = 0; i < 3; ++i) write_file(t / ("s" + std::to_string(i) + ".jsonl"), jsonl_of(random_docs(50, 20 + i)));
  for (int workers : {0, 2}) {
    FakeHost host;
    Plugin p(host);
    Loader l(p, host,
             opts({{"train_path", jstr(t.path)},
                   {"num_workers", std::to_string(workers)},
                   {"batch_size", "1"},
                   {"streaming", "true"},
                   {"shuffle", "false"},
                   {"prefetch_factor", "1"}}),
             config(15));
    ASSERT_TRUE(l.next());
    fs::rename(t / "s2.jsonl", t / "gone");
    std::string err;
    for (int i = 0; i < 10000 && err.empty(); ++i) {
      try {
        l.next();
      } catch (const zt::Error& e) {
        err = e.what();
      }
    }
    fs::rename(t / "gone", t / "s2.jsonl");
    EXPECT_EQ(err, std::string("data (train)") + (workers ? " worker" : "") + ": data.train_path: shard '" +
                       (t / "s2.jsonl") + "' disappeared after the run started (it was listed at start-up)");
  }
}

TEST(JsonlWorkers, StopFlagEndsWaitingAndDestroyJoins) {
  TempDir t;
  write_file(t / "a.jsonl", jsonl_of(random_docs(3000, 9)));
  FakeHost host;
  Plugin p(host);
  {
    Loader l(
        p, host,
        opts({{"train_path", jstr(t / "a.jsonl")}, {"num_workers", "2"}, {"batch_size", "2"}, {"streaming", "true"}}),
        config(15));
    ASSERT_TRUE(l.next());
    host.stop = 1;
    zc_status_code code = ZC_OK;
    for (int i = 0; i < 100000 && code == ZC_OK; ++i) {
      try {
        l.next();
      } catch (const zt::Error& e) {
        code = e.code;
      }
    }
    EXPECT_EQ(code, ZC_ERR_CANCELLED);
  }  // destroy joins the workers (a hang would time the test out)
}

// ------------------------------------------------------------------ resume in a new process

namespace {

std::string serialize(const std::vector<Batch>& bs) {
  std::string s;
  for (const auto& b : bs) {
    auto put = [&](const std::vector<int32_t>& v) { s.append(reinterpret_cast<const char*>(v.data()), v.size() * 4); };
    put(b.input);
    put(b.target);
    put(b.doc);
    s += std::to_string(b.tokens) + "," + std::to_string(b.bytes) + "," + std::to_string(b.chars) + "," +
         std::to_string(b.epoch) + ";";
  }
  return s;
}

/// Runs this binary as a helper with extra environment; returns its exit code.
int run_helper(const std::vector<std::string>& env) {
  pid_t pid = fork();
  if (pid == 0) {
    for (const auto& e : env) putenv(strdup(e.c_str()));
    execl(g_self.c_str(), g_self.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/// Helper process body: ZT_HELPER = save | resume | build.
int helper_main(const std::string& mode) {
  FakeHost host;
  Plugin p(host);
  Loader l(p, host, std::getenv("ZT_OPTS"), std::getenv("ZT_CONFIG"));
  int k = std::atoi(std::getenv("ZT_K"));
  if (mode == "resume") l.load(State::parse(read_file(std::getenv("ZT_STATE"))));
  std::vector<Batch> bs;
  for (int i = 0; i < k; ++i) bs.push_back(*l.next());
  if (mode == "save") write_file(std::getenv("ZT_OUT"), l.save().serialize());
  else write_file(std::getenv("ZT_OUT"), serialize(bs));
  return 0;
}

}  // namespace

TEST_P(JsonlModes, ResumeInANewProcessIsExact) {
  auto [streaming, workers] = GetParam();
  TempDir t;
  write_file(t / "a.jsonl", jsonl_of(random_docs(40, 4, 30)));
  // ~640 tokens, windows of 16: ~40 windows, 3 per batch, shuffle blocks of
  // 5: 14 batches span epoch boundaries and block boundaries mid-batch.
  std::string o = opts({{"train_path", jstr(t / "a.jsonl")},
                        {"cache_dir", jstr(t / "c")},
                        {"num_workers", std::to_string(workers)},
                        {"batch_size", "3"},
                        {"streaming", streaming ? "true" : "false"},
                        {"shuffle_block", "5"},
                        {"cross_document_attention", "false"}});
  std::string cfg = config(15);
  const int total = 40, stop_at = 17;
  std::vector<Batch> ref;
  {
    FakeHost host;
    Plugin p(host);
    Loader l(p, host, o, cfg);
    for (int i = 0; i < total; ++i) ref.push_back(*l.next());
  }
  ASSERT_GE(ref.back().epoch, 2u);
  std::vector<std::string> env = {"ZT_OPTS=" + o, "ZT_CONFIG=" + cfg};
  auto e1 = env;
  e1.insert(e1.end(), {"ZT_HELPER=save", "ZT_K=" + std::to_string(stop_at), "ZT_OUT=" + (t / "state.bin")});
  ASSERT_EQ(run_helper(e1), 0);
  auto e2 = env;
  e2.insert(e2.end(), {"ZT_HELPER=resume", "ZT_K=" + std::to_string(total - stop_at), "ZT_STATE=" + (t / "state.bin"),
                       "ZT_OUT=" + (t / "rest.bin")});
  ASSERT_EQ(run_helper(e2), 0);
  std::vector<Batch> rest(ref.begin() + stop_at, ref.end());
  EXPECT_TRUE(read_file(t / "rest.bin") == serialize(rest));
  // And in-process, restoring into a loader that already ran elsewhere.
  FakeHost host;
  Plugin p(host);
  Loader a(p, host, o, cfg);
  for (int i = 0; i < 9; ++i) a.next();
  State st = a.save();
  Loader b(p, host, o, cfg);
  for (int i = 0; i < 3; ++i) b.next();
  b.load(st);
  for (int i = 9; i < total; ++i) ASSERT_EQ(*b.next(), ref[i]) << "batch " << i;
}

// set_data_shard (ABI 1.8, data parallelism): rank r of N gets batches
// r, N + r, 2N + r, ... of the unsharded stream, across epoch (and
// streaming block) boundaries; its saved position is the end of the group
// of N, so rank 0's state resumes the stream with any number of ranks (here
// 3 ranks -> 2 ranks -> 1 process), and a bad shard is refused.
TEST_P(JsonlModes, DataShardsAreTheStreamsRanksAndResumeOnAnyCount) {
  auto [streaming, workers] = GetParam();
  TempDir t;
  write_file(t / "a.jsonl", jsonl_of(random_docs(40, 4, 30)));
  std::string o = opts({{"train_path", jstr(t / "a.jsonl")},
                        {"cache_dir", jstr(t / "c")},
                        {"num_workers", std::to_string(workers)},
                        {"batch_size", "3"},
                        {"streaming", streaming ? "true" : "false"},
                        {"shuffle_block", "5"}});
  std::string cfg = config(15);
  FakeHost host;
  Plugin p(host);
  std::vector<Batch> ref;
  {
    Loader l(p, host, o, cfg);
    for (int i = 0; i < 36; ++i) ref.push_back(*l.next());
  }
  ASSERT_GE(ref.back().epoch, 2u);  // the groups cross epochs
  // 3 ranks, 4 groups each (12 batches of the stream).
  State after12;
  for (uint64_t r = 0; r < 3; ++r) {
    Loader l(p, host, o, cfg);
    l.shard(r, 3);
    for (int g = 0; g < 4; ++g) ASSERT_EQ(*l.next(), ref[size_t(3 * g) + r]) << "rank " << r << ", group " << g;
    if (r == 0) after12 = l.save();
  }
  // Resumed on 2 ranks from rank 0's state: batches 12 + 2g + r.
  State after20;
  for (uint64_t r = 0; r < 2; ++r) {
    Loader l(p, host, o, cfg);
    l.shard(r, 2);
    l.load(after12);
    for (int g = 0; g < 4; ++g) ASSERT_EQ(*l.next(), ref[size_t(12 + 2 * g) + r]) << "rank " << r << ", group " << g;
    if (r == 0) after20 = l.save();
  }
  // And by one process.
  Loader one(p, host, o, cfg);
  one.load(after20);
  for (int i = 20; i < 36; ++i) ASSERT_EQ(*one.next(), ref[size_t(i)]) << "batch " << i;
  Loader bad(p, host, o, cfg);
  try {
    bad.shard(2, 2);
    ADD_FAILURE() << "rank 2 of 2 accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("set_data_shard rank 2 of 2 (expected 0 <= rank < size)"), std::string::npos)
        << e.what();
  }
}

TEST(JsonlCache, TwoProcessesRacingBothEndValid) {
  TempDir t;
  auto docs = random_docs(20000, 8, 60);
  write_file(t / "a.jsonl", jsonl_of(docs));
  std::string o = opts({{"train_path", jstr(t / "a.jsonl")},
                        {"cache_dir", jstr(t / "c")},
                        {"num_workers", "0"},
                        {"batch_size", "2"},
                        {"shuffle", "false"}});
  std::vector<std::string> env = {"ZT_OPTS=" + o, "ZT_CONFIG=" + config(31), "ZT_HELPER=build", "ZT_K=3"};
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    auto e = env;
    e.push_back("ZT_OUT=" + (t / ("out" + std::to_string(i))));
    pid_t pid = fork();
    if (pid == 0) {
      for (const auto& x : e) putenv(strdup(x.c_str()));
      execl(g_self.c_str(), g_self.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(read_file(t / "out0"), read_file(t / "out1"));
  size_t files = 0;
  for (auto& e : fs::directory_iterator(t / "c")) {
    ++files;
    EXPECT_EQ(e.path().extension(), ".zctok") << e.path();  // no temporary left behind
  }
  EXPECT_EQ(files, 1u);
  FakeHost host;
  Plugin p(host);
  Loader l(p, host, o, config(31));
  EXPECT_TRUE(host.logged("reusing token cache"));
  std::vector<Batch> bs;
  for (int i = 0; i < 3; ++i) bs.push_back(*l.next());
  EXPECT_EQ(serialize(bs), read_file(t / "out0"));
  // Independent check of the first window: the stream's first 32 tokens.
  auto s = stream_of(docs);
  EXPECT_EQ(bs[0].window(0), std::vector<int32_t>(s.begin(), s.begin() + 32));
}

int main(int argc, char** argv) {
  g_self = fs::canonical("/proc/self/exe").string();
  if (const char* h = std::getenv("ZT_HELPER")) {
    try {
      return helper_main(h);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "helper: %s\n", e.what());
      return 1;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
