// Parsing OpenAI-style requests (openai_api.h), with rapidjson.
#include "serve/openai_api.h"

#include <zcode/core/serve/text_stream.h>
#include <zcode/generation/generate.h>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace zcode::serve::api {

namespace {

using Value = rapidjson::Value;

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  throw ApiError(400, "invalid_request_error", msg, param);
}

std::string type_name(const Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return "a boolean";
  if (v.IsNumber()) return "a number";
  if (v.IsString()) return "a string";
  if (v.IsArray()) return "an array";
  return "an object";
}

double number(const Value& v, const char* name, double lo, double hi) {
  if (!v.IsNumber()) bad(name, std::string("'") + name + "': expected a number, found " + type_name(v));
  const double x = v.GetDouble();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(name, std::string("'") + name + "': " + std::to_string(x) + " is outside [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
  return x;
}

int64_t integer(const Value& v, const char* name, int64_t lo, int64_t hi) {
  if (!v.IsInt64()) bad(name, std::string("'") + name + "': expected an integer, found " + type_name(v));
  const int64_t x = v.GetInt64();
  if (x < lo || x > hi)
    bad(name, std::string("'") + name + "': " + std::to_string(x) + " is outside [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
  return x;
}

bool boolean(const Value& v, const char* name) {
  if (!v.IsBool()) bad(name, std::string("'") + name + "': expected a boolean, found " + type_name(v));
  return v.GetBool();
}

std::string string(const Value& v, const char* name) {
  if (!v.IsString()) bad(name, std::string("'") + name + "': expected a string, found " + type_name(v));
  return std::string(v.GetString(), v.GetStringLength());
}

std::vector<int32_t> token_ids(const Value& a, const char* name) {
  std::vector<int32_t> ids;
  for (const auto& x : a.GetArray()) {
    if (!x.IsInt()) bad(name, std::string("'") + name + "': expected token ids (integers), found " + type_name(x));
    ids.push_back(x.GetInt());
  }
  return ids;
}

// OpenAI's logit_bias: {"<token id>": bias, ...}. Keys are JSON strings, so
// every one is checked to be a plain decimal id (no sign, space or exponent)
// in the vocabulary; "7" and "07" name the same id and count as a repeat.
std::vector<std::pair<int32_t, double>> logit_bias(const Value& v, int64_t vocab_size) {
  constexpr const char* kName = "logit_bias";
  if (!v.IsObject()) bad(kName, "'logit_bias': expected an object {\"token id\": bias}, found " + type_name(v));
  if (v.MemberCount() > gen::kMaxLogitBiasEntries)
    bad(kName, "'logit_bias': " + std::to_string(v.MemberCount()) + " entries; at most " +
                   std::to_string(gen::kMaxLogitBiasEntries) + " are allowed");
  std::vector<std::pair<int32_t, double>> out;
  out.reserve(v.MemberCount());
  for (const auto& m : v.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    const std::string where = "'logit_bias': key '" + key + "'";
    int64_t id = 0;
    const char* end = key.data() + key.size();
    const bool digits =
        !key.empty() && std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    const auto res = std::from_chars(key.data(), end, id);
    if (!digits || res.ptr != end || res.ec == std::errc::result_out_of_range) {
      if (digits) bad(kName, where + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
      bad(kName, where + " is not a token id (expected a decimal integer in [0, " + std::to_string(vocab_size) + "))");
    }
    if (id >= vocab_size) bad(kName, where + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    if (!m.value.IsNumber()) bad(kName, where + ": expected a number in [-100, 100], found " + type_name(m.value));
    const double b = m.value.GetDouble();
    if (!std::isfinite(b) || b < -gen::kMaxLogitBias || b > gen::kMaxLogitBias)
      bad(kName, where + ": " + std::to_string(b) + " is outside [-100, 100]");
    for (const auto& e : out)
      if (e.first == id) bad(kName, where + " names token id " + std::to_string(id) + " again");
    out.emplace_back(static_cast<int32_t>(id), b);
  }
  return out;
}

}  // namespace

std::string error_json(const ApiError& e) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("message");
  const std::string message = sanitize_utf8(e.text);  // a message may quote the client's bytes
  w.String(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
  w.Key("type");
  w.String(e.type.c_str());
  w.Key("param");
  if (e.param.empty()) w.Null();
  else {
    const std::string param = sanitize_utf8(e.param);
    w.String(param.c_str(), static_cast<rapidjson::SizeType>(param.size()));
  }
  w.Key("code");
  if (e.code.empty()) w.Null();
  else w.String(e.code.c_str());
  w.EndObject();
  w.EndObject();
  return sb.GetString();
}

GenerationRequest parse_request(const std::string& body, bool chat, int32_t max_n, int64_t vocab_size) {
  rapidjson::Document d;
  // Iterative (no recursion: a deeply nested body cannot overflow the stack)
  // and UTF-8-validating (so nothing echoed in an error is malformed).
  d.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(body.c_str(), body.size());
  if (d.HasParseError())
    bad("", std::string("the body is not valid JSON: ") + rapidjson::GetParseError_En(d.GetParseError()) + " at byte " +
                std::to_string(d.GetErrorOffset()));
  if (!d.IsObject()) bad("", "the body must be a JSON object, found " + type_name(d));
  static const std::set<std::string> kCompletion = {"model",
                                                    "prompt",
                                                    "max_tokens",
                                                    "temperature",
                                                    "top_p",
                                                    "top_k",
                                                    "n",
                                                    "stream",
                                                    "stream_options",
                                                    "stop",
                                                    "seed",
                                                    "logprobs",
                                                    "echo",
                                                    "user",
                                                    "presence_penalty",
                                                    "frequency_penalty",
                                                    "best_of",
                                                    "logit_bias",
                                                    "suffix"};
  static const std::set<std::string> kChat = {"model",
                                              "messages",
                                              "max_tokens",
                                              "max_completion_tokens",
                                              "temperature",
                                              "top_p",
                                              "top_k",
                                              "n",
                                              "stream",
                                              "stream_options",
                                              "stop",
                                              "seed",
                                              "logprobs",
                                              "top_logprobs",
                                              "user",
                                              "presence_penalty",
                                              "frequency_penalty",
                                              "logit_bias",
                                              "response_format"};
  const auto& known = chat ? kChat : kCompletion;
  std::set<std::string> seen;
  for (const auto& m : d.GetObject()) {
    const std::string k(m.name.GetString(), m.name.GetStringLength());
    if (!known.count(k)) bad(k, "unknown field '" + k + "' for " + (chat ? "/v1/chat/completions" : "/v1/completions"));
    if (!seen.insert(k).second) bad(k, "field '" + k + "' appears twice");
  }
  GenerationRequest r;
  r.chat = chat;
  if (!d.HasMember("model")) bad("model", "'model' is required");
  r.model = string(d["model"], "model");
  if (chat) {
    if (!d.HasMember("messages")) bad("messages", "'messages' is required");
    const Value& ms = d["messages"];
    if (!ms.IsArray() || ms.Empty()) bad("messages", "'messages': expected a non-empty array of messages");
    for (rapidjson::SizeType i = 0; i < ms.Size(); ++i) {
      const std::string where = "messages[" + std::to_string(i) + "]";
      const Value& m = ms[i];
      if (!m.IsObject()) bad(where, "'" + where + "': expected an object, found " + type_name(m));
      for (const auto& f : m.GetObject()) {
        const std::string k(f.name.GetString(), f.name.GetStringLength());
        if (k != "role" && k != "content" && k != "name")
          bad(where + "." + k, "unknown field '" + k + "' in '" + where + "'");
      }
      if (!m.HasMember("role") || !m["role"].IsString())
        bad(where + ".role", "'" + where + ".role': expected a string");
      if (!m.HasMember("content") || !m["content"].IsString())
        bad(where + ".content", "'" + where + ".content': expected a string (multi-part content is not supported)");
      if (m.HasMember("name") && !m["name"].IsString())
        bad(where + ".name", "'" + where + ".name': expected a string, found " + type_name(m["name"]));
      ChatMessage cm{string(m["role"], "role"), string(m["content"], "content")};  // NULs kept
      if (cm.role != "system" && cm.role != "user" && cm.role != "assistant" && cm.role != "developer")
        bad(where + ".role",
            "'" + where + ".role': '" + cm.role + "' is not one of system, developer, user, assistant");
      r.messages.push_back(std::move(cm));
    }
  } else {
    if (!d.HasMember("prompt")) bad("prompt", "'prompt' is required");
    const Value& p = d["prompt"];
    if (p.IsString()) {
      r.prompts.emplace_back(string(p, "prompt"));
    } else if (p.IsArray() && !p.Empty() && p[0].IsInt()) {
      r.prompts.emplace_back(token_ids(p, "prompt"));
    } else if (p.IsArray() && !p.Empty()) {
      for (const auto& x : p.GetArray()) {
        if (x.IsString()) r.prompts.emplace_back(string(x, "prompt"));
        else if (x.IsArray()) r.prompts.emplace_back(token_ids(x, "prompt"));
        else bad("prompt", "'prompt': expected a string, token ids, or an array of them, found " + type_name(x));
      }
    } else {
      bad("prompt", "'prompt': expected a string, token ids, or a non-empty array of them, found " + type_name(p));
    }
  }
  auto has = [&](const char* k) { return d.HasMember(k) && !d[k].IsNull(); };
  if (has("max_tokens")) r.max_tokens = static_cast<int32_t>(integer(d["max_tokens"], "max_tokens", 1, INT32_MAX));
  if (chat && has("max_completion_tokens"))
    r.max_tokens = static_cast<int32_t>(integer(d["max_completion_tokens"], "max_completion_tokens", 1, INT32_MAX));
  if (has("temperature")) r.temperature = number(d["temperature"], "temperature", 0, 2);
  if (has("top_p")) r.top_p = number(d["top_p"], "top_p", 0, 1);
  if (has("top_p") && r.top_p == 0) bad("top_p", "'top_p': must be > 0");
  if (has("top_k")) r.top_k = static_cast<int32_t>(integer(d["top_k"], "top_k", 0, INT32_MAX));
  if (has("n")) r.n = static_cast<int32_t>(integer(d["n"], "n", 1, max_n));
  if (has("stream")) r.stream = boolean(d["stream"], "stream");
  if (has("stream_options")) {
    const Value& so = d["stream_options"];
    if (!so.IsObject()) bad("stream_options", "'stream_options': expected an object, found " + type_name(so));
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed with \"stream\": true");
    for (const auto& f : so.GetObject()) {
      const std::string k(f.name.GetString(), f.name.GetStringLength());
      if (k != "include_usage") bad("stream_options." + k, "unknown field '" + k + "' in 'stream_options'");
      r.include_usage = boolean(f.value, "stream_options.include_usage");
    }
  }
  if (has("stop")) {
    const Value& s = d["stop"];
    if (s.IsString()) r.stop.push_back(string(s, "stop"));
    else if (s.IsArray()) {
      if (s.Size() > 4) bad("stop", "'stop': at most 4 stop strings, found " + std::to_string(s.Size()));
      for (const auto& x : s.GetArray()) r.stop.push_back(string(x, "stop"));
    } else bad("stop", "'stop': expected a string or an array of strings, found " + type_name(s));
    for (const auto& x : r.stop)
      if (x.empty()) bad("stop", "'stop': an empty stop string");
  }
  if (has("seed")) {
    const Value& s = d["seed"];
    if (s.IsUint64()) r.seed = s.GetUint64();
    else if (s.IsInt64()) r.seed = static_cast<uint64_t>(s.GetInt64());
    else bad("seed", "'seed': expected an integer, found " + type_name(s));
  }
  if (chat) {
    const bool lp = has("logprobs") && boolean(d["logprobs"], "logprobs");
    if (has("top_logprobs")) {
      const auto k = static_cast<int32_t>(integer(d["top_logprobs"], "top_logprobs", 0, 20));
      if (!lp) bad("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
      r.logprobs = k;
    } else if (lp) {
      r.logprobs = 0;
    }
    if (has("response_format")) {
      const Value& f = d["response_format"];
      if (!f.IsObject() || f.MemberCount() != 1 || !f.HasMember("type") || !f["type"].IsString() ||
          string(f["type"], "response_format.type") != "text")
        bad("response_format", "'response_format': only {\"type\": \"text\"} is supported");
    }
  } else {
    if (has("logprobs")) r.logprobs = static_cast<int32_t>(integer(d["logprobs"], "logprobs", 0, 5));
    if (has("echo") && boolean(d["echo"], "echo")) bad("echo", "'echo': true is not supported by this server");
    if (has("best_of") && integer(d["best_of"], "best_of", 1, max_n) != r.n)
      bad("best_of", "'best_of' other than n is not supported by this server");
    if (has("suffix") && !string(d["suffix"], "suffix").empty())
      bad("suffix", "'suffix' is not supported by this server");
  }
  if (has("user")) string(d["user"], "user");
  if (has("presence_penalty"))
    r.presence_penalty = number(d["presence_penalty"], "presence_penalty", -gen::kMaxPenalty, gen::kMaxPenalty);
  if (has("frequency_penalty"))
    r.frequency_penalty = number(d["frequency_penalty"], "frequency_penalty", -gen::kMaxPenalty, gen::kMaxPenalty);
  if (has("logit_bias")) r.logit_bias = logit_bias(d["logit_bias"], vocab_size);
  return r;
}

std::string chat_prompt(const std::vector<ChatMessage>& messages) {
  std::string p;
  for (const auto& m : messages) {
    const std::string role = m.role == "user" ? "User" : m.role == "assistant" ? "Assistant" : "System";
    p += role + ": " + m.content + "\n\n";
  }
  p += "Assistant:";
  return p;
}

}  // namespace zcode::serve::api
