// zcode/core/tokenizer_train.h: train a SentencePiece vocabulary with the
// GLM-5.2 specials at the ids the guide gives them (`zcode-host tokenizer
// train` is its CLI; the Python bindings will call the same function).
//
// Writes two files into TokenizerTrainOptions::out_dir, each atomically
// (sdk/file.h): tokenizer.model (the SentencePiece ModelProto) and the marker
// sdk::kTrainedMarker ("zcode_tokenizer.json", version
// sdk::kTrainedMarkerVersion) that tells the tokenizer plugins to use the
// guide's special ids: <pad> 0, <bos> 1, <eos> 2, <mask> 3, <unk> 4; the other
// GLM-5.2 specials (<expert_i>, <image>) take the ids right after the learned
// vocabulary unless data.tokenizer.special_tokens pins them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace zcode {

/// What to train on and how; the CLI's flags, one to one (`--vocab-size` is
/// vocab_size).
struct TokenizerTrainOptions {
  /// Training files: *.jsonl / *.json are JSON lines (one object per line,
  /// the text in `text_field`); any other name is plain text, one sentence
  /// per non-blank line. At least one; each must be a regular file.
  std::vector<std::string> inputs;
  int64_t vocab_size = 0;              ///< pieces, specials included: 16..1000000
  std::string model_type = "unigram";  ///< "bpe" or "unigram" (SentencePiece's model_type)
  std::string out_dir;                 ///< created when missing
  std::string text_field = "text";     ///< the JSONL field holding the text
  /// Fraction of the characters seen that the vocabulary covers
  /// (SentencePiece's character_coverage; 0.9995 is its default).
  double character_coverage = 0.9995;
  bool byte_fallback = false;  ///< add <0xNN> byte pieces so no character is <unk>
  int num_threads = 2;         ///< SentencePiece trainer threads
};

/// What train_tokenizer wrote.
struct TokenizerTrainResult {
  std::string model_path;   ///< <out_dir>/tokenizer.model
  std::string marker_path;  ///< <out_dir>/zcode_tokenizer.json
  uint64_t vocab_size = 0;  ///< pieces in the trained model
  uint64_t sentences = 0;   ///< sentences read from the inputs
};

/// A refusal of train_tokenizer. kind() says whose fault it is: kBadInput
/// for an option out of range or a bad training record (the caller can fix
/// it), kFailure for the trainer or the file system failing. option() is the
/// option at fault in the CLI's spelling without "--" ("vocab-size",
/// "input"), or "" when no single option is (a bad record, a failed write).
/// what() is the message alone: "expected 16..1000000, found 5", or
/// "data.jsonl:2:1: missing field \"text\"" for a record.
class TokenizerTrainError : public std::runtime_error {
 public:
  enum class Kind { kBadInput, kFailure };
  TokenizerTrainError(Kind kind, std::string option, const std::string& message)
      : std::runtime_error(message), kind_(kind), option_(std::move(option)) {}
  Kind kind() const { return kind_; }
  const std::string& option() const { return option_; }

 private:
  Kind kind_;
  std::string option_;
};

/// Checks `options` (the ranges above; every input is a regular file)
/// without reading the inputs. Throws TokenizerTrainError(kBadInput) naming
/// the first option at fault.
void validate(const TokenizerTrainOptions& options);

/// validate(), then trains and writes the two files. Nothing is written
/// unless the trained model loads and holds <pad> <bos> <eos> <mask> <unk> at
/// ids 0..4. Throws TokenizerTrainError: kBadInput for bad options and for
/// the first bad record (`file:line:col: message`; JSON nested deeper than
/// 256 levels is a bad record, never a stack overflow), kFailure when
/// SentencePiece or a write fails.
TokenizerTrainResult train_tokenizer(const TokenizerTrainOptions& options);

}  // namespace zcode
