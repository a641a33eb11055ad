// Id parity with the reference implementations (gpt-3-encoder, Hugging Face
// tokenizers) on Debian's fortunes and an adversarial set; goldens generated
// once by scripts/tokenizer-goldens.js.
#include "bpe_model.h"
#include "plugin_harness.h"

#include <rapidjson/document.h>
#include <zlib.h>

#include <map>

namespace {

struct Case {
  std::string id, text;
  std::map<std::string, std::vector<int32_t>> ids;  // reference name -> ids (absent when null)
};

std::vector<Case> load_goldens() {
  std::string path = std::string(ZCODE_SOURCE_DIR) + "/tests/tokenizer/goldens/goldens.jsonl.gz";
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::string all;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  gzclose(f);
  std::vector<Case> out;
  size_t pos = 0, line = 0;
  while (pos < all.size()) {
    size_t eol = all.find('\n', pos);
    if (eol == std::string::npos) eol = all.size();
    std::string l = all.substr(pos, eol - pos);
    pos = eol + 1;
    ++line;
    if (l.empty()) continue;
    rapidjson::Document d;
    d.Parse(l.data(), l.size());
    if (d.HasParseError()) throw std::runtime_error(path + ":" + std::to_string(line) + ": bad JSON");
    Case c;
    c.id = d["id"].GetString();
    c.text.assign(d["text"].GetString(), d["text"].GetStringLength());
    for (auto it = d.MemberBegin(); it != d.MemberEnd(); ++it) {
      if (!it->value.IsArray()) continue;
      std::vector<int32_t> v;
      for (auto& x : it->value.GetArray()) v.push_back(x.GetInt());
      c.ids[it->name.GetString()] = std::move(v);
    }
    out.push_back(std::move(c));
  }
  return out;
}

const std::vector<Case>& goldens() {
  static const std::vector<Case> g = load_goldens();
  return g;
}

// Encodes every golden text and compares with reference `key`; also checks the round trip.
void check_parity(zt::Tok& tok, const std::string& key, uint32_t flags, bool roundtrip) {
  size_t compared = 0, mismatched = 0;
  for (const Case& c : goldens()) {
    auto it = c.ids.find(key);
    if (it == c.ids.end()) continue;
    ++compared;
    std::vector<int32_t> got = tok.encode(c.text, flags);
    if (got != it->second) {
      ++mismatched;
      size_t k = 0;
      while (k < got.size() && k < it->second.size() && got[k] == it->second[k]) ++k;
      if (mismatched <= 5)
        ADD_FAILURE() << key << ": case " << c.id << ": first difference at token " << k << " (got "
                      << (k < got.size() ? std::to_string(got[k]) : "end") << ", reference "
                      << (k < it->second.size() ? std::to_string(it->second[k]) : "end") << "), " << got.size()
                      << " vs " << it->second.size() << " tokens";
    }
    if (roundtrip) {
      EXPECT_EQ(tok.decode(got), c.text) << key << ": round trip of " << c.id;
    }
  }
  EXPECT_EQ(mismatched, 0u) << key << ": " << mismatched << " of " << compared << " cases differ";
  EXPECT_GT(compared, 800u) << key << ": too few golden cases";
}

class Golden : public ::testing::Test {
 protected:
  static const zc_tokenizer_table* bpe() {
    static const zc_tokenizer_table* t = zt::load_table("libzcode_bpe.so");
    return t;
  }
};

TEST_F(Golden, Gpt2EncoderJsonMatchesGpt3Encoder) {
  std::string dir = zt::assets_dir() + "/hf/gpt2";
  ZT_REQUIRE_ASSET(dir + "/encoder.json");
  zt::Tok tok(bpe(), "{\"path\":" + zt::q(dir + "/encoder.json") + "}");
  check_parity(tok, "gpt2", 0, true);
}

// Four threads share one model (and so its lock-free word cache, cold at the
// start): every text must still get the reference's ids. Run 3 times so the
// later passes read words another thread inserted.
TEST_F(Golden, Gpt2SharedWordCacheAcrossThreadsMatchesHfTokenizers) {
  std::string dir = zt::assets_dir() + "/hf/gpt2";
  ZT_REQUIRE_ASSET(dir + "/vocab.json");
  auto model = zcode::tok::BpeModel::load_gpt2(dir + "/vocab.json", dir + "/merges.txt");
  std::vector<std::string_view> texts;
  std::vector<const std::vector<int32_t>*> want;
  for (const Case& c : goldens()) {
    auto it = c.ids.find("gpt2_hf");
    if (it == c.ids.end()) continue;
    texts.push_back(c.text);
    want.push_back(&it->second);
  }
  ASSERT_GT(texts.size(), 800u);
  for (int pass = 0; pass < 3; ++pass) {
    auto got = zcode::tok::encode_batch(model, texts, 4);
    size_t bad = 0;
    for (size_t i = 0; i < texts.size(); ++i) bad += got[i] != *want[i] ? 1 : 0;
    EXPECT_EQ(bad, 0u) << "pass " << pass << ": " << bad << " of " << texts.size() << " texts differ";
  }
}

TEST_F(Golden, Gpt2VocabJsonMatchesHfTokenizers) {
  ZT_REQUIRE_ASSET(zt::assets_dir() + "/hf/gpt2/vocab.json");
  zt::Tok tok(bpe(), "{\"path\":\"hf://gpt2\"}");
  check_parity(tok, "gpt2_hf", 0, true);
}

TEST_F(Golden, Gpt2TokenizerJsonMatchesHfTokenizers) {
  std::string dir = zt::assets_dir() + "/hf/gpt2-json";
  ZT_REQUIRE_ASSET(dir + "/tokenizer.json");
  zt::Tok tok(bpe(), "{\"path\":" + zt::q(dir) + "}");
  check_parity(tok, "gpt2_hf", 0, true);
}

TEST_F(Golden, Llama2PlainTextMatchesHfTokenizers) {
  ZT_REQUIRE_ASSET(zt::assets_dir() + "/hf/llama2/tokenizer.json");
  zt::Tok tok(bpe(), "{\"path\":\"hf://llama2\"}");
  check_parity(tok, "llama2", 0, false);
  // Round trip: the Metaspace scheme maps U+2581 to a space, so texts holding it are excluded.
  for (const Case& c : goldens()) {
    if (c.text.find("\xE2\x96\x81") == std::string::npos) {
      EXPECT_EQ(tok.decode(tok.encode(c.text)), c.text) << c.id;
    }
  }
}

// The library parses the file's own specials; allowed_special lists exactly those (the GLM
// specials ZCode appends are unknown to the reference, so ZC_ENCODE_ALLOW_SPECIAL would differ
// on the case that spells them).
TEST_F(Golden, Llama2AllowedSpecialMatchesHfTokenizers) {
  ZT_REQUIRE_ASSET(zt::assets_dir() + "/hf/llama2/tokenizer.json");
  zt::Tok tok(bpe(), "{\"path\":\"hf://llama2\",\"allowed_special\":[\"<unk>\",\"<s>\",\"</s>\"]}");
  check_parity(tok, "llama2_special", 0, false);
}

}  // namespace
