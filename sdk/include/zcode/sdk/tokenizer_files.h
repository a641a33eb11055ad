// zcode/sdk/tokenizer_files.h: which tokenizer files a path holds, and so
// which tokenizer plugin ("bpe" or "sentencepiece") loads it (header-only).
//
// One rule for the config checks, the CLI and the tokenizer plugins: the
// plugin the host picks for a data.tokenizer without `type` is always the one
// whose resolver accepts the files.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace zcode::sdk {

/// Name of the marker file `tokenizer train` (zcode/core/tokenizer_train.h)
/// writes next to its tokenizer.model; the tokenizer plugins read it. It is
/// not a vocabulary: tokenizer_files_in_folder never returns it.
inline constexpr const char* kTrainedMarker = "zcode_tokenizer.json";

/// The marker version `tokenizer train` writes today. 1: the specials missing
/// from the vocabulary take the guide's ids (1000 + i, 250000); 2: they follow
/// the vocabulary.
inline constexpr int kTrainedMarkerVersion = 2;

/// The tokenizer files found in one folder.
struct TokenizerFiles {
  std::string kind;                ///< "tokenizer.json", "gpt2" or "sentencepiece"
  std::vector<std::string> files;  ///< [tokenizer.json] | [vocab, merges] | [model]
};

/// True when the file name of `path` has the extension ".model" in any case
/// ("tokenizer.model", "SP.MODEL"; not a bare ".model", which is a dotfile
/// without extension). Looks at the name only, never at the file.
inline bool is_sentencepiece_model_name(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".model";
}

/// The tokenizer files in folder `dir`, in order of preference:
/// tokenizer.json; vocab.json + merges.txt; encoder.json + vocab.bpe;
/// tokenizer.model, else the first other *.model by name
/// (is_sentencepiece_model_name). nullopt when `dir` is not a readable
/// folder or holds none of these. Never throws filesystem errors.
inline std::optional<TokenizerFiles> tokenizer_files_in_folder(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto is_file = [](const fs::path& p) {
    std::error_code e;
    return fs::is_regular_file(p, e);
  };
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  if (is_file(dir / "tokenizer.json")) return TokenizerFiles{"tokenizer.json", {(dir / "tokenizer.json").string()}};
  for (auto [v, m] : {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}})
    if (is_file(dir / v) && is_file(dir / m)) return TokenizerFiles{"gpt2", {(dir / v).string(), (dir / m).string()}};
  if (is_file(dir / "tokenizer.model")) return TokenizerFiles{"sentencepiece", {(dir / "tokenizer.model").string()}};
  std::vector<fs::path> models;
  for (auto& e : fs::directory_iterator(dir, ec))
    if (is_sentencepiece_model_name(e.path()) && is_file(e.path())) models.push_back(e.path());
  if (models.empty()) return std::nullopt;
  return TokenizerFiles{"sentencepiece", {std::min_element(models.begin(), models.end())->string()}};
}

/// The tokenizer plugin that loads reference `ref` (data.tokenizer.path, or
/// the data.tokenizer string) when no `type` is given: "sentencepiece" for a
/// *.model file name (any case) or a folder whose preferred tokenizer files
/// (tokenizer_files_in_folder) are a SentencePiece model, else "bpe". An
/// hf://NAME reference is not looked up (only its name is read), so a
/// SentencePiece hub model needs `type: sentencepiece`. Reads the filesystem
/// only to see whether `ref` is a folder and what it holds; never throws
/// filesystem errors.
inline std::string tokenizer_plugin_for_reference(std::string_view ref) {
  const std::filesystem::path p{std::string(ref)};
  std::error_code ec;
  if (!ref.starts_with("hf://") && std::filesystem::is_directory(p, ec)) {
    auto found = tokenizer_files_in_folder(p);
    return found && found->kind == "sentencepiece" ? "sentencepiece" : "bpe";
  }
  return is_sentencepiece_model_name(p) ? "sentencepiece" : "bpe";
}

}  // namespace zcode::sdk
