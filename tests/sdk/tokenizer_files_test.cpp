// zcode/sdk/tokenizer_files.h: the one rule for "bpe or sentencepiece".
#include <zcode/sdk/tokenizer_files.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using zcode::sdk::is_sentencepiece_model_name;
using zcode::sdk::tokenizer_files_in_folder;
using zcode::sdk::tokenizer_plugin_for_reference;

class TokenizerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zcode_tokfiles_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path touch(const std::string& rel) {
    fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "x";
    return p;
  }
  std::string folder(const std::string& rel) {
    fs::create_directories(dir_ / rel);
    return (dir_ / rel).string();
  }
  fs::path dir_;
};

TEST(TokenizerFileNames, ModelExtensionInAnyCase) {
  EXPECT_TRUE(is_sentencepiece_model_name("tokenizer.model"));
  EXPECT_TRUE(is_sentencepiece_model_name("a/b/SP.MODEL"));
  EXPECT_TRUE(is_sentencepiece_model_name("x.Model"));
  EXPECT_FALSE(is_sentencepiece_model_name(".model"));  // a dotfile, no extension
  EXPECT_FALSE(is_sentencepiece_model_name("tokenizer.json"));
  EXPECT_FALSE(is_sentencepiece_model_name("model"));
  EXPECT_FALSE(is_sentencepiece_model_name("x.models"));
}

TEST_F(TokenizerFiles, FilesByNameWithoutLookingAtThem) {
  EXPECT_EQ(tokenizer_plugin_for_reference("missing/sp.model"), "sentencepiece");
  EXPECT_EQ(tokenizer_plugin_for_reference("missing/SP.MODEL"), "sentencepiece");
  EXPECT_EQ(tokenizer_plugin_for_reference("missing/tokenizer.json"), "bpe");
  EXPECT_EQ(tokenizer_plugin_for_reference("missing/vocab.json"), "bpe");
  EXPECT_EQ(tokenizer_plugin_for_reference(touch("t/tok.model").string()), "sentencepiece");
  EXPECT_EQ(tokenizer_plugin_for_reference("hf://gpt2"), "bpe");  // not looked up
  EXPECT_EQ(tokenizer_plugin_for_reference(""), "bpe");
}

TEST_F(TokenizerFiles, FolderHoldingOnlyAModelIsSentencePiece) {
  touch("sp/tokenizer.model");
  touch("sp/zcode_tokenizer.json");  // the train marker is not a vocabulary
  EXPECT_EQ(tokenizer_plugin_for_reference(folder("sp")), "sentencepiece");
  touch("other/B.MODEL");
  touch("other/a.model");
  EXPECT_EQ(tokenizer_plugin_for_reference(folder("other")), "sentencepiece");
  auto f = tokenizer_files_in_folder(dir_ / "other");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, "sentencepiece");
  EXPECT_EQ(f->files, std::vector<std::string>{(dir_ / "other" / "B.MODEL").string()});  // first by name
}

TEST_F(TokenizerFiles, FolderWithBpeFilesIsBpeWhateverElseItHolds) {
  touch("hf/tokenizer.model");
  touch("hf/tokenizer.json");
  EXPECT_EQ(tokenizer_plugin_for_reference(folder("hf")), "bpe");
  EXPECT_EQ(tokenizer_files_in_folder(dir_ / "hf")->kind, "tokenizer.json");
  touch("gpt2/tokenizer.model");
  touch("gpt2/vocab.json");
  touch("gpt2/merges.txt");
  EXPECT_EQ(tokenizer_plugin_for_reference(folder("gpt2")), "bpe");
  auto g = tokenizer_files_in_folder(dir_ / "gpt2");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->kind, "gpt2");
  EXPECT_EQ(g->files, (std::vector<std::string>{(dir_ / "gpt2" / "vocab.json").string(),
                                                (dir_ / "gpt2" / "merges.txt").string()}));
  // A vocab.json without its merges file is not a BPE vocabulary: the model wins.
  touch("half/tokenizer.model");
  touch("half/vocab.json");
  EXPECT_EQ(tokenizer_plugin_for_reference(folder("half")), "sentencepiece");
}

TEST_F(TokenizerFiles, EmptyOrMissingFolderIsBpe) {
  EXPECT_EQ(tokenizer_plugin_for_reference(folder("empty")), "bpe");
  EXPECT_FALSE(tokenizer_files_in_folder(dir_ / "empty"));
  EXPECT_FALSE(tokenizer_files_in_folder(dir_ / "missing"));
  EXPECT_EQ(tokenizer_plugin_for_reference(folder("dir.model")), "bpe");  // a folder, judged by content
}

}  // namespace
