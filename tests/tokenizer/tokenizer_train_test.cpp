// zcode::train_tokenizer (core/src/tokenizer_train.cpp): what it writes is
// read back here with SentencePiece's own processor and RapidJSON, and the
// sentence count is counted here from the input, never taken from the code.
#include <zcode/core/tokenizer_train.h>

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sentencepiece_processor.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using zcode::TokenizerTrainError;
using zcode::TokenizerTrainOptions;

namespace {

const char* kFortunes = "/usr/share/games/fortunes/fortunes";

class TokenizerTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("zcode_tokenizer_train_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  // The refusal of train_tokenizer(o), or a failure when it trains.
  static TokenizerTrainError refusal(const TokenizerTrainOptions& o) {
    try {
      zcode::train_tokenizer(o);
    } catch (const TokenizerTrainError& e) {
      return e;
    }
    ADD_FAILURE() << "train_tokenizer accepted the options";
    return TokenizerTrainError(TokenizerTrainError::Kind::kFailure, "", "");
  }
  fs::path dir;
};

TEST_F(TokenizerTrain, WritesAModelWithTheSpecialIdsAndAMarker) {
  if (!fs::is_regular_file(kFortunes)) GTEST_SKIP() << kFortunes << " is missing: run scripts/install-deps.sh";
  // The first 3000 lines of fortunes as JSONL and as plain text; the count of
  // non-blank lines is what the trainer must report.
  std::ifstream in(kFortunes);
  std::string line, jsonl, plain;
  uint64_t expected_sentences = 0;
  for (int i = 0; i < 3000 && std::getline(in, line); ++i) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    rapidjson::StringBuffer esc;  // the record as RapidJSON writes it
    rapidjson::Writer<rapidjson::StringBuffer> w(esc);
    w.StartObject();
    w.Key("text");
    w.String(line.c_str(), static_cast<rapidjson::SizeType>(line.size()));
    w.EndObject();
    (i % 2 ? jsonl : plain) += (i % 2 ? std::string(esc.GetString()) : line) + "\n";
    ++expected_sentences;
  }
  TokenizerTrainOptions o;
  o.inputs = {write("a.jsonl", jsonl).string(), write("b.txt", plain).string()};
  o.vocab_size = 500;
  o.model_type = "bpe";
  o.out_dir = (dir / "out" / "tok").string();  // created
  o.num_threads = 1;
  const zcode::TokenizerTrainResult r = zcode::train_tokenizer(o);
  EXPECT_EQ(r.vocab_size, 500u);
  EXPECT_EQ(r.sentences, expected_sentences);
  EXPECT_EQ(r.model_path, (fs::path(o.out_dir) / "tokenizer.model").string());

  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(r.model_path).ok());
  EXPECT_EQ(sp.GetPieceSize(), 500);
  const char* want[] = {"<pad>", "<bos>", "<eos>", "<mask>", "<unk>"};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sp.IdToPiece(i), want[i]) << i;
  EXPECT_TRUE(sp.IsControl(3));  // <mask> is never matched in text

  std::ifstream m(r.marker_path);
  std::stringstream ss;
  ss << m.rdbuf();
  rapidjson::Document d;
  d.Parse(ss.str().c_str());
  ASSERT_FALSE(d.HasParseError()) << ss.str();
  EXPECT_STREQ(d["trained_by"].GetString(), "zcode");
  EXPECT_EQ(d["version"].GetInt(), 2);
  EXPECT_STREQ(d["special_ids"].GetString(), "after_vocabulary");
  EXPECT_STREQ(d["model_type"].GetString(), "bpe");
  EXPECT_EQ(d["vocab_size"].GetInt(), 500);
  EXPECT_EQ(d["sentences"].GetUint64(), expected_sentences);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(d["specials"][want[i]].GetInt(), i) << want[i];
  ASSERT_EQ(d["inputs"].Size(), 2u);
  EXPECT_EQ(d["inputs"][1].GetString(), o.inputs[1]);
  // Only the two files: no temporary file is left behind.
  size_t n = 0;
  for (auto& e : fs::directory_iterator(o.out_dir)) n += e.is_regular_file();
  EXPECT_EQ(n, 2u);
}

TEST_F(TokenizerTrain, RefusesOptionsOutOfRangeNamingTheFlag) {
  TokenizerTrainOptions o;
  o.inputs = {write("t.txt", "hello world\n").string()};
  o.out_dir = (dir / "out").string();
  o.vocab_size = 15;
  TokenizerTrainError e = refusal(o);
  EXPECT_EQ(e.kind(), TokenizerTrainError::Kind::kBadInput);
  EXPECT_EQ(e.option(), "vocab-size");
  EXPECT_STREQ(e.what(), "expected 16..1000000, found 15");
  o.vocab_size = 100;
  o.model_type = "wordpiece";
  e = refusal(o);
  EXPECT_EQ(e.option(), "model-type");
  EXPECT_STREQ(e.what(), "expected bpe or unigram, found 'wordpiece'");
  o.model_type = "unigram";
  o.inputs.push_back((dir / "missing.txt").string());
  e = refusal(o);
  EXPECT_EQ(e.option(), "input");
  EXPECT_EQ(std::string(e.what()), "file '" + (dir / "missing.txt").string() + "' not found");
  o.inputs.pop_back();
  o.out_dir = o.inputs[0];  // a file, not a folder
  e = refusal(o);
  EXPECT_EQ(e.option(), "out");
  EXPECT_EQ(std::string(e.what()), "'" + o.inputs[0] + "' exists and is not a folder");
  o.inputs.clear();
  e = refusal(o);
  EXPECT_EQ(e.option(), "input");
  EXPECT_STREQ(e.what(), "at least one file is required");
}

TEST_F(TokenizerTrain, ABadRecordIsRefusedWithItsPlaceAndNothingIsWritten) {
  TokenizerTrainOptions o;
  const fs::path bad = write("bad.jsonl", "{\"text\": \"ok\"}\n\n{\"txt\": \"no text\"}\n");
  o.inputs = {bad.string()};
  o.vocab_size = 100;
  o.out_dir = (dir / "out").string();
  const TokenizerTrainError e = refusal(o);
  EXPECT_EQ(e.kind(), TokenizerTrainError::Kind::kBadInput);
  EXPECT_EQ(e.option(), "");
  EXPECT_EQ(std::string(e.what()), bad.string() + ":3:1: missing field \"text\"");
  EXPECT_FALSE(fs::exists(o.out_dir));
}

}  // namespace
