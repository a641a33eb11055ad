// Validation: every error collected, each one line `path: found X, expected Y`.
//
// Schema keywords are checked by RapidJSON's schema validator (draft-04),
// one value at a time: our walk descends objects and lists itself (so it can
// report EVERY bad field, name unknown keys with a did-you-mean hint and
// catch YAML 1.1 booleans) and hands each value to RapidJSON, whose single
// error is translated here. The same walk runs over the built-in schema and
// over each plugin's options schema. Then come the cross-field rules and the
// table of accepted-but-not-implemented options.
#include "config_impl.h"

#include <zcode/sdk/suggest.h>
#include <zcode/sdk/tokenizer_files.h>

#include <rapidjson/pointer.h>
#include <rapidjson/schema.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>

namespace zcode {

using namespace config_detail;

namespace config_detail {

void tokenizer_options(const JsonValue* tok, JsonValue& out, JsonAlloc& a) {
  if (tok && tok->IsObject()) {
    out.CopyFrom(*tok, a);
    return;
  }
  out.SetObject();
  if (tok && tok->IsString()) out.AddMember("path", JsonValue(*tok, a), a);
}

// The built-in schema's default for data.tokenizer (a string reference).
const JsonValue* builtin_tokenizer_default() {
  static const JsonDoc schema = [] {
    JsonDoc d;
    d.Parse(HarnessConfig::builtin_schema_json().c_str());
    return d;
  }();
  const JsonValue* v = &schema;
  for (const char* k : {"properties", "data", "properties", "tokenizer", "default"}) {
    v = v->IsObject() ? member(*v, k) : nullptr;
    if (!v) return nullptr;
  }
  return v;
}

std::string tokenizer_component(const JsonValue* tok) {
  const JsonValue* path = tok;
  if (tok && tok->IsObject()) {
    if (const JsonValue* t = member(*tok, "type"); t && t->IsString()) return fold(t->GetString());
    path = member(*tok, "path");
  }
  if (path && path->IsString()) return sdk::tokenizer_plugin_for_reference(path->GetString());
  return "bpe";
}

void evaluator_options(const JsonValue* evaluation, std::string_view evaluator, JsonDoc& out,
                       rapidjson::MemoryPoolAllocator<>& a) {
  out.SetObject();
  if (!evaluation || !evaluation->IsObject()) return;
  std::vector<std::string> others;
  if (const JsonValue* pl = member(*evaluation, "plugins"); pl && pl->IsArray())
    for (const auto& p : pl->GetArray())
      if (p.IsString() && fold(p.GetString()) != fold(std::string(evaluator))) others.push_back(p.GetString());
  for (const auto& m : evaluation->GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    if (std::find(others.begin(), others.end(), key) != others.end()) continue;
    out.AddMember(JsonValue(key.c_str(), a), JsonValue(m.value, a), a);
  }
}

std::vector<PluginSection> plugin_sections(const JsonValue& named, const SchemaProvider* provider) {
  std::vector<PluginSection> out;
  auto add = [&](zc_kind kind, const char* word, const JsonValue* name, std::string component, std::string name_path,
                 std::string section_path, std::string routing_key) {
    if (!name || !name->IsString() || name->GetStringLength() == 0) return;
    PluginSection s;
    s.kind = kind;
    s.kind_word = word;
    s.written_name.assign(name->GetString(), name->GetStringLength());
    s.component = std::move(component);
    s.name_path = std::move(name_path);
    s.section_path = std::move(section_path);
    s.routing_key = std::move(routing_key);
    if (provider) {
      if (auto schema = provider->options_schema(kind, s.component)) {
        s.found = true;
        s.schema = std::move(*schema);
      }
    }
    out.push_back(std::move(s));
  };
  const JsonValue* data = member(named, "data");
  if (data && data->IsObject()) {
    const JsonValue* tok = member(*data, "tokenizer");
    if (tok && (tok->IsString() || tok->IsObject())) {
      const JsonValue* t = tok->IsObject() ? member(*tok, "type") : nullptr;
      std::string comp = tokenizer_component(tok);
      JsonValue name(comp.c_str(), static_cast<rapidjson::SizeType>(comp.size()));
      add(ZC_KIND_TOKENIZER, "tokenizer", t ? t : &name, comp, t ? "data.tokenizer.type" : "data.tokenizer",
          "data.tokenizer", "type");
    }
    const JsonValue* loader = member(*data, "loader");
    add(ZC_KIND_DATALOADER, "dataloader", loader, loader && loader->IsString() ? fold(loader->GetString()) : "",
        "data.loader", "data", "loader");
  }
  if (const JsonValue* m = member(named, "model"); m && m->IsObject()) {
    const JsonValue* t = member(*m, "type");
    add(ZC_KIND_MODEL, "model", t, t && t->IsString() ? HarnessConfig::canonical_model_type(t->GetString()) : "",
        "model.type", "model", "type");
  }
  if (const JsonValue* o = member(named, "optimizer"); o && o->IsObject()) {
    const JsonValue* n = member(*o, "name");
    add(ZC_KIND_OPTIMIZER, "optimizer", n, n && n->IsString() ? fold(n->GetString()) : "", "optimizer.name",
        "optimizer", "name");
  }
  if (const JsonValue* s = member(named, "scheduler"); s && s->IsObject()) {
    const JsonValue* t = member(*s, "type");
    add(ZC_KIND_SCHEDULER, "scheduler", t, t && t->IsString() ? fold(t->GetString()) : "", "scheduler.type",
        "scheduler", "type");
  }
  if (const JsonValue* e = member(named, "evaluation"); e && e->IsObject()) {
    if (const JsonValue* pl = member(*e, "plugins"); pl && pl->IsArray())
      for (rapidjson::SizeType i = 0; i < pl->Size(); ++i)
        add(ZC_KIND_EVALUATOR, "evaluator", &(*pl)[i], (*pl)[i].IsString() ? fold((*pl)[i].GetString()) : "",
            join_index("evaluation.plugins", i), "evaluation", "plugins");
  }
  if (const JsonValue* cbs = member(named, "callbacks"); cbs && cbs->IsArray()) {
    for (rapidjson::SizeType i = 0; i < cbs->Size(); ++i) {
      const JsonValue* t = member((*cbs)[i], "type");
      std::string sp = join_index("callbacks", i);
      add(ZC_KIND_CALLBACK, "callback", t, t && t->IsString() ? fold(t->GetString()) : "", sp + ".type", sp, "type");
    }
  }
  return out;
}

}  // namespace config_detail

namespace {

// ---- translating one schema failure into words -----------------------------

std::vector<std::string> schema_types(const JsonValue& schema) {
  std::vector<std::string> out;
  if (const JsonValue* t = member(schema, "type")) {
    if (t->IsString()) out.emplace_back(t->GetString());
    else if (t->IsArray())
      for (auto& x : t->GetArray())
        if (x.IsString()) out.emplace_back(x.GetString());
  }
  return out;
}

std::string type_phrase(const std::vector<std::string>& types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string& t = types[i];
    std::string p = t == "integer"   ? "an integer"
                    : t == "number"  ? "a number"
                    : t == "string"  ? "a string"
                    : t == "boolean" ? "true or false"
                    : t == "array"   ? "a list"
                    : t == "object"  ? "a mapping"
                                     : t;
    s += (i == 0 ? "" : i + 1 == types.size() ? " or " : ", ") + p;
  }
  return s.empty() ? "a valid value" : s;
}

bool has_type(const std::vector<std::string>& types, std::string_view t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

std::string range_phrase(const JsonValue& schema) {
  const auto types = schema_types(schema);
  std::string s = has_type(types, "integer") ? "an integer" : "a number";
  auto flag = [&](const char* k) {
    const JsonValue* v = member(schema, k);
    return v && v->IsBool() && v->GetBool();
  };
  std::vector<std::string> parts;
  if (const JsonValue* mn = member(schema, "minimum"); mn && mn->IsNumber())
    parts.push_back((flag("exclusiveMinimum") ? "> " : ">= ") + number_text(*mn));
  if (const JsonValue* mx = member(schema, "maximum"); mx && mx->IsNumber())
    parts.push_back((flag("exclusiveMaximum") ? "< " : "<= ") + number_text(*mx));
  for (size_t i = 0; i < parts.size(); ++i) s += (i == 0 ? " " : " and ") + parts[i];
  return s;
}

std::vector<std::string> enum_values(const JsonValue& schema) {
  std::vector<std::string> out;
  if (const JsonValue* e = member(schema, "enum"); e && e->IsArray())
    for (auto& v : e->GetArray()) out.push_back(v.IsString() ? std::string(v.GetString()) : json_text(v));
  return out;
}

std::string enum_message(const JsonValue& schema, const JsonValue& inst) {
  std::vector<std::string> values = enum_values(schema);
  std::string list;
  for (size_t i = 0; i < values.size(); ++i) list += (i ? ", " : "") + values[i];
  if (inst.IsString()) {
    std::string s(inst.GetString(), inst.GetStringLength());
    return "'" + s + "' is not one of " + list + sdk::did_you_mean_hint(s, values);
  }
  return "expected one of " + list + ", found " + describe(inst);
}

std::string translate(const std::string& keyword, const JsonValue& schema, const JsonValue& inst) {
  const JsonValue* xmsg = member(schema, "x-message");
  if (keyword == "type") {
    const auto types = schema_types(schema);
    if (inst.IsString() && (has_type(types, "number") || has_type(types, "integer"))) {
      // .nan, .inf, 1e400: numbers to the reader, strings to the loader.
      const std::string s(inst.GetString(), inst.GetStringLength());
      if (PlainScalar p = read_plain_scalar(s); p.non_finite)
        return "expected " + type_phrase(types) + ", found " + s + ", which " + p.non_finite_reason +
               "; a config number must be finite";
    }
    return "expected " + type_phrase(types) + ", found " + describe(inst);
  }
  if (keyword == "enum") return enum_message(schema, inst);
  if (keyword == "minimum" || keyword == "maximum" || keyword == "exclusiveMinimum" || keyword == "exclusiveMaximum")
    return "expected " + range_phrase(schema) + ", found " + describe(inst).substr(inst.IsNumber() ? 7 : 0);
  if (keyword == "minItems" || keyword == "maxItems") {
    const JsonValue* mn = member(schema, "minItems");
    const JsonValue* mx = member(schema, "maxItems");
    std::string want;
    if (mn && mx && mn->IsUint() && mx->IsUint() && mn->GetUint() == mx->GetUint())
      want = "exactly " + number_text(*mn);
    else if (keyword == "minItems" && mn) want = "at least " + number_text(*mn);
    else if (mx) want = "at most " + number_text(*mx);
    return "expected a list of " + want + " items, found " + std::to_string(inst.IsArray() ? inst.Size() : 0) +
           " items";
  }
  if (keyword == "minLength") {
    const JsonValue* mn = member(schema, "minLength");
    if (mn && mn->IsUint() && mn->GetUint() == 1) return "expected a non-empty string, found " + describe(inst);
    return "expected a string of at least " + (mn ? number_text(*mn) : "?") + " characters, found " + describe(inst);
  }
  if (keyword == "maxLength") {
    const JsonValue* mx = member(schema, "maxLength");
    return "expected a string of at most " + (mx ? number_text(*mx) : "?") + " characters, found " + describe(inst);
  }
  if (keyword == "pattern") {
    if (xmsg && xmsg->IsString()) return "expected " + std::string(xmsg->GetString()) + ", found " + describe(inst);
    const JsonValue* p = member(schema, "pattern");
    return describe(inst) + " does not match the pattern '" + (p && p->IsString() ? p->GetString() : "?") + "'";
  }
  if (keyword == "multipleOf") {
    const JsonValue* m = member(schema, "multipleOf");
    return "expected a multiple of " + (m ? number_text(*m) : "?") + ", found " + describe(inst);
  }
  if (xmsg && xmsg->IsString()) return "expected " + std::string(xmsg->GetString()) + ", found " + describe(inst);
  return "invalid value " + describe(inst) + " (fails the schema's '" + keyword + "' rule)";
}

// ---- draft-2020-12 spellings RapidJSON (draft-04) does not know -------------

void normalize_schema(JsonValue& s, JsonAlloc& a) {
  if (s.IsArray()) {
    for (auto& x : s.GetArray()) normalize_schema(x, a);
    return;
  }
  if (!s.IsObject()) return;
  // Numeric exclusiveMinimum: N  ->  minimum: N, exclusiveMinimum: true.
  for (const char* pair : {"Minimum", "Maximum"}) {
    std::string ex = std::string("exclusive") + pair, plain = pair;
    plain[0] = static_cast<char>(std::tolower(plain[0]));
    auto it = s.FindMember(ex.c_str());
    if (it != s.MemberEnd() && it->value.IsNumber()) {
      JsonValue bound(it->value, a);
      it->value.SetBool(true);
      s.RemoveMember(plain.c_str());
      s.AddMember(JsonValue(plain.c_str(), a), bound, a);
    }
  }
  if (auto it = s.FindMember("const"); it != s.MemberEnd() && !s.HasMember("enum")) {
    JsonValue list(rapidjson::kArrayType);
    list.PushBack(JsonValue(it->value, a), a);
    s.AddMember("enum", list, a);
  }
  for (auto& m : s.GetObject())
    if (m.value.IsObject() || m.value.IsArray()) normalize_schema(m.value, a);
}

// ---- the walk --------------------------------------------------------------

const char* kYaml11String = "; quote it if you mean the string";

struct Walker {
  const std::set<std::string>& yaml11;
  std::vector<ConfigError>& errors;
  bool builtin;                   // lenient enums, cross-section hints
  std::string root_path;          // the section this walk started at
  std::string exempt_key;         // routing key at root_path, never "unknown"
  std::string owner;              // "optimizer 'adamw'" for plugin walks
  rapidjson::Document scratch{};  // owns temporary schema fragments

  void error(const std::string& path, std::string msg) { errors.push_back({path, std::move(msg)}); }

  void walk(const JsonValue& schema_in, const JsonValue& inst, const std::string& path) {
    static const JsonValue empty(rapidjson::kObjectType);
    const JsonValue& schema = schema_in.IsObject() ? schema_in : empty;
    const auto types = schema_types(schema);
    if (inst.IsString() && yaml11.count(path)) {
      std::string v = "boolean-like YAML 1.1 value '" + std::string(inst.GetString()) + "'";
      if (has_type(types, "boolean")) error(path, "expected true or false, found " + v);
      else if (types.empty() || has_type(types, "string")) error(path, "found " + v + kYaml11String);
      else error(path, "expected " + type_phrase(types) + ", found " + v);
      return;
    }
    const size_t before = errors.size();
    if (inst.IsObject() && (types.empty() || has_type(types, "object"))) {
      const JsonValue* props = member(schema, "properties");
      const JsonValue* addl = member(schema, "additionalProperties");
      for (auto& m : inst.GetObject()) {
        std::string key(m.name.GetString(), m.name.GetStringLength());
        std::string sub = join_path(path, key);
        if (const JsonValue* ps = props ? member(*props, key) : nullptr) {
          walk(*ps, m.value, sub);
        } else if (addl && addl->IsBool() && !addl->GetBool() && !(path == root_path && key == exempt_key)) {
          unknown_key(props, key, path);
        } else {
          walk(addl && addl->IsObject() ? *addl : empty, m.value, sub);
        }
      }
      if (const JsonValue* req = member(schema, "required"); req && req->IsArray())
        for (auto& r : req->GetArray())
          if (r.IsString() && !inst.HasMember(r.GetString()))
            error(join_path(path, r.GetString()), "missing required key");
      // Built-in object schemas have no keyword the walk did not apply (and
      // their enums are case-insensitive, which RapidJSON's are not).
      if (errors.size() == before && !builtin) leaf(schema, inst, path, /*container=*/true);
      return;
    }
    if (inst.IsArray() && (types.empty() || has_type(types, "array"))) {
      const JsonValue* items = member(schema, "items");
      for (rapidjson::SizeType i = 0; i < inst.Size(); ++i)
        walk(items && items->IsObject() ? *items : empty, inst[i], join_index(path, i));
      if (errors.size() == before) {
        if (builtin) {  // only list-level keywords; the items were walked
          JsonValue list_schema(rapidjson::kObjectType);
          for (const char* k : {"type", "minItems", "maxItems", "uniqueItems"})
            if (const JsonValue* v = member(schema, k))
              list_schema.AddMember(rapidjson::StringRef(k), JsonValue(*v, scratch.GetAllocator()),
                                    scratch.GetAllocator());
          leaf(list_schema, inst, path, true);
        } else {
          leaf(schema, inst, path, true);
        }
      }
      return;
    }
    leaf(schema, inst, path, false);
  }

  void unknown_key(const JsonValue* props, const std::string& key, const std::string& path) {
    std::vector<std::string> known;
    if (props && props->IsObject())
      for (auto& p : props->GetObject()) known.emplace_back(p.name.GetString(), p.name.GetStringLength());
    std::string hint = sdk::did_you_mean_hint(key, known);
    const std::string full = join_path(path, key);
    if (hint.empty() && builtin) hint = cross_section_hint(full, key);
    std::string msg = "unknown key" + (owner.empty() ? "" : " for " + owner) + hint;
    if (hint.empty() && !known.empty() && known.size() <= 24) {
      std::string list;
      for (size_t i = 0; i < known.size(); ++i) list += (i ? ", " : "") + known[i];
      msg += "; known keys: " + list;
    }
    error(full, msg);
  }

  // A key written in the wrong section (the guide's own 3.3 snippet puts
  // mixed_precision under training), or a spelling the guide used.
  static std::string cross_section_hint(const std::string& full, const std::string& key) {
    static const std::map<std::string, std::string> special = {
        {"generation.contrastive", " (use generation.strategy: contrastive)"},
        {"training.mixed_precision", " (did you mean 'hardware.mixed_precision'?)"},
        {"training.lr", " (did you mean 'optimizer.lr'?)"},
        {"training.batch_size", " (did you mean 'data.batch_size'?)"},
        {"training.warmup_steps", " (did you mean 'scheduler.warmup_steps'?)"}};
    if (auto it = special.find(full); it != special.end()) return it->second;
    const JsonValue* props = member(builtin_schema(), "properties");
    if (member(*props, key) && full.find('.') != std::string::npos) return " (did you mean '" + key + "'?)";
    for (auto& sec : props->GetObject()) {
      const JsonValue* sp = member(sec.value, "properties");
      std::string name = std::string(sec.name.GetString()) + "." + key;
      if (sp && member(*sp, key) && name != full) return " (did you mean '" + name + "'?)";
    }
    return "";
  }

  // One value against one schema: RapidJSON decides, we translate.
  void leaf(const JsonValue& schema, const JsonValue& inst, const std::string& path, bool container) {
    if (!schema.IsObject() || schema.ObjectEmpty()) return;
    if (builtin && inst.IsString() && member(schema, "enum")) {
      // Built-in enums: case-insensitive, '-' == '_', plus aliases.
      const std::string v = fold(inst.GetString());
      for (const std::string& e : enum_values(schema))
        if (fold(e) == v) return;
      if (const JsonValue* al = member(schema, "x-aliases"); al && al->IsObject())
        for (auto& m : al->GetObject())
          if (fold(m.name.GetString()) == v) return;
      error(path, enum_message(schema, inst));
      return;
    }
    rapidjson::SchemaDocument sd(schema);
    rapidjson::SchemaValidator validator(sd);
    if (inst.Accept(validator)) return;
    std::string keyword = validator.GetInvalidSchemaKeyword();
    // On containers the walk already reported unknown and missing keys.
    if (container && (keyword == "additionalProperties" || keyword == "required")) return;
    const JsonValue* sub = validator.GetInvalidSchemaPointer().Get(schema);
    const rapidjson::Pointer& dp = validator.GetInvalidDocumentPointer();
    const JsonValue* bad = dp.Get(inst);
    std::string where = path;
    for (size_t i = 0; i < dp.GetTokenCount(); ++i) {
      const auto& t = dp.GetTokens()[i];
      where = t.index != rapidjson::kPointerInvalidIndex ? join_index(where, t.index)
                                                         : join_path(where, std::string(t.name, t.length));
    }
    error(where, translate(keyword, sub ? *sub : schema, bad ? *bad : inst));
  }
};

// ---- cross-field rules -----------------------------------------------------

struct Lookup {
  const JsonValue& root;
  const JsonValue* get(const std::string& path) const {
    const JsonValue* v = &root;
    size_t start = 0;
    while (v && start <= path.size()) {
      size_t dot = path.find('.', start);
      std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      v = member(*v, key);
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return v;
  }
  std::optional<int64_t> i64(const std::string& p) const {
    const JsonValue* v = get(p);
    return v && v->IsInt64() ? std::optional<int64_t>(v->GetInt64()) : std::nullopt;
  }
  std::optional<double> num(const std::string& p) const {
    const JsonValue* v = get(p);
    return v && v->IsNumber() ? std::optional<double>(v->GetDouble()) : std::nullopt;
  }
  std::optional<bool> boolean(const std::string& p) const {
    const JsonValue* v = get(p);
    return v && v->IsBool() ? std::optional<bool>(v->GetBool()) : std::nullopt;
  }
  std::optional<std::string> str(const std::string& p) const {
    const JsonValue* v = get(p);
    return v && v->IsString() ? std::optional<std::string>(fold(v->GetString())) : std::nullopt;
  }
  bool present(const std::string& p) const { return get(p) != nullptr; }
};

std::string n2s(int64_t v) { return std::to_string(v); }
std::string d2s(double v) {
  JsonValue x(v);
  return number_text(x);
}

bool has_error_at_or_under(const std::vector<ConfigError>& errors, const std::string& path);

// `r` = raw + built-in defaults; `raw` = as written. Each rule runs only when
// its fields are well typed and have no error of their own in `earlier`
// (max_seq_len: 0 is reported once, as itself, not again as an sp_group_size
// that does not divide it).
void cross_field(const Lookup& r, const Lookup& raw, const std::vector<ConfigError>& earlier,
                 std::vector<ConfigError>& e) {
  auto ok = [&](std::initializer_list<const char*> paths) {
    for (const char* p : paths)
      if (has_error_at_or_under(earlier, p)) return false;
    return true;
  };
  // model.moe_top_k <= moe_experts, n_kv_heads | n_heads, first_dense_layers
  // <= n_layers: the model plugin's rules (glm52 Config::resolve), which
  // validate meets through the memory estimate, and run at create.

  auto max_steps = r.i64("training.max_steps");
  auto warm = r.i64("scheduler.warmup_steps");
  if (max_steps && warm && ok({"training.max_steps"}) && *warm > *max_steps)
    e.push_back({"scheduler.warmup_steps", n2s(*warm) + " exceeds training.max_steps (" + n2s(*max_steps) + ")"});
  // WSD (Hu et al. 2024, MiniCPM): warmup, then stable, then decay, all
  // inside max_steps. decay_steps defaults to what is left.
  if (r.str("scheduler.type") == "wsd" && max_steps && warm && *warm <= *max_steps &&
      ok({"training.max_steps", "scheduler.warmup_steps", "scheduler.stable_steps"})) {
    auto stable = r.i64("scheduler.stable_steps");
    auto decay = raw.i64("scheduler.decay_steps");
    if (stable && decay && *warm + *stable + *decay > *max_steps)
      e.push_back(
          {"scheduler.decay_steps", "warmup_steps + stable_steps + decay_steps = " + n2s(*warm + *stable + *decay) +
                                        " exceeds training.max_steps (" + n2s(*max_steps) + ")"});
    else if (stable && !raw.present("scheduler.decay_steps") && *warm + *stable > *max_steps)
      e.push_back({"scheduler.stable_steps", "warmup_steps + stable_steps = " + n2s(*warm + *stable) +
                                                 " exceeds training.max_steps (" + n2s(*max_steps) + ")"});
    // The scheduler refuses a decay of 0 steps (it would end on the stable
    // lr, never reaching min_lr_ratio); the default decay is what is left.
    else if (stable && !raw.present("scheduler.decay_steps") && *warm + *stable == *max_steps)
      e.push_back(
          {"scheduler.stable_steps", "warmup_steps + stable_steps = " + n2s(*warm + *stable) +
                                         " equals training.max_steps, which leaves 0 steps to decay; " +
                                         (*max_steps > *warm ? "expected stable_steps <= " + n2s(*max_steps - *warm - 1)
                                                             : std::string("expected training.max_steps > "
                                                                           "warmup_steps"))});
    else if (decay && *decay == 0) e.push_back({"scheduler.decay_steps", "0 steps to decay; expected an integer >= 1"});
  }

  auto seq = r.i64("model.max_seq_len"), sp = r.i64("training.sp_group_size");
  if (seq && sp && ok({"model.max_seq_len"}) && *sp != 0 && *seq % *sp != 0)
    e.push_back({"training.sp_group_size", n2s(*sp) + " does not divide model.max_seq_len (" + n2s(*seq) + ")"});
  if (sp && *sp > 1 && r.boolean("training.sequence_parallel") == false)
    e.push_back({"training.sp_group_size", n2s(*sp) + " has no effect unless training.sequence_parallel is true"});
  auto d = r.i64("model.d_model"), tp = r.i64("training.tp_group_size");
  if (d && tp && ok({"model.d_model"}) && *tp != 0 && *d % *tp != 0)
    e.push_back({"training.tp_group_size", n2s(*tp) + " does not divide model.d_model (" + n2s(*d) + ")"});
  if (tp && *tp > 1 && r.boolean("training.tensor_parallel") == false)
    e.push_back({"training.tp_group_size", n2s(*tp) + " has no effect unless training.tensor_parallel is true"});

  // Expert parallelism (issue #20): K ranks split the experts, K divides the
  // world; what needs every expert in one process is refused by name.
  // (model.moe_experts mod K is the model plugin's rule, checked at create.)
  if (auto k = r.i64("distributed.expert_parallel"); k && *k > 1 && ok({"distributed.expert_parallel"})) {
    const std::string ks = "distributed.expert_parallel = " + n2s(*k);
    if (auto dev = r.i64("hardware.devices"); dev && ok({"hardware.devices"}) && *dev % *k != 0)
      e.push_back(
          {"distributed.expert_parallel",
           n2s(*k) + " does not divide hardware.devices (" + n2s(*dev) +
               "): each group of K ranks splits the experts K ways, so the world size must be a multiple of K"});
    // (As written: the default callbacks generate nothing, and the paths are the file's.)
    if (const JsonValue* cbs = raw.get("callbacks"); cbs && cbs->IsArray())
      for (rapidjson::SizeType i = 0; i < cbs->Size(); ++i) {
        const JsonValue* t = member((*cbs)[i], "type");
        const JsonValue* on = member((*cbs)[i], "enabled");
        if (t && t->IsString() && fold(t->GetString()) == "samples" && !(on && on->IsBool() && !on->GetBool()))
          e.push_back({join_index("callbacks", i) + ".type",
                       "'samples' generates text, which needs every expert in one process, but " + ks +
                           " splits them over ranks; remove it or set " + join_index("callbacks", i) +
                           ".enabled: false (generate from the checkpoint afterwards: zcode-host generate "
                           "--checkpoint ...)"});
      }
    if (const JsonValue* ev = r.get("evaluation.plugins"); ev && ev->IsArray())
      for (rapidjson::SizeType i = 0; i < ev->Size(); ++i)
        if ((*ev)[i].IsString() && fold((*ev)[i].GetString()) == "generation")
          e.push_back({join_index("evaluation.plugins", i),
                       "'generation' decodes text, which needs every expert in one process, but " + ks +
                           " splits them over ranks; evaluate the checkpoint afterwards (zcode-host evaluate)"});
  }

  auto vf = r.num("data.val_fraction");
  if (vf && *vf > 0 && r.str("data.val_path"))
    e.push_back({"data.val_fraction", d2s(*vf) + " cannot be combined with data.val_path; use one of them"});

  auto strategy = r.str("generation.strategy");
  auto beams = r.i64("generation.num_beams");
  if (strategy == "beam" && beams && *beams < 2)
    e.push_back({"generation.num_beams", "strategy 'beam' needs num_beams >= 2, found " + n2s(*beams)});
  if (strategy && strategy != "beam" && beams && *beams > 1)
    e.push_back({"generation.num_beams", n2s(*beams) + " has no effect unless generation.strategy is 'beam'"});
  auto alpha = r.num("generation.penalty_alpha");
  auto topk = r.i64("generation.top_k");
  if (strategy == "contrastive") {
    if (alpha && *alpha <= 0)
      e.push_back({"generation.penalty_alpha", "strategy 'contrastive' needs penalty_alpha > 0, found " + d2s(*alpha)});
    if (topk && *topk < 2)
      e.push_back({"generation.top_k", "strategy 'contrastive' needs top_k >= 2, found " + n2s(*topk)});
  } else if (strategy && alpha && *alpha > 0) {
    e.push_back(
        {"generation.penalty_alpha", d2s(*alpha) + " has no effect unless generation.strategy is 'contrastive'"});
  }
}

// ---- accepted, but not implemented in this build ---------------------------
// One row per option; delete a row when the feature lands.

struct Unsupported {
  const char* path;
  std::function<std::optional<std::string>(const JsonValue&)> check;
};

std::optional<std::string> if_true(const JsonValue& v, const char* reason) {
  if (v.IsBool() && v.GetBool()) return std::string("true ") + reason;
  return std::nullopt;
}

const std::vector<Unsupported>& unsupported_table() {
  static const std::vector<Unsupported> table = {
      {"hardware.accelerator",
       [](const JsonValue& v) -> std::optional<std::string> {
         if (v.IsString() && fold(v.GetString()) == "gpu")
           return "'" + std::string(v.GetString()) + "' needs the CUDA backend, which is not implemented yet; use cpu";
         return std::nullopt;
       }},
      {"distributed.backend",
       [](const JsonValue& v) -> std::optional<std::string> {
         if (v.IsString() && fold(v.GetString()) == "nccl")
           return "'nccl' needs the CUDA backend, which is not implemented yet; use mpi (or auto)";
         return std::nullopt;
       }},
      {"hardware.mixed_precision",
       [](const JsonValue& v) {
         return if_true(v,
                        "needs the CUDA backend (fp16/bf16 autocast), which is not implemented yet; "
                        "the CPU backend trains in fp32: set false");
       }},
      {"training.precision",
       [](const JsonValue& v) -> std::optional<std::string> {
         if (v.IsString() && fold(v.GetString()) != "fp32")
           return "'" + std::string(v.GetString()) + "' needs the CUDA backend, which is not implemented yet; use fp32";
         return std::nullopt;
       }},
      {"training.loss_scale",
       [](const JsonValue& v) -> std::optional<std::string> {
         if (v.IsNumber() && v.GetDouble() != 1.0)
           return number_text(v) +
                  " (static loss scaling) is for fp16 training, which is not implemented yet; remove it or set 1";
         return std::nullopt;
       }},
      {"training.gradient_checkpointing",
       [](const JsonValue& v) {
         return if_true(v, "is not implemented yet (activations are always kept); set false");
       }},
      {"training.sequence_parallel",
       [](const JsonValue& v) {
         return if_true(v, "needs multi-device training, which is not implemented yet; set false");
       }},
      {"training.tensor_parallel",
       [](const JsonValue& v) {
         return if_true(v, "needs multi-device training, which is not implemented yet; set false");
       }},
      {"logging.wandb",
       [](const JsonValue& v) {
         return if_true(v, "needs the Weights & Biases sink, which is not implemented yet; set false");
       }},
  };
  return table;
}

// ---- ordering: errors in document order -------------------------------------

std::vector<size_t> order_key(const JsonValue& raw, const std::string& path) {
  std::vector<size_t> key;
  const JsonValue* v = &raw;
  size_t i = 0;
  const size_t missing = static_cast<size_t>(-1);
  while (i < path.size()) {
    if (path[i] == '.') ++i;
    if (path[i] == '[') {
      const size_t close = path.find(']', i);
      size_t idx = 0;
      // A user's key may itself hold '[' (found by scripts/fuzz-long.sh: stoul
      // threw through validate): a bracket that is not an index sorts as missing.
      const char* first = path.data() + i + 1;
      const char* last = path.data() + (close == std::string::npos ? path.size() : close);
      const auto [p, ec] = std::from_chars(first, last, idx);
      if (close == std::string::npos || ec != std::errc() || p != last) {
        key.push_back(missing);
        return key;
      }
      key.push_back(idx);
      v = (v && v->IsArray() && idx < v->Size()) ? &(*v)[static_cast<rapidjson::SizeType>(idx)] : nullptr;
      i = close + 1;
      continue;
    }
    size_t end = path.find_first_of(".[", i);
    std::string name = path.substr(i, end == std::string::npos ? std::string::npos : end - i);
    size_t pos = missing;
    if (v && v->IsObject()) {
      size_t n = 0;
      for (auto& m : v->GetObject()) {
        if (name == m.name.GetString()) {
          pos = n;
          v = &m.value;
          break;
        }
        ++n;
      }
    }
    if (pos == missing) {
      // Not in the document (a missing key or a default): after the written
      // keys of its parent, in schema order.
      key.push_back(missing);
      return key;
    }
    key.push_back(pos);
    i = end == std::string::npos ? path.size() : end;
  }
  return key;
}

bool has_error_at_or_under(const std::vector<ConfigError>& errors, const std::string& path) {
  for (const ConfigError& e : errors)
    if (e.path == path || path.starts_with(e.path + ".") || path.starts_with(e.path + "[")) return true;
  return false;
}

}  // namespace

std::string no_plugins_found_message(const std::vector<std::string>& searched) {
  std::string m = "no plugins found: ";
  if (searched.empty()) {
    m += "the plugin path is empty";
  } else {
    m += "none in the folders searched (";
    for (size_t i = 0; i < searched.size(); ++i) m += (i ? ", " : "") + searched[i];
    m += ")";
  }
  return m +
         "; set ZCODE_PLUGIN_PATH or pass --plugin-path DIR "
         "(the bundled plugins are looked for in <dir of zcode-host>/../lib/zcode/plugins)";
}

std::vector<ConfigError> HarnessConfig::check(const SchemaProvider* provider) const {
  const Impl& m = *impl_;
  std::vector<ConfigError> errors;
  const JsonValue& schema = builtin_schema();

  // 1. The built-in schema over the whole document.
  Walker{m.yaml11_bools, errors, true, "", "", ""}.walk(schema, m.raw, "");

  // Names (with defaults) decide the plugins.
  JsonDoc named;
  named.CopyFrom(m.raw, named.GetAllocator());
  fill_defaults(schema, named, named.GetAllocator());

  // 2. Each plugin-owned section against its component's schema. No
  // component of any kind: the plugin path itself is the problem, said once
  // (not as one "no ... plugin named" line per section).
  bool no_plugins = provider != nullptr;
  for (int k = ZC_KIND_TOKENIZER; no_plugins && k <= ZC_KIND_CALLBACK; ++k)
    no_plugins = provider->component_names(static_cast<zc_kind>(k)).empty();
  if (no_plugins) errors.push_back({"", no_plugins_found_message(provider->searched_folders())});
  if (provider && !no_plugins) {
    std::vector<ConfigError> plugin_errors;
    for (const PluginSection& s : plugin_sections(named, provider)) {
      if (has_error_at_or_under(errors, s.name_path)) continue;
      if (!s.found) {
        plugin_errors.push_back(
            {s.name_path, "no " + s.kind_word + " plugin named '" + s.written_name + "' on the plugin path" +
                              sdk::did_you_mean_or_available(s.component, provider->component_names(s.kind))});
        continue;
      }
      JsonDoc sd;
      sd.Parse(s.schema.c_str());
      if (sd.HasParseError() || !sd.IsObject()) {
        plugin_errors.push_back({s.name_path, s.kind_word + " plugin '" + s.written_name +
                                                  "' has an options schema that is not a JSON object"});
        continue;
      }
      normalize_schema(sd, sd.GetAllocator());
      // The section as written ({} when absent); the tokenizer's string form
      // is {"path": ref}.
      JsonDoc section;
      const JsonValue* raw_section = nullptr;
      if (s.section_path == "data.tokenizer") {
        const JsonValue* data = member(m.raw, "data");
        const JsonValue* tok = data ? member(*data, "tokenizer") : nullptr;
        if (!tok) tok = builtin_tokenizer_default();  // what the engine creates when absent
        tokenizer_options(tok, section, section.GetAllocator());
      } else if (s.section_path.starts_with("callbacks[")) {
        raw_section = member(named, "callbacks");
        size_t i = std::stoul(s.section_path.substr(10));
        raw_section = &(*raw_section)[static_cast<rapidjson::SizeType>(i)];
      } else if (s.kind == ZC_KIND_EVALUATOR) {
        // Each evaluator sees the shared keys and its own subsection only.
        evaluator_options(member(m.raw, "evaluation"), s.component, section, section.GetAllocator());
      } else {
        raw_section = member(m.raw, s.section_path);
      }
      if (raw_section) section.CopyFrom(*raw_section, section.GetAllocator());
      else if (!section.IsObject()) section.SetObject();
      // `enabled` is the host's key (merge_callbacks), checked by the built-in schema.
      if (s.section_path.starts_with("callbacks[") && section.IsObject()) section.RemoveMember("enabled");
      std::string owner = s.kind_word + " '" + s.written_name + "'";
      Walker w{m.yaml11_bools, plugin_errors, false, s.section_path, s.routing_key, owner};
      w.walk(sd, section, s.section_path);
    }
    // One error per path: the built-in one wins.
    for (ConfigError& pe : plugin_errors) {
      bool dup = std::any_of(errors.begin(), errors.end(), [&](const ConfigError& e) { return e.path == pe.path; });
      if (!dup) errors.push_back(std::move(pe));
    }
  }

  // 3. Cross-field rules and 4. unsupported options, over raw + defaults.
  JsonDoc resolved;
  resolve(m, nullptr, resolved);
  std::vector<ConfigError> later;
  cross_field(Lookup{resolved}, Lookup{m.raw}, errors, later);
  for (const Unsupported& u : unsupported_table()) {
    const JsonValue* v = Lookup{resolved}.get(u.path);
    if (v)
      if (auto msg = u.check(*v)) later.push_back({u.path, *msg});
  }
  const std::vector<ConfigError> earlier = errors;
  for (ConfigError& e : later)
    if (!has_error_at_or_under(earlier, e.path)) errors.push_back(std::move(e));

  std::stable_sort(errors.begin(), errors.end(), [&](const ConfigError& a, const ConfigError& b) {
    return order_key(m.raw, a.path) < order_key(m.raw, b.path);
  });
  return errors;
}

}  // namespace zcode
