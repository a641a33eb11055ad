// bpe_model.h: a loaded byte-pair-encoding tokenizer (immutable, shareable
// across threads) and the per-thread encoder that runs it.
//
// BPE: Sennrich, Haddow & Birch 2016, "Neural Machine Translation of Rare
// Words with Subword Units", section 3.1 (merges applied greedily by learned
// rank). Byte-level BPE and its byte-to-unicode alphabet: Radford et al. 2019,
// section 2.2. The Hugging Face tokenizer.json pipeline order (added tokens,
// normalizer, pre-tokenizer, model, decoder) is that of the `tokenizers`
// library's documentation ("The tokenization pipeline").
#pragma once

#include "flat_map.h"
#include "shared_word_cache.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zcode::tok {

/// One step of a normalizer or decoder chain from tokenizer.json.
struct TextOp {
  enum Kind { kPrepend, kReplace, kNfc, kNfd, kStrip, kByteLevel, kByteFallback, kFuse, kMetaspace } kind;
  std::string a, b;             ///< Prepend: a; Replace: a -> b; Strip: a = content; Metaspace: a = replacement
  int32_t start = 0, stop = 0;  ///< Strip counts; Metaspace: start = 1 when the prefix space is stripped
};

/// The pre-tokenizer of a model.
struct PreTokenizer {
  enum Kind { kNone, kByteLevel, kMetaspace } kind = kNone;
  bool add_prefix_space = false;             ///< ByteLevel
  bool use_regex = true;                     ///< ByteLevel: split with the GPT-2 pattern
  std::string replacement = "\xE2\x96\x81";  ///< Metaspace (U+2581)
  int prepend = 0;                           ///< Metaspace: 0 never, 1 first, 2 always
  bool split = true;                         ///< Metaspace: split on the replacement
};

/// A token from tokenizer.json's added_tokens.
struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

/// Hash for heterogeneous string lookup.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return hash_bytes(s); }
};

/// An immutable BPE tokenizer: vocabulary, merge ranks and the text pipeline.
/// Thread-safe to share (all methods const). It also owns the word cache
/// that all its encoders share (lock-free, see shared_word_cache.h).
class BpeModel {
 public:
  /// Loads the GPT-2 format: `vocab_path` (encoder.json / vocab.json: token -> id)
  /// and `merges_path` (vocab.bpe / merges.txt: "#version" line, then "a b" per
  /// line, rank = line order). Throws zcode::sdk::Error (ZC_ERR_DATA, naming
  /// file:line or the JSON path; ZC_ERR_NOT_FOUND/IO for unreadable files).
  static std::shared_ptr<const BpeModel> load_gpt2(const std::string& vocab_path, const std::string& merges_path);
  /// Loads a Hugging Face tokenizer.json with model.type "BPE". Unsupported
  /// pipeline parts are a ZC_ERR_UNSUPPORTED error naming the JSON path.
  static std::shared_ptr<const BpeModel> load_hf_json(const std::string& path);
  /// Same from bytes already read (`name` is used in messages); for the fuzzer.
  /// Words the model-wide cache shared by every encoder of a model can hold
  /// (with 64 bytes of records per word: 8 MiB); reserved when the model is
  /// parsed. The fuzz target passes a small count, so that a model per input
  /// does not cost 12 MiB of allocation.
  static constexpr size_t kSharedCacheWords = size_t{1} << 17;
  /// Ids a vocabulary file may leave without a token (holes below its largest
  /// id). The token table is dense (one string per id up to the largest), so
  /// an unbounded id would let a one-entry vocab.json demand gigabytes; real
  /// files have none (GPT-2, Llama-2) or a few reserved ids. A file's largest
  /// id must be below (its vocabulary entries + added_tokens) + this.
  static constexpr size_t kMaxUnassignedIds = size_t{1} << 16;
  static std::shared_ptr<const BpeModel> parse_hf_json(std::string_view json, const std::string& name,
                                                       size_t shared_cache_words = kSharedCacheWords);
  static std::shared_ptr<const BpeModel> parse_gpt2(std::string_view vocab_json, std::string_view merges,
                                                    const std::string& vocab_name, const std::string& merges_name,
                                                    size_t shared_cache_words = kSharedCacheWords);

  /// Ids 0..size()-1 of the model's own vocabulary (added tokens included).
  size_t size() const { return tokens_.size(); }
  /// Id of a token string as written in the file, or -1.
  int32_t token_to_id(std::string_view token) const;
  /// Token string as written in the file ("" for an id that has none).
  const std::string& id_to_token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  bool byte_level() const { return byte_level_; }
  const std::string& format() const { return format_; }

  /// Appends the raw bytes ids[0..n) decode to (the file's decoder chain; see
  /// README for the ByteFallback difference). Ids must be < size().
  void decode(const int32_t* ids, size_t n, std::string& out) const;

 private:
  friend class BpeEncoder;
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  void finish(const std::string& where);  // builds lookup tables after parsing

  std::string format_;  // "gpt2" or "tokenizer.json"
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  U64Map<Merge> merges_;      // key (left << 32 | right) + 1
  U64Map<int32_t> char_ids_;  // code point + 1 -> id of the one-character token
  bool byte_level_ = false;   // symbols are bytes through the GPT-2 byte alphabet
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  int32_t unk_id_ = -1;
  int32_t byte_ids_[256];  // byte-level: id of each byte; byte_fallback: id of <0xNN>
  std::vector<TextOp> normalizer_, decoder_;
  PreTokenizer pre_;
  std::vector<AddedToken> added_;
  std::vector<std::string> id_bytes_;  // fast decode for a pure ByteLevel decoder
  bool fast_decode_ = false;
  // Word -> ids results of every encoder of this model; only ever grows, and
  // only with what bpe() computes, so it does not change any result.
  std::unique_ptr<SharedWordCache> word_cache_;  // made by parse_*
};

/// Runs a BpeModel on text segments. Holds scratch buffers and a private
/// overflow word cache (used once the model's shared cache is full), so it is
/// NOT thread-safe: use one per thread (they may share the model). After
/// warm-up, encoding allocates nothing per token.
class BpeEncoder {
 public:
  /// `cache_entries`: size of the private overflow cache.
  explicit BpeEncoder(std::shared_ptr<const BpeModel> model, size_t cache_entries = size_t{1} << 16);
  /// Returns the unused part of its shared-cache reservation.
  ~BpeEncoder();
  // Not copyable or movable: a copy would write into the same reserved bytes.
  BpeEncoder(const BpeEncoder&) = delete;
  BpeEncoder& operator=(const BpeEncoder&) = delete;
  /// Appends to `out` the ids of a plain-text segment (no special-token
  /// parsing: callers split specials first). `first` is true for the segment
  /// at offset 0 of the caller's text (Metaspace prepend_scheme "first").
  void encode(std::string_view text, std::vector<int32_t>& out, bool first = true);
  const BpeModel& model() const { return *model_; }

 private:
  void encode_word(std::string_view word, std::vector<int32_t>& out);
  void remember(std::string_view word, uint64_t h, const int32_t* ids, size_t n);  // shared cache, else private
  void bpe(std::vector<int32_t>& out);  // merges syms_ in place, appends to out
  void pretokenize(std::string_view text, std::vector<int32_t>& out, bool first);

  std::shared_ptr<const BpeModel> model_;
  WordCache cache_;
  SharedWordCache::Writer cache_writer_;  // this encoder's blocks of the shared cache
  std::string norm_;                      // normalized text scratch
  std::vector<int32_t> syms_, tmp_;       // symbols of the current word
  std::vector<int32_t> prev_, next_;      // linked list for long words
  struct HeapItem {
    int32_t rank, pos;
  };
  std::vector<HeapItem> heap_;
};

/// Encodes many texts on `num_threads` threads (one BpeEncoder each, sharing
/// `model`); results are in input order. For benchmarks and data loaders.
std::vector<std::vector<int32_t>> encode_batch(const std::shared_ptr<const BpeModel>& model,
                                               const std::vector<std::string_view>& texts, int num_threads);

}  // namespace zcode::tok
