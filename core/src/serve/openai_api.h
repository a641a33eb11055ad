// OpenAI API requests and responses as ZCode's server understands them:
// parsing with every field checked (unknown fields, wrong types and values
// out of range are ApiError 400 naming the field), and the JSON of the
// responses and stream chunks. Field meanings follow OpenAI's API reference
// (completions and chat completions); top_k is an extension.
#pragma once

#include <zcode/core/serve/scheduler.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace zcode::serve::api {

/// An error a client gets: HTTP status and OpenAI's error object.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string type, std::string message, std::string param = {}, std::string code = {})
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)),
        text(std::move(message)) {}
  int status;
  std::string type, param, code;
  std::string text;  ///< the message with any NUL it quotes (what() ends at the first)
};
/// {"error": {"message", "type", "param", "code"}} (param, code null when empty).
std::string error_json(const ApiError& e);

struct ChatMessage {
  std::string role, content;
};

/// A parsed /v1/completions or /v1/chat/completions request.
struct GenerationRequest {
  bool chat = false;
  std::string model;
  /// Completions: each prompt as text or as token ids (one or a batch).
  std::vector<std::variant<std::string, std::vector<int32_t>>> prompts;
  std::vector<ChatMessage> messages;  ///< chat
  int32_t max_tokens = -1;            ///< -1: the endpoint's default
  double temperature = 1.0;
  double top_p = 1.0;
  int32_t top_k = 0;
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;
  int32_t logprobs = -1;         ///< -1 none; completions: 0..5 alternatives; chat: top_logprobs when logprobs is true
  double presence_penalty = 0;   ///< [-2, 2]
  double frequency_penalty = 0;  ///< [-2, 2]
  std::vector<std::pair<int32_t, double>> logit_bias;  ///< (id, bias in [-100, 100]) in the body's order
};

/// Parses a body; throws ApiError(400, "invalid_request_error", ...).
/// `vocab_size` bounds logit_bias's token ids.
GenerationRequest parse_request(const std::string& body, bool chat, int32_t max_n, int64_t vocab_size);

/// The documented chat template (server.h).
std::string chat_prompt(const std::vector<ChatMessage>& messages);
inline constexpr const char* kChatStop = "\n\nUser:";

}  // namespace zcode::serve::api
