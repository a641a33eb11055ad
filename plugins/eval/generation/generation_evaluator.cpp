// `generation`: generation metrics of the model as it trains (kind evaluator).
//
// For each of the first evaluation.generation.max_documents documents of the
// file of evaluation.split (data.val_path, or data.train_path for train; field
// data.text_field), or of a prompts file
// ({"prompt": ..., "reference": ...} lines), the document's tokens are split:
// the first prompt_fraction of them (at least one, leaving at least one) are
// the prompt, the next max_new_tokens tokens, decoded, are the reference; the
// model continues the prompt with the config's `generation` options
// (zcode/generation/generate.h, over its KV cache) and the continuation is the
// hypothesis. Over all documents (sdk/textmetrics, one implementation with
// `zcode-host score`):
//   bleu                 corpus BLEU as sacreBLEU (13a, exp smoothing), 0..100
//   rouge1, rouge2, rougeL  mean ROUGE F-measure as rouge-score (unicode: any script)
//   meteor               mean METEOR as NLTK's meteor_score (whitespace tokens, WordNet)
//   distinct_1, distinct_2, entropy, repetition  over the generated token ids
//   documents            how many were scored
// The engine reports them as generation_<metric>, to every sink. Each
// evaluation also rewrites logs/generation_eval.jsonl (prompt, reference,
// hypothesis per document), so a reader can recompute any score.
// The `data` stage the host passes is not read: documents, not packed rows,
// are the unit here. So `zcode-host evaluate --split` reaches this evaluator
// only through the config's evaluation.split (set it with --set).
#include <zcode/generation/config_options.h>
#include <zcode/generation/generate.h>
#include <zcode/generation/model_decoder.h>
#include <zcode/sdk/buffers.h>
#include <zcode/sdk/file.h>
#include <zcode/sdk/json.h>
#include <zcode/sdk/plugin.h>
#include <zcode/textmetrics/bleu.h>
#include <zcode/textmetrics/diversity.h>
#include <zcode/textmetrics/meteor.h>
#include <zcode/textmetrics/rouge.h>

#include <rapidjson/document.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace zcode::sdk;
namespace gen = zcode::gen;
namespace tm = zcode::textmetrics;

struct Document {
  std::string prompt_text;      // prompts file only
  std::vector<int32_t> prompt;  // ids
  std::string reference;
};

class GenerationEvaluator : public Evaluator {
 public:
  explicit GenerationEvaluator(const CreateContext& ctx)
      : host_(ctx.host()), raw_host_(ctx.raw()->host), model_(ctx.raw()->model), tokenizer_(ctx.tokenizer()) {
    const Options o = ctx.options().object("generation");
    max_documents_ = o.get<int64_t>("max_documents", 8);
    prompt_fraction_ = o.get<double>("prompt_fraction", 0.5);
    const auto max_new = static_cast<int32_t>(o.get<int64_t>("max_new_tokens", 32));
    prompts_file_ = o.get<std::string>("prompts_file", "");
    unicode_ = o.get<bool>("unicode", false);
    wordnet_dir_ = o.get<std::string>("wordnet", "/usr/share/wordnet");
    for (const auto& m : o.get_list<std::string>("metrics", {"bleu", "rouge", "meteor", "distinct"}))
      metrics_.insert(m);
    if (max_documents_ < 1) invalid_argument("evaluation.generation.max_documents: must be >= 1");
    if (!(prompt_fraction_ > 0 && prompt_fraction_ < 1))
      invalid_argument("evaluation.generation.prompt_fraction: " + std::to_string(prompt_fraction_) +
                       " is outside (0, 1)");
    opts_ = gen::options_from_config(ctx.config().object("generation"), ctx.config().get<uint64_t>("seed", 0), max_new,
                                     "evaluation.generation (the config's generation section)");
    max_seq_len_ = static_cast<int32_t>(ctx.config().object("model").get<int64_t>("max_seq_len", 256));
    // The documents of evaluation.split: its JSONL file (a split carved out
    // by data.val_fraction has no file of its own), unless a prompts file.
    const Options data = ctx.config().object("data");
    const std::string split = ctx.options().get<std::string>("split", "val");
    docs_key_ = split == "train" ? "data.train_path" : "data.val_path";
    docs_path_ = data.get<std::string>(split == "train" ? "train_path" : "val_path", "");
    text_field_ = data.get<std::string>("text_field", "text");
    if (prompts_file_.empty() && docs_path_.empty())
      invalid_argument("evaluation.generation: no documents for evaluation.split '" + split + "': set " + docs_key_ +
                       " or evaluation.generation.prompts_file");
    if (!ctx.run_dir().empty()) out_path_ = ctx.run_dir() + "/logs/generation_eval.jsonl";
    if (!tokenizer_) invalid_argument("generation evaluator: created without a tokenizer");
  }

  void evaluate(const DataRef& /*data*/, const MetricsSink& sink) override {
    if (docs_.empty()) load_documents();
    rapidjson::Document ti;
    ti.Parse(tokenizer_.info_json().c_str());
    auto id_of = [&](const char* k) { return ti.IsObject() && ti.HasMember(k) && ti[k].IsInt() ? ti[k].GetInt() : -1; };
    gen::ModelRefDecoder dec(raw_host_, model_, static_cast<int64_t>(tokenizer_.vocab_size()));
    std::vector<std::string> hyps, refs;
    std::vector<std::vector<std::string>> generated;  // token ids as text, for diversity
    std::string lines;
    for (const Document& d : docs_) {
      gen::Hooks hooks;
      hooks.warn = [this](const std::string& w) { host_.warn("generation", w); };
      const gen::Result r = gen::generate(dec, d.prompt, opts_, id_of("bos_id"), id_of("eos_id"), max_seq_len_, hooks);
      const std::string hyp = decode(r.generated);
      hyps.push_back(hyp);
      refs.push_back(d.reference);
      std::vector<std::string> toks;
      for (int32_t id : r.generated) toks.push_back(std::to_string(id));
      generated.push_back(std::move(toks));
      json::Writer w;
      w.begin_object().key("prompt").string(d.prompt_text.empty() ? decode(d.prompt) : d.prompt_text);
      w.key("reference").string(d.reference).key("hypothesis").string(hyp).end_object();
      lines += w.str() + "\n";
    }
    const double n = static_cast<double>(hyps.size());
    if (metrics_.count("bleu")) sink.put("bleu", tm::corpus_bleu(hyps, {refs}).score);
    if (metrics_.count("rouge")) {
      const tm::Rouge r = tm::corpus_rouge(hyps, {refs}, unicode_);
      sink.put("rouge1", r.rouge1.fmeasure);
      sink.put("rouge2", r.rouge2.fmeasure);
      sink.put("rougeL", r.rougeL.fmeasure);
    }
    if (metrics_.count("meteor")) {
      if (!wordnet_) wordnet_ = std::make_unique<tm::WordNet>(wordnet_dir_);
      double sum = 0;
      for (size_t i = 0; i < hyps.size(); ++i)
        sum += tm::meteor(tm::whitespace_tokens(refs[i]), tm::whitespace_tokens(hyps[i]), *wordnet_);
      sink.put("meteor", n > 0 ? sum / n : 0);
    }
    if (metrics_.count("distinct")) {
      const tm::Diversity dv = tm::diversity(generated);
      sink.put("distinct_1", dv.distinct_1);
      sink.put("distinct_2", dv.distinct_2);
      sink.put("entropy", dv.entropy_bits);
      sink.put("repetition", dv.repetition);
    }
    sink.put("documents", n);
    if (!out_path_.empty()) write_file_atomic(out_path_, lines);
  }

 private:
  std::string decode(std::span<const int32_t> ids) const { return tokenizer_.decode(ids); }
  std::vector<int32_t> encode(const std::string& text) const { return tokenizer_.encode(text); }

  void load_documents() {
    const std::string& path = prompts_file_.empty() ? docs_path_ : prompts_file_;
    const std::string key = prompts_file_.empty() ? docs_key_ : "evaluation.generation.prompts_file";
    std::ifstream in(path);
    if (!in) throw Error(ZC_ERR_IO, key + ": cannot read '" + path + "'");
    int64_t line_no = 0;
    for (std::string line; std::getline(in, line) && static_cast<int64_t>(docs_.size()) < max_documents_;) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      rapidjson::Document j;
      j.Parse(line.c_str(), line.size());
      const std::string where = path + ":" + std::to_string(line_no);
      if (j.HasParseError() || !j.IsObject()) throw Error(ZC_ERR_INVALID_ARGUMENT, where + ": not a JSON object");
      Document d;
      if (!prompts_file_.empty()) {
        if (!j.HasMember("prompt") || !j["prompt"].IsString() || !j.HasMember("reference") ||
            !j["reference"].IsString())
          throw Error(ZC_ERR_INVALID_ARGUMENT, where + ": expected string fields \"prompt\" and \"reference\"");
        d.prompt_text = j["prompt"].GetString();
        d.prompt = encode(d.prompt_text);
        d.reference = j["reference"].GetString();
      } else {
        if (!j.HasMember(text_field_.c_str()) || !j[text_field_.c_str()].IsString()) continue;  // the loader's rule
        const std::vector<int32_t> ids = encode(j[text_field_.c_str()].GetString());
        if (ids.size() < 2) continue;
        size_t k = static_cast<size_t>(std::floor(prompt_fraction_ * static_cast<double>(ids.size())));
        k = std::clamp<size_t>(k, 1, ids.size() - 1);
        d.prompt.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k));
        const size_t end = std::min(ids.size(), k + static_cast<size_t>(opts_.max_new_tokens));
        d.reference = decode(std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(k),
                                                  ids.begin() + static_cast<std::ptrdiff_t>(end)));
      }
      if (d.prompt.empty()) continue;
      docs_.push_back(std::move(d));
    }
    if (docs_.empty()) throw Error(ZC_ERR_INVALID_ARGUMENT, key + ": '" + path + "' has no usable document");
  }

  Host host_;
  const zc_host_services* raw_host_;
  zc_stage_ref model_;
  TokenizerRef tokenizer_;
  gen::GenerationOptions opts_;
  int64_t max_documents_ = 8;
  double prompt_fraction_ = 0.5;
  int32_t max_seq_len_ = 256;
  bool unicode_ = false;
  std::string prompts_file_, docs_path_, docs_key_, text_field_, wordnet_dir_, out_path_;
  std::set<std::string> metrics_;
  std::vector<Document> docs_;
  std::unique_ptr<tm::WordNet> wordnet_;
};

}  // namespace

ZCODE_PLUGIN("generation", "0.1.0", "Apache-2.0",
             "Generation metrics: BLEU, ROUGE, METEOR, distinct-n, entropy, repetition of continuations",
             ZCODE_COMPONENT(GenerationEvaluator, "generation",
                             "Continues validation documents (or a prompts file) and scores them against the rest",
                             R"JS({"type":"object","additionalProperties":false,"properties":{
  "plugins":{"type":"array","items":{"type":"string"},"default":["lm"],"description":"evaluator components"},
  "split":{"type":"string","enum":["val","train"],"default":"val","description":"split evaluated during training: this evaluator continues the documents of its file (data.val_path or data.train_path), or its prompts file"},
  "batch_size":{"type":"integer","minimum":1,"default":8,"description":"(the lm evaluator's)"},
  "max_batches":{"type":"integer","minimum":0,"default":0,"description":"(the lm evaluator's)"},
  "generation":{"type":"object","additionalProperties":false,"default":{},"description":"this evaluator's options","properties":{
    "max_documents":{"type":"integer","minimum":1,"default":8,"description":"documents continued per evaluation (the first ones of the file)"},
    "prompt_fraction":{"type":"number","minimum":0.01,"maximum":0.99,"default":0.5,"description":"share of a document's tokens given as the prompt"},
    "max_new_tokens":{"type":"integer","minimum":1,"default":32,"description":"tokens generated per document; the reference is as long"},
    "prompts_file":{"type":"string","default":"","description":"JSONL of {\"prompt\", \"reference\"} instead of the validation documents"},
    "metrics":{"type":"array","items":{"type":"string","enum":["bleu","rouge","meteor","distinct"]},"default":["bleu","rouge","meteor","distinct"],"description":"which metrics to compute"},
    "unicode":{"type":"boolean","default":false,"description":"ROUGE tokens of every script (rouge-score deletes non-Latin text)"},
    "wordnet":{"type":"string","default":"/usr/share/wordnet","description":"WordNet 3.0 database folder for METEOR (Debian's wordnet-base)"}}}}})JS"))
