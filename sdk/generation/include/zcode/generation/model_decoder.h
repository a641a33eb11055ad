// zcode/generation/model_decoder.h: the Decoder of generate.h over a model's
// zc_model_table KV-cache slots (decode_begin, decode_step, decode_reorder,
// decode_end, decode_extend), for plugins that generate (the `samples`
// callback, the generation evaluator) and, through its check() hook, for the
// host's `generate`. Errors of the model throw sdk::StatusError (the host's
// subclass throws its own error naming the component); the session is always
// ended.
#pragma once

#include <zcode/generation/generate.h>
#include <zcode/sdk/host.h>

namespace zcode::gen {

class ModelRefDecoder : public Decoder {
 public:
  /// `model` borrowed (table and instance); `vocab` = the logit columns of
  /// decode_step (the tokenizer's vocabulary size).
  ModelRefDecoder(const zc_host_services* host, zc_stage_ref model, int64_t vocab)
      : host_(host), t_(static_cast<const zc_model_table*>(model.table)), inst_(model.instance), vocab_(vocab) {}
  ~ModelRefDecoder() override { end(); }
  ModelRefDecoder(const ModelRefDecoder&) = delete;
  ModelRefDecoder& operator=(const ModelRefDecoder&) = delete;

  int64_t vocab_size() const override { return vocab_; }
  void begin(int32_t batch, int32_t max_len) override {
    if (!ZC_TABLE_HAS_SLOT(t_, zc_model_table, decode_begin) || !t_->decode_begin)
      throw sdk::Error(ZC_ERR_UNSUPPORTED, "the model has no KV-cache decoding (zc_model_table.decode_begin)");
    check("decode_begin", t_->decode_begin(inst_, batch, max_len, &session_));
  }
  void step(const int32_t* tokens, float* logits) override {
    check("decode_step", t_->decode_step(inst_, session_, tokens, logits));
  }
  /// decode_extend where the model has it (ABI 1.8); n steps where it is
  /// absent or unsupported (the SDK's default).
  void extend(int32_t batch, int32_t n, const int32_t* tokens, float* logits) override {
    if (ZC_TABLE_HAS_SLOT(t_, zc_model_table, decode_extend) && t_->decode_extend && !no_extend_) {
      zc_status* st = t_->decode_extend(inst_, session_, n, tokens, logits);
      if (!st) return;
      if (host_->status_code(host_->host_ctx, st) != ZC_ERR_UNSUPPORTED) check("decode_extend", st);
      host_->status_release(host_->host_ctx, st);
      no_extend_ = true;
    }
    Decoder::extend(batch, n, tokens, logits);
  }
  void reorder(const int32_t* src) override { check("decode_reorder", t_->decode_reorder(inst_, session_, src)); }
  void end() override {
    if (session_) t_->decode_end(inst_, session_);
    session_ = nullptr;
  }

 protected:
  /// How a status of slot `slot` is reported: must throw for a non-null
  /// `st`, after releasing it (extend() relies on it), and do nothing for
  /// null. Here through the host's services (sdk::StatusError); the host's
  /// own `generate` overrides it to name the component. Never called from
  /// the destructor (end() reports nothing).
  virtual void check(const char* slot, zc_status* st) {
    (void)slot;
    sdk::check(host_, st);
  }

 private:
  const zc_host_services* host_;
  const zc_model_table* t_;
  void* inst_;
  int64_t vocab_;
  void* session_ = nullptr;
  bool no_extend_ = false;  // decode_extend said ZC_ERR_UNSUPPORTED once
};

}  // namespace zcode::gen
