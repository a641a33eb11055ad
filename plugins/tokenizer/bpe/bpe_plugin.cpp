// bpe_plugin.cpp: the `bpe` tokenizer component (GPT-2 files and Hugging Face
// tokenizer.json with model type BPE) behind the ZCode tokenizer ABI.
//
// Threading: one instance per thread (ABI contract). Instances loading the
// same files share one immutable BpeModel (process-wide cache), so a data
// loader parallelises by creating one tokenizer instance per worker: the
// second instance costs only its word cache.
#include "bpe_model.h"
#include "tokenizer_common.h"
#include "unicode.h"

#include <zcode/sdk/plugin.h>

#include <filesystem>
#include <map>
#include <mutex>

namespace zcode::tok {
namespace {

using sdk::Error;

std::shared_ptr<const BpeModel> shared_model(const ResolvedRef& r) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const BpeModel>> cache;
  std::string key = r.kind;
  for (const std::string& f : r.files) {
    std::error_code ec;
    auto size = std::filesystem::file_size(f, ec);
    auto mtime = std::filesystem::last_write_time(f, ec).time_since_epoch().count();
    key += "|" + f + "|" + std::to_string(size) + "|" + std::to_string(mtime);
  }
  std::lock_guard<std::mutex> lock(mu);
  if (auto m = cache[key].lock()) return m;
  auto m = r.kind == "gpt2" ? BpeModel::load_gpt2(r.files[0], r.files[1]) : BpeModel::load_hf_json(r.files[0]);
  cache[key] = m;
  return m;
}

class BpeTokenizer : public sdk::Tokenizer {
 public:
  explicit BpeTokenizer(const sdk::CreateContext& ctx) {
    const sdk::Options& o = ctx.options();
    std::string ref = o.get<std::string>("path", "");
    ResolvedRef r = resolve_reference(ref);
    if (r.kind == "sentencepiece")
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data.tokenizer.path: '" + r.files[0] +
                                               "' is a SentencePiece model; use data.tokenizer.type: sentencepiece");
    model_ = shared_model(r);
    enc_ = std::make_unique<BpeEncoder>(model_);
    std::vector<FileToken> file_tokens;
    for (const AddedToken& a : model_->added_tokens())
      file_tokens.push_back(FileToken{a.content, a.id, a.special, a.lstrip, a.rstrip, a.single_word});
    if (r.kind == "gpt2") {  // GPT-2's one control token has no added_tokens entry
      int32_t eot = model_->token_to_id("<|endoftext|>");
      if (eot >= 0) file_tokens.push_back(FileToken{"<|endoftext|>", eot, true, false, false, false});
    }
    const BpeModel* m = model_.get();
    specials_ = std::make_unique<Specials>(
        o, ctx.config(), m->size(), [m](std::string_view t) { return m->token_to_id(t); }, marker_version(r.marker),
        file_tokens);
    int64_t experts = ctx.config().object("model").get<int64_t>("moe_experts", 0);
    std::vector<std::string> files = r.files;
    if (!r.marker.empty()) files.push_back(r.marker);
    std::string identity =
        identity_sha256(files, "bpe|" + sdk::to_json(o.json()) + "|moe_experts=" + std::to_string(experts));
    sdk::json::Writer w;
    w.begin_object().key("name").string("bpe").key("format").string(m->format()).key("path").string(ref);
    w.key("files").begin_array();
    for (const auto& f : r.files) w.string(f);
    w.end_array().key("identity").string(identity).key("vocab_size").integer(specials_->vocab_size());
    w.key("base_vocab_size").integer(m->size()).key("trained_by_zcode").boolean(!r.marker.empty());
    specials_->write_members(w);
    w.key("unicode_version").string(unicode_tables_version()).end_object();
    info_ = w.str();
  }

  uint64_t vocab_size() const override { return specials_->vocab_size(); }

  void encode(std::string_view text, uint32_t flags, sdk::IdSink& out) override {
    ids_.clear();
    bool allow = (flags & ZC_ENCODE_ALLOW_SPECIAL) != 0;
    if (!specials_->may_match(allow)) {
      enc_->encode(text, ids_, true);
    } else {
      specials_->split(
          text, allow, [this](std::string_view seg, bool first) { enc_->encode(seg, ids_, first); },
          [this](int32_t id) { ids_.push_back(id); });
    }
    out.append(ids_.data(), ids_.size());
  }

  void decode(const int32_t* ids, size_t n, sdk::ByteSink& out) override {
    bytes_.clear();
    const size_t base = model_->size();
    size_t run = 0;  // start of the current run of base-vocabulary ids
    for (size_t i = 0; i < n; ++i) {
      int32_t id = ids[i];
      if (id < 0 || static_cast<uint64_t>(id) >= specials_->vocab_size())
        throw Error(ZC_ERR_INVALID_ARGUMENT, "decode: id " + std::to_string(id) + " at position " + std::to_string(i) +
                                                 " is out of range [0, " + std::to_string(specials_->vocab_size()) +
                                                 ")");
      if (static_cast<size_t>(id) < base) continue;
      model_->decode(ids + run, i - run, bytes_);
      const std::string* t = specials_->extra_text(id);
      if (!t)
        throw Error(ZC_ERR_INVALID_ARGUMENT, "decode: id " + std::to_string(id) + " is not assigned to any token");
      bytes_ += *t;
      run = i + 1;
    }
    model_->decode(ids + run, n - run, bytes_);
    out.append(bytes_);
  }

  int32_t token_to_id(std::string_view token) const override {
    int32_t id = specials_->special_id(token);
    return id >= 0 ? id : model_->token_to_id(token);
  }

  void id_to_token(int32_t id, sdk::ByteSink& out) const override {
    if (id < 0 || static_cast<uint64_t>(id) >= specials_->vocab_size())
      throw Error(ZC_ERR_INVALID_ARGUMENT, "id_to_token: id " + std::to_string(id) + " is out of range [0, " +
                                               std::to_string(specials_->vocab_size()) + ")");
    if (static_cast<size_t>(id) < model_->size()) {
      out.append(model_->id_to_token(id));
      return;
    }
    const std::string* t = specials_->extra_text(id);
    if (!t)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "id_to_token: id " + std::to_string(id) + " is not assigned to any token");
    out.append(*t);
  }

  const std::string& info_json() const override { return info_; }

 private:
  std::shared_ptr<const BpeModel> model_;
  std::unique_ptr<BpeEncoder> enc_;
  std::unique_ptr<Specials> specials_;
  std::string info_;
  std::vector<int32_t> ids_;
  std::string bytes_;
};

}  // namespace
}  // namespace zcode::tok

namespace {
constexpr const char kBpeSchema[] = R"JSON({"type":"object","properties":{
"type":{"type":"string","default":"bpe","description":"component name"},
"path":{"type":"string","description":"tokenizer file, folder, or hf://NAME (resolved offline)"},
"allowed_special":{"type":["string","array"],"items":{"type":"string"},"default":"none",
 "description":"special tokens parsed in text: all, none or a list of them (tiktoken semantics)"},
"special_tokens":{"type":"object","additionalProperties":{"type":"integer","minimum":0},
 "description":"override special-token ids, e.g. {<pad>: 50257}"}
},"required":["path"],"additionalProperties":false})JSON";
}  // namespace

ZCODE_PLUGIN(
    "bpe", "1.0.0", "Apache-2.0", "Byte-level BPE tokenizers: GPT-2 files and Hugging Face tokenizer.json",
    ZCODE_COMPONENT(zcode::tok::BpeTokenizer, "bpe",
                    "Byte-pair encoding (GPT-2 encoder.json+vocab.bpe / vocab.json+merges.txt, HF tokenizer.json BPE)",
                    kBpeSchema))
