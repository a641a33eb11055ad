// The server's text and request handling without a model: TextStream's UTF-8
// hold-back and stop strings (byte values from the UTF-8 encoding rules,
// RFC 3629 §3), U+FFFD substitution (Unicode 15 §3.9, its own worked
// example), the OpenAI request checks, and ChangeSignal's wake-ups.
#include <zcode/core/serve/text_stream.h>

#include "serve/change_signal.h"
#include "serve/openai_api.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
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

// A long completion: the stop search looks only near what was sent, and
// still finds a stop string split over two tokens after 20,000 bytes, and
// one that the first pieces already begin (held until it resolves).
TEST(TextStreamTest, StopStringsAfterALongTextAreFoundNearTheEnd) {
  TextStream ts({"<END>", "xyz"});
  bool stop = false;
  std::string full, sent;
  for (int i = 0; i < 10000; ++i) {
    full += "ab";
    sent += ts.push(full, &stop);
    ASSERT_FALSE(stop);
  }
  EXPECT_EQ(sent, full);
  full += "c<E";
  EXPECT_EQ(ts.push(full, &stop), "c");  // "<E" held: it may begin "<END>"
  full += "ND>tail";
  EXPECT_EQ(ts.push(full, &stop), "");
  EXPECT_TRUE(stop);
  EXPECT_EQ(ts.text(), full.substr(0, 20000) + "c");
}

constexpr int64_t kVocab = 1000;  // the vocabulary logit_bias's ids are checked against

std::string parse_error(const std::string& body, bool chat = false) {
  try {
    api::parse_request(body, chat, 4, kVocab);
  } catch (const api::ApiError& e) {
    return std::to_string(e.status) + " " + e.param + ": " + e.what();
  }
  return "accepted";
}

TEST(OpenAiRequest, FieldsAreParsedWithTheirDefaults) {
  const auto r = api::parse_request(
      R"({"model": "m", "prompt": ["a", [1, 2]], "max_tokens": 7, "stop": "x", "seed": 3, "logprobs": 2,
          "presence_penalty": 0, "user": "u"})",
      false, 4, kVocab);
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
      4, kVocab);
  EXPECT_EQ(c.logprobs, 3);
  EXPECT_EQ(api::chat_prompt(c.messages), "User: hi\n\nAssistant:");
}

TEST(OpenAiRequest, BadFieldsNameThemselves) {
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": "a", "n": 5})"), "400 n: 'n': 5 is outside [1, 4]");
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": "a", "top_p": 0})"), "400 top_p: 'top_p': must be > 0");
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": "a", "stop": ["a","b","c","d","e"]})"),
            "400 stop: 'stop': at most 4 stop strings, found 5");
  EXPECT_EQ(parse_error(R"({"prompt": "a"})"), "400 model: 'model' is required");
  EXPECT_EQ(parse_error(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", true),
            "400 top_logprobs: 'top_logprobs' needs \"logprobs\": true");
  EXPECT_EQ(parse_error(R"({"model": "m", "messages": [{"role": "user", "content": [1]}]})", true),
            "400 messages[0].content: 'messages[0].content': expected a string (multi-part content is not supported)");
  EXPECT_EQ(api::error_json(api::ApiError(429, "rate_limit_error", "full", "", "queue_full")),
            R"({"error":{"message":"full","type":"rate_limit_error","param":null,"code":"queue_full"}})");
}

TEST(OpenAiRequest, PenaltiesAndLogitBiasAreParsed) {
  const auto r = api::parse_request(
      R"({"model": "m", "prompt": "a", "presence_penalty": -0.5, "frequency_penalty": 2,
          "logit_bias": {"7": 100, "0": -100, "999": 0.25, "0042": -1.5}})",
      false, 4, kVocab);
  EXPECT_EQ(r.presence_penalty, -0.5);
  EXPECT_EQ(r.frequency_penalty, 2.0);
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<int32_t, double>>{{7, 100.0}, {0, -100.0}, {999, 0.25}, {42, -1.5}}));
  const auto c = api::parse_request(
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "frequency_penalty": 0.75,
          "presence_penalty": null, "logit_bias": {}})",
      true, 4, kVocab);
  EXPECT_EQ(c.frequency_penalty, 0.75);
  EXPECT_EQ(c.presence_penalty, 0.0);
  EXPECT_TRUE(c.logit_bias.empty());
  const auto d = api::parse_request(R"({"model": "m", "prompt": "a"})", false, 4, kVocab);
  EXPECT_EQ(d.presence_penalty, 0.0);
  EXPECT_EQ(d.frequency_penalty, 0.0);
  EXPECT_TRUE(d.logit_bias.empty());
}

TEST(OpenAiRequest, BadPenaltiesAndLogitBiasNameTheFieldAndKey) {
  for (bool chat : {false, true}) {
    const std::string head = chat ? R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )"
                                  : R"({"model": "m", "prompt": "a", )";
    EXPECT_EQ(parse_error(head + R"("presence_penalty": 2.5})", chat),
              "400 presence_penalty: 'presence_penalty': 2.500000 is outside [-2.000000, 2.000000]");
    EXPECT_EQ(parse_error(head + R"("frequency_penalty": -3})", chat),
              "400 frequency_penalty: 'frequency_penalty': -3.000000 is outside [-2.000000, 2.000000]");
    EXPECT_EQ(parse_error(head + R"("frequency_penalty": "1"})", chat),
              "400 frequency_penalty: 'frequency_penalty': expected a number, found a string");
    EXPECT_EQ(parse_error(head + R"("logit_bias": [1, 2]})", chat),
              "400 logit_bias: 'logit_bias': expected an object {\"token id\": bias}, found an array");
    EXPECT_EQ(parse_error(head + R"("logit_bias": {"abc": 1}})", chat),
              "400 logit_bias: 'logit_bias': key 'abc' is not a token id (expected a decimal integer in [0, 1000))");
    EXPECT_EQ(parse_error(head + R"("logit_bias": {"-1": 1}})", chat),
              "400 logit_bias: 'logit_bias': key '-1' is not a token id (expected a decimal integer in [0, 1000))");
    EXPECT_EQ(parse_error(head + R"("logit_bias": {"1e2": 1}})", chat),
              "400 logit_bias: 'logit_bias': key '1e2' is not a token id (expected a decimal integer in [0, 1000))");
    EXPECT_EQ(parse_error(head + R"("logit_bias": {"": 1}})", chat),
              "400 logit_bias: 'logit_bias': key '' is not a token id (expected a decimal integer in [0, 1000))");
    EXPECT_EQ(parse_error(head + R"("logit_bias": {"1000": 1}})", chat),
              "400 logit_bias: 'logit_bias': key '1000' is outside the vocabulary [0, 1000)");
    EXPECT_EQ(parse_error(head + R"("logit_bias": {"99999999999999999999999": 1}})", chat),
              "400 logit_bias: 'logit_bias': key '99999999999999999999999' is outside the vocabulary [0, 1000)");
    EXPECT_EQ(parse_error(head + R"("logit_bias": {"5": 100.5}})", chat),
              "400 logit_bias: 'logit_bias': key '5': 100.500000 is outside [-100, 100]");
    EXPECT_EQ(parse_error(head + R"("logit_bias": {"5": "high"}})", chat),
              "400 logit_bias: 'logit_bias': key '5': expected a number in [-100, 100], found a string");
    EXPECT_EQ(parse_error(head + R"("logit_bias": {"5": null}})", chat),
              "400 logit_bias: 'logit_bias': key '5': expected a number in [-100, 100], found null");
    EXPECT_EQ(parse_error(head + R"("logit_bias": {"5": 1, "05": 2}})", chat),
              "400 logit_bias: 'logit_bias': key '05' names token id 5 again");
  }
  std::string many = R"({"model": "m", "prompt": "a", "logit_bias": {)";
  for (int i = 0; i < 301; ++i) many.append(i ? ", \"" : "\"").append(std::to_string(i)).append("\": 1");
  EXPECT_EQ(parse_error(many + "}}"), "400 logit_bias: 'logit_bias': 301 entries; at most 300 are allowed");
}

// ---- ChangeSignal (change_signal.h) ----------------------------------------
//
// The liveness bounds below are 10–100× what the waits need: a lost wake-up
// shows as a waiter sleeping out its whole timeout, which the bounds catch.

using zcode::serve::ChangeSignal;
using Steady = std::chrono::steady_clock;

TEST(ChangeSignalTest, AWaitAfterAChangeReturnsAtOnce) {
  ChangeSignal s;
  const uint32_t seen = s.value();
  s.bump();
  EXPECT_EQ(s.value(), seen + 1);
  const auto t0 = Steady::now();
  s.wait_change(seen, std::chrono::seconds(30));
  EXPECT_LT(Steady::now() - t0, std::chrono::seconds(10));
}

TEST(ChangeSignalTest, AWaitWithoutAChangeEndsAtItsTimeout) {
  ChangeSignal s;
  const auto t0 = Steady::now();
  s.wait_change(s.value(), std::chrono::milliseconds(50));
  EXPECT_GE(Steady::now() - t0, std::chrono::milliseconds(50));
  s.wait_change(s.value(), std::chrono::nanoseconds(0));  // returns at once
}

TEST(ChangeSignalTest, OneBumpWakesEveryWaiter) {
  ChangeSignal s;
  std::mutex m;
  bool ready = false;
  constexpr int kWaiters = 8;
  std::vector<std::thread> waiters;
  std::vector<Steady::duration> took(kWaiters);
  const auto t0 = Steady::now();
  for (int i = 0; i < kWaiters; ++i)
    waiters.emplace_back([&, i] {
      std::unique_lock<std::mutex> lk(m);
      for (;;) {  // the protocol of change_signal.h
        const uint32_t seen = s.value();
        if (ready) break;
        lk.unlock();
        s.wait_change(seen, std::chrono::seconds(30));
        lk.lock();
      }
      took[static_cast<size_t>(i)] = Steady::now() - t0;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // most are asleep by now; the rest see `ready`
  {
    std::lock_guard<std::mutex> lk(m);
    ready = true;
  }
  s.bump();
  for (auto& t : waiters) t.join();
  for (const auto& d : took) EXPECT_LT(d, std::chrono::seconds(10));
}

TEST(ChangeSignalTest, APingPongLosesNoWakeUp) {
  // Two threads take turns 2,000 times, each waiting with the protocol for
  // the other's move. A lost wake-up makes a wait run out its 5 s timeout:
  // the game then ends at once, marked lost.
  ChangeSignal s;
  std::mutex m;
  int turn = 0;  // even: A moves, odd: B moves
  bool lost = false;
  constexpr int kMoves = 2000;
  auto play = [&](int parity) {
    std::unique_lock<std::mutex> lk(m);
    for (;;) {
      const uint32_t seen = s.value();
      if (turn >= kMoves) return;
      if (turn % 2 == parity) {
        ++turn;
        lk.unlock();
        s.bump();
        lk.lock();
        continue;
      }
      lk.unlock();
      const auto w0 = Steady::now();
      s.wait_change(seen, std::chrono::seconds(5));
      const bool timed_out = Steady::now() - w0 >= std::chrono::seconds(5);
      lk.lock();
      if (timed_out && turn % 2 == parity) {  // it was this thread's move all along
        lost = true;
        turn = kMoves;
        lk.unlock();
        s.bump();
        return;
      }
    }
  };
  const auto t0 = Steady::now();
  std::thread a(play, 0), b(play, 1);
  a.join();
  b.join();
  EXPECT_FALSE(lost) << "a waiter slept through the other's move until its timeout";
  EXPECT_EQ(turn, kMoves);
  EXPECT_LT(Steady::now() - t0, std::chrono::seconds(60));
}

}  // namespace
