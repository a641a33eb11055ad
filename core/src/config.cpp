// HarnessConfig: state, defaults, the typed tree, and JSON/YAML output.
#include "config_impl.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

namespace zcode {

using namespace config_detail;

// ---- errors ----------------------------------------------------------------

std::string ConfigError::str() const { return path.empty() ? message : path + ": " + message; }

namespace {
std::string validation_what(const std::string& origin, const std::vector<ConfigError>& errors) {
  std::string s =
      origin + ": " + std::to_string(errors.size()) + (errors.size() == 1 ? " config error" : " config errors");
  for (const ConfigError& e : errors) s += "\n  " + e.str();
  return s;
}
}  // namespace

ConfigValidationError::ConfigValidationError(std::string origin, std::vector<ConfigError> errors)
    : std::runtime_error(validation_what(origin, errors)), origin_(std::move(origin)), errors_(std::move(errors)) {}

// ---- plumbing --------------------------------------------------------------

HarnessConfig::Impl::Impl(const Impl& o)
    : origin(o.origin),
      yaml11_bools(o.yaml11_bools),
      overrides(o.overrides),
      validated(o.validated),
      experiment_name(o.experiment_name),
      seed(o.seed),
      plugin_path(o.plugin_path),
      hardware(o.hardware),
      distributed(o.distributed),
      model(o.model),
      data(o.data),
      optimizer(o.optimizer),
      scheduler(o.scheduler),
      training(o.training),
      logging(o.logging),
      profiling(o.profiling),
      evaluation(o.evaluation),
      generation(o.generation),
      callbacks(o.callbacks),
      model_card(o.model_card) {
  raw.CopyFrom(o.raw, raw.GetAllocator());
  resolved.CopyFrom(o.resolved, resolved.GetAllocator());
}

HarnessConfig::HarnessConfig() : impl_(std::make_unique<Impl>()) {}
HarnessConfig::HarnessConfig(const HarnessConfig& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
HarnessConfig& HarnessConfig::operator=(const HarnessConfig& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
HarnessConfig::HarnessConfig(HarnessConfig&&) noexcept = default;
HarnessConfig& HarnessConfig::operator=(HarnessConfig&&) noexcept = default;
HarnessConfig::~HarnessConfig() = default;

const std::vector<std::string>& HarnessConfig::overrides() const { return impl_->overrides; }
bool HarnessConfig::validated() const { return impl_->validated; }
const std::string& HarnessConfig::origin() const { return impl_->origin; }
const std::string& HarnessConfig::experiment_name() const { return impl_->experiment_name; }
uint64_t HarnessConfig::seed() const { return impl_->seed; }
const std::vector<std::string>& HarnessConfig::plugin_path() const { return impl_->plugin_path; }
const HardwareConfig& HarnessConfig::hardware() const { return impl_->hardware; }
const DistributedConfig& HarnessConfig::distributed() const { return impl_->distributed; }
const ModelConfig& HarnessConfig::model() const { return impl_->model; }
const DataConfig& HarnessConfig::data() const { return impl_->data; }
const OptimizerConfig& HarnessConfig::optimizer() const { return impl_->optimizer; }
const SchedulerConfig& HarnessConfig::scheduler() const { return impl_->scheduler; }
const TrainingConfig& HarnessConfig::training() const { return impl_->training; }
const LoggingConfig& HarnessConfig::logging() const { return impl_->logging; }
const ProfilingConfig& HarnessConfig::profiling() const { return impl_->profiling; }
const EvaluationConfig& HarnessConfig::evaluation() const { return impl_->evaluation; }
const GenerationConfig& HarnessConfig::generation() const { return impl_->generation; }
const std::vector<CallbackConfig>& HarnessConfig::callbacks() const { return impl_->callbacks; }
const ModelCardConfig& HarnessConfig::model_card() const { return impl_->model_card; }

std::string HarnessConfig::canonical_name(std::string_view name) { return fold(name); }
std::string HarnessConfig::canonical_model_type(std::string_view name) {
  std::string c = fold(name);
  return c == "glm5pt2" ? "glm52" : c;
}

// ---- defaults --------------------------------------------------------------

namespace config_detail {

const JsonDoc& builtin_schema() {
  static const JsonDoc doc = [] {
    JsonDoc d;
    d.Parse(HarnessConfig::builtin_schema_json().c_str());
    return d;  // parse errors are caught by the config tests
  }();
  return doc;
}

const JsonValue* member(const JsonValue& obj, std::string_view key) {
  if (!obj.IsObject()) return nullptr;
  auto it = obj.FindMember(JsonValue(key.data(), static_cast<rapidjson::SizeType>(key.size())));
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

void fill_defaults(const JsonValue& schema, JsonValue& inst, JsonAlloc& a, const std::set<std::string>* only_keys) {
  if (!schema.IsObject()) return;
  if (inst.IsObject()) {
    const JsonValue* props = member(schema, "properties");
    if (!props || !props->IsObject()) return;
    for (auto& p : props->GetObject()) {
      std::string key(p.name.GetString(), p.name.GetStringLength());
      if (only_keys && !only_keys->count(key)) continue;
      auto it = inst.FindMember(p.name);
      if (it == inst.MemberEnd()) {
        const JsonValue* def = member(p.value, "default");
        if (!def) continue;
        JsonValue k(p.name, a), v(*def, a);
        inst.AddMember(k, v, a);
        it = inst.FindMember(p.name);
      }
      fill_defaults(p.value, it->value, a);
    }
  } else if (inst.IsArray()) {
    const JsonValue* items = member(schema, "items");
    if (!items) return;
    for (auto& v : inst.GetArray()) fill_defaults(*items, v, a);
  }
}

namespace {

std::set<std::string> schema_keys(const JsonValue& schema) {
  std::set<std::string> keys;
  if (const JsonValue* props = member(schema, "properties"); props && props->IsObject())
    for (auto& p : props->GetObject()) keys.emplace(p.name.GetString(), p.name.GetStringLength());
  return keys;
}

// The section object at a plugin section path, inside `root`.
JsonValue* section_at(JsonValue& root, const std::string& path) {
  if (path == "data.tokenizer") return nullptr;  // handled separately (string or object)
  if (path.starts_with("callbacks[")) {
    size_t i = std::stoul(path.substr(10));
    auto it = root.FindMember("callbacks");
    if (it == root.MemberEnd() || !it->value.IsArray() || i >= it->value.Size()) return nullptr;
    return it->value[static_cast<rapidjson::SizeType>(i)].IsObject() ? &it->value[static_cast<rapidjson::SizeType>(i)]
                                                                     : nullptr;
  }
  auto it = root.FindMember(JsonValue(path.c_str(), static_cast<rapidjson::SizeType>(path.size())));
  return (it != root.MemberEnd() && it->value.IsObject()) ? &it->value : nullptr;
}

}  // namespace

namespace {

// The callbacks that `logging:` switches on: `logging.<key>: true` (or, for
// prometheus, an object of its options) adds {"type": <type>, ...} to the
// list. An entry of that type in `callbacks:` configures it (its options win
// over the logging object's) or, with `enabled: false`, removes it.
std::vector<JsonValue> logging_sinks(const JsonValue& root, JsonAlloc& a) {
  std::vector<JsonValue> sinks;
  const JsonValue* lg = member(root, "logging");
  if (!lg || !lg->IsObject()) return sinks;
  static constexpr std::pair<const char*, const char*> kSinks[] = {
      {"mlflow", "mlflow"}, {"tensorboard", "tensorboard"}, {"prometheus", "prometheus"}};
  for (const auto& [key, type] : kSinks) {
    const JsonValue* v = member(*lg, key);
    if (!v || !((v->IsBool() && v->GetBool()) || v->IsObject())) continue;  // wrong types: validation says so
    JsonValue e(rapidjson::kObjectType);
    e.AddMember("type", JsonValue(type, a), a);
    if (v->IsObject())
      for (const auto& m : v->GetObject()) e.AddMember(JsonValue(m.name, a), JsonValue(m.value, a), a);
    sinks.push_back(std::move(e));
  }
  return sinks;
}

}  // namespace

void merge_callbacks(const JsonValue& raw, JsonDoc& out) {
  out.CopyFrom(raw, out.GetAllocator());
  if (!out.IsObject()) return;
  JsonAlloc& a = out.GetAllocator();
  std::vector<JsonValue> sinks = logging_sinks(out, a);
  if (!sinks.empty() && !out.HasMember("callbacks")) out.AddMember("callbacks", JsonValue(rapidjson::kArrayType), a);
  auto cbs = out.FindMember("callbacks");
  if (cbs == out.MemberEnd() || !cbs->value.IsArray()) return;
  const JsonValue* rd = member(out, "callbacks_replace_defaults");
  const bool replace = rd && rd->IsBool() && rd->GetBool();
  struct Slot {
    JsonValue entry;
    bool keep = true;
  };
  std::vector<Slot> list;
  std::vector<bool> configured;  // per default: an entry of its type was seen
  if (!replace) {
    const JsonValue* def = member(*member(*member(builtin_schema(), "properties"), "callbacks"), "default");
    for (const JsonValue& d : def->GetArray()) list.push_back({JsonValue(d, a), true});
    configured.assign(list.size(), false);
  }
  const size_t n_defaults = list.size();
  for (JsonValue& cb : cbs->value.GetArray()) {
    bool keep = true;
    if (cb.IsObject()) {
      if (const JsonValue* en = member(cb, "enabled"); en && en->IsBool()) keep = en->GetBool();
      cb.RemoveMember("enabled");  // the host's key, not the callback's option
    }
    const JsonValue* t = member(cb, "type");
    size_t at = n_defaults;
    if (t && t->IsString())
      for (size_t i = 0; i < n_defaults; ++i)
        if (!configured[i] && fold(member(list[i].entry, "type")->GetString()) == fold(t->GetString())) at = i;
    if (at < n_defaults) {
      configured[at] = true;
      list[at] = {JsonValue(cb, a), keep};
    } else {
      list.push_back({JsonValue(cb, a), keep});
    }
  }
  // The logging sinks: configured in place by an entry of their type (which
  // may also switch one off), else added after the list.
  for (JsonValue& sink : sinks) {
    const std::string type = member(sink, "type")->GetString();
    Slot* same = nullptr;
    for (Slot& s : list)
      if (const JsonValue* t = member(s.entry, "type"); t && t->IsString() && fold(t->GetString()) == type) same = &s;
    if (!same) {
      list.push_back({std::move(sink), true});
      continue;
    }
    if (!same->entry.IsObject()) continue;
    for (auto& m : sink.GetObject())
      if (!same->entry.HasMember(m.name)) same->entry.AddMember(JsonValue(m.name, a), JsonValue(m.value, a), a);
  }
  JsonValue merged(rapidjson::kArrayType);
  for (Slot& s : list)
    if (s.keep) merged.PushBack(s.entry, a);
  cbs->value = merged;
  // The list is now complete: reading the resolved config back (config.yaml,
  // a checkpoint's state.json) must not add the defaults a second time.
  if (auto f = out.FindMember("callbacks_replace_defaults"); f != out.MemberEnd()) f->value.SetBool(true);
  else out.AddMember("callbacks_replace_defaults", JsonValue(true), a);
}

void resolve(const HarnessConfig::Impl& impl, const SchemaProvider* provider, JsonDoc& out) {
  const JsonValue& schema = builtin_schema();
  JsonAlloc& a = out.GetAllocator();
  JsonDoc base;
  merge_callbacks(impl.raw, base);

  // Names first: which components do the sections go to (defaults count).
  JsonDoc named;
  named.CopyFrom(base, named.GetAllocator());
  if (named.IsObject()) fill_defaults(schema, named, named.GetAllocator());
  std::vector<PluginSection> sections = plugin_sections(named, provider);

  out.CopyFrom(base, a);
  if (!out.IsObject()) out.SetObject();
  // Built-in defaults; a plugin-owned section whose component schema is
  // known gets only the base keys that schema declares (so the section still
  // validates against it), plus the key that names the component.
  std::map<std::string, std::set<std::string>> allowed;
  std::map<std::string, std::vector<JsonDoc>> plugin_schemas;
  for (const PluginSection& s : sections) {
    if (!s.found) continue;
    JsonDoc sd;
    sd.Parse(s.schema.c_str());
    if (sd.HasParseError() || !sd.IsObject()) continue;
    auto& keys = allowed[s.section_path];
    keys.merge(schema_keys(sd));
    keys.insert(s.routing_key);
    if (s.section_path == "data") keys.insert("tokenizer");
    plugin_schemas[s.section_path].push_back(std::move(sd));
  }
  const JsonValue* props = member(schema, "properties");
  for (auto& p : props->GetObject()) {
    std::string key(p.name.GetString(), p.name.GetStringLength());
    auto it = out.FindMember(p.name);
    if (it == out.MemberEnd()) {
      const JsonValue* def = member(p.value, "default");
      if (!def) continue;
      JsonValue k(p.name, a), v(*def, a);
      out.AddMember(k, v, a);
      it = out.FindMember(p.name);
    }
    if (key == "callbacks" && it->value.IsArray()) {
      const JsonValue& item_schema = *member(p.value, "items");
      for (rapidjson::SizeType i = 0; i < it->value.Size(); ++i) {
        auto f = allowed.find(join_index("callbacks", i));
        fill_defaults(item_schema, it->value[i], a, f == allowed.end() ? nullptr : &f->second);
      }
    } else {
      auto f = allowed.find(key);
      fill_defaults(p.value, it->value, a, f == allowed.end() ? nullptr : &f->second);
    }
  }
  // The resolved `callbacks` list is always the complete one (merge_callbacks
  // or the defaults), so the resolved config says so and reads back the same.
  if (auto f = out.FindMember("callbacks_replace_defaults"); f != out.MemberEnd()) f->value.SetBool(true);
  // The plugins' own defaults.
  for (auto& [path, docs] : plugin_schemas) {
    JsonValue* sec = section_at(out, path);
    if (!sec) continue;
    for (const JsonDoc& sd : docs) fill_defaults(sd, *sec, a);
  }
  // Computed defaults.
  JsonValue* data = section_at(out, "data");
  JsonValue* eval = section_at(out, "evaluation");
  auto may_fill = [&](const std::string& sec, const char* key) {
    auto f = allowed.find(sec);
    return f == allowed.end() || f->second.count(key);
  };
  if (data && eval && !member(*eval, "batch_size") && may_fill("evaluation", "batch_size"))
    if (const JsonValue* bs = member(*data, "batch_size"); bs && bs->IsInt64())
      eval->AddMember("batch_size", JsonValue(bs->GetInt64()), a);
  JsonValue* sched = section_at(out, "scheduler");
  JsonValue* train = section_at(out, "training");
  if (sched && train && !member(*sched, "decay_steps") && may_fill("scheduler", "decay_steps")) {
    const JsonValue* type = member(*sched, "type");
    const JsonValue* w = member(*sched, "warmup_steps");
    const JsonValue* st = member(*sched, "stable_steps");
    const JsonValue* mx = member(*train, "max_steps");
    if (type && type->IsString() && fold(type->GetString()) == "wsd" && w && w->IsInt64() && st && st->IsInt64() &&
        mx && mx->IsInt64() && mx->GetInt64() - w->GetInt64() - st->GetInt64() >= 0)
      sched->AddMember("decay_steps", JsonValue(mx->GetInt64() - w->GetInt64() - st->GetInt64()), a);
  }
  // The record of --set overrides.
  out.RemoveMember("overrides");
  JsonValue list(rapidjson::kArrayType);
  for (const std::string& s : impl.overrides) list.PushBack(JsonValue(s.c_str(), a), a);
  out.AddMember("overrides", list, a);
}

}  // namespace config_detail

// ---- typed tree ------------------------------------------------------------

void HarnessConfig::validate(const SchemaProvider* provider) {
  std::vector<ConfigError> errors = check(provider);
  if (!errors.empty()) throw ConfigValidationError(impl_->origin, std::move(errors));
  resolve(*impl_, provider, impl_->resolved);
  read_typed_fields(impl_->resolved, *impl_);  // the field table (config_schema.cpp)
  impl_->validated = true;
}

// ---- output ----------------------------------------------------------------

namespace {

// The resolved tree: the validated one, or (before validate) raw + built-in
// defaults.
const JsonValue& current(const HarnessConfig::Impl& impl, JsonDoc& scratch) {
  if (impl.validated) return impl.resolved;
  resolve(impl, nullptr, scratch);
  return scratch;
}

void emit(YAML::Emitter& e, const JsonValue& v) {
  if (v.IsNull()) {
    e << YAML::Null;
  } else if (v.IsBool()) {
    e << (v.GetBool() ? "true" : "false");
  } else if (v.IsInt64() || v.IsUint64()) {
    e << number_text(v);
  } else if (v.IsNumber()) {
    // Always with a '.' and a signed exponent, so YAML 1.1 readers (PyYAML)
    // also read a float: 3e-04 -> 3.0e-04.
    std::string s = number_text(v);
    size_t epos = s.find_first_of("eE");
    std::string mant = s.substr(0, epos), exp = epos == std::string::npos ? "" : s.substr(epos);
    if (mant.find('.') == std::string::npos) mant += ".0";
    e << mant + exp;
  } else if (v.IsString()) {
    std::string s(v.GetString(), v.GetStringLength());
    PlainScalar p = read_plain_scalar(s);
    // yaml-cpp writes control characters raw in a plain scalar, and its
    // parser then folds them (trailing CRs before the next key lose one), so
    // any control byte or edge whitespace goes double-quoted, where the
    // emitter escapes it (\r, \t, \x01) and the text reads back the same.
    const bool control = std::any_of(s.begin(), s.end(), [](char c) {
      const auto u = static_cast<unsigned char>(c);
      return u < 0x20 || u == 0x7f;
    });
    const bool edge_space = !s.empty() && (s.front() == ' ' || s.back() == ' ');
    if (p.kind != PlainKind::String || p.yaml11_bool || control || edge_space) e << YAML::DoubleQuoted;
    e << s;
  } else if (v.IsArray()) {
    bool scalars = std::all_of(v.Begin(), v.End(), [](const JsonValue& x) { return !x.IsObject() && !x.IsArray(); });
    if (scalars) e << YAML::Flow;
    e << YAML::BeginSeq;
    for (auto& x : v.GetArray()) emit(e, x);
    e << YAML::EndSeq;
  } else {
    e << YAML::BeginMap;
    for (auto& m : v.GetObject()) {
      e << YAML::Key << std::string(m.name.GetString(), m.name.GetStringLength()) << YAML::Value;
      emit(e, m.value);
    }
    e << YAML::EndMap;
  }
}

}  // namespace

std::string HarnessConfig::to_json() const {
  JsonDoc scratch;
  return json_text(current(*impl_, scratch));
}

std::string HarnessConfig::to_yaml() const {
  JsonDoc scratch;
  const JsonValue& r = current(*impl_, scratch);
  YAML::Emitter e;
  e << YAML::Comment("ZCode resolved config: defaults filled; `overrides` records the --set entries applied");
  e << YAML::Newline;
  emit(e, r);
  return std::string(e.c_str()) + "\n";
}

namespace {
// The config's file-path fields (one home: to_yaml_absolute_paths and
// is_path_field). "plugin_path" is a string or a list of strings.
constexpr std::string_view kPathFields[] = {"plugin_path",        "data.train_path",    "data.val_path",
                                            "data.cache_dir",     "data.tokenizer",     "data.tokenizer.path",
                                            "logging.output_dir", "model_card.template"};

void make_absolute(JsonValue& v, const std::filesystem::path& base, JsonAlloc& a) {
  if (!v.IsString()) return;
  std::string s(v.GetString(), v.GetStringLength());
  if (s.empty() || s.find("://") != std::string::npos) return;  // hf://NAME, s3://...: not a file path
  std::filesystem::path p(s);
  if (p.is_absolute()) return;
  v.SetString((base / p).lexically_normal().string().c_str(), a);
}
}  // namespace

bool HarnessConfig::is_path_field(std::string_view key) {
  for (std::string_view k : kPathFields)
    if (k == key) return true;
  return false;
}

void config_detail::make_paths_absolute(JsonValue& doc, const std::filesystem::path& base, JsonAlloc& a) {
  for (std::string_view key : kPathFields) {
    JsonValue* v = &doc;
    size_t from = 0;
    while (v && from <= key.size()) {
      size_t dot = key.find('.', from);
      std::string part(key.substr(from, dot == std::string_view::npos ? std::string_view::npos : dot - from));
      if (!v->IsObject()) {
        v = nullptr;
        break;
      }
      auto it = v->FindMember(part.c_str());
      v = it != v->MemberEnd() ? &it->value : nullptr;
      if (dot == std::string_view::npos) break;
      from = dot + 1;
    }
    if (!v) continue;
    if (v->IsArray())
      for (auto& x : v->GetArray()) make_absolute(x, base, a);
    else make_absolute(*v, base, a);
  }
}

std::string HarnessConfig::to_yaml_absolute_paths(const std::filesystem::path& base) const {
  JsonDoc scratch;
  JsonDoc doc;
  doc.CopyFrom(current(*impl_, scratch), doc.GetAllocator());
  make_paths_absolute(doc, base, doc.GetAllocator());
  YAML::Emitter e;
  e << YAML::Comment(
      "ZCode resolved config: defaults filled, relative paths made absolute; `overrides` records the --set entries "
      "applied");
  e << YAML::Newline;
  emit(e, doc);
  return std::string(e.c_str()) + "\n";
}

std::string HarnessConfig::section_json(std::string_view section) const {
  JsonDoc scratch;
  const JsonValue& r = current(*impl_, scratch);
  if (section == "data.tokenizer") {
    JsonDoc opts;
    const JsonValue* data = member(r, "data");
    tokenizer_options(data ? member(*data, "tokenizer") : nullptr, opts, opts.GetAllocator());
    return json_text(opts);
  }
  const JsonValue* v = member(r, section);
  return v ? json_text(*v) : std::string("{}");
}

std::string HarnessConfig::evaluator_options_json(std::string_view evaluator) const {
  JsonDoc scratch;
  const JsonValue& r = current(*impl_, scratch);
  const JsonValue* e = member(r, "evaluation");
  JsonDoc opts;
  config_detail::evaluator_options(e, evaluator, opts, opts.GetAllocator());
  return json_text(opts);
}

}  // namespace zcode
