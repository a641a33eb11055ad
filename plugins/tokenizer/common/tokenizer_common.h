// tokenizer_common.h: what the bpe and sentencepiece plugins share: resolving
// a tokenizer reference offline, the GLM-5.2 special tokens and their ids,
// special-token parsing in text (tiktoken's allowed_special semantics), and
// the tokenizer identity hash.
#pragma once

#include <zcode/sdk/json.h>
#include <zcode/sdk/options.h>
#include <zcode/sdk/tokenizer_files.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace zcode::tok {

/// The files a tokenizer reference resolved to.
struct ResolvedRef {
  std::string kind;                ///< "tokenizer.json", "gpt2" or "sentencepiece"
  std::vector<std::string> files;  ///< [tokenizer.json] | [vocab, merges] | [model]
  std::string marker;              ///< path of zcode_tokenizer.json (written by `tokenizer train`), or ""
};

/// Resolves `ref`: a file, a folder, or hf://NAME looked up OFFLINE in
/// $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub (models--NAME with
/// "/" -> "--", snapshots/*), then the assets folder ($ZCODE_ASSETS_DIR/hf/NAME,
/// else <prefix>/share/zcode/assets/hf/NAME beside the plugin's lib/zcode/plugins
/// and the per-user $XDG_DATA_HOME/zcode/assets/hf/NAME, default
/// ~/.local/share/zcode/assets/hf/NAME).
/// In a folder: tokenizer.json, then vocab.json + merges.txt, then
/// encoder.json + vocab.bpe, then tokenizer.model / *.model (any case; the
/// rule of zcode/sdk/tokenizer_files.h, which also picks the plugin). Throws
/// sdk::Error(ZC_ERR_NOT_FOUND) listing every place searched.
ResolvedRef resolve_reference(const std::string& ref, const std::string& option_path = "data.tokenizer.path");

/// Every folder searched for hf://NAME, in order (for messages and the CLI).
std::vector<std::string> hf_search_dirs(const std::string& name);

/// A token the tokenizer file itself declares (added_tokens, GPT-2's
/// <|endoftext|>, SentencePiece control symbols).
struct FileToken {
  std::string text;
  int32_t id = -1;
  bool special = true;  ///< false: an ordinary added token, always matched in text
  bool lstrip = false, rstrip = false, single_word = false;
};

/// The GLM-5.2 specials and every other special, with ids; parses specials
/// in text. See plugins/tokenizer/README.md ("Special tokens") for the rules.
class Specials {
 public:
  /// `base_size`: ids of the loaded vocabulary; `lookup`: base token text ->
  /// id or -1; `trained`: the version of the `zcode-host tokenizer train`
  /// marker beside the vocabulary (marker_version; 0: none). Version 1 gives
  /// a GLM special missing from the vocabulary its guide id (<expert_i>
  /// 1000 + i, <image> 250000), leaving the ids between unassigned; version 2
  /// appends them right after the learned vocabulary, as for a pretrained
  /// one. Reads options `special_tokens` (object text -> id, which pins an
  /// id under either rule) and `allowed_special` ("all", "none" or a list),
  /// and config `model.moe_experts`.
  Specials(const sdk::Options& options, const sdk::Options& config, size_t base_size,
           const std::function<int32_t(std::string_view)>& lookup, int trained, std::vector<FileToken> file_tokens);

  uint64_t vocab_size() const { return vocab_size_; }
  size_t base_size() const { return base_size_; }
  int32_t pad_id() const { return pad_; }
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t mask_id() const { return mask_; }
  /// Text of an id outside the base vocabulary, or nullptr when unassigned.
  const std::string* extra_text(int32_t id) const;
  /// Id of a special's text (GLM or file special), or -1.
  int32_t special_id(std::string_view text) const;

  /// Splits `text` at special tokens: calls plain(segment, at_start) for text
  /// and special(id) for a recognised special. Specials are recognised only
  /// when allowed (`allow_all`, or the allowed_special option); ordinary added
  /// tokens always. Longest match wins at each position.
  void split(std::string_view text, bool allow_all, const std::function<void(std::string_view, bool)>& plain,
             const std::function<void(int32_t)>& special) const;
  /// True when split() can recognise anything in this mode (else callers skip it).
  bool may_match(bool allow_all) const { return allow_all ? !matchers_.empty() : any_default_; }

  /// The "specials" object, pad/bos/eos/mask ids, the mapping notes and
  /// "unassigned_ids" (half-open [first, end) ranges of ids no token has,
  /// e.g. [[600,1000],[1002,250000]] for a marker-version-1 vocabulary of 600
  /// pieces and 2 experts), as members of the info_json object `w` has open.
  void write_members(sdk::json::Writer& w) const;

 private:
  struct Matcher {
    std::string text;
    int32_t id;
    bool allowed;  // by the allowed_special option (or always, for ordinary added tokens)
    bool lstrip, rstrip, single_word;
  };
  size_t base_size_ = 0;
  uint64_t vocab_size_ = 0;
  int32_t pad_ = -1, bos_ = -1, eos_ = -1, mask_ = -1;
  std::vector<std::pair<std::string, int32_t>> glm_;          // GLM specials in guide order
  std::vector<std::pair<std::string, std::string>> aliases_;  // "<eos>" -> "<|endoftext|>"
  std::vector<FileToken> file_;
  std::vector<std::pair<int32_t, std::string>> extra_;  // ids >= base_size, sorted
  std::vector<Matcher> matchers_;                       // longest first
  bool first_byte_[256] = {};
  bool any_default_ = false;
};

/// Lower-case hex SHA-256 (FIPS 180-4, via OpenSSL EVP) over each file's name
/// and bytes, then `extra` (canonical options and the expert count).
std::string identity_sha256(const std::vector<std::string>& files, const std::string& extra);

/// The marker `tokenizer train` writes next to its model, and its version
/// (defined with the tokenizer files in sdk/tokenizer_files.h).
using sdk::kTrainedMarker;
using sdk::kTrainedMarkerVersion;

/// The `version` of the marker file at `path` (1 or 2); 0 when `path` is "".
/// Throws sdk::Error(ZC_ERR_INVALID_ARGUMENT) naming the file when it is not
/// a JSON object with an integer version of 1..kTrainedMarkerVersion.
int marker_version(const std::string& path);

}  // namespace zcode::tok
