// zcode/core/serve/server.h: `zcode-host serve`, an HTTP server compatible
// with OpenAI's API (cpp-httplib) over the continuous-batching Scheduler.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (non-streaming
// and server-sent events ending in `data: [DONE]`), GET /v1/models, GET
// /health, GET /metrics (Prometheus text format). Errors are OpenAI's JSON:
// {"error": {"message", "type", "param", "code"}} with 400 (bad JSON, unknown
// field, wrong type, prompt too long), 401 (api key), 404 (model, path), 413
// (body too large), 429 (queue full), 503 (draining), 504 (timeout), 500.
//
// Chat template (documented in README.md "Serving"): each message becomes
// "<Role>: <content>\n\n" (Role: System, User, Assistant), then
// "Assistant:" opens the reply; "\n\nUser:" is an implicit stop string.
#pragma once

#include <zcode/core/inference_model.h>
#include <zcode/core/serve/scheduler.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace zcode::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";  ///< loopback unless told otherwise
  int port = 8000;                 ///< 0: any free port (printed)
  std::string api_key;             ///< "": no check; else `Authorization: Bearer <key>` on /v1/*
  SchedulerOptions scheduler;
  double request_timeout_s = 300;    ///< a request still running then ends with 504 (or an error event)
  int32_t max_prompt_tokens = 0;     ///< 0: the context − 1
  int32_t max_tokens_limit = 0;      ///< the largest max_tokens accepted; 0: the context − 1
  int32_t max_n = 8;                 ///< choices per request
  size_t max_body_bytes = 1u << 20;  ///< request bodies above are refused (413)
  int http_threads = 0;              ///< 0: slots + max_queue + 4 (a streaming request holds a thread)
};

class Server {
 public:
  /// Builds the scheduler over `model` (which must outlive the server).
  Server(const InferenceModel& model, const ServerOptions& opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds (throws std::runtime_error naming host:port when it cannot) and
  /// returns the port bound.
  int bind();
  /// Serves until shutdown() (blocking).
  void serve();
  /// Graceful stop, callable from any thread: new requests get 503, the
  /// running ones finish, then the listener closes and serve() returns.
  void shutdown();

  struct Impl;  ///< opaque (server.cpp)

 private:
  std::unique_ptr<Impl> impl_;
};

/// `zcode-host serve`: loads the model, binds, prints
/// "zcode-host serve: listening on http://HOST:PORT" to stdout, serves until
/// SIGTERM or SIGINT (then drains). Returns the exit code (0, 1, 2).
int run_serve_command(const InferenceSource& src, const ServerOptions& opts);

}  // namespace zcode::serve
