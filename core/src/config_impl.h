// Private to core/src/config*.cpp: HarnessConfig's state and the helpers its
// files share (YAML/JSON -> RapidJSON conversion, value description, paths).
#pragma once

#include <zcode/core/config.h>

#include <rapidjson/document.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace zcode {

using JsonValue = rapidjson::Value;
using JsonDoc = rapidjson::Document;
using JsonAlloc = rapidjson::Document::AllocatorType;

struct HarnessConfig::Impl {
  std::string origin = "<default>";
  JsonDoc raw;                         // the config as written, overrides applied
  std::set<std::string> yaml11_bools;  // paths of unquoted yes/no/on/off/y/n values
  std::vector<std::string> overrides;  // "a.b=value", in order

  bool validated = false;
  JsonDoc resolved;  // raw + defaults (valid after validate())

  std::string experiment_name = "zcode_run";
  uint64_t seed = 42;
  std::vector<std::string> plugin_path;
  HardwareConfig hardware;
  DistributedConfig distributed;
  ModelConfig model;
  DataConfig data;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  TrainingConfig training;
  LoggingConfig logging;
  ProfilingConfig profiling;
  EvaluationConfig evaluation;
  GenerationConfig generation;
  std::vector<CallbackConfig> callbacks;
  ModelCardConfig model_card;

  Impl() {
    raw.SetObject();
    resolved.SetObject();
  }
  Impl(const Impl& o);
  Impl& operator=(const Impl&) = delete;
};

namespace config_detail {

/// How a plain (unquoted) YAML scalar is read: YAML 1.2 core schema.
enum class PlainKind { Null, Bool, Int, Uint, Float, String };
struct PlainScalar {
  PlainKind kind = PlainKind::String;
  bool b = false;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  bool yaml11_bool = false;  // yes/no/on/off/y/n (kept as a string, flagged)
  /// A YAML 1.2 float that is not finite: .nan, .inf, -.inf (core schema
  /// spellings) or a decimal that overflows a double (1e400). Kept as a
  /// string (JSON cannot carry it); `non_finite_reason` says why, for the
  /// message of a numeric field that finds it.
  bool non_finite = false;
  std::string non_finite_reason;
};
PlainScalar read_plain_scalar(std::string_view text);

/// Parses YAML text into `out` (an object unless the document is a scalar or
/// list). Records flagged YAML 1.1 booleans under `path_prefix`. Throws
/// ConfigLoadError with "origin:line:col: message".
void parse_yaml(std::string_view text, const std::string& origin, JsonDoc& out, std::set<std::string>& yaml11_bools,
                const std::string& path_prefix = "");
/// Parses JSON text into `out`. Throws ConfigLoadError "origin:line:col: ...".
void parse_json(std::string_view text, const std::string& origin, JsonDoc& out);

/// "string 'fast'", "number 2.5", "boolean true", "null", "a list [..]", ...
std::string describe(const JsonValue& v);
/// Shortest round-trip text of a number ("0.0003" -> "0.0003", 1e-08 -> "1e-08").
std::string number_text(const JsonValue& v);
/// Compact JSON of a value.
std::string json_text(const JsonValue& v);
/// Makes every relative file path of the config object `doc` (the fields
/// HarnessConfig::to_yaml_absolute_paths lists) absolute against `base`;
/// references with a scheme (`hf://gpt2`) and absolute paths stay as written.
void make_paths_absolute(JsonValue& doc, const std::filesystem::path& base, JsonAlloc& a);

/// "a.b" + key -> "a.b.key"; "" + key -> "key"; "a" + 3 -> "a[3]".
std::string join_path(const std::string& base, std::string_view key);
std::string join_index(const std::string& base, size_t index);

/// Lower case, '-' -> '_'.
std::string fold(std::string_view s);

}  // namespace config_detail
}  // namespace zcode

namespace zcode::config_detail {

/// A plugin-owned section and the component it goes to.
struct PluginSection {
  zc_kind kind = ZC_KIND_UNKNOWN;
  std::string kind_word;     // "optimizer"
  std::string written_name;  // as in the config ("AdamW")
  std::string component;     // canonical ("adamw")
  std::string name_path;     // where the name is: "optimizer.name", "evaluation.plugins[0]"
  std::string section_path;  // "optimizer", "data.tokenizer", "callbacks[1]"
  std::string routing_key;   // the key naming the component ("name"); never "unknown"
  bool found = false;        // provider knows the component
  std::string schema;        // its options schema (when found)
};

/// The plugin-owned sections of `named` (a config with built-in defaults
/// filled, so default names count). With no provider, `found` stays false.
std::vector<PluginSection> plugin_sections(const JsonValue& named, const SchemaProvider* provider);

/// HarnessConfig::evaluator_options_json's object from the `evaluation`
/// section (null: {}): every member but the other listed evaluators' subsections.
void evaluator_options(const JsonValue* evaluation, std::string_view evaluator, JsonDoc& out,
                       rapidjson::MemoryPoolAllocator<>& a);

/// The tokenizer's options object for `data.tokenizer` (string form becomes
/// {"path": ref}) and its component name (type, or inferred from the path).
void tokenizer_options(const JsonValue* tok, JsonValue& out, JsonAlloc& a);
std::string tokenizer_component(const JsonValue* tok);

/// raw + defaults (built-in, filtered to the keys a known plugin declares,
/// then the plugin schemas' own defaults) + computed defaults + overrides.
void resolve(const HarnessConfig::Impl& impl, const SchemaProvider* provider, JsonDoc& out);

/// `out` = `raw` with its `callbacks` list made complete: the default
/// callbacks (the schema's default list) first, an entry whose `type` is a
/// default configuring that one in its place (the first such entry), the
/// other entries appended in order; `enabled: false` drops an entry and the
/// `enabled` key is removed from each. With `callbacks_replace_defaults:
/// true` the list is taken as written (still without `enabled: false`
/// entries). When a list was merged, `callbacks_replace_defaults` is set to
/// true in `out` so the result reads back unchanged. No-op without a list.
void merge_callbacks(const JsonValue& raw, JsonDoc& out);

/// Fills `defaults` of an object schema into `inst` (recursively).
void fill_defaults(const JsonValue& schema, JsonValue& inst, JsonAlloc& a,
                   const std::set<std::string>* only_keys = nullptr);

/// The parsed built-in schema.
const JsonDoc& builtin_schema();

/// Fills the typed tree of `m` from `resolved` (a validated config with
/// defaults filled), one row of the field table (config_schema.cpp) at a time.
void read_typed_fields(const JsonValue& resolved, HarnessConfig::Impl& m);
/// The paths of the field table's rows whose schema default is written from a
/// struct member's initializer ("training.log_every", ...), in table order.
std::vector<std::string> typed_field_paths();

/// Member lookup by key (nullptr when absent or `obj` is not an object).
const JsonValue* member(const JsonValue& obj, std::string_view key);

}  // namespace zcode::config_detail
