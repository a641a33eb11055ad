// bpe plugin: special tokens, round trips over arbitrary bytes, malformed
// files, offline reference resolution. Expected values are derived by hand
// from the GPT-2 vocabulary (its ids are fixed by encoder.json) and from the
// special-token rules in plugins/tokenizer/README.md.
#include "plugin_harness.h"

#include <filesystem>
#include <random>

namespace fs = std::filesystem;

namespace {

const zc_tokenizer_table* bpe() {
  static const zc_tokenizer_table* t = zt::load_table("libzcode_bpe.so");
  return t;
}

std::string gpt2_opts(const std::string& extra = "") {
  return "{\"path\":" + zt::q(zt::assets_dir() + "/hf/gpt2") + extra + "}";
}

#define REQUIRE_GPT2() ZT_REQUIRE_ASSET(zt::assets_dir() + "/hf/gpt2/vocab.json")
#define REQUIRE_LLAMA2() ZT_REQUIRE_ASSET(zt::assets_dir() + "/hf/llama2/tokenizer.json")

TEST(BpeSpecials, EndOfTextInDataIsPlainTextByDefault) {
  REQUIRE_GPT2();
  zt::Tok tok(bpe(), gpt2_opts());
  // "<|endoftext|>" as text: "<|" (27, 91: '<' 27? no) -- take ids from the vocabulary, not from the code.
  int32_t eot = tok.token_to_id("<|endoftext|>");
  ASSERT_EQ(eot, 50256);  // GPT-2's encoder.json
  std::vector<int32_t> plain = tok.encode("a<|endoftext|>b");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(tok.decode(plain), "a<|endoftext|>b");
  std::vector<int32_t> allowed = tok.encode("a<|endoftext|>b", ZC_ENCODE_ALLOW_SPECIAL);
  // 'a' = 64 and 'b' = 65 in encoder.json (printable ASCII in byte order starting at '!' = 0).
  EXPECT_EQ(allowed, (std::vector<int32_t>{64, 50256, 65}));
}

TEST(BpeSpecials, AllowedSpecialOptionSelectsTokens) {
  REQUIRE_GPT2();
  zt::Tok tok(bpe(), gpt2_opts(",\"allowed_special\":[\"<|endoftext|>\"]"));
  EXPECT_EQ(tok.encode("<|endoftext|>"), (std::vector<int32_t>{50256}));
  zt::Tok all(bpe(), gpt2_opts(",\"allowed_special\":\"all\""));
  EXPECT_EQ(all.encode("<|endoftext|>"), (std::vector<int32_t>{50256}));
  std::string err = zt::create_error(bpe(), gpt2_opts(",\"allowed_special\":[\"<nope>\"]"));
  EXPECT_NE(err.find("allowed_special"), std::string::npos) << err;
  EXPECT_NE(err.find("<nope>"), std::string::npos) << err;
}

TEST(BpeSpecials, GlmSpecialsAppendedAfterPretrainedVocab) {
  REQUIRE_GPT2();
  zt::Tok tok(bpe(), gpt2_opts(), "{\"model\":{\"moe_experts\":4}}");
  // Rule: eos and bos map to <|endoftext|> (50256); missing ones are appended in guide order
  // after the 50257 GPT-2 ids: <pad> 50257, <mask> 50258, <expert_0..3> 50259..50262, <image> 50263.
  EXPECT_EQ(tok.vocab_size(), 50264u);
  EXPECT_EQ(tok.token_to_id("<eos>"), 50256);
  EXPECT_EQ(tok.token_to_id("<bos>"), 50256);
  EXPECT_EQ(tok.token_to_id("<pad>"), 50257);
  EXPECT_EQ(tok.token_to_id("<mask>"), 50258);
  EXPECT_EQ(tok.token_to_id("<expert_0>"), 50259);
  EXPECT_EQ(tok.token_to_id("<expert_3>"), 50262);
  EXPECT_EQ(tok.token_to_id("<image>"), 50263);
  EXPECT_EQ(tok.id_to_token(50263), "<image>");
  EXPECT_EQ(tok.decode({64, 50257, 65}), "a<pad>b");
  std::string info = tok.info();
  EXPECT_NE(info.find("\"vocab_size\":50264"), std::string::npos) << info;
  EXPECT_NE(info.find("\"pad_id\":50257"), std::string::npos) << info;
  EXPECT_NE(info.find("\"eos_id\":50256"), std::string::npos) << info;
  EXPECT_NE(info.find("\"<expert_3>\":50262"), std::string::npos) << info;
  EXPECT_NE(info.find("\"identity\":\""), std::string::npos) << info;
  // Specials in data stay text; allowed, they are single ids.
  EXPECT_EQ(tok.encode("<pad>", ZC_ENCODE_ALLOW_SPECIAL), (std::vector<int32_t>{50257}));
  EXPECT_GT(tok.encode("<pad>").size(), 1u);
  EXPECT_THROW(tok.decode({50264}), zt::CallError);
  EXPECT_THROW(tok.decode({-1}), zt::CallError);
}

TEST(BpeSpecials, OverridesAndLlamaMapping) {
  REQUIRE_LLAMA2();
  // Llama-2: <s> = 1 and </s> = 2 play bos/eos; <pad>, <mask>, <image> appended at 32000..32002.
  zt::Tok tok(bpe(), "{\"path\":\"hf://llama2\"}");
  EXPECT_EQ(tok.token_to_id("<bos>"), 1);
  EXPECT_EQ(tok.token_to_id("<eos>"), 2);
  EXPECT_EQ(tok.token_to_id("<pad>"), 32000);
  EXPECT_EQ(tok.token_to_id("<mask>"), 32001);
  EXPECT_EQ(tok.token_to_id("<image>"), 32002);
  EXPECT_EQ(tok.vocab_size(), 32003u);
  // special_tokens overrides: pad onto <unk> (0), image at 40000 (holes in between are unassigned).
  zt::Tok o(bpe(), "{\"path\":\"hf://llama2\",\"special_tokens\":{\"<pad>\":0,\"<image>\":40000}}");
  EXPECT_EQ(o.token_to_id("<pad>"), 0);
  EXPECT_EQ(o.token_to_id("<mask>"), 32000);
  EXPECT_EQ(o.token_to_id("<image>"), 40000);
  EXPECT_EQ(o.vocab_size(), 40001u);
  EXPECT_THROW(o.decode({39999}), zt::CallError);
  std::string err = zt::create_error(bpe(), "{\"path\":\"hf://llama2\",\"special_tokens\":{\"<pad>\":5,\"<mask>\":5}}");
  EXPECT_NE(err.find("already given"), std::string::npos) << err;
}

TEST(BpeSpecials, IdentityDependsOnFilesAndOptions) {
  REQUIRE_GPT2();
  REQUIRE_LLAMA2();
  auto identity = [](const std::string& opts, const std::string& cfg = "{}") {
    zt::Tok t(bpe(), opts, cfg);
    std::string i = t.info();
    size_t p = i.find("\"identity\":\"") + 12;
    return i.substr(p, 64);
  };
  std::string a = identity(gpt2_opts());
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, identity(gpt2_opts()));
  EXPECT_NE(a, identity(gpt2_opts(",\"allowed_special\":\"all\"")));
  EXPECT_NE(a, identity(gpt2_opts(), "{\"model\":{\"moe_experts\":8}}"));
  EXPECT_NE(a, identity("{\"path\":\"hf://llama2\"}"));
}

// decode(encode(x)) == x for arbitrary bytes (invalid UTF-8 included): byte-level BPE is lossless.
TEST(BpeRoundTrip, RandomBytesGpt2) {
  REQUIRE_GPT2();
  zt::Tok tok(bpe(), gpt2_opts());
  std::mt19937_64 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    size_t len = rng() % 64;
    std::string s(len, '\0');
    int mode = iter % 3;  // all bytes / ASCII-heavy / UTF-8 lead+continuation-heavy
    for (char& c : s) {
      uint64_t r = rng();
      c = static_cast<char>(mode == 0 ? r : mode == 1 ? " \t\n'aZ9!\xC3\xA9"[r % 11] : 0x80 + (r % 0x60));
    }
    ASSERT_EQ(tok.decode(tok.encode(s)), s) << "iteration " << iter;
    ASSERT_EQ(tok.decode(tok.encode(s, ZC_ENCODE_ALLOW_SPECIAL)), s) << "iteration " << iter;
  }
}

TEST(BpeRoundTrip, RandomBytesLlamaByteFallback) {
  REQUIRE_LLAMA2();
  zt::Tok tok(bpe(), "{\"path\":\"hf://llama2\"}");
  std::mt19937_64 rng(99);
  for (int iter = 0; iter < 1000; ++iter) {
    std::string s(rng() % 48, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    if (s.find("\xE2\x96\x81") != std::string::npos) continue;  // U+2581 is Llama's space
    ASSERT_EQ(tok.decode(tok.encode(s)), s) << "iteration " << iter;
  }
  // Invalid UTF-8 falls back to <0xNN> byte tokens: 0xFF is <0xFF> = id 3 + 0xFF = 258.
  std::vector<int32_t> ids = tok.encode("\xFF");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), 258);
}

TEST(BpeRoundTrip, LongWordWithoutSpaces) {
  REQUIRE_GPT2();
  zt::Tok tok(bpe(), gpt2_opts());
  std::string s;
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) s += static_cast<char>('a' + rng() % 26);
  std::vector<int32_t> ids = tok.encode(s);
  EXPECT_LT(ids.size(), s.size());  // merges happened (exact ids: the 100 KB golden case)
  EXPECT_EQ(tok.decode(ids), s);
}

// ---- malformed files: one clear message naming the file and place, never a crash ----

class Malformed : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zcode_tok_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  std::string error_for(const std::string& path, zc_status_code* code = nullptr) {
    return zt::create_error(bpe(), "{\"path\":" + zt::q(path) + "}", "{}", code);
  }
  fs::path dir_;
};

const char* kTinyVocab = R"({"a":0,"b":1,"ab":2,"<unk>":3})";

TEST_F(Malformed, BadJson) {
  std::string p = write("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,, }}}");
  zc_status_code code = 0;
  std::string e = error_for(p, &code);
  EXPECT_EQ(code, ZC_ERR_DATA);
  EXPECT_NE(e.find("tokenizer.json:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;
}

TEST_F(Malformed, TruncatedFile) {
  std::string full = std::string(R"({"model":{"type":"BPE","vocab":)") + kTinyVocab + R"(,"merges":["a b"]}})";
  std::string p = write("tokenizer.json", full.substr(0, full.size() / 2));
  std::string e = error_for(p);
  EXPECT_NE(e.find("tokenizer.json:1:"), std::string::npos) << e;
}

TEST_F(Malformed, MissingMerges) {
  std::string p = write("tokenizer.json", std::string(R"({"model":{"type":"BPE","vocab":)") + kTinyVocab + "}}");
  std::string e = error_for(p);
  EXPECT_NE(e.find("model.merges: missing"), std::string::npos) << e;
}

TEST_F(Malformed, WrongTypes) {
  std::string p = write("tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":"zero"},"merges":[]}})");
  std::string e = error_for(p);
  EXPECT_NE(e.find("model.vocab[\"a\"]"), std::string::npos) << e;
  EXPECT_NE(e.find("string \"zero\""), std::string::npos) << e;
  p = write("tokenizer.json", std::string(R"({"model":{"type":"BPE","vocab":)") + kTinyVocab + R"(,"merges":[7]}})");
  e = error_for(p);
  EXPECT_NE(e.find("model.merges[0]"), std::string::npos) << e;
  p = write("tokenizer.json",
            std::string(R"({"model":{"type":"BPE","byte_fallback":"yes","vocab":)") + kTinyVocab + R"(,"merges":[]}})");
  e = error_for(p);
  EXPECT_NE(e.find("model.byte_fallback: expected a boolean"), std::string::npos) << e;
}

TEST_F(Malformed, MergeWithOneToken) {
  write("vocab.json", kTinyVocab);
  std::string p = write("merges.txt", "#version: 0.2\na b\nab\n");
  std::string e = error_for(p);
  EXPECT_NE(e.find("merges.txt:3: expected two tokens"), std::string::npos) << e;
  p = write("tokenizer.json",
            std::string(R"({"model":{"type":"BPE","vocab":)") + kTinyVocab + R"(,"merges":["a b","ab"]}})");
  e = error_for(p);
  EXPECT_NE(e.find("model.merges[1]: expected two tokens"), std::string::npos) << e;
}

TEST_F(Malformed, MergeTokenNotInVocab) {
  write("vocab.json", kTinyVocab);
  std::string p = write("merges.txt", "a b\nb c\n");
  std::string e = error_for(p);
  EXPECT_NE(e.find("merges.txt:2: token 'c' is not in"), std::string::npos) << e;
}

// ---- bounds: nesting depth, one id per token, a merges file with merges ----

// `{"<key>":` then n '[' and n ']', then '}': the root object and n lists.
std::string nested_member(const std::string& key, size_t n) {
  return "{\"" + key + "\":" + std::string(n, '[') + std::string(n, ']') + "}";
}
// The path the message shows for the 257th container below `key`: `key` and
// the [0] of its 255 lists, 80 characters of it, then "...".
std::string shown_path(std::string p) {
  for (int i = 0; i < 255; ++i) p += "[0]";
  return p.substr(0, 80) + "...";
}

TEST_F(Malformed, DeeplyNestedJsonIsAnErrorNotACrash) {
  // The 257th container is the 256th '[', at byte 4 + key length + 255: column 5 + key length + 255.
  for (size_t n : {size_t{256}, size_t{1000000}}) {
    std::string p = write("tokenizer.json", nested_member("normalizer", n));
    zc_status_code code = 0;
    std::string e = error_for(p, &code);
    EXPECT_EQ(code, ZC_ERR_DATA);
    EXPECT_EQ(
        e, p + ":1:" + std::to_string(5 + 10 + 255) + ": nesting deeper than 256 levels at " + shown_path("normalizer"))
        << n;
    std::string v = write("vocab.json", nested_member("a", n));
    std::string m = write("merges.txt", "a b\n");
    e = error_for(m);
    EXPECT_EQ(e, v + ":1:" + std::to_string(5 + 1 + 255) + ": nesting deeper than 256 levels at " + shown_path("a"))
        << n;
  }
}

TEST_F(Malformed, TwoTokensWithOneIdAreAnError) {
  write("vocab.json", R"({"a":0,"b":1,"ab":1})");
  std::string p = write("merges.txt", "a b\n");
  std::string e = error_for(p);
  EXPECT_EQ(e, (dir_ / "vocab.json").string() + ": tokens \"b\" and \"ab\" both have id 1");
  p = write("tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"<unk>":0},"merges":[]}})");
  EXPECT_EQ(error_for(p), p + ": model.vocab: tokens \"a\" and \"<unk>\" both have id 0");
  // One token listed twice (JSON allows the duplicate key; the first id would be unreachable).
  p = write("tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"a":2},"merges":[]}})");
  EXPECT_EQ(error_for(p), p + ": model.vocab: token \"a\" is listed twice (ids 0 and 2)");
  // An added token at the id of a different vocabulary token.
  p = write("tokenizer.json",
            std::string(R"({"model":{"type":"BPE","vocab":)") + kTinyVocab +
                R"(,"merges":[]},"added_tokens":[{"id":3,"content":"<unk>"},{"id":2,"content":"<x>"}]})");
  EXPECT_EQ(error_for(p), p + ": added_tokens[1]: tokens \"ab\" and \"<x>\" both have id 2");
}

// A one-entry vocabulary at id 2^27-1 would make the dense token table 134M
// strings (4 GiB): the id is bounded by the file's entries + 65536
// (BpeModel::kMaxUnassignedIds), computed here by hand.
TEST_F(Malformed, IdFarPastTheVocabularyIsAnError) {
  write("vocab.json", R"({"a":134217727})");
  std::string m = write("merges.txt", "a b\n");
  zc_status_code code = 0;
  std::string e = error_for(m, &code);
  EXPECT_EQ(code, ZC_ERR_DATA);
  EXPECT_EQ(e,
            (dir_ / "vocab.json").string() +
                ": [\"a\"]: id 134217727 is too large: a file of 1 tokens may use ids below 65537 (at most 65536 ids "
                "without a token)");
  // Three entries: ids below 3 + 65536 = 65539, so 65539 fails and 65538 passes the bound.
  std::string p = write("tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":65539},"merges":[]}})");
  EXPECT_EQ(error_for(p),
            p + ": model.vocab[\"ab\"]: id 65539 is too large: a file of 3 tokens may use ids below 65539 "
                "(at most 65536 ids without a token)");
  p = write("tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":65538},"merges":[]}})");
  EXPECT_EQ(error_for(p).find("too large"), std::string::npos) << error_for(p);
  // added_tokens count as entries, and their ids have the same bound.
  p = write("tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[]},)"
                              R"("added_tokens":[{"id":70000,"content":"<x>"}]})");
  EXPECT_EQ(error_for(p), p + ": added_tokens[0].id: id 70000 is too large: a file of 4 tokens may use ids below 65540 "
                              "(at most 65536 ids without a token)");
}

TEST_F(Malformed, EmptyMergesFileIsAnError) {
  write("vocab.json", kTinyVocab);
  for (const char* text : {"", "#version: 0.2\n", "\n\n"}) {
    std::string p = write("merges.txt", text);
    EXPECT_EQ(error_for(p), p + ": no merges (the file is empty or holds only the #version line)") << text;
  }
}

TEST_F(Malformed, UnsupportedPipelineParts) {
  std::string p =
      write("tokenizer.json",
            std::string(R"({"pre_tokenizer":{"type":"Split","pattern":{"Regex":"x"}},"model":{"type":"BPE","vocab":)") +
                kTinyVocab + R"(,"merges":[]}})");
  zc_status_code code = 0;
  std::string e = error_for(p, &code);
  EXPECT_EQ(code, ZC_ERR_UNSUPPORTED);
  EXPECT_NE(e.find("pre_tokenizer.type: \"Split\" is not supported"), std::string::npos) << e;
  p = write("tokenizer.json", std::string(R"({"model":{"type":"WordPiece","vocab":)") + kTinyVocab + "}}");
  e = error_for(p);
  EXPECT_NE(e.find("model.type: \"WordPiece\""), std::string::npos) << e;
}

TEST_F(Malformed, TinyModelWorksAndUnknownCharsNeedUnk) {
  // A hand-built model: "ab" merges; unk_token set, so "c" encodes to <unk>.
  std::string p =
      write("tokenizer.json", std::string(R"({"model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"vocab":)") +
                                  kTinyVocab + R"(,"merges":["a b"]}})");
  zt::Tok tok(bpe(), "{\"path\":" + zt::q(p) + "}");
  EXPECT_EQ(tok.encode("abab"), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(tok.encode("acca"), (std::vector<int32_t>{0, 3, 0}));
  p = write("tokenizer.json",
            std::string(R"({"model":{"type":"BPE","vocab":)") + kTinyVocab + R"(,"merges":["a b"]}})");
  zt::Tok no_unk(bpe(), "{\"path\":" + zt::q(p) + "}");
  EXPECT_THROW(no_unk.encode("c"), zt::CallError);
}

// ---- references ----

TEST_F(Malformed, HfReferenceNotFoundListsPlaces) {
  ::setenv("HF_HUB_CACHE", (dir_ / "hub").c_str(), 1);
  std::string e = zt::create_error(bpe(), "{\"path\":\"hf://nobody/nothing\"}");
  ::unsetenv("HF_HUB_CACHE");
  EXPECT_NE(e.find("not found offline"), std::string::npos) << e;
  EXPECT_NE(e.find((dir_ / "hub" / "models--nobody--nothing" / "snapshots").string()), std::string::npos) << e;
  EXPECT_NE(e.find("scripts/fetch-assets.sh"), std::string::npos) << e;
  EXPECT_NE(e.find("assets/hf/nobody/nothing"), std::string::npos) << e;
}

TEST_F(Malformed, HfReferenceFromHubCacheLayout) {
  fs::path snap = dir_ / "hub" / "models--org--tiny" / "snapshots" / "0123abc";
  fs::create_directories(snap);
  std::ofstream(snap / "tokenizer.json") << R"({"model":{"type":"BPE","unk_token":"<unk>","vocab":)" << kTinyVocab
                                         << R"(,"merges":["a b"]}})";
  ::setenv("HF_HUB_CACHE", (dir_ / "hub").c_str(), 1);
  std::string e = zt::create_error(bpe(), "{\"path\":\"hf://org/tiny\"}");
  EXPECT_EQ(e, "");
  {
    zt::Tok tok(bpe(), "{\"path\":\"hf://org/tiny\"}");
    EXPECT_NE(tok.info().find("0123abc"), std::string::npos);
    EXPECT_EQ(tok.encode("ab"), (std::vector<int32_t>{2}));
  }
  ::unsetenv("HF_HUB_CACHE");
}

TEST_F(Malformed, MissingPath) {
  std::string e = error_for((dir_ / "nope.json").string());
  EXPECT_NE(e.find("not found"), std::string::npos) << e;
  e = zt::create_error(bpe(), "{}");
  EXPECT_NE(e.find("data.tokenizer.path: missing"), std::string::npos) << e;
}

}  // namespace
