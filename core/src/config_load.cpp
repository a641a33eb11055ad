// Loading: YAML (yaml-cpp) and JSON (RapidJSON) into one RapidJSON tree.
//
// YAML scalars are typed by the YAML 1.2 core schema, so `3e-4`, `1e-3`,
// `.5` are numbers (PyYAML's YAML 1.1 would read `3e-4` as a string). Only
// true/false are booleans; the YAML 1.1 spellings yes/no/on/off/y/n are kept
// as strings and flagged, and validation rejects them (a user who wrote
// `console_log_level: off` or `mlflow: yes` must say what they mean).
#include "config_impl.h"

#include <zcode/sdk/json.h>
#include <zcode/sdk/utf8.h>

#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <unordered_set>

namespace zcode {
namespace config_detail {

std::string fold(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == '-') c = '_';
  }
  return out;
}

std::string join_path(const std::string& base, std::string_view key) {
  return base.empty() ? std::string(key) : base + "." + std::string(key);
}
std::string join_index(const std::string& base, size_t index) { return base + "[" + std::to_string(index) + "]"; }

PlainScalar read_plain_scalar(std::string_view t) {
  PlainScalar r;
  // YAML 1.2 core schema, tag resolution table (YAML 1.2.2, section 10.3.2).
  static const std::regex int10("[-+]?[0-9]+");
  static const std::regex int8("0o[0-7]+");
  static const std::regex int16("0x[0-9a-fA-F]+");
  static const std::regex flt("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  static const std::regex yaml11("y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF");
  static const std::regex nan("\\.nan|\\.NaN|\\.NAN");
  static const std::regex inf("[-+]?(\\.inf|\\.Inf|\\.INF)");
  const std::string s(t);
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") {
    r.kind = PlainKind::Null;
  } else if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    r.kind = PlainKind::Bool;
    r.b = s[0] == 't' || s[0] == 'T';
  } else if (std::regex_match(s, int10) || std::regex_match(s, int8) || std::regex_match(s, int16)) {
    int base = 10;
    std::string digits = s;
    bool neg = false;
    if (s.starts_with("0o")) base = 8, digits = s.substr(2);
    else if (s.starts_with("0x")) base = 16, digits = s.substr(2);
    else if (s[0] == '+' || s[0] == '-') neg = s[0] == '-', digits = s.substr(1);
    uint64_t u = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), u, base);
    if (ec != std::errc() || p != digits.data() + digits.size()) {
      // Beyond 64 bits: keep the magnitude as a float (validation will then
      // say "expected an integer" with the value).
      r.kind = PlainKind::Float;
      r.d = std::strtod(s.c_str(), nullptr);
    } else if (neg) {
      if (u > static_cast<uint64_t>(INT64_MAX) + 1) {
        r.kind = PlainKind::Float;
        r.d = -static_cast<double>(u);
      } else {
        r.kind = PlainKind::Int;
        r.i = u == static_cast<uint64_t>(INT64_MAX) + 1 ? INT64_MIN : -static_cast<int64_t>(u);
      }
    } else if (u <= static_cast<uint64_t>(INT64_MAX)) {
      r.kind = PlainKind::Int;
      r.i = static_cast<int64_t>(u);
    } else {
      r.kind = PlainKind::Uint;
      r.u = u;
    }
  } else if (std::regex_match(s, flt)) {
    double d = std::strtod(s.c_str(), nullptr);
    if (std::isfinite(d)) {
      r.kind = PlainKind::Float;
      r.d = d;
    } else {  // an overflow like 1e999 stays a string: validation names it
      r.non_finite = true;
      r.non_finite_reason = "is beyond the largest double (about 1.8e308)";
    }
  } else if (std::regex_match(s, yaml11)) {
    r.yaml11_bool = true;
  } else if (std::regex_match(s, nan) || std::regex_match(s, inf)) {
    // .inf / .nan stay strings: the config has no use for them and JSON
    // cannot carry them.
    r.non_finite = true;
    r.non_finite_reason = std::regex_match(s, nan) ? "is YAML's not-a-number" : "is YAML's infinity";
  }
  return r;
}

namespace {

[[noreturn]] void load_error(const std::string& origin, const YAML::Mark& m, const std::string& msg) {
  if (m.is_null()) throw ConfigLoadError(origin + ": " + msg);
  throw ConfigLoadError(origin + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) + ": " + msg);
}

// Untrusted structure is bounded before it is walked (see zcode/sdk/json.h).
// kMaxConfigDepth: containers nested inside each other, YAML and JSON alike.
// kMaxConfigValues: values a YAML document may expand to. Anchors and aliases
// share nodes, so a few lines can stand for 10^11 values ("billion laughs");
// the walk counts what it produces and stops at this limit. A real config has
// a few hundred values.
constexpr unsigned kMaxConfigDepth = sdk::json::kMaxDepth;
constexpr size_t kMaxConfigValues = 100000;

struct YamlWalk {
  const std::string& origin;
  std::set<std::string>& yaml11;
  size_t values = 0;
};

// A scalar or key after YAML's escapes ("\\xA0", a NUL read from the file)
// can be bytes that are not UTF-8 even when the file was: refused too, or the
// run folder's config.yaml would hold U+FFFD where the value was.
void check_scalar_utf8(const std::string& s, const YamlWalk& w, const YAML::Mark& m, const std::string& path) {
  const size_t bad = sdk::invalid_utf8_at(s);
  if (bad == std::string::npos && s.find('\0') == std::string::npos) return;
  load_error(
      w.origin, m,
      "invalid UTF-8 or a NUL byte in a value or key at " + sdk::json::shown_path(path) + "; a config is UTF-8 text");
}

void yaml_to_json(const YAML::Node& n, JsonValue& out, JsonAlloc& a, YamlWalk& w, const std::string& path,
                  unsigned depth) {
  if (++w.values > kMaxConfigValues)
    load_error(w.origin, n.Mark(),
               "the document expands to more than " + std::to_string(kMaxConfigValues) +
                   " values (anchors and aliases are copied where they are used) at " + sdk::json::shown_path(path));
  const bool container = n.Type() == YAML::NodeType::Sequence || n.Type() == YAML::NodeType::Map;
  // depth counts the containers around this node; an alias that refers to a
  // node inside itself also ends here, as an endless nesting.
  if (container && depth >= kMaxConfigDepth)
    load_error(w.origin, n.Mark(),
               "nesting deeper than " + std::to_string(kMaxConfigDepth) + " levels at " + sdk::json::shown_path(path));
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null: out.SetNull(); return;
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      check_scalar_utf8(s, w, n.Mark(), path);
      const std::string& tag = n.Tag();
      // "!" = quoted or block scalar (always a string); "?" = plain.
      if (tag == "!" || tag == "tag:yaml.org,2002:str") {
        out.SetString(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
        return;
      }
      if (tag != "?" && !tag.empty() && tag != "tag:yaml.org,2002:int" && tag != "tag:yaml.org,2002:float" &&
          tag != "tag:yaml.org,2002:bool" && tag != "tag:yaml.org,2002:null")
        load_error(w.origin, n.Mark(), "unsupported YAML tag '" + tag + "'");
      PlainScalar p = read_plain_scalar(s);
      switch (p.kind) {
        case PlainKind::Null: out.SetNull(); break;
        case PlainKind::Bool: out.SetBool(p.b); break;
        case PlainKind::Int: out.SetInt64(p.i); break;
        case PlainKind::Uint: out.SetUint64(p.u); break;
        case PlainKind::Float: out.SetDouble(p.d); break;
        case PlainKind::String:
          if (p.yaml11_bool) w.yaml11.insert(path);
          out.SetString(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
          break;
      }
      return;
    }
    case YAML::NodeType::Sequence: {
      out.SetArray();
      size_t i = 0;
      for (const YAML::Node& item : n) {
        JsonValue v;
        yaml_to_json(item, v, a, w, join_index(path, i++), depth + 1);
        out.PushBack(v, a);
      }
      return;
    }
    case YAML::NodeType::Map: {
      out.SetObject();
      // A set, not HasMember: that is linear, so a wide mapping would take
      // quadratic time.
      std::unordered_set<std::string> keys;
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (!it->first.IsScalar()) load_error(w.origin, it->first.Mark(), "mapping keys must be plain names");
        const std::string key = it->first.Scalar();
        check_scalar_utf8(key, w, it->first.Mark(), path);
        if (!keys.insert(key).second)
          load_error(w.origin, it->first.Mark(),
                     "duplicate key '" + join_path(path, key) + "' (a later value would silently win)");
        JsonValue k(key.data(), static_cast<rapidjson::SizeType>(key.size()), a);
        JsonValue v;
        yaml_to_json(it->second, v, a, w, join_path(path, key), depth + 1);
        out.AddMember(k, v, a);
      }
      return;
    }
  }
}

// RapidJSON accepts duplicate member names; a config with two `lr:` is a
// mistake the user must hear about. Keys and strings are also checked after
// their escapes, as YAML's are (check_scalar_utf8): "\u0000" is valid JSON
// but not text, and the run folder's config.yaml would give it back changed.
// (RapidJSON refuses a lone surrogate "\uD800" itself.)
void check_json_text(const std::string& s, const std::string& origin, const std::string& path) {
  if (sdk::invalid_utf8_at(s) == std::string::npos && s.find('\0') == std::string::npos) return;
  throw ConfigLoadError(origin + ": invalid UTF-8 or a NUL byte (after \\u escapes) in a value or key at " +
                        sdk::json::shown_path(path) + "; a config is UTF-8 text");
}

void check_json_duplicates(const JsonValue& v, const std::string& origin, const std::string& path) {
  if (v.IsObject()) {
    std::set<std::string> seen;
    for (auto& m : v.GetObject()) {
      std::string key(m.name.GetString(), m.name.GetStringLength());
      check_json_text(key, origin, path);
      if (!seen.insert(key).second)
        throw ConfigLoadError(origin + ": duplicate key '" + join_path(path, key) +
                              "' (a later value would silently win)");
      check_json_duplicates(m.value, origin, join_path(path, key));
    }
  } else if (v.IsArray()) {
    for (rapidjson::SizeType i = 0; i < v.Size(); ++i) check_json_duplicates(v[i], origin, join_index(path, i));
  } else if (v.IsString()) {
    check_json_text(std::string(v.GetString(), v.GetStringLength()), origin, path);
  }
}

// YAML and JSON are Unicode text. yaml-cpp and RapidJSON pass other bytes
// through, and the run folder's config.yaml would then hold U+FFFD where the
// user's byte was: refuse them where they are.
void check_utf8(std::string_view text, const std::string& origin) {
  const size_t bad = sdk::invalid_utf8_at(text);
  if (bad == std::string_view::npos) return;
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[bad]));
  throw ConfigLoadError(origin + ":" + sdk::json::line_col(text, bad) + ": invalid UTF-8 (byte " + hex +
                        "); a config is UTF-8 text");
}

}  // namespace

void parse_yaml(std::string_view text, const std::string& origin, JsonDoc& out, std::set<std::string>& yaml11_bools,
                const std::string& path_prefix) {
  check_utf8(text, origin);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own parser stops at 500 levels (DepthGuard, message "bad file"); say it in our terms.
    load_error(origin, e.mark, "nesting deeper than " + std::to_string(kMaxConfigDepth) + " levels");
  } catch (const YAML::ParserException& e) {
    load_error(origin, e.mark, e.msg);
  } catch (const YAML::Exception& e) {
    load_error(origin, e.mark, e.msg);
  }
  try {
    YamlWalk walk{origin, yaml11_bools};
    yaml_to_json(root, out, out.GetAllocator(), walk, path_prefix, 0);
  } catch (const YAML::Exception& e) {
    load_error(origin, e.mark, e.msg);
  }
}

void parse_json(std::string_view text, const std::string& origin, JsonDoc& out) {
  check_utf8(text, origin);
  const sdk::json::Result r = sdk::json::parse<rapidjson::kParseFullPrecisionFlag>(out, text, kMaxConfigDepth);
  if (!r.ok()) throw ConfigLoadError(origin + ":" + sdk::json::line_col(text, r.offset) + ": " + r.message());
  check_json_duplicates(out, origin, "");
}

std::string number_text(const JsonValue& v) {
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  if (v.IsUint64()) return std::to_string(v.GetUint64());
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v.GetDouble());
  return ec == std::errc() ? std::string(buf, p) : std::string("?");
}

std::string json_text(const JsonValue& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

std::string describe(const JsonValue& v) {
  auto clip = [](std::string s) { return s.size() > 60 ? s.substr(0, 57) + "..." : s; };
  if (v.IsNull()) return "null";
  if (v.IsBool()) return v.GetBool() ? "boolean true" : "boolean false";
  if (v.IsNumber()) return "number " + number_text(v);
  if (v.IsString()) return "string '" + clip(std::string(v.GetString(), v.GetStringLength())) + "'";
  if (v.IsArray()) return "a list " + clip(json_text(v));
  return "a mapping " + clip(json_text(v));
}

}  // namespace config_detail

using namespace config_detail;

namespace {

std::string read_file(const std::string& path) {
  // A folder opens as a stream on Linux and reads as nothing: say what it is,
  // and point at the config a run folder holds.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    std::string hint;
    for (const char* name : {"config.yaml", "config.yml", "config.json"}) {
      const std::filesystem::path inside = std::filesystem::path(path) / name;
      if (std::filesystem::is_regular_file(inside, ec)) {
        hint = " (did you mean " + inside.string() + "?)";
        break;
      }
    }
    throw ConfigLoadError(path + ": is a folder, expected a config file (YAML or JSON)" + hint);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigLoadError(path + ": file not found or not readable");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw ConfigLoadError(path + ": read error");
  return ss.str();
}

bool looks_like_json(std::string_view text) {
  size_t i = 0;
  if (text.starts_with("\xEF\xBB\xBF")) i = 3;  // UTF-8 BOM
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  return i < text.size() && text[i] == '{';
}

bool ends_with_ci(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && fold(s.substr(s.size() - suffix.size())) == suffix;
}

// The `overrides:` field of a saved config is a record, not a setting: lift
// it out of the tree (validation checks it only when it is malformed).
void lift_overrides(HarnessConfig::Impl& impl) {
  auto it = impl.raw.FindMember("overrides");
  if (it == impl.raw.MemberEnd() || !it->value.IsArray()) return;
  std::vector<std::string> list;
  for (auto& v : it->value.GetArray()) {
    if (!v.IsString()) return;
    list.emplace_back(v.GetString(), v.GetStringLength());
  }
  impl.overrides = std::move(list);
  impl.raw.RemoveMember(it);
}

void finish(HarnessConfig::Impl& impl) {
  if (impl.raw.IsNull()) impl.raw.SetObject();  // an empty file is an empty config
  if (!impl.raw.IsObject())
    throw ConfigLoadError(impl.origin + ": expected a mapping of config sections at the top level, found " +
                          describe(impl.raw));
  lift_overrides(impl);
}

}  // namespace

HarnessConfig HarnessConfig::from_string(std::string_view text, std::string origin_name) {
  HarnessConfig cfg;
  Impl& impl = *cfg.impl_;
  impl.origin = std::move(origin_name);
  if (looks_like_json(text)) {
    size_t bom = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
    parse_json(text.substr(bom), impl.origin, impl.raw);
  } else {
    parse_yaml(text, impl.origin, impl.raw, impl.yaml11_bools);
  }
  finish(*cfg.impl_);
  return cfg;
}

HarnessConfig HarnessConfig::from_yaml(const std::string& path) {
  const std::string text = read_file(path);
  HarnessConfig cfg;
  cfg.impl_->origin = path;
  parse_yaml(text, path, cfg.impl_->raw, cfg.impl_->yaml11_bools);
  finish(*cfg.impl_);
  return cfg;
}

HarnessConfig HarnessConfig::from_json(const std::string& path) {
  const std::string text = read_file(path);
  HarnessConfig cfg;
  cfg.impl_->origin = path;
  std::string_view body(text);
  if (body.starts_with("\xEF\xBB\xBF")) body.remove_prefix(3);
  parse_json(body, path, cfg.impl_->raw);
  finish(*cfg.impl_);
  return cfg;
}

HarnessConfig HarnessConfig::from_file(const std::string& path) {
  if (ends_with_ci(path, ".yaml") || ends_with_ci(path, ".yml")) return from_yaml(path);
  if (ends_with_ci(path, ".json")) return from_json(path);
  const std::string text = read_file(path);
  return looks_like_json(text) ? from_json(path) : from_yaml(path);
}

}  // namespace zcode
