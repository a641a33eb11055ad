// The bundled callbacks (kind callback), one class per file. Each reads its
// own entry of the config's `callbacks:` list (options) and shared fields
// from config_json. Events: zc_event kinds SETUP, STEP_END, EVAL_END,
// CHECKPOINT, TEARDOWN; unknown kinds are ignored.
#pragma once

#include <zcode/generation/generate.h>
#include <zcode/sdk/plugin.h>

#include "cadence.h"

#include <rapidjson/document.h>

#include <cstdio>
#include <string>
#include <vector>

namespace zcode::callbacks {

using namespace zcode::sdk;

/// Parses an event's metrics_json (an object; {} when empty or invalid).
rapidjson::Document parse_metrics(const char* json);
/// Number or `fallback`.
double num(const rapidjson::Value& obj, const char* key, double fallback);

/// One event record, the schema shared by `console`'s JSON lines and
/// `metrics_jsonl`: {"event": kind ("step" | "eval"), "step": e.step,
/// "max_steps": e.max_steps, then the event's metrics in their order}, one
/// line of JSON without the newline (RapidJSON's Writer; numbers as it
/// prints doubles, shortest round-trip).
std::string event_record(const char* kind, const zc_event& e, const rapidjson::Value& metrics);

/// `console`: one line per `every` steps (default training.log_every):
/// `[INFO] Step 10/500 | loss: 3.2100 | lr: 0.0005 | grad_norm: 0.92 | tokens/s: 1234 | data_wait: 3% |
///  moe_load: 0.10-0.15 | dropped: 0.0% | ETA 0:01:23`; on a TTY a live
/// progress bar on stdout between those lines; one line per evaluation.
/// `log_format: json` (set by the host for `--log-format json`): those lines
/// go to the log at DEBUG (logs/console.log keeps them) and stdout gets one
/// JSON object per line instead, written with RapidJSON's Writer:
/// {"event":"step"|"eval","step":N,"max_steps":M, <the event's metrics>}.
class Console : public Callback {
 public:
  explicit Console(const CreateContext& ctx);
  uint32_t on_event(const zc_event& e) override;

 private:
  Host host_;
  int64_t every_;
  bool bar_;
  bool bar_shown_ = false;
  bool json_ = false;
  /// Writes {"event": kind, "step", "max_steps", metrics...} and a newline to stdout.
  void print_json(const char* kind, const zc_event& e, const rapidjson::Value& metrics) const;
};

/// `metrics_json`: writes `<run>/metrics.json` atomically after each
/// evaluation, checkpoint and at teardown: {"final": {"train": {...},
/// "val": {...}}, "best": {"val_loss", "step"}, "history": {"train": [...],
/// "val": [...]}}. Train history keeps every `every` steps (default
/// training.log_every). Its history is part of the checkpoint, so a resumed
/// run continues the same file.
class MetricsJson : public Callback {
 public:
  explicit MetricsJson(const CreateContext& ctx);
  uint32_t on_event(const zc_event& e) override;
  void save_state(const StateWriter& w) override;
  void load_state(const StateReader& r) override;

 private:
  void write() const;
  std::string path_;
  int64_t every_;
  std::string train_hist_, val_hist_;  // JSON array bodies (comma-separated objects)
  std::string last_train_ = "{}", last_val_ = "{}";
  double best_ = 0;
  uint64_t best_step_ = 0;
  bool has_best_ = false;
};

/// `metrics_jsonl`: the live metrics stream, `<run>/logs/metrics.jsonl`
/// (option `path`): one event_record per log step (cadence `every`, default
/// training.log_every, as the console) and per evaluation, appended and
/// flushed line by line so that `tail -f` and other tools can follow a run.
/// The file is the run's: a fresh run (SETUP with resumed_step 0) starts it
/// empty; a resumed run keeps the records up to its checkpoint's step and
/// drops those the interrupted run wrote after it (rewritten atomically), so
/// the file reads as one run with each step once. Throws ZC_ERR_IO naming the
/// file when it cannot be opened or written.
class MetricsJsonl : public Callback {
 public:
  explicit MetricsJsonl(const CreateContext& ctx);
  ~MetricsJsonl() override;
  uint32_t on_event(const zc_event& e) override;

 private:
  void open(uint64_t resumed_step);
  void append(const std::string& record);
  std::string path_;
  int64_t every_;
  std::FILE* file_ = nullptr;
};

/// `samples`: text generated from fixed prompts every `every` steps (default
/// training.eval_every) and at the end, with the config's `generation`
/// section (strategy, temperature, top_k, top_p, seed, ...) and
/// `max_new_tokens` (default 32): each sample is a console line
/// `[INFO] samples: step N: <prompt>|<continuation>` and a JSON line
/// {"step", "prompt", "text", "tokens", "stop_reason", "strategy"} in
/// `logs/samples.jsonl` (option `path`), flushed. Generation runs the
/// model's KV-cache decode (zcode/generation) between training steps; a
/// resumed run keeps the samples up to its checkpoint. Throws ZC_ERR_IO
/// naming the file when it cannot write.
class Samples : public Callback {
 public:
  explicit Samples(const CreateContext& ctx);
  ~Samples() override;
  uint32_t on_event(const zc_event& e) override;

 private:
  void open();
  void write(uint64_t step, zc_stage_ref model);
  Host host_;
  TokenizerRef tokenizer_;
  int64_t every_;
  std::vector<std::string> prompts_;
  gen::GenerationOptions opts_;
  int32_t max_seq_len_ = 256;
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t resumed_ = 0, last_ = ~uint64_t{0};
};

/// `checkpoint`: decides the cadence; the engine writes (atomic folder,
/// `latest`, keep_last_n). Returns ZC_CALLBACK_REQUEST_CHECKPOINT every
/// `every` steps (default training.save_every).
class Checkpoint : public Callback {
 public:
  explicit Checkpoint(const CreateContext& ctx);
  uint32_t on_event(const zc_event& e) override;

 private:
  int64_t every_;
};

/// `early_stopping`: after each evaluation, when `metric` (default "loss",
/// lower is better) has not improved by more than `min_delta` for `patience`
/// evaluations in a row, returns ZC_CALLBACK_REQUEST_STOP.
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(const CreateContext& ctx);
  uint32_t on_event(const zc_event& e) override;
  void save_state(const StateWriter& w) override;
  void load_state(const StateReader& r) override;

 private:
  Host host_;
  std::string metric_;
  int64_t patience_;
  double min_delta_;
  double best_ = 0;
  bool has_best_ = false;
  int64_t bad_ = 0;
};

/// `debugger`: every `every` steps appends one JSON line to `path` (default
/// `<run>/logs/debug.jsonl`): per parameter group (name up to the block part,
/// e.g. "layers.0.attn", "layers.1.moe", "embed") the L2 norms of gradients
/// and values, and log10-magnitude histograms of all gradients and all
/// values; and, when the model exposes them (zc_model_table.named_activations,
/// ABI 1.4, or activations, ABI 1.2), per kept activation of the last micro-batch (e.g.
/// "layers.0.attn.out", [batch, seq, width]) its mean, std, max |x| and
/// log10-magnitude histogram ("activations": null otherwise).
class Debugger : public Callback {
 public:
  explicit Debugger(const CreateContext& ctx);
  uint32_t on_event(const zc_event& e) override;

 private:
  Host host_;
  int64_t every_;
  int64_t bins_;
  std::string path_;
};

/// `model_card`: renders `<run>/model_card.md` at teardown from a Mustache
/// template (built in, or the config's model_card.template).
class ModelCard : public Callback {
 public:
  explicit ModelCard(const CreateContext& ctx);
  uint32_t on_event(const zc_event& e) override;
  /// The built-in template.
  static const char* default_template();

 private:
  Host host_;
  std::string run_dir_;
  std::string template_text_;
  std::string template_origin_;
  double watts_per_core_, pue_, kg_co2_per_kwh_;
};

}  // namespace zcode::callbacks
