// sentencepiece_plugin.cpp: the `sentencepiece` tokenizer component. Debian's
// libsentencepiece (Kudo & Richardson 2018, "SentencePiece: A simple and
// language independent subword tokenizer") loads a .model file, encodes and
// decodes. Optional subword regularization (Kudo 2018, "Subword
// Regularization", section 3: sampling from the unigram lattice with
// smoothing alpha; for BPE models alpha is the BPE-dropout probability,
// Provilkov et al. 2020) is seeded from the host's derive_seed.
//
// Normalization is the model's own (trained models default to nmt_nfkc: NFKC
// plus collapsing and trimming of whitespace; see README), so decode(encode(x))
// returns the normalized text, not always x.
#include "tokenizer_common.h"

#include <zcode/sdk/plugin.h>

#include <sentencepiece_processor.h>

namespace zcode::tok {
namespace {

using sdk::Error;

class SentencePieceTokenizer : public sdk::Tokenizer {
 public:
  explicit SentencePieceTokenizer(const sdk::CreateContext& ctx) {
    const sdk::Options& o = ctx.options();
    std::string ref = o.get<std::string>("path", "");
    ResolvedRef r = resolve_reference(ref);
    if (r.kind != "sentencepiece")
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data.tokenizer.path: '" + r.files[0] + "' is not a SentencePiece .model (" +
                                               r.kind + "); use data.tokenizer.type: bpe");
    auto st = sp_.Load(r.files[0]);
    if (!st.ok()) throw Error(ZC_ERR_DATA, r.files[0] + ": cannot load SentencePiece model: " + st.ToString());
    alpha_ = o.get<double>("sampling_alpha", 0.0);
    nbest_ = o.get<int32_t>("nbest", -1);
    if (alpha_ < 0.0 || alpha_ > 1.0)
      sdk::invalid_argument("data.tokenizer.sampling_alpha: expected 0..1 (0 = no sampling), found " +
                            std::to_string(alpha_));
    if (nbest_ == 0 || nbest_ < -1)
      sdk::invalid_argument("data.tokenizer.nbest: expected -1 (all segmentations) or >= 1, found " +
                            std::to_string(nbest_));
    if (alpha_ > 0.0) {
      // libsentencepiece keeps one process-wide seed; each thread's generator is seeded from it
      // at that thread's first draw. So samples are reproducible per run for a thread that starts
      // drawing after this create (a data-loader worker); the last sampling instance's seed wins.
      seed_ = ctx.host().derive_seed("tokenizer.sentencepiece");
      sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(seed_ ^ (seed_ >> 32)));
    }
    base_ = static_cast<size_t>(sp_.GetPieceSize());
    std::vector<FileToken> file_tokens;
    for (size_t id = 0; id < base_; ++id)
      if (sp_.IsControl(static_cast<int>(id)) || sp_.IsUnknown(static_cast<int>(id)))
        file_tokens.push_back(
            FileToken{sp_.IdToPiece(static_cast<int>(id)), static_cast<int32_t>(id), true, false, false, false});
    auto lookup = [this](std::string_view t) {
      int id = sp_.PieceToId(std::string(t));
      return (id >= 0 && sp_.IdToPiece(id) == t) ? static_cast<int32_t>(id) : -1;
    };
    specials_ = std::make_unique<Specials>(o, ctx.config(), base_, lookup, marker_version(r.marker), file_tokens);
    int64_t experts = ctx.config().object("model").get<int64_t>("moe_experts", 0);
    std::vector<std::string> files = r.files;
    if (!r.marker.empty()) files.push_back(r.marker);
    std::string identity =
        identity_sha256(files, "sentencepiece|" + sdk::to_json(o.json()) + "|moe_experts=" + std::to_string(experts));
    sdk::json::Writer w;
    w.begin_object().key("name").string("sentencepiece").key("format").string("sentencepiece").key("path").string(ref);
    w.key("files").begin_array().string(r.files[0]).end_array();
    w.key("identity").string(identity).key("vocab_size").integer(specials_->vocab_size());
    w.key("base_vocab_size").integer(base_).key("trained_by_zcode").boolean(!r.marker.empty());
    // %f (std::to_string's format), as this info_json has always shown it.
    w.key("unk_id").integer(sp_.unk_id()).key("sampling_alpha").fixed(alpha_, 6).key("nbest").integer(nbest_);
    specials_->write_members(w);
    w.end_object();
    info_ = w.str();
  }

  uint64_t vocab_size() const override { return specials_->vocab_size(); }

  void encode(std::string_view text, uint32_t flags, sdk::IdSink& out) override {
    ids_.clear();
    specials_->split(
        text, (flags & ZC_ENCODE_ALLOW_SPECIAL) != 0,
        [this](std::string_view seg, bool) {
          auto st = alpha_ > 0.0 ? sp_.SampleEncode(seg, nbest_, static_cast<float>(alpha_), &piece_ids_)
                                 : sp_.Encode(seg, &piece_ids_);
          if (!st.ok()) throw Error(ZC_ERR_DATA, "sentencepiece encode: " + st.ToString());
          ids_.insert(ids_.end(), piece_ids_.begin(), piece_ids_.end());
        },
        [this](int32_t id) { ids_.push_back(id); });
    out.append(ids_.data(), ids_.size());
  }

  void decode(const int32_t* ids, size_t n, sdk::ByteSink& out) override {
    text_.clear();
    piece_ids_.clear();
    auto flush = [&] {
      if (piece_ids_.empty()) return;
      std::string s;
      auto st = sp_.Decode(piece_ids_, &s);
      if (!st.ok()) throw Error(ZC_ERR_DATA, "sentencepiece decode: " + st.ToString());
      text_ += s;
      piece_ids_.clear();
    };
    for (size_t i = 0; i < n; ++i) {
      int32_t id = ids[i];
      if (id < 0 || static_cast<uint64_t>(id) >= specials_->vocab_size())
        throw Error(ZC_ERR_INVALID_ARGUMENT, "decode: id " + std::to_string(id) + " at position " + std::to_string(i) +
                                                 " is out of range [0, " + std::to_string(specials_->vocab_size()) +
                                                 ")");
      if (static_cast<size_t>(id) < base_) {
        piece_ids_.push_back(id);
        continue;
      }
      flush();
      const std::string* t = specials_->extra_text(id);
      if (!t)
        throw Error(ZC_ERR_INVALID_ARGUMENT, "decode: id " + std::to_string(id) + " is not assigned to any token");
      text_ += *t;
    }
    flush();
    out.append(text_);
  }

  int32_t token_to_id(std::string_view token) const override {
    int32_t id = specials_->special_id(token);
    if (id >= 0) return id;
    int p = sp_.PieceToId(std::string(token));
    return (p >= 0 && sp_.IdToPiece(p) == token) ? p : -1;
  }

  void id_to_token(int32_t id, sdk::ByteSink& out) const override {
    if (id < 0 || static_cast<uint64_t>(id) >= specials_->vocab_size())
      throw Error(ZC_ERR_INVALID_ARGUMENT, "id_to_token: id " + std::to_string(id) + " is out of range");
    if (static_cast<size_t>(id) < base_) {
      out.append(sp_.IdToPiece(id));
      return;
    }
    const std::string* t = specials_->extra_text(id);
    if (!t)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "id_to_token: id " + std::to_string(id) + " is not assigned to any token");
    out.append(*t);
  }

  const std::string& info_json() const override { return info_; }

 private:
  sentencepiece::SentencePieceProcessor sp_;
  size_t base_ = 0;
  double alpha_ = 0.0;
  int32_t nbest_ = -1;
  uint64_t seed_ = 0;
  std::unique_ptr<Specials> specials_;
  std::string info_, text_;
  std::vector<int32_t> ids_;
  std::vector<int> piece_ids_;
};

constexpr const char kSchema[] = R"JSON({"type":"object","properties":{
"type":{"type":"string","default":"sentencepiece","description":"component name"},
"path":{"type":"string","description":"SentencePiece .model file, a folder holding one, or hf://NAME (offline)"},
"allowed_special":{"type":["string","array"],"items":{"type":"string"},"default":"none",
 "description":"special tokens parsed in text: all, none or a list of them (tiktoken semantics)"},
"special_tokens":{"type":"object","additionalProperties":{"type":"integer","minimum":0},
 "description":"override special-token ids"},
"sampling_alpha":{"type":"number","minimum":0,"maximum":1,"default":0,
 "description":"subword regularization: unigram smoothing alpha or BPE-dropout probability (0 = deterministic)"},
"nbest":{"type":"integer","minimum":-1,"default":-1,"description":"sample from the n best segmentations (-1 = all)"}
},"required":["path"],"additionalProperties":false})JSON";

}  // namespace
}  // namespace zcode::tok

ZCODE_PLUGIN("sentencepiece", "1.0.0", "Apache-2.0", "SentencePiece tokenizer (libsentencepiece)",
             ZCODE_COMPONENT(zcode::tok::SentencePieceTokenizer, "sentencepiece",
                             "SentencePiece .model (unigram or BPE), optional subword-regularization sampling",
                             zcode::tok::kSchema))
