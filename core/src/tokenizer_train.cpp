// train_tokenizer: checks the options, has the SentencePiece trainer module
// (core/spm_trainer/, loaded here with dlopen(RTLD_LOCAL) on first use: why
// is said there) train the model, and writes the model and its marker.
#include <zcode/core/tokenizer_train.h>

#include <zcode/sdk/file.h>
#include <zcode/sdk/json.h>
#include <zcode/sdk/tokenizer_files.h>

#include <dlfcn.h>
#include <boost/dll/runtime_symbol_info.hpp>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "spm_trainer_module.h"

namespace zcode {
namespace fs = std::filesystem;
namespace {

using Kind = TokenizerTrainError::Kind;

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

namespace {

// The module: $ZCODE_SPM_TRAINER, else beside the plugins of this program
// (<dir of the executable>/../lib/zcode/: the build tree and an installed
// prefix alike), else the install folder. Loaded once; never unloaded.
using SpmTrainFn = void (*)(SpmTrainCall*);
SpmTrainFn spm_train_entry() {
  static std::once_flag once;
  static SpmTrainFn fn = nullptr;
  static std::string error;
  std::call_once(once, [] {
    std::vector<fs::path> candidates;
    if (const char* env = std::getenv("ZCODE_SPM_TRAINER"); env && *env) candidates.emplace_back(env);
    boost::dll::fs::error_code ec;
    const auto exe = boost::dll::program_location(ec);
    if (!ec)
      candidates.push_back(fs::path(exe.string()).parent_path() / ".." / "lib" / "zcode" / "libzcode_spm_trainer.so");
    candidates.emplace_back(ZCODE_SPM_TRAINER_INSTALL_PATH);
    std::string looked;
    for (const fs::path& p : candidates) {
      std::error_code fe;
      if (!fs::is_regular_file(p, fe)) {
        looked += (looked.empty() ? "" : ", ") + p.lexically_normal().string();
        continue;
      }
      void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        error = "cannot load the SentencePiece trainer " + p.string() + ": " + dlerror();
        return;
      }
      fn = reinterpret_cast<SpmTrainFn>(dlsym(h, "zcode_spm_train"));
      if (!fn) error = p.string() + " has no zcode_spm_train";
      return;
    }
    error = "the SentencePiece trainer module libzcode_spm_trainer.so was not found (looked in: " + looked +
            "; set ZCODE_SPM_TRAINER to its path)";
  });
  if (!fn) throw TokenizerTrainError(Kind::kFailure, "", error);
  return fn;
}

}  // namespace

TokenizerTrainResult train_tokenizer(const TokenizerTrainOptions& o) {
  validate(o);
  SpmTrainCall call;
  call.options = &o;
  spm_train_entry()(&call);
  const std::string& proto = call.proto;
  TokenizerTrainResult r;
  r.vocab_size = call.vocab_size;
  r.sentences = call.sentences;
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
