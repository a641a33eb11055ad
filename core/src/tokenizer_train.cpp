// SentencePiece training through its library API (sentencepiece_trainer.h):
// the sentences come from our own iterator, so JSONL records are read with
// the bounded parser and a bad record stops training with its place.
#include <zcode/core/tokenizer_train.h>

#include <zcode/sdk/file.h>
#include <zcode/sdk/json.h>
#include <zcode/sdk/tokenizer_files.h>

#include <rapidjson/document.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <unordered_map>

namespace zcode {
namespace fs = std::filesystem;
namespace {

using Kind = TokenizerTrainError::Kind;

// Feeds SentencePiece's trainer one sentence per line: the `text_field` of each
// JSONL record, or each line of a plain-text file. A bad record ends the
// iteration with status() holding `file:line:col: message`.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  LineIterator(std::vector<std::string> files, std::string field) : files_(std::move(files)), field_(std::move(field)) {
    advance();
  }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return status_; }
  uint64_t sentences() const { return count_; }

 private:
  void advance() {
    for (;;) {
      if (!in_.is_open()) {
        if (next_file_ >= files_.size()) {
          done_ = true;
          return;
        }
        name_ = files_[next_file_++];
        in_.open(name_, std::ios::binary);
        line_no_ = 0;
        if (!in_) {
          fail(name_ + ": cannot open file");
          return;
        }
        jsonl_ = name_.size() > 6 && (name_.compare(name_.size() - 6, 6, ".jsonl") == 0 ||
                                      name_.compare(name_.size() - 5, 5, ".json") == 0);
      }
      std::string line;
      if (!std::getline(in_, line)) {
        in_.close();
        in_.clear();
        continue;
      }
      ++line_no_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      if (!jsonl_) {
        value_ = line;
        ++count_;
        return;
      }
      rapidjson::Document d;
      const sdk::json::Result parsed = sdk::json::parse(d, line);  // iterative, 256 levels at most
      std::string where = name_ + ":" + std::to_string(line_no_);
      if (!parsed.ok()) {
        fail(where + ":" + std::to_string(parsed.offset + 1) + ": " + (parsed.too_deep ? "" : "invalid JSON: ") +
             parsed.message());
        return;
      }
      if (!d.IsObject() || !d.HasMember(field_.c_str())) {
        fail(where + ":1: missing field \"" + field_ + "\"");
        return;
      }
      const rapidjson::Value& v = d[field_.c_str()];
      if (!v.IsString()) {
        fail(where + ":1: field \"" + field_ + "\" is not a string");
        return;
      }
      value_.assign(v.GetString(), v.GetStringLength());
      ++count_;
      return;
    }
  }
  void fail(const std::string& msg) {
    status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInvalidArgument, msg);
    done_ = true;
  }
  std::vector<std::string> files_;
  std::string field_, name_, value_;
  size_t next_file_ = 0, line_no_ = 0;
  uint64_t count_ = 0;
  std::ifstream in_;
  bool jsonl_ = false, done_ = false;
  sentencepiece::util::Status status_;
};

// The marker the tokenizer plugins read (plugins/tokenizer/common/resolve.cpp).
// Version 2: specials missing from the vocabulary follow it (version 1 gave
// them the guide's ids 1000 + i and 250000, leaving a gap).
std::string marker_json(const TokenizerTrainOptions& o, uint64_t vocab_size, uint64_t sentences) {
  sdk::json::Writer w;
  w.begin_object()
      .key("trained_by")
      .string("zcode")
      .key("version")
      .integer(sdk::kTrainedMarkerVersion)
      .key("special_ids")
      .string("after_vocabulary")
      .key("model_type")
      .string(o.model_type)
      .key("vocab_size")
      .integer(vocab_size);
  w.key("specials").begin_object();
  const char* const specials[] = {"<pad>", "<bos>", "<eos>", "<mask>", "<unk>"};
  for (int i = 0; i < 5; ++i) w.key(specials[i]).integer(i);
  w.end_object().key("sentences").integer(sentences).key("inputs").begin_array();
  for (const std::string& f : o.inputs) w.string(f);
  return w.end_array().end_object().str() + "\n";
}

}  // namespace

void validate(const TokenizerTrainOptions& o) {
  auto bad = [](const char* option, const std::string& message) {
    throw TokenizerTrainError(Kind::kBadInput, option, message);
  };
  if (o.inputs.empty()) bad("input", "at least one file is required");
  if (o.model_type != "bpe" && o.model_type != "unigram")
    bad("model-type", "expected bpe or unigram, found '" + o.model_type + "'");
  if (o.vocab_size < 16 || o.vocab_size > 1000000)
    bad("vocab-size", "expected 16..1000000, found " + std::to_string(o.vocab_size));
  std::error_code ec;
  if (o.out_dir.empty()) bad("out", "expected a folder, found an empty path");
  if (fs::exists(o.out_dir, ec) && !fs::is_directory(o.out_dir, ec))
    bad("out", "'" + o.out_dir + "' exists and is not a folder");
  if (o.num_threads < 1) bad("num-threads", "expected an integer >= 1, found " + std::to_string(o.num_threads));
  for (const std::string& f : o.inputs)
    if (!fs::is_regular_file(f, ec)) bad("input", "file '" + f + "' not found");
}

TokenizerTrainResult train_tokenizer(const TokenizerTrainOptions& o) {
  validate(o);
  LineIterator it(o.inputs, o.text_field);
  const std::unordered_map<std::string, std::string> kw = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"pad_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"unk_id", "4"},
      {"pad_piece", "<pad>"},
      {"bos_piece", "<bos>"},
      {"eos_piece", "<eos>"},
      {"unk_piece", "<unk>"},
      // A control symbol (not user_defined): never matched in text, so data cannot inject it.
      {"control_symbols", "<mask>"},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"num_threads", std::to_string(o.num_threads)},
      {"minloglevel", "1"}};
  std::string proto;
  const auto st = sentencepiece::SentencePieceTrainer::Train(kw, &it, &proto);
  if (!it.status().ok()) throw TokenizerTrainError(Kind::kBadInput, "", std::string(it.status().message()));
  if (!st.ok()) throw TokenizerTrainError(Kind::kFailure, "", st.ToString());
  // Check the ids the plugins rely on before writing anything.
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(proto).ok())
    throw TokenizerTrainError(Kind::kFailure, "", "the trained model does not load");
  const char* const want[] = {"<pad>", "<bos>", "<eos>", "<mask>", "<unk>"};
  for (int i = 0; i < 5; ++i)
    if (sp.IdToPiece(i) != want[i])
      throw TokenizerTrainError(
          Kind::kFailure, "",
          "trained model has '" + sp.IdToPiece(i) + "' at id " + std::to_string(i) + ", expected " + want[i]);
  TokenizerTrainResult r;
  r.vocab_size = static_cast<uint64_t>(sp.GetPieceSize());
  r.sentences = it.sentences();
  const fs::path dir(o.out_dir);
  r.model_path = (dir / "tokenizer.model").string();
  r.marker_path = (dir / sdk::kTrainedMarker).string();
  try {
    fs::create_directories(dir);
    sdk::write_file_atomic(r.model_path, proto);
    sdk::write_file_atomic(r.marker_path, marker_json(o, r.vocab_size, r.sentences));
  } catch (const std::exception& e) {  // sdk::Error names the file; filesystem_error the folder
    throw TokenizerTrainError(Kind::kFailure, "", e.what());
  }
  return r;
}

}  // namespace zcode
