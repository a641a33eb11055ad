// The SentencePiece trainer, loaded by zcode::train_tokenizer
// (core/src/tokenizer_train.cpp) with dlopen(RTLD_LOCAL) only when a
// vocabulary is trained. Why a module: Debian's libsentencepiece exports the
// copy of protobuf-lite it bundles; linked into zcode-host (or any program
// that links zcode_core), those symbols stood first in the process's global
// scope and plugins using Debian's libprotobuf (the tensorboard callback)
// had their protobuf calls bound to that older copy and crashed. Loaded
// RTLD_LOCAL, the library's symbols stay out of everyone else's lookup.
//
// The sentences come from our own iterator, so JSONL records are read with
// the bounded parser and a bad record stops training with its place.
#include <zcode/core/tokenizer_train.h>

#include <zcode/sdk/json.h>

#include <rapidjson/document.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <unordered_map>

#include "spm_trainer_module.h"

namespace zcode {
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

}  // namespace
}  // namespace zcode

extern "C" __attribute__((visibility("default"))) void zcode_spm_train(zcode::SpmTrainCall* call) {
  using zcode::TokenizerTrainError;
  const zcode::TokenizerTrainOptions& o = *call->options;
  zcode::LineIterator it(o.inputs, o.text_field);
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
  const auto st = sentencepiece::SentencePieceTrainer::Train(kw, &it, &call->proto);
  if (!it.status().ok())
    throw TokenizerTrainError(TokenizerTrainError::Kind::kBadInput, "", std::string(it.status().message()));
  if (!st.ok()) throw TokenizerTrainError(TokenizerTrainError::Kind::kFailure, "", st.ToString());
  // Check the ids the plugins rely on before anything is written.
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(call->proto).ok())
    throw TokenizerTrainError(TokenizerTrainError::Kind::kFailure, "", "the trained model does not load");
  const char* const want[] = {"<pad>", "<bos>", "<eos>", "<mask>", "<unk>"};
  for (int i = 0; i < 5; ++i)
    if (sp.IdToPiece(i) != want[i])
      throw TokenizerTrainError(
          TokenizerTrainError::Kind::kFailure, "",
          "trained model has '" + sp.IdToPiece(i) + "' at id " + std::to_string(i) + ", expected " + want[i]);
  call->vocab_size = static_cast<uint64_t>(sp.GetPieceSize());
  call->sentences = it.sentences();
}
