// The config's fields, each declared once, in one table (kFields below): its
// dotted path, its JSON Schema keywords, its description, and, for the typed
// tree, the struct member (config.h) that holds it. From the table come
//   - the built-in JSON Schema (builtin_schema_json), whose `default` of a
//     typed field is written from the member's initializer in config.h, so
//     the struct and the schema cannot disagree;
//   - the typed reader (read_typed_fields, used by HarnessConfig::validate);
//   - docs/config-reference.md (core/src/config_reference.cpp).
// Adding a host field is one row here plus the struct member it fills.
//
// Plugin-owned sections are marked "x-plugin-owned": their other keys pass
// through to the plugin, whose own options schema is applied when a
// SchemaProvider is given.
//
// Keywords are JSON Schema draft-04 as RapidJSON implements it (boolean
// exclusiveMinimum/exclusiveMaximum), plus our annotations:
//   x-plugin-owned   the section's unknown keys belong to a plugin
//   x-message        how to describe the expected value when it is wrong
//   x-aliases        accepted spellings of enum values ({"WARN": "WARNING"})
// Built-in string enums compare case-insensitively with '-' == '_'.
#include "config_impl.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <sstream>

namespace zcode {

using namespace config_detail;

namespace {

using Impl = HarnessConfig::Impl;

// How a string field is stored in the typed tree.
enum Flags : unsigned {
  kAsWritten = 0,
  kFold = 1,       // canonical: lower case, '-' -> '_' (enums, component names)
  kModelType = 2,  // canonical_model_type (alias GLM5pt2)
  kNoDefault = 4,  // the member's initializer is not a schema default (required, or computed)
};

// ---- typed value <-> JSON ----------------------------------------------------

// The JSON of a typed default; false when there is none (an unset optional).
bool to_json(const std::string& v, JsonValue& out, JsonAlloc& a) {
  out.SetString(v.c_str(), static_cast<rapidjson::SizeType>(v.size()), a);
  return true;
}
bool to_json(int64_t v, JsonValue& out, JsonAlloc&) {
  out.SetInt64(v);
  return true;
}
bool to_json(uint64_t v, JsonValue& out, JsonAlloc&) {
  out.SetUint64(v);
  return true;
}
bool to_json(double v, JsonValue& out, JsonAlloc&) {
  out.SetDouble(v);
  return true;
}
bool to_json(bool v, JsonValue& out, JsonAlloc&) {
  out.SetBool(v);
  return true;
}
bool to_json(const std::vector<std::string>& v, JsonValue& out, JsonAlloc& a) {
  out.SetArray();
  for (const std::string& s : v) out.PushBack(JsonValue(s.c_str(), a), a);
  return true;
}
bool to_json(const std::array<double, 2>& v, JsonValue& out, JsonAlloc& a) {
  out.SetArray();
  for (double x : v) out.PushBack(JsonValue(x), a);
  return true;
}
const char* level_name(zc_log_level l) {
  switch (l) {
    case ZC_LOG_TRACE: return "TRACE";
    case ZC_LOG_DEBUG: return "DEBUG";
    case ZC_LOG_WARN: return "WARNING";
    case ZC_LOG_ERROR: return "ERROR";
    default: return "INFO";
  }
}
bool to_json(zc_log_level v, JsonValue& out, JsonAlloc& a) {
  out.SetString(level_name(v), a);
  return true;
}
template <class T>
bool to_json(const std::optional<T>& v, JsonValue& out, JsonAlloc& a) {
  return v && to_json(*v, out, a);
}

// Reads a resolved (validated) value into the typed tree; a value of
// another type leaves the member as it is.
void from_json(const JsonValue& v, std::string& out, unsigned flags) {
  if (!v.IsString()) return;
  out.assign(v.GetString(), v.GetStringLength());
  if (flags & kFold) out = fold(out);
  if (flags & kModelType) out = HarnessConfig::canonical_model_type(out);
}
void from_json(const JsonValue& v, std::optional<std::string>& out, unsigned) {
  if (v.IsString()) out.emplace(v.GetString(), v.GetStringLength());
}
void from_json(const JsonValue& v, int64_t& out, unsigned) {
  if (v.IsInt64()) out = v.GetInt64();
}
void from_json(const JsonValue& v, std::optional<int64_t>& out, unsigned) {
  if (v.IsInt64()) out = v.GetInt64();
}
void from_json(const JsonValue& v, uint64_t& out, unsigned) {
  if (v.IsUint64()) out = v.GetUint64();
}
void from_json(const JsonValue& v, std::optional<uint64_t>& out, unsigned) {
  if (v.IsUint64()) out = v.GetUint64();
}
void from_json(const JsonValue& v, double& out, unsigned) {
  if (v.IsNumber()) out = v.GetDouble();
}
void from_json(const JsonValue& v, bool& out, unsigned) {
  if (v.IsBool()) out = v.GetBool();
}
void from_json(const JsonValue& v, std::vector<std::string>& out, unsigned flags) {
  if (!v.IsArray()) return;
  out.clear();
  for (auto& s : v.GetArray())
    if (s.IsString()) out.emplace_back(flags & kFold ? fold(s.GetString()) : std::string(s.GetString()));
}
void from_json(const JsonValue& v, std::array<double, 2>& out, unsigned) {
  if (v.IsArray() && v.Size() == 2 && v[0].IsNumber() && v[1].IsNumber()) out = {v[0].GetDouble(), v[1].GetDouble()};
}
void from_json(const JsonValue& v, zc_log_level& out, unsigned) {
  if (!v.IsString()) return;
  std::string level = v.GetString();
  for (char& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out = level == "TRACE"                        ? ZC_LOG_TRACE
        : level == "DEBUG"                      ? ZC_LOG_DEBUG
        : level == "WARNING" || level == "WARN" ? ZC_LOG_WARN
        : level == "ERROR"                      ? ZC_LOG_ERROR
                                                : ZC_LOG_INFO;
}

// ---- rows ------------------------------------------------------------------

struct Field {
  const char* path;         // "training.log_every"; a section is "training"
  const char* schema;       // JSON Schema keywords (a `default` here only for untyped fields)
  const char* description;  // "" for none
  // Writes the typed default (the member's initializer); null or false: none.
  std::function<bool(const Impl&, JsonValue&, JsonAlloc&)> default_of;
  // Reads the resolved value (nullptr when absent) into the typed tree.
  std::function<void(const JsonValue*, Impl&)> read;
};

/// A field of the schema only (a section, or a key the typed tree does not hold).
Field untyped(const char* path, const char* schema, const char* description = "") {
  return {path, schema, description, nullptr, nullptr};
}

/// A field held by `(impl.*section).*member`.
template <class S, class T>
Field typed(const char* path, S Impl::*section, T S::*member, const char* schema, const char* description,
            unsigned flags = kAsWritten) {
  Field f{path, schema, description, nullptr, nullptr};
  if (!(flags & kNoDefault))
    f.default_of = [section, member](const Impl& m, JsonValue& out, JsonAlloc& a) {
      return to_json((m.*section).*member, out, a);
    };
  f.read = [section, member, flags](const JsonValue* v, Impl& m) {
    if (v) from_json(*v, (m.*section).*member, flags);
  };
  return f;
}

/// A top-level field held by `impl.*member`.
template <class T>
Field top(const char* path, T Impl::*member, const char* schema, const char* description, unsigned flags = kAsWritten) {
  Field f{path, schema, description, nullptr, nullptr};
  if (!(flags & kNoDefault))
    f.default_of = [member](const Impl& m, JsonValue& out, JsonAlloc& a) { return to_json(m.*member, out, a); };
  f.read = [member, flags](const JsonValue* v, Impl& m) {
    if (v) from_json(*v, m.*member, flags);
  };
  return f;
}

/// `f` with its reader replaced (a field whose typed form is derived).
Field read_with(Field f, std::function<void(const JsonValue*, Impl&)> read) {
  f.read = std::move(read);
  return f;
}

const std::vector<Field>& fields() {
  using I = Impl;
  using HW = HardwareConfig;
  using DI = DistributedConfig;
  using MO = ModelConfig;
  using DA = DataConfig;
  using OP = OptimizerConfig;
  using SC = SchedulerConfig;
  using TR = TrainingConfig;
  using LG = LoggingConfig;
  using PR = ProfilingConfig;
  using EV = EvaluationConfig;
  using GE = GenerationConfig;
  static const std::vector<Field> kFields = {
      top("experiment_name", &I::experiment_name,
          R"J({"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$",
              "x-message": "a name of letters, digits, '.', '_' or '-' (it names the run folder)"})J",
          "Run name; the run folder is logging.output_dir/experiment_name."),
      top("seed", &I::seed, R"J({"type": "integer", "minimum": 0, "maximum": 18446744073709551615})J",
          "Global seed; every stage derives its own stream from it."),
      read_with(top("plugin_path", &I::plugin_path, R"J({"type": ["string", "array"], "items": {"type": "string"}})J",
                    "Extra plugin folders (a list, or one colon-separated string), searched after --plugin-path."),
                [](const JsonValue* v, I& m) {
                  if (!v) return;
                  m.plugin_path.clear();
                  if (v->IsString()) {
                    std::stringstream ss(v->GetString());
                    for (std::string part; std::getline(ss, part, ':');)
                      if (!part.empty()) m.plugin_path.push_back(part);
                  } else {
                    from_json(*v, m.plugin_path, kAsWritten);
                  }
                }),
      untyped("overrides", R"J({"type": "array", "items": {"type": "string"}})J",
              "Record of the --set overrides already applied to this config (not re-applied)."),

      untyped("hardware", R"J({"type": "object", "additionalProperties": false, "default": {}})J", "Host-owned."),
      typed("hardware.accelerator", &I::hardware, &HW::accelerator, R"J({"type": "string", "enum": ["cpu", "gpu"]})J",
            "gpu: not implemented yet.", kFold),
      typed("hardware.devices", &I::hardware, &HW::devices, R"J({"type": "integer", "minimum": 1})J",
            "Processes of the job (ranks): must equal the world size mpirun or srun launched (1: a plain run)."),
      typed("hardware.mixed_precision", &I::hardware, &HW::mixed_precision, R"J({"type": "boolean"})J",
            "true: not implemented yet."),
      typed("hardware.num_threads", &I::hardware, &HW::num_threads,
            R"J({"type": "integer", "minimum": 0, "maximum": 4096})J",
            "Compute threads per process; 0 = the node's cores divided by the processes on it."),

      untyped("distributed", R"J({"type": "object", "additionalProperties": false, "default": {}})J",
              "Host-owned: multi-process training (ignored by a one-process run)."),
      typed("distributed.backend", &I::distributed, &DI::backend,
            R"J({"type": "string", "enum": ["auto", "mpi", "nccl"]})J",
            "Collectives: mpi (Open MPI, CPU); auto = mpi on the CPU; nccl: not implemented yet.", kFold),
      typed("distributed.zero_stage", &I::distributed, &DI::zero_stage,
            R"J({"type": "integer", "minimum": 0, "maximum": 1})J",
            "1 = ZeRO-1: each data-parallel rank keeps and updates the optimizer state of its contiguous "
            "range of the parameters (reduce-scatter, step, all-gather; with expert_parallel, each expert's "
            "state is split among the ranks that hold it); checkpoints reshard."),
      typed("distributed.expert_parallel", &I::distributed, &DI::expert_parallel,
            R"J({"type": "integer", "minimum": 1})J",
            "Expert parallelism: each group of K consecutive ranks splits the MoE experts K ways (K divides "
            "hardware.devices and model.moe_experts); the dense layers stay data parallel over every rank."),
      typed("distributed.bucket_mb", &I::distributed, &DI::bucket_mb,
            R"J({"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 4096})J",
            "Gradient bucket of the data-parallel reduction, MiB (reduced in reverse parameter order)."),
      typed("distributed.overlap", &I::distributed, &DI::overlap, R"J({"type": "boolean"})J",
            "Start each gradient bucket's reduce-scatter (non-blocking) during the last micro-batch's backward, "
            "as soon as its tensors are final; false: blocking collectives after the backward. Off by default: "
            "on a 2-core CPU machine it made no step faster (each core is busy with a rank, so the copies "
            "move rather than hide; README, Multi-process training)."),
      typed("distributed.timeout_s", &I::distributed, &DI::timeout_s,
            R"J({"type": "integer", "minimum": 1, "maximum": 86400})J",
            "Seconds a blocking collective may wait for a lost or hung rank before the job ends (a "
            "watchdog thread per rank; waits for rank 0's evaluation and checkpoints do not count)."),

      untyped("model",
              R"J({"type": "object", "x-plugin-owned": true, "additionalProperties": true,
                  "default": {}})J",
              "Plugin-owned: the component named by model.type. The host owns type and max_seq_len (which the "
              "data loader shares); every other key is the model plugin's (its options schema below: glm52)."),
      typed("model.type", &I::model, &MO::type, R"J({"type": "string", "minLength": 1})J",
            "Model component (alias GLM5pt2 = glm52).", kModelType),
      typed("model.max_seq_len", &I::model, &MO::max_seq_len, R"J({"type": "integer", "minimum": 1})J",
            "Tokens per training window (the data loader's too)."),

      untyped("data",
              R"J({"type": "object", "x-plugin-owned": true, "additionalProperties": true,
                  "required": ["train_path"]})J",
              "Plugin-owned: the data loader named by data.loader."),
      typed("data.loader", &I::data, &DA::loader, R"J({"type": "string", "minLength": 1})J", "Data loader component.",
            kFold),
      typed("data.train_path", &I::data, &DA::train_path, R"J({"type": "string", "minLength": 1})J",
            "Required: a file, folder or glob, relative to the current folder; validate and run check it exists "
            "(remote schemes such as s3:// are refused).",
            kNoDefault),
      typed("data.val_path", &I::data, &DA::val_path, R"J({"type": ["string", "null"], "minLength": 1})J",
            "Validation file (null = unset); not together with val_fraction > 0. Evaluation of the val split needs "
            "val_path or val_fraction > 0."),
      typed("data.train_shard_pattern", &I::data, &DA::train_shard_pattern,
            R"J({"type": ["string", "null"], "minLength": 1})J",
            "Shard file names inside train_path, e.g. part-{:05d}.jsonl (null = unset)."),
      read_with(
          typed("data.tokenizer", &I::data, &DA::tokenizer,
                R"J({"type": ["string", "object"], "minLength": 1,
                    "properties": {"type": {"type": "string", "minLength": 1}, "path": {"type": "string", "minLength": 1}}})J",
                "A reference (hf://NAME, a file or folder), or {type, path, ...}: the tokenizer plugin's options. "
                "The component is type, else sentencepiece for a path ending in .model, else bpe."),
          [](const JsonValue* tok, I& m) {
            JsonDoc opts;
            tokenizer_options(tok, opts, opts.GetAllocator());
            m.data.tokenizer_options_json = json_text(opts);
            m.data.tokenizer_type = tokenizer_component(tok);
            if (auto p = member(opts, "path"); p && p->IsString()) m.data.tokenizer = p->GetString();
          }),
      typed("data.batch_size", &I::data, &DA::batch_size, R"J({"type": "integer", "minimum": 1})J",
            "Sequences per micro-batch."),
      typed("data.prefetch_factor", &I::data, &DA::prefetch_factor, R"J({"type": "integer", "minimum": 1})J",
            "Batches prepared ahead per worker."),
      typed("data.num_workers", &I::data, &DA::num_workers, R"J({"type": "integer", "minimum": 0})J",
            "Loader threads; 0 = synchronous."),
      typed("data.text_field", &I::data, &DA::text_field, R"J({"type": "string", "minLength": 1})J",
            "JSON field (dotted path) holding the text."),
      typed("data.on_bad_record", &I::data, &DA::on_bad_record, R"J({"type": "string", "enum": ["error", "skip"]})J",
            "", kFold),
      typed("data.val_fraction", &I::data, &DA::val_fraction,
            R"J({"type": "number", "minimum": 0, "maximum": 1, "exclusiveMaximum": true})J",
            "Share of the train documents held out for validation."),
      typed("data.cache_dir", &I::data, &DA::cache_dir, R"J({"type": ["string", "null"], "minLength": 1})J",
            "Token cache folder (null = unset: the loader's choice)."),
      typed("data.cross_document_attention", &I::data, &DA::cross_document_attention, R"J({"type": "boolean"})J",
            "false: the batch carries doc_ids and attention stays inside each document."),
      typed("data.mask_document_boundary", &I::data, &DA::mask_document_boundary, R"J({"type": "boolean"})J",
            "true: the target of each <eos> is ignored (-1), so no loss predicts a document's first token from the "
            "previous one."),

      untyped("optimizer",
              R"J({"type": "object", "x-plugin-owned": true, "additionalProperties": true,
                  "default": {}})J",
              "Plugin-owned: the optimizer named by optimizer.name; its own keys: zcode-host plugins show NAME."),
      typed("optimizer.name", &I::optimizer, &OP::name, R"J({"type": "string", "minLength": 1})J",
            "Optimizer component.", kFold),
      typed("optimizer.lr", &I::optimizer, &OP::lr, R"J({"type": "number", "minimum": 0, "exclusiveMinimum": true})J",
            "Base learning rate."),
      typed("optimizer.weight_decay", &I::optimizer, &OP::weight_decay, R"J({"type": "number", "minimum": 0})J", ""),
      typed("optimizer.betas", &I::optimizer, &OP::betas,
            R"J({"type": "array", "minItems": 2, "maxItems": 2,
                "items": {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMaximum": true}})J",
            "Two numbers, each in [0, 1)."),
      typed("optimizer.eps", &I::optimizer, &OP::eps, R"J({"type": "number", "minimum": 0, "exclusiveMinimum": true})J",
            "Every optimizer gets it (Adafactor as its eps1)."),

      untyped("scheduler",
              R"J({"type": "object", "x-plugin-owned": true, "additionalProperties": true,
                  "default": {}})J",
              "Plugin-owned: the scheduler named by scheduler.type."),
      typed("scheduler.type", &I::scheduler, &SC::type, R"J({"type": "string", "minLength": 1})J",
            "Scheduler component.", kFold),
      typed("scheduler.warmup_steps", &I::scheduler, &SC::warmup_steps, R"J({"type": "integer", "minimum": 0})J",
            "At most training.max_steps."),
      typed("scheduler.stable_steps", &I::scheduler, &SC::stable_steps, R"J({"type": "integer", "minimum": 0})J",
            "wsd only."),
      typed("scheduler.decay_steps", &I::scheduler, &SC::decay_steps, R"J({"type": "integer", "minimum": 0})J",
            "wsd only; default max_steps - warmup_steps - stable_steps."),
      typed("scheduler.min_lr_ratio", &I::scheduler, &SC::min_lr_ratio,
            R"J({"type": "number", "minimum": 0, "maximum": 1})J", "Final lr / base lr."),
      typed("scheduler.power", &I::scheduler, &SC::power,
            R"J({"type": "number", "minimum": 0, "exclusiveMinimum": true})J", "Polynomial decay power."),

      untyped("training", R"J({"type": "object", "additionalProperties": false, "default": {}})J", "Host-owned."),
      typed("training.max_steps", &I::training, &TR::max_steps, R"J({"type": "integer", "minimum": 1})J",
            "Optimizer steps."),
      typed("training.gradient_accumulation", &I::training, &TR::gradient_accumulation,
            R"J({"type": "integer", "minimum": 1})J", "Micro-batches per optimizer step."),
      typed("training.clip_grad_norm", &I::training, &TR::clip_grad_norm, R"J({"type": "number", "minimum": 0})J",
            "Global L2 clip; 0 = no clipping."),
      typed("training.precision", &I::training, &TR::precision,
            R"J({"type": "string", "enum": ["fp32", "fp16", "bf16", "fp8"]})J", "Not fp32: not implemented yet.",
            kFold),
      typed("training.loss_scale", &I::training, &TR::loss_scale,
            R"J({"type": "number", "minimum": 0, "exclusiveMinimum": true})J",
            "Static loss scale; != 1: not implemented yet (fp16 only)."),
      typed("training.gradient_checkpointing", &I::training, &TR::gradient_checkpointing, R"J({"type": "boolean"})J",
            "true: not implemented yet."),
      typed("training.sequence_parallel", &I::training, &TR::sequence_parallel, R"J({"type": "boolean"})J",
            "true: not implemented yet."),
      typed("training.sp_group_size", &I::training, &TR::sp_group_size, R"J({"type": "integer", "minimum": 1})J",
            "Divides model.max_seq_len; > 1 needs sequence_parallel."),
      typed("training.tensor_parallel", &I::training, &TR::tensor_parallel, R"J({"type": "boolean"})J",
            "true: not implemented yet."),
      typed("training.tp_group_size", &I::training, &TR::tp_group_size, R"J({"type": "integer", "minimum": 1})J",
            "Divides model.d_model (checked when d_model is written); > 1 needs tensor_parallel."),
      typed("training.eval_every", &I::training, &TR::eval_every, R"J({"type": "integer", "minimum": 1})J",
            "Steps between evaluations."),
      typed("training.eval_at_start", &I::training, &TR::eval_at_start, R"J({"type": "boolean"})J",
            "Evaluate before the first optimizer step of a fresh run (recorded as step 0; not on resume)."),
      typed("training.save_every", &I::training, &TR::save_every, R"J({"type": "integer", "minimum": 1})J",
            "Steps between checkpoints."),
      typed("training.keep_last_n", &I::training, &TR::keep_last_n, R"J({"type": "integer", "minimum": 0})J",
            "Checkpoints kept; 0 = all."),
      typed("training.log_every", &I::training, &TR::log_every, R"J({"type": "integer", "minimum": 1})J",
            "Steps between log lines (console, metrics.json)."),
      typed("training.deterministic", &I::training, &TR::deterministic, R"J({"type": "boolean"})J",
            "Fixed reduction order: an N-process run is bit-identical to one process with gradient_accumulation "
            "x N (each micro-batch's gradient summed in global order; one extra gradient buffer)."),
      typed("training.max_consecutive_nonfinite", &I::training, &TR::max_consecutive_nonfinite,
            R"J({"type": "integer", "minimum": 1})J", "That many skipped non-finite steps in a row stop the run."),

      untyped("logging", R"J({"type": "object", "additionalProperties": false, "default": {}})J", "Host-owned."),
      typed(
          "logging.console_log_level", &I::logging, &LG::console_log_level,
          R"J({"type": "string", "enum": ["TRACE", "DEBUG", "INFO", "WARNING", "ERROR"], "x-aliases": {"WARN": "WARNING"}})J",
          "Case-insensitive; WARN = WARNING."),
      typed("logging.mlflow", &I::logging, &LG::mlflow, R"J({"type": "boolean"})J",
            "true: adds the `mlflow` callback (a file store in logs/mlflow, or the tracking server of "
            "mlflow_tracking_uri)."),
      untyped("logging.mlflow_tracking_uri", R"J({"type": "string", "minLength": 1})J",
              "http(s)://host:port (an MLflow tracking server's REST API), file:///path or a folder (a file store); "
              "default $MLFLOW_TRACKING_URI, else <run folder>/logs/mlflow."),
      typed("logging.wandb", &I::logging, &LG::wandb, R"J({"type": "boolean"})J", "true: not implemented yet."),
      untyped("logging.prometheus",
              R"J({"type": ["boolean", "object"], "default": false, "additionalProperties": false,
                  "properties": {"host": {"type": "string", "minLength": 1},
                                 "port": {"type": "integer", "minimum": 0, "maximum": 65535},
                                 "every": {"type": "integer", "minimum": 1},
                                 "linger_s": {"type": "number", "minimum": 0, "maximum": 3600}}})J",
              "true or {host, port, every, linger_s}: adds the `prometheus` callback, a /metrics endpoint "
              "(default 127.0.0.1:9464)."),
      typed("logging.tensorboard", &I::logging, &LG::tensorboard, R"J({"type": "boolean"})J",
            "true: adds the `tensorboard` callback (logs/tensorboard/events.out.tfevents.*)."),
      typed("logging.output_dir", &I::logging, &LG::output_dir, R"J({"type": "string", "minLength": 1})J",
            "Run folder = output_dir/experiment_name."),

      untyped("profiling", R"J({"type": "object", "additionalProperties": false, "default": {}})J", "Host-owned."),
      typed("profiling.enabled", &I::profiling, &PR::enabled, R"J({"type": "boolean"})J", ""),
      read_with(typed("profiling.schedule", &I::profiling, &PR::schedule,
                      R"J({"type": "string",
                          "pattern": "^ *(wait|warmup|active|repeat) *= *[0-9]+ *(, *(wait|warmup|active|repeat) *= *[0-9]+ *)*$",
                          "x-message": "comma-separated wait=N,warmup=N,active=N,repeat=N"})J",
                      "torch.profiler's schedule: comma-separated wait/warmup/active/repeat =N."),
                [](const JsonValue* v, I& m) {
                  ProfilingConfig& p = m.profiling;
                  if (v) from_json(*v, p.schedule, kAsWritten);
                  std::stringstream ss(p.schedule);
                  for (std::string part; std::getline(ss, part, ',');) {
                    part.erase(std::remove(part.begin(), part.end(), ' '), part.end());
                    size_t eq = part.find('=');
                    if (eq == std::string::npos) continue;
                    int64_t n = 0;
                    std::from_chars(part.data() + eq + 1, part.data() + part.size(), n);
                    std::string k = part.substr(0, eq);
                    if (k == "wait") p.wait = n;
                    else if (k == "warmup") p.warmup = n;
                    else if (k == "active") p.active = n;
                    else if (k == "repeat") p.repeat = n;
                  }
                }),
      typed("profiling.trace_handler", &I::profiling, &PR::trace_handler,
            R"J({"type": "string", "enum": ["disk", "tensorboard"]})J",
            "disk: trace.json in the run folder; tensorboard: logs/tensorboard/<host>_<pid>.<ms>.pt.trace.json, "
            "where torch.profiler.tensorboard_trace_handler puts it.",
            kFold),
      typed("profiling.profile_memory", &I::profiling, &PR::profile_memory, R"J({"type": "boolean"})J",
            "A memory counter per traced step: parameter, gradient, optimizer-state and workspace MiB, and the RSS."),
      typed("profiling.profile_shapes", &I::profiling, &PR::profile_shapes, R"J({"type": "boolean"})J",
            "Rows (tokens) and analytic FLOPs in the args of every model phase of the trace."),

      untyped("evaluation",
              R"J({"type": "object", "x-plugin-owned": true, "additionalProperties": true,
                  "default": {}})J",
              "Plugin-owned: each evaluator named in evaluation.plugins."),
      typed("evaluation.plugins", &I::evaluation, &EV::plugins,
            R"J({"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1})J",
            "Evaluator components.", kFold),
      typed("evaluation.split", &I::evaluation, &EV::split, R"J({"type": "string", "enum": ["val", "train"]})J", "",
            kFold),
      read_with(
          typed("evaluation.batch_size", &I::evaluation, &EV::batch_size, R"J({"type": "integer", "minimum": 1})J",
                "Default: data.batch_size. Results do not depend on it (glm52 evaluates dropless unless "
                "model.eval_capacity_factor > 0).",
                kNoDefault),
          [](const JsonValue* v, I& m) {
            m.evaluation.batch_size = m.data.batch_size;
            if (v) from_json(*v, m.evaluation.batch_size, kAsWritten);
          }),
      typed("evaluation.max_batches", &I::evaluation, &EV::max_batches, R"J({"type": "integer", "minimum": 0})J",
            "Loader batches per evaluation; 0 = the whole split (Lightning's limit_val_batches)."),

      untyped("generation", R"J({"type": "object", "additionalProperties": false, "default": {}})J",
              "Host-owned (zcode-host generate)."),
      typed("generation.strategy", &I::generation, &GE::strategy,
            R"J({"type": "string", "enum": ["greedy", "sample", "beam", "contrastive"]})J", "", kFold),
      typed("generation.max_new_tokens", &I::generation, &GE::max_new_tokens, R"J({"type": "integer", "minimum": 1})J",
            ""),
      typed("generation.temperature", &I::generation, &GE::temperature, R"J({"type": "number", "minimum": 0})J",
            "0 = greedy."),
      typed("generation.top_k", &I::generation, &GE::top_k, R"J({"type": "integer", "minimum": 0})J",
            "0 = off; contrastive needs >= 2."),
      typed("generation.top_p", &I::generation, &GE::top_p,
            R"J({"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1})J", ""),
      typed("generation.num_beams", &I::generation, &GE::num_beams, R"J({"type": "integer", "minimum": 1})J",
            "beam needs >= 2; > 1 only with beam."),
      typed("generation.length_penalty", &I::generation, &GE::length_penalty, R"J({"type": "number"})J",
            "Beam score / length^length_penalty."),
      typed("generation.penalty_alpha", &I::generation, &GE::penalty_alpha,
            R"J({"type": "number", "minimum": 0, "maximum": 1})J",
            "Contrastive degeneration penalty; contrastive needs > 0; > 0 only with contrastive."),
      typed("generation.seed", &I::generation, &GE::seed,
            R"J({"type": "integer", "minimum": 0, "maximum": 18446744073709551615})J", "Default: the top-level seed."),
      typed("generation.stop", &I::generation, &GE::stop,
            R"J({"type": "array", "items": {"type": "string", "minLength": 1}})J", "Stop strings."),

      read_with(untyped("callbacks",
                        R"J({"type": "array",
                            "default": [{"type": "console"}, {"type": "metrics_json"}, {"type": "metrics_jsonl"}, {"type": "checkpoint"}, {"type": "model_card"}],
                            "items": {"type": "object", "x-plugin-owned": true, "additionalProperties": true, "required": ["type"],
                              "properties": {"type": {"type": "string", "minLength": 1}, "enabled": {"type": "boolean"}}}})J",
                        "Plugin-owned: each entry's type; a list adds to the defaults (see below)."),
                [](const JsonValue* cbs, I& m) {
                  m.callbacks.clear();
                  if (cbs && cbs->IsArray())
                    for (auto& cb : cbs->GetArray()) {
                      CallbackConfig c;
                      if (auto t = member(cb, "type"); t && t->IsString()) c.type = fold(t->GetString());
                      c.options_json = json_text(cb);
                      m.callbacks.push_back(std::move(c));
                    }
                }),
      untyped("callbacks_replace_defaults", R"J({"type": "boolean", "default": false})J",
              "true: the callbacks list replaces the default callbacks instead of adding to them."),

      untyped("model_card", R"J({"type": "object", "additionalProperties": false, "default": {}})J", "Host-owned."),
      typed("model_card.template", &I::model_card, &ModelCardConfig::template_path,
            R"J({"type": "string", "minLength": 1})J", "Mustache template file for model_card.md (unset: built-in)."),
  };
  return kFields;
}

JsonValue parse_fragment(const char* text, JsonAlloc& a) {
  JsonDoc d;
  d.Parse(text);
  return JsonValue(d, a);  // a parse error gives null, which the config tests catch
}

// The object schema at `path` ("training"; "" = the root) inside `root`.
JsonValue* schema_at(JsonValue& root, std::string_view path) {
  JsonValue* v = &root;
  size_t from = 0;
  while (v && from < path.size()) {
    const size_t dot = path.find('.', from);
    const std::string key(path.substr(from, dot == std::string_view::npos ? std::string_view::npos : dot - from));
    auto props = v->IsObject() ? v->FindMember("properties") : v->MemberEnd();
    if (!v->IsObject() || props == v->MemberEnd() || !props->value.IsObject()) return nullptr;
    auto it = props->value.FindMember(key.c_str());
    v = it == props->value.MemberEnd() ? nullptr : &it->value;
    from = dot == std::string_view::npos ? path.size() : dot + 1;
  }
  return v;
}

}  // namespace

namespace config_detail {

void read_typed_fields(const JsonValue& resolved, HarnessConfig::Impl& m) {
  for (const Field& f : fields()) {
    if (!f.read) continue;
    const JsonValue* v = &resolved;
    std::string_view path = f.path;
    size_t from = 0;
    while (v && from < path.size()) {
      const size_t dot = path.find('.', from);
      v = member(*v, path.substr(from, dot == std::string_view::npos ? std::string_view::npos : dot - from));
      from = dot == std::string_view::npos ? path.size() : dot + 1;
    }
    f.read(v, m);
  }
}

std::vector<std::string> typed_field_paths() {
  std::vector<std::string> out;
  for (const Field& f : fields())
    if (f.default_of) out.emplace_back(f.path);
  return out;
}

}  // namespace config_detail

const std::string& HarnessConfig::builtin_schema_json() {
  static const std::string schema = [] {
    JsonDoc d;
    d.Parse(R"J({"type": "object", "additionalProperties": false, "required": ["data"], "properties": {}})J");
    JsonAlloc& a = d.GetAllocator();
    static const Impl defaults;  // every member at its initializer
    for (const Field& f : fields()) {
      const std::string_view path = f.path;
      const size_t dot = path.rfind('.');
      JsonValue* parent = schema_at(d, dot == std::string_view::npos ? std::string_view() : path.substr(0, dot));
      if (!parent || !parent->IsObject()) continue;  // a row before its section: the config tests catch it
      if (!parent->HasMember("properties")) parent->AddMember("properties", JsonValue(rapidjson::kObjectType), a);
      JsonValue node = parse_fragment(f.schema, a);
      JsonValue def;
      if (node.IsObject() && f.default_of && f.default_of(defaults, def, a)) node.AddMember("default", def, a);
      if (node.IsObject() && *f.description) node.AddMember("description", JsonValue(f.description, a), a);
      const std::string key(dot == std::string_view::npos ? path : path.substr(dot + 1));
      (*parent)["properties"].AddMember(JsonValue(key.c_str(), a), node, a);
    }
    return json_text(d);
  }();
  return schema;
}

}  // namespace zcode
