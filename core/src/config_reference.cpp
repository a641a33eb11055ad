// docs/config-reference.md from the schemas (see zcode/core/config_reference.h).
#include <zcode/core/config.h>
#include <zcode/core/config_reference.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <sstream>
#include <stdexcept>

namespace zcode {
namespace {

using Value = rapidjson::Value;

const Value* find(const Value& obj, const char* key) {
  if (!obj.IsObject()) return nullptr;
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

std::string compact(const Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

// A table cell: one line, '|' escaped.
std::string cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += ' ';
    else if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

std::string code(std::string_view s) {
  std::string out = "`";  // (appending, not "`" + ...: GCC 12 misreports -Wrestrict there)
  out += cell(s);
  out += '`';
  return out;
}

std::string type_word(std::string_view t, bool plural) {
  if (t == "integer") return plural ? "integers" : "integer";
  if (t == "number") return plural ? "numbers" : "number";
  if (t == "string") return plural ? "strings" : "string";
  if (t == "boolean") return plural ? "booleans" : "boolean";
  if (t == "array") return plural ? "lists" : "list";
  if (t == "object") return plural ? "mappings" : "mapping";
  return std::string(t);
}

std::string type_of(const Value& s, bool plural = false) {
  if (const Value* e = find(s, "enum"); e && e->IsArray()) {
    std::string out;
    for (auto& v : e->GetArray()) out += (out.empty() ? "" : " \\| ") + code(v.IsString() ? v.GetString() : compact(v));
    return out;
  }
  std::vector<std::string> types;
  if (const Value* t = find(s, "type")) {
    if (t->IsString()) types.emplace_back(t->GetString());
    else if (t->IsArray())
      for (auto& x : t->GetArray())
        if (x.IsString()) types.emplace_back(x.GetString());
  }
  if (types.empty()) return "any";
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) {
    std::string w = type_word(types[i], plural);
    if (types[i] == "array")
      if (const Value* items = find(s, "items"); items && find(*items, "type")) w += " of " + type_of(*items, true);
    out += (i == 0 ? "" : " or ") + w;
  }
  return out;
}

// Bounds in the validator's terms; exclusiveMinimum/Maximum as draft-04
// booleans or draft-2020 numbers.
std::string bounds_of(const Value& s, bool required) {
  std::vector<std::string> parts;
  if (required) parts.emplace_back("**required**");
  auto flag = [&](const char* k) {
    const Value* v = find(s, k);
    return v && v->IsBool() && v->GetBool();
  };
  if (const Value* mn = find(s, "minimum"); mn && mn->IsNumber())
    parts.push_back((flag("exclusiveMinimum") ? "> " : "≥ ") + compact(*mn));
  if (const Value* mn = find(s, "exclusiveMinimum"); mn && mn->IsNumber()) parts.push_back("> " + compact(*mn));
  if (const Value* mx = find(s, "maximum"); mx && mx->IsNumber())
    parts.push_back((flag("exclusiveMaximum") ? "< " : "≤ ") + compact(*mx));
  if (const Value* mx = find(s, "exclusiveMaximum"); mx && mx->IsNumber()) parts.push_back("< " + compact(*mx));
  if (const Value* ml = find(s, "minLength"); ml && ml->IsUint())
    parts.push_back(ml->GetUint() == 1 ? "non-empty" : "≥ " + compact(*ml) + " characters");
  if (const Value* ml = find(s, "maxLength"); ml && ml->IsUint()) parts.push_back("≤ " + compact(*ml) + " characters");
  const Value* mi = find(s, "minItems");
  const Value* ma = find(s, "maxItems");
  if (mi && ma && compact(*mi) == compact(*ma)) {
    parts.push_back("exactly " + compact(*mi) + " items");
  } else {
    if (mi) parts.push_back("≥ " + compact(*mi) + " items");
    if (ma) parts.push_back("≤ " + compact(*ma) + " items");
  }
  if (const Value* items = find(s, "items"); items && items->IsObject() && !find(*items, "properties")) {
    std::string each = bounds_of(*items, false);
    if (!each.empty()) parts.push_back("each " + each);
  }
  if (const Value* x = find(s, "x-message"); x && x->IsString()) parts.push_back(cell(x->GetString()));
  else if (const Value* p = find(s, "pattern"); p && p->IsString()) parts.push_back("matches " + code(p->GetString()));
  if (const Value* c = find(s, "const")) parts.push_back("= " + code(compact(*c)));
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out;
}

void rows(const Value& object_schema, const std::string& prefix, std::string& out) {
  const Value* props = find(object_schema, "properties");
  if (!props || !props->IsObject()) return;
  const Value* req = find(object_schema, "required");
  for (auto& p : props->GetObject()) {
    const std::string key = prefix + p.name.GetString();
    bool required = false;
    if (req && req->IsArray())
      for (auto& r : req->GetArray())
        required = required || (r.IsString() && std::string_view(p.name.GetString()) == r.GetString());
    const Value& s = p.value;
    std::string def = "—";
    if (const Value* d = find(s, "default")) def = code(d->IsString() ? d->GetString() : compact(*d));
    const Value* desc = find(s, "description");
    out += "| " + code(key) + " | " + type_of(s) + " | " + def + " | " + bounds_of(s, required) + " | " +
           (desc && desc->IsString() ? cell(desc->GetString()) : "") + " |\n";
    if (find(s, "properties")) rows(s, key + ".", out);
  }
}

std::string table(const Value& object_schema, const std::string& prefix = "") {
  std::string body;
  rows(object_schema, prefix, body);
  if (body.empty()) return "No options.\n";
  return "| key | type | default | bounds | description |\n| --- | --- | --- | --- | --- |\n" + body;
}

// The top-level fields that are not sections (objects with keys of their
// own, or the callbacks list of mappings).
bool is_section(const Value& s) {
  if (find(s, "properties")) return true;
  const Value* items = find(s, "items");
  return items && find(*items, "properties");
}

std::string section_table(const Value& root, const std::string& name) {
  const Value* props = find(root, "properties");
  if (name == "top") {
    Value top(rapidjson::kObjectType);
    rapidjson::Document scratch;
    Value p(rapidjson::kObjectType);
    for (auto& m : props->GetObject())
      if (!is_section(m.value))
        p.AddMember(Value(m.name, scratch.GetAllocator()), Value(m.value, scratch.GetAllocator()),
                    scratch.GetAllocator());
    top.AddMember("properties", p, scratch.GetAllocator());
    return table(top);
  }
  const Value* s = props ? find(*props, name.c_str()) : nullptr;
  if (!s) throw std::invalid_argument("config reference template: no section '" + name + "' in the built-in schema");
  std::string out;
  if (const Value* d = find(*s, "description"); d && d->IsString()) out = std::string(d->GetString()) + "\n\n";
  if (const Value* items = find(*s, "items"); items && find(*items, "properties")) return out + table(*items);
  return out + table(*s);
}

std::string plugins_part(const std::vector<ComponentOptions>& components) {
  std::string out;
  for (const ComponentOptions& c : components) {
    out += "### `" + c.name + "` (" + c.kind + ")\n\n";
    if (!c.description.empty()) out += c.description + "\n\n";
    rapidjson::Document d;
    d.Parse(c.options_schema_json.c_str());
    if (d.HasParseError() || !d.IsObject()) {
      out += "(its options schema is not a JSON object)\n\n";
      continue;
    }
    if (const Value* desc = find(d, "description"); desc && desc->IsString())
      out += desc->GetString() + std::string("\n\n");
    out += table(d) + "\n";
  }
  if (!out.empty()) out.pop_back();  // the template's own blank line follows
  return out;
}

}  // namespace

std::string render_config_reference(std::string_view template_text, const std::vector<ComponentOptions>& components) {
  rapidjson::Document schema;
  schema.Parse(HarnessConfig::builtin_schema_json().c_str());
  const std::string fields_marker = "<!-- fields: ";
  std::string out;
  std::istringstream in{std::string(template_text)};
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(fields_marker) && line.ends_with(" -->")) {
      out += section_table(schema, line.substr(fields_marker.size(), line.size() - fields_marker.size() - 4));
    } else if (line == "<!-- plugins -->") {
      out += plugins_part(components);
    } else {
      out += line + "\n";
    }
  }
  return out;
}

}  // namespace zcode
