// `--set a.b=value` overrides, applied to the raw tree before validation.
#include "config_impl.h"

#include <zcode/sdk/suggest.h>

#include <algorithm>
#include <cctype>

namespace zcode {

using namespace config_detail;

namespace {

struct Token {
  std::string key;
  bool bracket_index = false;  // written as [N]
  size_t index = 0;
};

bool is_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// "callbacks[0].every" / "callbacks.0.every" / "optimizer.lr".
std::optional<std::vector<Token>> parse_path(std::string_view p) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == '[') {
      size_t close = p.find(']', i);
      if (close == std::string_view::npos || !is_digits(p.substr(i + 1, close - i - 1)) || out.empty())
        return std::nullopt;
      Token t;
      t.bracket_index = true;
      t.index = std::stoul(std::string(p.substr(i + 1, close - i - 1)));
      out.push_back(t);
      i = close + 1;
      if (i < p.size() && p[i] != '.' && p[i] != '[') return std::nullopt;
      if (i < p.size() && p[i] == '.') ++i;
      continue;
    }
    size_t end = p.find_first_of(".[", i);
    std::string key(p.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i));
    if (key.empty()) return std::nullopt;
    out.push_back(Token{key});
    i = end == std::string_view::npos ? p.size() : end;
    if (i < p.size() && p[i] == '.') {
      ++i;
      if (i == p.size()) return std::nullopt;
    }
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> keys_of(const JsonValue& props) {
  std::vector<std::string> out;
  for (auto& p : props.GetObject()) out.emplace_back(p.name.GetString(), p.name.GetStringLength());
  return out;
}

// Checks the path against the built-in schema where the host owns the keys.
std::optional<std::string> unknown_path(const std::vector<Token>& toks) {
  const JsonValue* props = member(builtin_schema(), "properties");
  const JsonValue* sec = member(*props, toks[0].key);
  if (!sec || toks[0].bracket_index)
    return "unknown config key '" + toks[0].key + "'" + sdk::did_you_mean_hint(toks[0].key, keys_of(*props));
  if (toks.size() < 2 || member(*sec, "x-plugin-owned")) return std::nullopt;
  const JsonValue* sub = member(*sec, "properties");
  if (!sub || toks[1].bracket_index) return std::nullopt;  // lists: checked by validation
  if (!member(*sub, toks[1].key))
    return "unknown key '" + toks[1].key + "' in section '" + toks[0].key + "'" +
           sdk::did_you_mean_hint(toks[1].key, keys_of(*sub));
  return std::nullopt;
}

std::string kind_of(const JsonValue& v) { return v.IsObject() ? "a mapping" : v.IsArray() ? "a list" : describe(v); }

}  // namespace

void HarnessConfig::apply_overrides(const std::vector<std::string>& sets) {
  Impl& m = *impl_;
  JsonDoc work;
  work.CopyFrom(m.raw, work.GetAllocator());
  JsonAlloc& a = work.GetAllocator();
  std::set<std::string> yaml11 = m.yaml11_bools;
  std::vector<ConfigError> errors;
  std::vector<std::string> applied;

  for (const std::string& entry : sets) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      errors.push_back({"", "--set '" + entry + "': expected PATH=VALUE, e.g. optimizer.lr=1e-3"});
      continue;
    }
    const std::string path_text = trim(std::string_view(entry).substr(0, eq));
    const std::string value_text = trim(std::string_view(entry).substr(eq + 1));
    auto toks = parse_path(path_text);
    if (!toks) {
      errors.push_back({path_text, "--set: malformed path (expected a.b.c or a.b[0].c)"});
      continue;
    }
    if (auto why = unknown_path(*toks)) {
      errors.push_back({path_text, "--set: " + *why});
      continue;
    }
    // Walk to the parent, creating mappings as needed; canonical path text
    // for the YAML 1.1 flags.
    JsonValue* cur = &work;
    std::string canon;
    std::string problem;
    for (size_t i = 0; i + 1 <= toks->size() && problem.empty(); ++i) {
      const Token& t = (*toks)[i];
      const bool last = i + 1 == toks->size();
      const bool want_index = t.bracket_index || ((cur->IsArray() || cur->IsNull()) && is_digits(t.key));
      size_t index = t.bracket_index ? t.index : want_index ? std::stoul(t.key) : 0;
      if (want_index) {
        if (!cur->IsArray()) {
          // Named first: "'" + std::string&& trips GCC 12's -Wrestrict false positive.
          const std::string where = canon.empty() ? std::string("(top)") : canon;
          problem = "'" + where + "' is " + kind_of(*cur) + ", not a list";
          break;
        }
        if (index > cur->Size()) {
          problem = "index " + std::to_string(index) + " is out of range ('" + canon + "' has " +
                    std::to_string(cur->Size()) + " items)";
          break;
        }
        canon = join_index(canon, index);
        if (index == cur->Size()) {  // appending a new item
          JsonValue fresh(last ? rapidjson::kNullType : rapidjson::kObjectType);
          cur->PushBack(fresh, a);
        }
        cur = &(*cur)[static_cast<rapidjson::SizeType>(index)];
      } else {
        if (!cur->IsObject()) {
          problem = "'" + canon + "' is " + kind_of(*cur) + ", not a mapping";
          break;
        }
        canon = join_path(canon, t.key);
        auto it = cur->FindMember(t.key.c_str());
        if (it == cur->MemberEnd()) {
          const Token* next = last ? nullptr : &(*toks)[i + 1];
          const bool next_is_index = next && (next->bracket_index || is_digits(next->key));
          cur->AddMember(JsonValue(t.key.c_str(), a),
                         JsonValue(last            ? rapidjson::kNullType
                                   : next_is_index ? rapidjson::kArrayType
                                                   : rapidjson::kObjectType),
                         a);
          it = cur->FindMember(t.key.c_str());
        }
        cur = &it->value;
      }
    }
    if (!problem.empty()) {
      errors.push_back({path_text, "--set: cannot set it: " + problem});
      continue;
    }
    JsonDoc value;
    std::set<std::string> flags;
    try {
      parse_yaml(value_text, "--set " + path_text, value, flags, canon);
    } catch (const ConfigLoadError& e) {
      errors.push_back({path_text, "--set: cannot parse the value '" + value_text + "': " + e.what()});
      continue;
    }
    // The old value's flags go, the new value's come.
    for (auto it = yaml11.begin(); it != yaml11.end();) {
      if (*it == canon || it->starts_with(canon + ".") || it->starts_with(canon + "[")) it = yaml11.erase(it);
      else ++it;
    }
    yaml11.merge(flags);
    cur->CopyFrom(value, a);
    applied.push_back(path_text + "=" + value_text);
  }
  if (!errors.empty()) throw ConfigValidationError(m.origin + " (--set)", std::move(errors));
  m.raw.Swap(work);
  m.yaml11_bools = std::move(yaml11);
  m.overrides.insert(m.overrides.end(), applied.begin(), applied.end());
  m.validated = false;
}

}  // namespace zcode
