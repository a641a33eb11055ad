// sentencepiece plugin: a small model is trained here with SentencePiece's own
// trainer on Debian's fortunes; the plugin's normalization, specials,
// sampling and errors are checked through the ABI.
#include "plugin_harness.h"

#include <sentencepiece_trainer.h>

#include <filesystem>
#include <set>
#include <thread>

namespace fs = std::filesystem;

namespace {

const zc_tokenizer_table* sp() {
  static const zc_tokenizer_table* t = zt::load_table("libzcode_sentencepiece.so");
  return t;
}

// Trains once per process: unigram, 800 pieces, specials as `zcode-host tokenizer train` places them.
const fs::path& model_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("zcode_sp_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::string corpus = "/usr/share/games/fortunes/fortunes";
    std::string args = "--input=" + corpus + " --model_prefix=" + (d / "tokenizer").string() +
                       " --vocab_size=800 --model_type=unigram --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=4"
                       " --pad_piece=<pad> --bos_piece=<bos> --eos_piece=<eos> --control_symbols=<mask>"
                       " --byte_fallback=true --minloglevel=2 --num_threads=1";
    auto st = sentencepiece::SentencePieceTrainer::Train(args);
    if (!st.ok()) throw std::runtime_error("training the test model failed: " + st.ToString());
    return d;
  }();
  return dir;
}

struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("zcode_sp_test_" + std::to_string(::getpid())), ec);
  }
} cleanup;

std::string opts(const std::string& extra = "") {
  return "{\"path\":" + zt::q((model_dir() / "tokenizer.model").string()) + extra + "}";
}

#define REQUIRE_FORTUNES() ZT_REQUIRE_ASSET(std::string("/usr/share/games/fortunes/fortunes"))

TEST(SentencePiece, NormalizationIsNfkcWithWhitespaceCleanup) {
  REQUIRE_FORTUNES();
  zt::Tok tok(sp(), opts());
  // nmt_nfkc: NFKC maps fullwidth letters to ASCII and the "fi" ligature (U+FB01) to "fi";
  // leading, trailing and repeated spaces are removed (SentencePiece's remove_extra_whitespaces).
  EXPECT_EQ(tok.decode(tok.encode("\xEF\xBD\x88\xEF\xBD\x85\xEF\xBD\x8C\xEF\xBD\x8C\xEF\xBD\x8F")), "hello");
  EXPECT_EQ(tok.decode(tok.encode("\xEF\xAC\x81ne")), "fine");
  EXPECT_EQ(tok.decode(tok.encode("  a   b  ")), "a b");
  // Already-normal text survives unchanged (byte fallback covers unseen characters).
  EXPECT_EQ(tok.decode(tok.encode("The cat sat, \xE4\xBD\xA0\xE5\xA5\xBD.")), "The cat sat, \xE4\xBD\xA0\xE5\xA5\xBD.");
}

TEST(SentencePiece, SpecialsOfAPretrainedModelAreAppended) {
  REQUIRE_FORTUNES();
  // No marker: the model's own <pad>/<bos>/<eos>/<mask> are found by name; <image> is appended at 800.
  zt::Tok tok(sp(), opts());
  EXPECT_EQ(tok.token_to_id("<pad>"), 0);
  EXPECT_EQ(tok.token_to_id("<bos>"), 1);
  EXPECT_EQ(tok.token_to_id("<eos>"), 2);
  EXPECT_EQ(tok.token_to_id("<mask>"), 3);
  EXPECT_EQ(tok.token_to_id("<image>"), 800);
  EXPECT_EQ(tok.vocab_size(), 801u);
  // <mask> is a control symbol: plain text by default, id 3 only when allowed.
  std::vector<int32_t> plain = tok.encode("x<mask>y");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 3), 0);
  std::vector<int32_t> allowed = tok.encode("x<mask>y", ZC_ENCODE_ALLOW_SPECIAL);
  EXPECT_EQ(std::count(allowed.begin(), allowed.end(), 3), 1);
}

TEST(SentencePiece, TrainedMarkerUsesGuideIds) {
  REQUIRE_FORTUNES();
  std::ofstream(model_dir() / "zcode_tokenizer.json") << R"({"trained_by":"zcode","version":1})";
  // Guide: <expert_i> = 1000 + i (free: the model has 800 pieces), <image> = 250000.
  zt::Tok tok(sp(), opts(), "{\"model\":{\"moe_experts\":3}}");
  fs::remove(model_dir() / "zcode_tokenizer.json");
  EXPECT_EQ(tok.token_to_id("<expert_0>"), 1000);
  EXPECT_EQ(tok.token_to_id("<expert_2>"), 1002);
  EXPECT_EQ(tok.token_to_id("<image>"), 250000);
  EXPECT_EQ(tok.vocab_size(), 250001u);
  EXPECT_EQ(tok.decode({1001}), "<expert_1>");
  EXPECT_THROW(tok.decode({900}), zt::CallError);  // a hole between the pieces and the guide ids
  EXPECT_NE(tok.info().find("\"trained_by_zcode\":true"), std::string::npos);
}

// Marker version 2 (what `tokenizer train` writes since issue 17): the
// specials missing from the 800 pieces follow them, so there is no gap.
TEST(SentencePiece, TrainedMarkerVersion2AppendsAfterTheVocabulary) {
  REQUIRE_FORTUNES();
  std::ofstream(model_dir() / "zcode_tokenizer.json") << R"({"trained_by":"zcode","version":2})";
  zt::Tok tok(sp(), opts(), "{\"model\":{\"moe_experts\":3}}");
  fs::remove(model_dir() / "zcode_tokenizer.json");
  EXPECT_EQ(tok.token_to_id("<expert_0>"), 800);
  EXPECT_EQ(tok.token_to_id("<expert_2>"), 802);
  EXPECT_EQ(tok.token_to_id("<image>"), 803);
  EXPECT_EQ(tok.vocab_size(), 804u);
  EXPECT_NE(tok.info().find("\"unassigned_ids\":[]"), std::string::npos) << tok.info();
}

TEST(SentencePiece, VersionOneMarkerDeclaresItsGapsAndABadVersionIsAnError) {
  REQUIRE_FORTUNES();
  std::ofstream(model_dir() / "zcode_tokenizer.json") << R"({"trained_by":"zcode","version":1})";
  {
    zt::Tok tok(sp(), opts(), "{\"model\":{\"moe_experts\":3}}");
    // 800 pieces, experts at 1000..1002, <image> at 250000.
    EXPECT_NE(tok.info().find("\"unassigned_ids\":[[800,1000],[1003,250000]]"), std::string::npos) << tok.info();
  }
  std::ofstream(model_dir() / "zcode_tokenizer.json") << R"({"trained_by":"zcode","version":7})";
  try {
    zt::Tok bad(sp(), opts(), "{\"model\":{\"moe_experts\":3}}");
    ADD_FAILURE() << "a marker of version 7 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("zcode_tokenizer.json: \"version\": expected 1..2 (written by zcode-host "
                                         "tokenizer train), found number 7"),
              std::string::npos)
        << e.what();
  }
  // A marker nested 300,000 deep is a bounded-parse error naming the file, not a stack overflow.
  std::ofstream(model_dir() / "zcode_tokenizer.json") << std::string(300000, '[') << std::string(300000, ']');
  try {
    zt::Tok deep(sp(), opts(), "{\"model\":{\"moe_experts\":3}}");
    ADD_FAILURE() << "a marker nested 300000 deep was accepted";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("zcode_tokenizer.json: invalid JSON at 1:"), std::string::npos) << what;
    EXPECT_NE(what.find("(nesting deeper than 256 levels at [0][0]"), std::string::npos) << what;
  }
  fs::remove(model_dir() / "zcode_tokenizer.json");
}

TEST(SentencePiece, SamplingIsSeededAndVaries) {
  REQUIRE_FORTUNES();
  const std::string text = "Subword regularization samples among the segmentations of the same sentence.";
  zt::Tok det(sp(), opts());
  std::vector<int32_t> best = det.encode(text);
  EXPECT_EQ(det.encode(text), best);
  // libsentencepiece draws from a per-thread generator seeded (at the thread's first draw) by the
  // process-wide seed that create() sets from derive_seed("tokenizer.sentencepiece"): a data-loader
  // worker thread started after create samples reproducibly. Each run below uses a fresh thread.
  auto sample_run = [&](std::vector<std::vector<int32_t>>& out) {
    zt::Tok s(sp(), opts(",\"sampling_alpha\":0.5,\"nbest\":-1"));
    std::thread th([&] {
      for (int i = 0; i < 20; ++i) out.push_back(s.encode(text));
    });
    th.join();
    for (auto& ids : out) EXPECT_EQ(s.decode(ids), text);
  };
  std::vector<std::vector<int32_t>> first_run, second_run;
  sample_run(first_run);
  sample_run(second_run);
  std::set<std::vector<int32_t>> seen(first_run.begin(), first_run.end());
  EXPECT_GT(seen.size(), 1u) << "alpha 0.5 should produce several segmentations";
  EXPECT_EQ(first_run, second_run) << "same seed, same samples";
}

TEST(SentencePiece, Errors) {
  REQUIRE_FORTUNES();
  std::string e = zt::create_error(sp(), opts(",\"sampling_alpha\":2"));
  EXPECT_NE(e.find("sampling_alpha"), std::string::npos) << e;
  e = zt::create_error(sp(), opts(",\"nbest\":0"));
  EXPECT_NE(e.find("nbest"), std::string::npos) << e;
  fs::path bad = model_dir() / "broken.model";
  std::ofstream(bad) << "this is not a protobuf";
  e = zt::create_error(sp(), "{\"path\":" + zt::q(bad.string()) + "}");
  EXPECT_NE(e.find("broken.model: cannot load SentencePiece model"), std::string::npos) << e;
  fs::remove(bad);
  // Two pieces with one text: the model's pieces are a repeated protobuf
  // field, so appending one more (field 1, length-delimited: piece "<mask>",
  // score 0.0f, type CONTROL = 3) to the trained file duplicates <mask>.
  fs::path dup = model_dir() / "dup.model";
  {
    std::ifstream in(model_dir() / "tokenizer.model", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string piece = std::string("\x0A\x06<mask>\x15", 9) + std::string(4, '\0') + "\x18\x03";
    bytes += "\x0A" + std::string(1, static_cast<char>(piece.size())) + piece;
    std::ofstream(dup, std::ios::binary) << bytes;
  }
  e = zt::create_error(sp(), "{\"path\":" + zt::q(dup.string()) + "}");
  EXPECT_NE(e.find("dup.model: cannot load SentencePiece model"), std::string::npos) << e;
  EXPECT_NE(e.find("<mask>"), std::string::npos) << e;
  fs::remove(dup);
  std::string gpt2 = zt::assets_dir() + "/hf/gpt2";
  if (zt::have_file(gpt2 + "/vocab.json")) {
    e = zt::create_error(sp(), "{\"path\":" + zt::q(gpt2) + "}");
    EXPECT_NE(e.find("use data.tokenizer.type: bpe"), std::string::npos) << e;
  }
}

}  // namespace
