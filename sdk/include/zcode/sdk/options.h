// zcode/sdk/options.h: JSON options into typed values (RapidJSON).
//
// The host validates a stage's options against the component's JSON Schema
// before create; Options still checks types so that a plugin used outside the
// host (tests, embedding) gets the same one-line errors:
//   `optimizer.betas[1]: expected a number, found "x"`.
#pragma once

#include <zcode/sdk/error.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace zcode::sdk {

/// Describes a JSON value for error messages: `string "abc"`, `number 3`, ...
inline std::string describe_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  std::string s = sb.GetString();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  const char* kind = v.IsString()   ? "string "
                     : v.IsNumber() ? "number "
                     : v.IsBool()   ? "boolean "
                     : v.IsNull()   ? ""
                     : v.IsArray()  ? "array "
                                    : "object ";
  return kind + s;
}

/// Serializes a JSON value compactly.
inline std::string to_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

/// A read-only view of one JSON object with typed, path-named getters.
class Options {
 public:
  /// Parses `json` (NULL or "" means {}). `prefix` names the object in errors
  /// (e.g. "optimizer"). Throws Error(ZC_ERR_INVALID_ARGUMENT) when the text is
  /// not a JSON object.
  explicit Options(const char* json, std::string prefix = "options") : prefix_(std::move(prefix)) {
    doc_ = std::make_shared<rapidjson::Document>();
    const char* text = (json && *json) ? json : "{}";
    doc_->Parse(text);
    if (doc_->HasParseError() || !doc_->IsObject()) invalid_argument(prefix_ + ": expected a JSON object");
    value_ = doc_.get();
  }
  Options(std::shared_ptr<rapidjson::Document> doc, const rapidjson::Value* v, std::string prefix)
      : doc_(std::move(doc)), value_(v), prefix_(std::move(prefix)) {}

  bool has(std::string_view key) const { return find(key) != nullptr; }
  const std::string& prefix() const { return prefix_; }
  const rapidjson::Value& json() const { return *value_; }
  std::string path(std::string_view key) const { return prefix_ + "." + std::string(key); }

  /// Typed value of `key`, or `fallback` when absent (null counts as absent).
  template <class T>
  T get(std::string_view key, T fallback) const {
    const rapidjson::Value* v = find(key);
    if (!v || v->IsNull()) return fallback;
    return convert<T>(*v, path(key));
  }
  /// Typed value of `key`; throws when absent.
  template <class T>
  T require(std::string_view key) const {
    const rapidjson::Value* v = find(key);
    if (!v || v->IsNull()) invalid_argument(path(key) + ": missing required option");
    return convert<T>(*v, path(key));
  }
  /// Array of typed values, or `fallback` when absent.
  template <class T>
  std::vector<T> get_list(std::string_view key, std::vector<T> fallback) const {
    const rapidjson::Value* v = find(key);
    if (!v || v->IsNull()) return fallback;
    if (!v->IsArray()) invalid_argument(path(key) + ": expected an array, found " + describe_json(*v));
    std::vector<T> out;
    for (rapidjson::SizeType i = 0; i < v->Size(); ++i)
      out.push_back(convert<T>((*v)[i], path(key) + "[" + std::to_string(i) + "]"));
    return out;
  }
  /// Nested object (empty Options when absent).
  Options object(std::string_view key) const {
    const rapidjson::Value* v = find(key);
    if (!v || v->IsNull()) return Options("{}", path(key));
    if (!v->IsObject()) invalid_argument(path(key) + ": expected an object, found " + describe_json(*v));
    return Options(doc_, v, path(key));
  }

 private:
  const rapidjson::Value* find(std::string_view key) const {
    if (!value_->IsObject()) return nullptr;
    auto it = value_->FindMember(rapidjson::Value(key.data(), static_cast<rapidjson::SizeType>(key.size())));
    return it == value_->MemberEnd() ? nullptr : &it->value;
  }

  template <class T>
  static T convert(const rapidjson::Value& v, const std::string& where) {
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.IsBool()) invalid_argument(where + ": expected a boolean, found " + describe_json(v));
      return v.GetBool();
    } else if constexpr (std::is_integral_v<T>) {
      if (v.IsInt64()) {
        int64_t x = v.GetInt64();
        if constexpr (std::is_unsigned_v<T>) {
          if (x < 0) invalid_argument(where + ": expected a non-negative integer, found " + describe_json(v));
        } else if constexpr (sizeof(T) < sizeof(int64_t)) {
          // A value the option's type cannot hold would wrap silently.
          if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
            invalid_argument(where + ": expected an integer of at most " +
                             std::to_string(std::numeric_limits<T>::max()) + " in magnitude, found " +
                             describe_json(v));
        }
        return static_cast<T>(x);
      }
      if (v.IsUint64()) {
        if (v.GetUint64() > static_cast<uint64_t>(std::numeric_limits<T>::max()))
          invalid_argument(where + ": expected an integer of at most " + std::to_string(std::numeric_limits<T>::max()) +
                           ", found " + describe_json(v));
        return static_cast<T>(v.GetUint64());
      }
      if (v.IsDouble() && v.GetDouble() == static_cast<double>(static_cast<int64_t>(v.GetDouble())))
        return static_cast<T>(v.GetDouble());
      invalid_argument(where + ": expected an integer, found " + describe_json(v));
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.IsNumber()) invalid_argument(where + ": expected a number, found " + describe_json(v));
      return static_cast<T>(v.GetDouble());
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.IsString()) invalid_argument(where + ": expected a string, found " + describe_json(v));
      return std::string(v.GetString(), v.GetStringLength());
    } else {
      static_assert(sizeof(T) == 0, "unsupported option type");
    }
  }

  std::shared_ptr<rapidjson::Document> doc_;
  const rapidjson::Value* value_ = nullptr;
  std::string prefix_;
};

}  // namespace zcode::sdk
