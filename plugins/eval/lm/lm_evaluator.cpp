// `lm`: the language-model evaluator (kind evaluator).
//
// Over one full pass of the data (the val split, or train for
// `zcode-host evaluate --split train`: a pass ends at the first batch of the
// next epoch, since train loaders cycle), or over its first
// `evaluation.max_batches` loader batches when that is > 0 (the analogue of
// PyTorch Lightning's limit_val_batches), with NLL_i = −log p(target_i | prefix)
// for every target position i that is not −1 (padding):
//   loss           = Σ NLL_i / N                       (nats per token)
//   perplexity     = exp(loss)                          (Jelinek et al. 1977)
//   bits_per_byte  = Σ NLL_i / (ln 2 · Σ bytes)         (as in Gao et al. 2020, The Pile, §4)
//   bits_per_char  = Σ NLL_i / (ln 2 · Σ chars)
//   accuracy       = #(argmax_v p(v | prefix) == target_i) / N   (ties: lowest id)
// N = number of target tokens. "bytes" and "chars" are what the data loader
// reports per batch (zc_batch.num_target_bytes / num_target_chars): the UTF-8
// bytes, and the Unicode code points, that the target tokens decode to.
//
// Sums are accumulated in double in row-major token order, so the result
// does not depend on how rows are grouped into forward calls
// (evaluation.batch_size only chunks the loader's batches into forward calls
// of at most that many rows).
//
// Accuracy needs the argmax: it comes from the model's forward_eval (ABI 1.1);
// for a model without it, from forward_logits row by row when the batch has
// no document mask (cross-document attention, where a row's logits do not
// depend on document boundaries); otherwise accuracy is not reported (one
// warning) rather than approximated.
#include <zcode/sdk/plugin.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace zcode::sdk;

class LmEvaluator : public Evaluator {
 public:
  explicit LmEvaluator(const CreateContext& ctx) : host_(ctx.host()), model_(ctx.model()), raw_host_(ctx.raw()->host) {
    if (!model_) invalid_argument("evaluation: the lm evaluator needs the model (args.model is NULL)");
    batch_size_ = ctx.options().get<int64_t>("batch_size", 0);
    if (batch_size_ < 0)
      invalid_argument("evaluation.batch_size: expected an integer >= 1, found " + std::to_string(batch_size_));
    max_batches_ = ctx.options().get<int64_t>("max_batches", 0);
    if (max_batches_ < 0)
      invalid_argument("evaluation.max_batches: expected an integer >= 0, found " + std::to_string(max_batches_));
    const std::string split = ctx.options().get<std::string>("split", "val");
    if (split != "val" && split != "train")
      invalid_argument("evaluation.split: expected \"val\" or \"train\", found \"" + split + "\"");
    // forward_logits writes [n, vocab_size] with the model's vocab_size
    // (info_json), else the tokenizer's.
    rapidjson::Document info;
    info.Parse(model_.info_json().c_str());
    if (info.IsObject() && info.HasMember("vocab_size") && info["vocab_size"].IsInt64())
      vocab_ = info["vocab_size"].GetInt64();
    else if (auto tok = ctx.tokenizer()) vocab_ = static_cast<int64_t>(tok.vocab_size());
  }

  void evaluate(const DataRef& data, const MetricsSink& out) override {
    data.reset();
    double nll = 0, bytes = 0, chars = 0;
    int64_t tokens = 0, correct = 0;
    bool accuracy_ok = true;
    zc_batch b{};
    b.struct_size = sizeof(zc_batch);
    bool first = true;
    uint64_t epoch = 0;
    // evaluation.max_batches > 0: no more loader batches are asked for than that.
    for (int64_t used = 0; (max_batches_ == 0 || used < max_batches_) && data.next(&b); ++used) {
      if (host_.stop_requested()) throw Error(ZC_ERR_CANCELLED, "evaluation: stop requested");
      // A train-split loader cycles epochs for ever: one pass ends where the
      // epoch changes (that batch belongs to the next pass and is not used).
      if (first) epoch = b.epoch;
      else if (b.epoch != epoch) break;
      first = false;
      if (b.input_ids.ndim != 2 || !same_dtype(b.input_ids.dtype, kI32) || !same_dtype(b.targets.dtype, kI32))
        throw Error(ZC_ERR_DATA, "evaluation: batch input_ids/targets must be int32 [batch, seq]");
      const int64_t B = b.input_ids.shape[0], T = b.input_ids.shape[1];
      const int64_t chunk = batch_size_ > 0 ? std::min<int64_t>(batch_size_, B) : B;
      for (int64_t r0 = 0; r0 < B; r0 += chunk) {
        const int64_t rows = std::min(chunk, B - r0);
        eval_rows(b, r0, rows, T, accuracy_ok);
        const int32_t* tgt = data_ptr<int32_t>(b.targets) + r0 * T;
        for (int64_t i = 0; i < rows * T; ++i) {
          if (tgt[i] == -1) continue;
          nll -= static_cast<double>(logp_[static_cast<size_t>(i)]);
          ++tokens;
          if (accuracy_ok && argmax_[static_cast<size_t>(i)] == tgt[i]) ++correct;
        }
      }
      bytes += static_cast<double>(b.num_target_bytes);
      chars += static_cast<double>(b.num_target_chars);
    }
    if (tokens == 0) throw Error(ZC_ERR_DATA, "evaluation: the split has no target tokens");
    const double loss = nll / static_cast<double>(tokens);
    out.put("loss", loss);
    out.put("perplexity", std::exp(loss));
    if (bytes > 0) out.put("bits_per_byte", nll / (std::log(2.0) * bytes));
    if (chars > 0) out.put("bits_per_char", nll / (std::log(2.0) * chars));
    if (accuracy_ok) out.put("accuracy", static_cast<double>(correct) / static_cast<double>(tokens));
    out.put("tokens", static_cast<double>(tokens));
    out.put("bytes", bytes);
  }

 private:
  // Log-probs (and argmax when possible) of rows [r0, r0+rows) into logp_/argmax_.
  void eval_rows(const zc_batch& b, int64_t r0, int64_t rows, int64_t T, bool& accuracy_ok) {
    const size_t n = static_cast<size_t>(rows * T);
    if (logp_.size() < n) logp_.resize(n);
    if (argmax_.size() < n) argmax_.resize(n);
    zc_batch sub = b;
    shape_[0] = rows;
    shape_[1] = T;
    auto slice = [&](DLTensor& t) {
      if (!t.data) return;
      t.data = data_ptr<int32_t>(t) + r0 * T;
      t.byte_offset = 0;
      t.shape = shape_;
    };
    slice(sub.input_ids);
    slice(sub.targets);
    slice(sub.doc_ids);
    sub.num_target_tokens = 0;
    for (int64_t i = 0; i < rows * T; ++i) sub.num_target_tokens += data_ptr<int32_t>(sub.targets)[i] != -1;
    sub.num_target_bytes = 0;  // not known per row; the model does not use them
    sub.num_target_chars = 0;
    DLTensor lp = make_view(logp_.data(), kF32, 2, shape_);
    DLTensor am = make_view(argmax_.data(), kI32, 2, shape_);
    const zc_model_table* t = model_.table();
    const bool has_eval = ZC_TABLE_HAS_SLOT(t, zc_model_table, forward_eval);
    if (has_eval && !forward_eval_unsupported_) {
      zc_status* s = t->forward_eval(model_.instance(), &sub, &lp, accuracy_ok ? &am : nullptr);
      if (!s) return;
      if (raw_host_->status_code(raw_host_->host_ctx, s) != ZC_ERR_UNSUPPORTED) check(raw_host_, s);
      raw_host_->status_release(raw_host_->host_ctx, s);
      forward_eval_unsupported_ = true;
    }
    model_.forward_logprobs(sub, &lp);
    if (!accuracy_ok) return;
    if (sub.doc_ids.data || vocab_ <= 0) {
      accuracy_ok = false;
      host_.warn("lm", sub.doc_ids.data
                           ? "accuracy not reported: the model has no forward_eval and the batch has a document mask"
                           : "accuracy not reported: the model has no forward_eval and its vocab_size is unknown");
      return;
    }
    logits_.resize(static_cast<size_t>(T * vocab_));
    for (int64_t r = 0; r < rows; ++r) {
      check(raw_host_, t->forward_logits(model_.instance(), data_ptr<int32_t>(sub.input_ids) + r * T,
                                         static_cast<int32_t>(T), logits_.data()));
      for (int64_t p = 0; p < T; ++p) {
        const float* row = logits_.data() + p * vocab_;
        int32_t best = 0;
        for (int64_t v = 1; v < vocab_; ++v)
          if (row[v] > row[best]) best = static_cast<int32_t>(v);
        argmax_[static_cast<size_t>(r * T + p)] = best;
      }
    }
  }

  Host host_;
  ModelRef model_;
  const zc_host_services* raw_host_;
  int64_t batch_size_ = 0;
  int64_t max_batches_ = 0;  // 0 = the whole split
  int64_t vocab_ = 0;
  bool forward_eval_unsupported_ = false;
  int64_t shape_[2] = {0, 0};
  std::vector<float> logp_, logits_;
  std::vector<int32_t> argmax_;
};

}  // namespace

ZCODE_PLUGIN("lm", "0.1.0", "Apache-2.0", "Language-model evaluation: loss, perplexity, bits per byte/char, accuracy",
             ZCODE_COMPONENT(LmEvaluator, "lm",
                             "Perplexity, bits per byte, bits per character and next-token accuracy over a split",
                             R"JS({"type":"object","additionalProperties":false,"properties":{
  "plugins":{"type":"array","items":{"type":"string"},"default":["lm"],"description":"evaluator components"},
  "split":{"type":"string","enum":["val","train"],"default":"val","description":"split evaluated during training"},
  "batch_size":{"type":"integer","minimum":1,"default":8,"description":"rows per forward call (the loader's batches are split into chunks of at most this many rows)"},
  "max_batches":{"type":"integer","minimum":0,"default":0,"description":"loader batches evaluated, 0 = the whole split (PyTorch Lightning's limit_val_batches)"}}})JS"))
