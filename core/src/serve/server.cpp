// The OpenAI-compatible HTTP server over the Scheduler (serve/server.h).
#include <zcode/core/log.h>
#include <zcode/core/serve/server.h>
#include <zcode/core/serve/text_stream.h>

#include "serve/change_signal.h"
#include "serve/openai_api.h"

#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <pthread.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <random>

namespace zcode::serve {

namespace {

using Clock = std::chrono::steady_clock;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;
using api::ApiError;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The endpoint label of a path: a fixed set, so clients cannot add series
// (or bytes Prometheus refuses) to /metrics.
std::string endpoint_label(const std::string& path) {
  for (const char* e : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"})
    if (path == e) return e;
  return "other";
}

// Prometheus metrics of the server (prometheus-cpp's registry and text format).
struct Metrics {
  std::shared_ptr<prometheus::Registry> reg = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& requests = prometheus::BuildCounter()
                                                          .Name("zcode_serve_requests_total")
                                                          .Help("HTTP requests answered, by endpoint and status code")
                                                          .Register(*reg);
  prometheus::Counter& prompt_tokens = prometheus::BuildCounter()
                                           .Name("zcode_serve_prompt_tokens_total")
                                           .Help("Prompt tokens of the sequences submitted")
                                           .Register(*reg)
                                           .Add({});
  prometheus::Counter& generated_tokens = prometheus::BuildCounter()
                                              .Name("zcode_serve_generated_tokens_total")
                                              .Help("Tokens generated")
                                              .Register(*reg)
                                              .Add({});
  prometheus::Gauge& queue_depth = prometheus::BuildGauge()
                                       .Name("zcode_serve_queue_depth")
                                       .Help("Sequences waiting for a KV-cache slot")
                                       .Register(*reg)
                                       .Add({});
  prometheus::Gauge& running = prometheus::BuildGauge()
                                   .Name("zcode_serve_running_sequences")
                                   .Help("Sequences in the running batch")
                                   .Register(*reg)
                                   .Add({});
  prometheus::Counter& steps = prometheus::BuildCounter()
                                   .Name("zcode_serve_decode_steps_total")
                                   .Help("Decode steps of the running batch")
                                   .Register(*reg)
                                   .Add({});
  prometheus::Counter& step_entries = prometheus::BuildCounter()
                                          .Name("zcode_serve_step_tokens_total")
                                          .Help("Tokens through the model over all steps (decode and prompt)")
                                          .Register(*reg)
                                          .Add({});
  prometheus::Counter& model_seconds = prometheus::BuildCounter()
                                           .Name("zcode_serve_model_seconds_total")
                                           .Help("Time in the model's decode steps")
                                           .Register(*reg)
                                           .Add({});
  prometheus::Counter& choose_seconds = prometheus::BuildCounter()
                                            .Name("zcode_serve_sampling_seconds_total")
                                            .Help("Time picking tokens and turning them into text and events")
                                            .Register(*reg)
                                            .Add({});
  prometheus::Counter& stream_wakes =
      prometheus::BuildCounter()
          .Name("zcode_serve_stream_wakes_total")
          .Help("Wakes of the streaming requests' HTTP threads: one after each step that queued stream events")
          .Register(*reg)
          .Add({});
  SchedulerStats last{};
  std::mutex last_m;
  /// Brings the gauges and the counters fed by the scheduler's stats up to
  /// date (stats read under the lock: concurrent scrapes never go backwards).
  void sync(const Scheduler& sched) {
    std::lock_guard<std::mutex> lk(last_m);
    const SchedulerStats s = sched.stats();
    queue_depth.Set(static_cast<double>(s.queued));
    running.Set(static_cast<double>(s.running));
    steps.Increment(static_cast<double>(s.steps - last.steps));
    step_entries.Increment(static_cast<double>(s.step_entries - last.step_entries));
    model_seconds.Increment(s.model_seconds - last.model_seconds);
    choose_seconds.Increment(s.choose_seconds - last.choose_seconds);
    last = s;
  }
  prometheus::Histogram& ttft =
      prometheus::BuildHistogram()
          .Name("zcode_serve_time_to_first_token_seconds")
          .Help("From a request's arrival to its first generated token")
          .Register(*reg)
          .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30});
  prometheus::Histogram& itl =
      prometheus::BuildHistogram()
          .Name("zcode_serve_inter_token_latency_seconds")
          .Help("Between two generated tokens of one sequence")
          .Register(*reg)
          .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1});
  prometheus::Family<prometheus::Histogram>& latency =
      prometheus::BuildHistogram()
          .Name("zcode_serve_request_duration_seconds")
          .Help("From a request's arrival to its last byte, by endpoint")
          .Register(*reg);
  void count(const std::string& endpoint, int status) {
    requests.Add({{"endpoint", endpoint}, {"code", std::to_string(status)}}).Increment();
  }
  void observe_latency(const std::string& endpoint, double s) {
    latency
        .Add({{"endpoint", endpoint}},
             prometheus::Histogram::BucketBoundaries{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120})
        .Observe(s);
  }
};

void write_logprobs(Writer& w, const std::vector<TokenEvent>& evs, const std::vector<std::string>& texts, bool chat,
                    const std::function<std::string(int32_t)>& token_text) {
  if (chat) {
    w.StartObject();
    w.Key("content");
    w.StartArray();
    for (size_t i = 0; i < evs.size(); ++i) {
      auto entry = [&](const std::string& t, double lp, bool with_top) {
        w.StartObject();
        w.Key("token");
        w.String(sanitize_utf8(t).c_str());
        w.Key("logprob");
        w.Double(lp);
        w.Key("bytes");
        w.StartArray();
        for (unsigned char c : t) w.Uint(c);
        w.EndArray();
        if (with_top) {
          w.Key("top_logprobs");
          w.StartArray();
          for (const auto& a : evs[i].top) {
            const std::string at = token_text(a.id);
            w.StartObject();
            w.Key("token");
            w.String(sanitize_utf8(at).c_str());
            w.Key("logprob");
            w.Double(a.logprob);
            w.Key("bytes");
            w.StartArray();
            for (unsigned char c : at) w.Uint(c);
            w.EndArray();
            w.EndObject();
          }
          w.EndArray();
        }
        w.EndObject();
      };
      entry(texts[i], evs[i].logprob, true);
    }
    w.EndArray();
    w.EndObject();
    return;
  }
  w.StartObject();
  w.Key("tokens");
  w.StartArray();
  for (const auto& t : texts) w.String(sanitize_utf8(t).c_str());
  w.EndArray();
  w.Key("token_logprobs");
  w.StartArray();
  for (const auto& e : evs) w.Double(e.logprob);
  w.EndArray();
  w.Key("top_logprobs");
  w.StartArray();
  for (const auto& e : evs) {
    // Keys are token texts; two tokens may read the same (bytes of one
    // character, both U+FFFD): the first, more likely one keeps the key.
    w.StartObject();
    std::vector<std::string> keys;
    for (const auto& a : e.top) {
      std::string k = sanitize_utf8(token_text(a.id));
      if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
      w.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
      w.Double(a.logprob);
      keys.push_back(std::move(k));
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("text_offset");
  w.StartArray();
  size_t off = 0;
  for (const auto& t : texts) {
    w.Uint64(off);
    off += t.size();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace

struct Server::Impl {
  const InferenceModel& model;
  ServerOptions opts;
  std::string model_id;
  int64_t model_created = 0;
  int32_t context = 0;
  // Bumped after each scheduler step that queued stream events: the
  // streaming requests' HTTP threads wait on it (wait_for_state) for their
  // Call's events. Declared before `scheduler`, whose thread bumps it until
  // the scheduler is destroyed.
  ChangeSignal published;
  bool events_queued = false;  // a sink queued a stream event this step (scheduler thread only)
  std::unique_ptr<Scheduler> scheduler;
  httplib::Server http;
  Metrics metrics;
  std::mutex tok_m;  // the tokenizer instance: one thread at a time (abi.h)
  std::atomic<bool> draining{false};
  std::atomic<int> in_flight{0};
  std::atomic<uint64_t> next_id{0};
  uint64_t id_salt = 0;

  Impl(const InferenceModel& m, const ServerOptions& o) : model(m), opts(o) {
    SchedulerOptions so = o.scheduler;
    so.on_step_end = [this] {
      if (!events_queued) return;  // (a prefill-only step): nobody to wake
      events_queued = false;
      metrics.stream_wakes.Increment();  // before the wake: a client that saw the event sees the count
      published.bump();
    };
    scheduler = std::make_unique<Scheduler>(m, so);
    context = scheduler->options().max_len;
    model_id = m.config().experiment_name();
    std::error_code ec;
    const auto t = std::filesystem::last_write_time(m.checkpoint_dir() / "state.json", ec);
    if (!ec)
      model_created =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::file_clock::to_sys(t).time_since_epoch())
              .count();
    std::random_device rd;
    id_salt = (uint64_t{rd()} << 32) ^ rd();
    routes();
  }

  std::vector<int32_t> encode(const std::string& text) {
    std::lock_guard<std::mutex> lk(tok_m);
    return model.encode(text);
  }
  std::string decode(std::span<const int32_t> ids) {
    std::lock_guard<std::mutex> lk(tok_m);
    return model.decode(ids);
  }
  std::string decode_one(int32_t id) { return decode(std::span<const int32_t>(&id, 1)); }
  void metrics_ttft(double s) {
    metrics.ttft.Observe(s);
    metrics.generated_tokens.Increment();
  }
  void metrics_itl(double s) {
    metrics.itl.Observe(s);
    metrics.generated_tokens.Increment();
  }

  std::string new_id(const char* prefix) {
    char b[64];
    std::snprintf(b, sizeof b, "%s-%016llx%08llx", prefix, static_cast<unsigned long long>(id_salt),
                  static_cast<unsigned long long>(next_id++));
    return b;
  }

  void reply_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(api::error_json(e), "application/json");
  }

  void routes();
  void generation(const httplib::Request& req, httplib::Response& res, bool chat);
};

// ---- one request in flight -------------------------------------------------

namespace {

struct Choice {
  std::vector<int32_t> ids;
  std::string full;  // the text of `ids`, grown token by token (ChoiceSink::on_token)
  TextStream text;
  std::vector<TokenEvent> lp;        // tokens' log-probabilities (when asked)
  std::vector<std::string> lp_text;  // each token's own text
  size_t lp_sent = 0;                // streamed so far
  bool role_sent = false;
  bool done = false;
  FinishReason reason = FinishReason::kStop;
  std::string error;
  Clock::time_point last_token;
  int32_t prompt_tokens = 0;
};

struct Call {
  Server::Impl* srv = nullptr;
  api::GenerationRequest req;
  std::string id;
  int64_t created = 0;
  Clock::time_point t0 = Clock::now();
  std::mutex m;  // guards what follows; the scheduler's sinks write, the request's HTTP thread reads
  // Non-streaming: notified once, when the last choice finishes. (A stream's
  // thread waits on Impl::published instead, bumped after every step that
  // queued stream events.)
  std::condition_variable finished;
  std::vector<Choice> choices;
  std::deque<std::string> events;  // SSE payloads, streaming only
  int remaining = 0;
  bool any_token = false;
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  int64_t prompt_tokens = 0, completion_tokens = 0;

  std::string chunk_json(size_t i, const std::string& piece, const char* finish);
  std::string usage_chunk();
};

}  // namespace

std::string Call::chunk_json(size_t i, const std::string& piece, const char* finish) {
  Choice& c = choices[i];
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("id");
  w.String(id.c_str());
  w.Key("object");
  w.String(req.chat ? "chat.completion.chunk" : "text_completion");
  w.Key("created");
  w.Int64(created);
  w.Key("model");
  w.String(req.model.c_str());
  w.Key("choices");
  w.StartArray();
  w.StartObject();
  w.Key("index");
  w.Uint64(i);
  if (req.chat) {
    w.Key("delta");
    w.StartObject();
    if (!c.role_sent) {
      w.Key("role");
      w.String("assistant");
      c.role_sent = true;
    }
    if (!piece.empty() || !finish) {
      w.Key("content");
      w.String(piece.c_str());
    }
    w.EndObject();
  } else {
    w.Key("text");
    w.String(piece.c_str());
  }
  w.Key("logprobs");
  if (req.logprobs >= 0 && c.lp_sent < c.lp.size()) {
    const std::vector<TokenEvent> evs(c.lp.begin() + static_cast<std::ptrdiff_t>(c.lp_sent), c.lp.end());
    const std::vector<std::string> texts(c.lp_text.begin() + static_cast<std::ptrdiff_t>(c.lp_sent), c.lp_text.end());
    write_logprobs(w, evs, texts, req.chat, [&](int32_t tid) { return srv->decode_one(tid); });
    c.lp_sent = c.lp.size();
  } else {
    w.Null();
  }
  w.Key("finish_reason");
  if (finish) w.String(finish);
  else w.Null();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

std::string Call::usage_chunk() {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("id");
  w.String(id.c_str());
  w.Key("object");
  w.String(req.chat ? "chat.completion.chunk" : "text_completion");
  w.Key("created");
  w.Int64(created);
  w.Key("model");
  w.String(req.model.c_str());
  w.Key("choices");
  w.StartArray();
  w.EndArray();
  w.Key("usage");
  w.StartObject();
  w.Key("prompt_tokens");
  w.Int64(prompt_tokens);
  w.Key("completion_tokens");
  w.Int64(completion_tokens);
  w.Key("total_tokens");
  w.Int64(prompt_tokens + completion_tokens);
  w.EndObject();
  w.EndObject();
  return sb.GetString();
}

namespace {

const char* finish_name(FinishReason r) { return r == FinishReason::kLength ? "length" : "stop"; }

// Waits until ready() (checked with `lk` held, as it is on entry and on
// return) or `timeout` passes; returns ready(). The writers change the state
// under the same lock and then bump `signal` (change_signal.h's protocol).
template <class Ready>
bool wait_for_state(const ChangeSignal& signal, std::unique_lock<std::mutex>& lk, Clock::duration timeout,
                    Ready ready) {
  const auto until = Clock::now() + timeout;
  for (;;) {
    const uint32_t seen = signal.value();
    if (ready()) return true;
    const auto left = until - Clock::now();
    if (left <= Clock::duration::zero()) return false;
    lk.unlock();
    signal.wait_change(seen, left);
    lk.lock();
  }
}

// The scheduler's view of one choice: text, stop strings, stream events.
class ChoiceSink : public SequenceSink {
 public:
  ChoiceSink(std::shared_ptr<Call> call, size_t index) : call_(std::move(call)), i_(index) {}

  // The text of the ids so far grows by the new token's part: the decode of
  // the last kContext ids and the new one, less the decode of those
  // kContext ids (the same window start on both sides, so a tokenizer that
  // treats the first piece of a decode specially treats both alike). Where
  // the shorter decode is not a prefix of the longer (a tokenizer whose
  // decode is not piecewise), everything is decoded again. Per token that
  // is O(kContext), not O(ids): a long completion stays linear.
  static constexpr size_t kContext = 6;

  bool on_token(const TokenEvent& t) override {
    Call& k = *call_;
    Server::Impl& srv = *k.srv;
    const auto now = Clock::now();
    int32_t window[kContext + 1];
    size_t w = 0;
    {
      std::lock_guard<std::mutex> lk(k.m);
      Choice& c = k.choices[i_];
      if (c.ids.empty()) srv.metrics_ttft(std::chrono::duration<double>(now - k.t0).count());
      else srv.metrics_itl(std::chrono::duration<double>(now - c.last_token).count());
      c.last_token = now;
      c.ids.push_back(t.id);
      const size_t from = c.ids.size() > kContext + 1 ? c.ids.size() - kContext - 1 : 0;
      for (size_t i = from; i < c.ids.size(); ++i) window[w++] = c.ids[i];
      ++k.completion_tokens;
    }
    const std::string before = srv.decode(std::span<const int32_t>(window, w - 1));
    const std::string after = srv.decode(std::span<const int32_t>(window, w));
    const bool piecewise = after.compare(0, before.size(), before) == 0;
    std::string all;  // (only when the decode is not piecewise)
    if (!piecewise) {
      std::vector<int32_t> ids;
      {
        std::lock_guard<std::mutex> lk(k.m);
        ids = k.choices[i_].ids;
      }
      all = srv.decode(ids);
    }
    const std::string tok_text = k.req.logprobs >= 0 ? srv.decode_one(t.id) : std::string();
    bool stopped = false;
    std::lock_guard<std::mutex> lk(k.m);
    Choice& c = k.choices[i_];
    if (piecewise) c.full.append(after, before.size(), std::string::npos);
    else c.full = std::move(all);
    const std::string piece = c.text.push(c.full, &stopped);
    if (k.req.logprobs >= 0) {
      c.lp.push_back(t);
      c.lp_text.push_back(tok_text);
    }
    // The reader wakes at the step's end (Impl::published), not here.
    if (k.req.stream && (!piece.empty() || k.req.logprobs >= 0)) {
      k.events.push_back(k.chunk_json(i_, piece, nullptr));
      srv.events_queued = true;
    }
    return !stopped;
  }

  void on_finish(FinishReason why, const std::string& error) override {
    Call& k = *call_;
    std::string full;
    std::vector<int32_t> ids;
    {
      std::lock_guard<std::mutex> lk(k.m);
      ids = k.choices[i_].ids;
    }
    if (why != FinishReason::kCancelled) full = k.srv->decode(ids);
    std::lock_guard<std::mutex> lk(k.m);
    Choice& c = k.choices[i_];
    c.done = true;
    c.reason = why;
    c.error = error;
    if (why != FinishReason::kCancelled) {
      const std::string piece = c.text.finish(full);
      if (k.req.stream) {
        if (why == FinishReason::kTimeout || why == FinishReason::kError) {
          const ApiError e(why == FinishReason::kTimeout ? 504 : 500,
                           why == FinishReason::kTimeout ? "timeout" : "server_error",
                           why == FinishReason::kTimeout ? "the request ran past the server's request timeout"
                                                         : "generation failed: " + error);
          if (!piece.empty()) k.events.push_back(k.chunk_json(i_, piece, nullptr));
          k.events.push_back(api::error_json(e));
        } else {
          k.events.push_back(k.chunk_json(i_, piece, finish_name(why)));
        }
      }
    }
    if (--k.remaining == 0 && k.req.stream) {
      if (k.req.include_usage) k.events.push_back(k.usage_chunk());
      k.events.push_back("[DONE]");
    }
    if (k.req.stream) k.srv->events_queued = true;
    else if (k.remaining == 0) k.finished.notify_all();  // once per request, on this (the scheduler's) thread
  }

 private:
  std::shared_ptr<Call> call_;
  size_t i_;
};

}  // namespace

// ---- routes ------------------------------------------------------------------

void Server::Impl::routes() {
  http.set_payload_max_length(opts.max_body_bytes);
  const int threads = opts.http_threads > 0 ? opts.http_threads : opts.scheduler.slots + opts.scheduler.max_queue + 4;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_read_timeout(30, 0);
  http.set_write_timeout(30, 0);

  // Every error answer is OpenAI's JSON error object, including httplib's own
  // (404 unknown path, 413 body too large, 400 unreadable request).
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string type = "invalid_request_error", msg = "HTTP " + std::to_string(res.status);
    if (res.status == 404)
      msg = "no such endpoint (see GET /v1/models, POST /v1/completions, POST /v1/chat/completions)";
    if (res.status == 413) msg = "the request body is larger than the server's limit";
    if (res.status >= 500) type = "server_error";
    res.set_content(api::error_json(ApiError(res.status, type, msg)), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // cpp-httplib 0.11 applies the body limit to Content-Length bodies only:
    // a chunked upload would be read whole. Refused before its body is read.
    if (req.method == "POST" && req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
      reply_error(res, ApiError(411, "invalid_request_error",
                                "request bodies need a Content-Length (chunked uploads are not accepted)"));
      metrics.count(endpoint_label(req.path), 411);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (opts.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (auth == "Bearer " + opts.api_key) return httplib::Server::HandlerResponse::Unhandled;
    reply_error(res, ApiError(401, "invalid_request_error",
                              auth.empty() ? "missing API key (Authorization: Bearer <key>)" : "incorrect API key", "",
                              "invalid_api_key"));
    metrics.count(endpoint_label(req.path), 401);
    return httplib::Server::HandlerResponse::Handled;
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool d = draining.load();
    res.status = d ? 503 : 200;
    res.set_content(d ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}", "application/json");
  });

  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    metrics.sync(*scheduler);
    res.set_content(prometheus::TextSerializer().Serialize(metrics.reg->Collect()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });

  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("object");
    w.String("list");
    w.Key("data");
    w.StartArray();
    w.StartObject();
    w.Key("id");
    w.String(model_id.c_str());
    w.Key("object");
    w.String("model");
    w.Key("created");
    w.Int64(model_created);
    w.Key("owned_by");
    w.String("zcode");
    w.EndObject();
    w.EndArray();
    w.EndObject();
    res.set_content(sb.GetString(), "application/json");
    metrics.count("/v1/models", 200);
  });

  http.Post("/v1/completions",
            [this](const httplib::Request& req, httplib::Response& res) { generation(req, res, false); });
  http.Post("/v1/chat/completions",
            [this](const httplib::Request& req, httplib::Response& res) { generation(req, res, true); });
}

void Server::Impl::generation(const httplib::Request& hreq, httplib::Response& res, bool chat) {
  const std::string endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  const auto t0 = Clock::now();
  auto call = std::make_shared<Call>();
  call->srv = this;
  call->t0 = t0;
  try {
    if (draining.load()) throw ApiError(503, "server_error", "the server is shutting down");
    call->req = api::parse_request(hreq.body, chat, opts.max_n, model.vocab_size());
    api::GenerationRequest& r = call->req;
    if (r.model != model_id)
      throw ApiError(404, "invalid_request_error",
                     "the model '" + r.model + "' does not exist; this server has '" + model_id + "'", "model",
                     "model_not_found");
    // Prompts as ids.
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::string> stop = r.stop;
    if (chat) {
      prompts.push_back(encode(api::chat_prompt(r.messages)));
      stop.push_back(api::kChatStop);
    } else {
      for (const auto& p : r.prompts) {
        if (const auto* text = std::get_if<std::string>(&p)) prompts.push_back(encode(*text));
        else prompts.push_back(std::get<std::vector<int32_t>>(p));
      }
    }
    const int32_t max_prompt = opts.max_prompt_tokens > 0 ? std::min(opts.max_prompt_tokens, context - 1) : context - 1;
    const int32_t max_out = opts.max_tokens_limit > 0 ? std::min(opts.max_tokens_limit, context - 1) : context - 1;
    for (auto& ids : prompts) {
      if (ids.empty()) {
        const int32_t start = model.bos_id() >= 0 ? model.bos_id() : model.eos_id();
        if (start < 0)
          throw ApiError(400, "invalid_request_error", "empty prompt and the tokenizer has no <bos>", "prompt");
        ids.push_back(start);
      }
      for (int32_t id : ids)
        if (id < 0 || id >= model.vocab_size())
          throw ApiError(400, "invalid_request_error",
                         "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(model.vocab_size()) + ")",
                         "prompt");
      if (static_cast<int32_t>(ids.size()) > max_prompt)
        throw ApiError(400, "invalid_request_error",
                       "the prompt has " + std::to_string(ids.size()) + " tokens; this server accepts at most " +
                           std::to_string(max_prompt) + " (context " + std::to_string(context) + ")",
                       chat ? "messages" : "prompt", "context_length_exceeded");
    }
    size_t longest = 0;
    for (const auto& ids : prompts) longest = std::max(longest, ids.size());
    int32_t max_tokens = r.max_tokens;
    if (max_tokens < 0)
      max_tokens = chat ? std::min<int32_t>(max_out, context - static_cast<int32_t>(longest)) : std::min(16, max_out);
    if (max_tokens > max_out)
      throw ApiError(
          400, "invalid_request_error",
          "max_tokens " + std::to_string(max_tokens) + " is above this server's limit of " + std::to_string(max_out),
          "max_tokens");
    if (static_cast<int64_t>(longest) + max_tokens > context)
      throw ApiError(400, "invalid_request_error",
                     "this model's maximum context length is " + std::to_string(context) + " tokens; you requested " +
                         std::to_string(longest + static_cast<size_t>(max_tokens)) + " (" + std::to_string(longest) +
                         " in the prompt, " + std::to_string(max_tokens) + " for the completion)",
                     chat ? "messages" : "prompt", "context_length_exceeded");
    uint64_t seed = 0;
    if (r.seed) seed = *r.seed;
    else {
      std::random_device rd;
      seed = (uint64_t{rd()} << 32) ^ rd();
    }
    // One sequence per (prompt, choice); choice j of a request draws from seed + j.
    call->id = new_id(chat ? "chatcmpl" : "cmpl");
    call->created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    const size_t total = prompts.size() * static_cast<size_t>(r.n);
    call->choices.resize(total);
    call->remaining = static_cast<int>(total);
    std::vector<SequenceRequest> seqs;
    // At most a year: further away, the tick count of the time point would overflow.
    const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(std::min(opts.request_timeout_s, 3.2e7)));
    for (size_t p = 0; p < prompts.size(); ++p)
      for (int32_t j = 0; j < r.n; ++j) {
        const size_t i = p * static_cast<size_t>(r.n) + static_cast<size_t>(j);
        call->choices[i].text = TextStream(stop);
        call->choices[i].prompt_tokens = static_cast<int32_t>(prompts[p].size());
        call->prompt_tokens += static_cast<int64_t>(j == 0 ? prompts[p].size() : 0);
        SequenceRequest s;
        s.prompt = prompts[p];
        s.params.temperature = r.temperature;
        s.params.top_k = r.top_k;
        s.params.top_p = r.top_p;
        s.params.seed = seed + static_cast<uint64_t>(j);
        s.params.max_new_tokens = max_tokens;
        s.params.top_logprobs = r.logprobs;
        s.params.presence_penalty = r.presence_penalty;
        s.params.frequency_penalty = r.frequency_penalty;
        s.params.logit_bias = r.logit_bias;
        s.sink = std::make_shared<ChoiceSink>(call, i);
        s.cancelled = call->cancelled;
        s.deadline = deadline;
        seqs.push_back(std::move(s));
      }
    bool queued = false;
    try {
      queued = scheduler->submit(std::move(seqs));
    } catch (const std::invalid_argument& e) {
      throw ApiError(400, "invalid_request_error", e.what());
    }
    if (!queued) {
      if (draining.load()) throw ApiError(503, "server_error", "the server is shutting down");
      throw ApiError(429, "rate_limit_error", "the server's queue is full; retry later", "", "queue_full");
    }
    for (const auto& ids : prompts)
      metrics.prompt_tokens.Increment(static_cast<double>(ids.size() * static_cast<size_t>(r.n)));
  } catch (const ApiError& e) {
    reply_error(res, e);
    metrics.count(endpoint, e.status);
    return;
  } catch (const std::exception& e) {
    reply_error(res, ApiError(500, "server_error", e.what()));
    metrics.count(endpoint, 500);
    return;
  }

  ++in_flight;
  if (call->req.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, call](size_t, httplib::DataSink& sink) {
          std::unique_lock<std::mutex> lk(call->m);
          wait_for_state(published, lk, std::chrono::milliseconds(200), [&] { return !call->events.empty(); });
          while (!call->events.empty()) {
            const std::string data = "data: " + call->events.front() + "\n\n";
            const bool last = call->events.front() == "[DONE]";
            call->events.pop_front();
            lk.unlock();
            if (!sink.write(data.data(), data.size())) {
              call->cancelled->store(true);  // the client went away: its slots free at the next step
              return false;
            }
            if (last) {
              sink.done();
              return true;
            }
            lk.lock();
          }
          if (!sink.is_writable()) {
            call->cancelled->store(true);
            return false;
          }
          return true;
        },
        [this, call, endpoint, t0](bool ok) {
          if (!ok) call->cancelled->store(true);
          metrics.count(endpoint, 200);
          metrics.observe_latency(endpoint, seconds_since(t0));
          --in_flight;
        });
    return;
  }

  // Non-streaming: wait for every choice, then one JSON answer.
  {
    std::unique_lock<std::mutex> lk(call->m);
    call->finished.wait(lk, [&] { return call->remaining == 0; });
  }
  --in_flight;
  for (const Choice& c : call->choices) {
    if (c.reason == FinishReason::kTimeout || c.reason == FinishReason::kError ||
        c.reason == FinishReason::kCancelled) {
      const ApiError e = c.reason == FinishReason::kTimeout
                             ? ApiError(504, "timeout",
                                        "the request ran past the server's request timeout of " +
                                            std::to_string(opts.request_timeout_s) + " s")
                             : ApiError(500, "server_error", "generation failed: " + c.error);
      reply_error(res, e);
      metrics.count(endpoint, e.status);
      return;
    }
  }
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("id");
  w.String(call->id.c_str());
  w.Key("object");
  w.String(chat ? "chat.completion" : "text_completion");
  w.Key("created");
  w.Int64(call->created);
  w.Key("model");
  w.String(call->req.model.c_str());
  w.Key("choices");
  w.StartArray();
  for (size_t i = 0; i < call->choices.size(); ++i) {
    const Choice& c = call->choices[i];
    w.StartObject();
    w.Key("index");
    w.Uint64(i);
    if (chat) {
      w.Key("message");
      w.StartObject();
      w.Key("role");
      w.String("assistant");
      w.Key("content");
      w.String(c.text.text().c_str());
      w.EndObject();
    } else {
      w.Key("text");
      w.String(c.text.text().c_str());
    }
    w.Key("logprobs");
    if (call->req.logprobs >= 0) write_logprobs(w, c.lp, c.lp_text, chat, [&](int32_t id) { return decode_one(id); });
    else w.Null();
    w.Key("finish_reason");
    w.String(finish_name(c.reason));
    w.EndObject();
  }
  w.EndArray();
  w.Key("usage");
  w.StartObject();
  w.Key("prompt_tokens");
  w.Int64(call->prompt_tokens);
  w.Key("completion_tokens");
  w.Int64(call->completion_tokens);
  w.Key("total_tokens");
  w.Int64(call->prompt_tokens + call->completion_tokens);
  w.EndObject();
  w.EndObject();
  res.set_content(sb.GetString(), "application/json");
  metrics.count(endpoint, 200);
  metrics.observe_latency(endpoint, seconds_since(t0));
}

// ---- Server ------------------------------------------------------------------

Server::Server(const InferenceModel& model, const ServerOptions& opts) : impl_(std::make_unique<Impl>(model, opts)) {}

Server::~Server() { shutdown(); }

int Server::bind() {
  const auto& o = impl_->opts;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host.c_str())
                               : (impl_->http.bind_to_port(o.host.c_str(), o.port) ? o.port : -1);
  if (port < 0)
    throw std::runtime_error("serve: cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             " (in use, or not an address of this machine)");
  return port;
}

void Server::serve() { impl_->http.listen_after_bind(); }

void Server::shutdown() {
  Impl& s = *impl_;
  if (s.draining.exchange(true)) return;
  s.scheduler->drain();  // every running and queued sequence ends; their events are queued
  // Let the streaming handlers send what is left (bounded: a stuck client does not hold the exit).
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (s.in_flight.load() > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s.http.stop();
}

// ---- zcode-host serve ----------------------------------------------------------

int run_serve_command(const InferenceSource& src, const ServerOptions& opts) {
  // SIGTERM and SIGINT are taken by one thread (sigwait), blocked everywhere
  // else: mask them before any thread starts, so every thread inherits it.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not the end of the server
  try {
    InferenceModel model(src);
    Server server(model, opts);
    const int port = server.bind();
    std::cout << "zcode-host serve: listening on http://" << opts.host << ":" << port << " (model '"
              << model.config().experiment_name() << "', step " << model.step() << ", " << opts.scheduler.slots
              << " slots)" << std::endl;
    std::atomic<bool> signalled{false};
    std::mutex served_m;
    std::condition_variable served_cv;
    bool served = false;
    std::thread waiter([&] {
      int sig = 0;
      sigwait(&sigs, &sig);
      if (signalled.exchange(true)) return;  // woken by serve() returning
      log::info(std::string("serve: ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                ": finishing the requests in flight, then exiting");
      server.shutdown();
      // cpp-httplib joins its workers before serve() returns, and a worker
      // reading a client that dribbles bytes waits out its read timeout per
      // line: the drain is bounded here instead. Every sequence has ended.
      std::unique_lock<std::mutex> lk(served_m);
      if (!served_cv.wait_for(lk, std::chrono::seconds(15), [&] { return served; })) {
        log::warn("serve: connections still open 15 s after the drain; exiting without them");
        log::close_file();
        std::fflush(nullptr);
        std::_Exit(0);
      }
    });
    server.serve();
    {
      std::lock_guard<std::mutex> lk(served_m);
      served = true;
    }
    served_cv.notify_all();
    if (!signalled.exchange(true)) pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    log::info("serve: stopped");
    return 0;
  } catch (const std::invalid_argument& e) {  // the scheduler's options
    log::error(e.what());
    return 2;
  } catch (...) {
    return inference_command_failed("serve");
  }
}

}  // namespace zcode::serve
