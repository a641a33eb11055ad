// The server's text and request handling without a model: TextStream's UTF-8
// hold-back and stop strings (byte values from the UTF-8 encoding rules,
// RFC 3629 §3), U+FFFD substitution (Unicode 15 §3.9, its own worked
// example), and the OpenAI request checks.
#include <zcode/core/serve/text_stream.h>

#include "serve/openai_api.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using zcode::serve::sanitize_utf8;
using zcode::serve::TextStream;
using zcode::serve::utf8_complete_prefix;
namespace api = zcode::serve::api;

// "日" is E6 97 A5, "é" is C3 A9, "𝄞" (U+1D11E) is F0 9D 84 9E.
const std::string kNichi = "\xE6\x97\xA5", kE = "\xC3\xA9", kClef = "\xF0\x9D\x84\x9E";

// Joins pieces (GCC 12's -Wrestrict misfires on chains of std::string operator+, PR 105329).
std::string cat(std::initializer_list<std::string> parts) {
  std::string s;
  for (const auto& p : parts) s.append(p);
  return s;
}

TEST(Utf8, CompletePrefixCutsBeforeAnUnfinishedCharacter) {
  const std::string s = cat({"a", kNichi, kClef});  // 1 + 3 + 4 bytes
  EXPECT_EQ(utf8_complete_prefix(s, 8), 8u);
  for (size_t n = 4; n < 8; ++n) EXPECT_EQ(utf8_complete_prefix(s, n), 4u) << n;
  for (size_t n = 1; n < 4; ++n) EXPECT_EQ(utf8_complete_prefix(s, n), 1u) << n;
  EXPECT_EQ(utf8_complete_prefix(s, 0), 0u);
}

TEST(Utf8, SanitizeReplacesMaximalSubparts) {
  // Unicode 15, §3.9, Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 becomes
  // a FFFD FFFD FFFD b FFFD c FFFD FFFD d.
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(sanitize_utf8(in), cat({"a", r, r, r, "b", r, "c", r, r, "d"}));
  EXPECT_EQ(sanitize_utf8(cat({"ok ", kNichi})), cat({"ok ", kNichi}));
}

TEST(TextStreamTest, HoldsASplitCharacterUntilItIsWhole) {
  TextStream ts;
  bool stop = false;
  std::string full = cat({"x", kNichi.substr(0, 1)});
  EXPECT_EQ(ts.push(full, &stop), "x");
  full += kNichi.substr(1, 1);
  EXPECT_EQ(ts.push(full, &stop), "");
  full += cat({kNichi.substr(2), kE});
  EXPECT_EQ(ts.push(full, &stop), cat({kNichi, kE}));
  EXPECT_FALSE(stop);
  full += kClef.substr(0, 2);  // generation ends inside a character
  EXPECT_EQ(ts.push(full, &stop), "");
  EXPECT_EQ(ts.finish(full), "\xEF\xBF\xBD");
  EXPECT_EQ(ts.text(), cat({"x", kNichi, kE, "\xEF\xBF\xBD"}));
}

TEST(TextStreamTest, StopStringsMatchAcrossPiecesAndCutTheText) {
  TextStream ts({"END", "xyz"});
  bool stop = false;
  EXPECT_EQ(ts.push("hello E", &stop), "hello ");  // "E" may start "END": held
  EXPECT_EQ(ts.push("hello EN", &stop), "");
  EXPECT_EQ(ts.push("hello ENx", &stop), "EN");  // "EN" can no longer start "END"; "x" may start "xyz"
  EXPECT_FALSE(stop);
  EXPECT_EQ(ts.text(), "hello EN");
  EXPECT_EQ(ts.push("hello ENxyz and more", &stop), "");
  EXPECT_TRUE(stop);
  EXPECT_EQ(ts.text(), "hello EN");
  EXPECT_EQ(ts.finish("hello ENxyz and more"), "");
}

TEST(TextStreamTest, FinishReleasesAHeldStopPrefix) {
  TextStream ts({"\n\nUser:"});
  bool stop = false;
  EXPECT_EQ(ts.push("answer\n\nUs", &stop), "answer");
  EXPECT_EQ(ts.finish("answer\n\nUs"), "\n\nUs");
  EXPECT_FALSE(ts.stopped());
}

std::string parse_error(const std::string& body, bool chat = false) {
  try {
    api::parse_request(body, chat, 4);
  } catch (const api::ApiError& e) {
    return std::to_string(e.status) + " " + e.param + ": " + e.what();
  }
  return "accepted";
}

TEST(OpenAiRequest, FieldsAreParsedWithTheirDefaults) {
  const auto r = api::parse_request(
      R"({"model": "m", "prompt": ["a", [1, 2]], "max_tokens": 7, "stop": "x", "seed": 3, "logprobs": 2,
          "presence_penalty": 0, "user": "u"})",
      false, 4);
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(std::get<std::string>(r.prompts[0]), "a");
  EXPECT_EQ(std::get<std::vector<int32_t>>(r.prompts[1]), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 1.0);
  EXPECT_EQ(r.top_p, 1.0);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.seed, 3u);
  EXPECT_EQ(r.logprobs, 2);
  const auto c = api::parse_request(
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 3})", true,
      4);
  EXPECT_EQ(c.logprobs, 3);
  EXPECT_EQ(api::chat_prompt(c.messages), "User: hi\n\nAssistant:");
}

TEST(OpenAiRequest, BadFieldsNameThemselves) {
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": "a", "n": 5})"), "400 n: 'n': 5 is outside [1, 4]");
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": "a", "top_p": 0})"), "400 top_p: 'top_p': must be > 0");
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": "a", "stop": ["a","b","c","d","e"]})"),
            "400 stop: 'stop': at most 4 stop strings, found 5");
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": "a", "frequency_penalty": 0.5})"),
            "400 frequency_penalty: 'frequency_penalty' is not supported by this server (only its default)");
  EXPECT_EQ(parse_error(R"({"prompt": "a"})"), "400 model: 'model' is required");
  EXPECT_EQ(parse_error(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", true),
            "400 top_logprobs: 'top_logprobs' needs \"logprobs\": true");
  EXPECT_EQ(parse_error(R"({"model": "m", "messages": [{"role": "user", "content": [1]}]})", true),
            "400 messages[0].content: 'messages[0].content': expected a string (multi-part content is not supported)");
  EXPECT_EQ(api::error_json(api::ApiError(429, "rate_limit_error", "full", "", "queue_full")),
            R"({"error":{"message":"full","type":"rate_limit_error","param":null,"code":"queue_full"}})");
}

}  // namespace
