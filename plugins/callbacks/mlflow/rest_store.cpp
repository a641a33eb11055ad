// The MLflow tracking server's REST API (MLflow 2.x, /api/2.0/mlflow/...):
//   GET  experiments/get-by-name?experiment_name=N -> {"experiment": {"experiment_id"}}
//        (404 RESOURCE_DOES_NOT_EXIST: POST experiments/create {"name"} -> {"experiment_id"})
//   POST runs/create {"experiment_id", "run_name", "start_time", "user_id", "tags"} -> {"run": {"info": {"run_id"}}}
//   POST runs/log-batch {"run_id", "metrics": [{"key", "value", "timestamp", "step"}], "params", "tags"}
//        (at most 1000 metrics, 100 params, 100 tags and 1000 entities per request)
//   POST runs/update {"run_id", "status", "end_time"}
// All of it from one sender thread: the training thread only queues.
#include <zcode/sdk/json.h>

#include <httplib.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "store.h"

namespace zcode::mlflow {

namespace {

constexpr const char* kApi = "/api/2.0/mlflow/";

void key_values(sdk::json::Writer& w, const char* name, const std::vector<KeyValue>& kv, size_t from, size_t n) {
  w.key(name).begin_array();
  for (size_t i = from; i < from + n; ++i)
    w.begin_object().key("key").string(kv[i].key).key("value").string(kv[i].value).end_object();
  w.end_array();
}

class RestStore : public Store {
 public:
  explicit RestStore(RestOptions o) : o_(std::move(o)) {
    // "http://host:port/prefix": httplib takes scheme://host:port, the
    // prefix goes before each endpoint.
    const size_t scheme_end = o_.tracking_uri.find("://");
    const size_t path_at = o_.tracking_uri.find('/', scheme_end == std::string::npos ? 0 : scheme_end + 3);
    base_ = o_.tracking_uri.substr(0, path_at);
    prefix_ = path_at == std::string::npos ? "" : o_.tracking_uri.substr(path_at);
    while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  }
  ~RestStore() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!ending_) {  // no end(): the run failed before TEARDOWN could say so
        ending_ = true;
        end_status_ = "FAILED";
        end_ms_ = now_ms();
      }
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  std::string start(const RunInfo& info) override {
    info_ = info;
    worker_ = std::thread([this] { run(); });
    return "";
  }

  void log(std::vector<Metric> metrics, std::vector<KeyValue> params, std::vector<KeyValue> tags) override {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& m : metrics)
      if (std::isfinite(m.value)) metrics_.push_back(std::move(m));  // JSON has no NaN or infinity
    for (auto& p : params) params_.push_back(std::move(p));
    for (auto& t : tags) tags_.push_back(std::move(t));
    if (metrics_.size() >= 1000) cv_.notify_all();
  }

  // Artifact upload (MLflow's artifact proxy) is not spoken: said once, not skipped silently.
  void artifact(const std::string& file) override {
    if (artifacts_said_ || !o_.warn) return;
    artifacts_said_ = true;
    o_.warn(o_.warn_ctx, "artifacts are not uploaded to " + o_.tracking_uri + " (not implemented); " + file +
                             " and the other run files stay in the run folder");
  }

  void end(const std::string& status, int64_t end_ms) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      ending_ = true;
      end_status_ = status;
      end_ms_ = end_ms;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  std::string run_id() const override {
    std::lock_guard<std::mutex> l(mu_);
    return run_id_;
  }

 private:
  httplib::Client client() const {
    httplib::Client c(base_);
    const auto to = std::chrono::duration<double>(o_.timeout_s);
    c.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(to));
    c.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(to));
    c.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(to));
    if (const char* t = std::getenv("MLFLOW_TRACKING_TOKEN"); t && *t) c.set_bearer_token_auth(t);
    const char* u = std::getenv("MLFLOW_TRACKING_USERNAME");
    const char* p = std::getenv("MLFLOW_TRACKING_PASSWORD");
    if (u && *u) c.set_basic_auth(u, p ? p : "");
    return c;
  }

  // One request with retries. Returns the body of a 200 answer, or nullopt
  // (after the retries: the server is given up on, and this request and all
  // later ones go to the unsent file). `missing` is set on a 404.
  std::optional<std::string> call(const std::string& method, const std::string& endpoint, const std::string& body,
                                  bool* missing = nullptr) {
    if (offline_) {
      keep_unsent(method, endpoint, body);
      return std::nullopt;
    }
    std::string why;
    for (int attempt = 0; attempt <= o_.retries; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::duration<double>(0.5 * (1 << (attempt - 1))));
      httplib::Client c = client();
      const std::string path = prefix_ + kApi + endpoint;
      auto r = method == "GET" ? c.Get(path) : c.Post(path, body, "application/json");
      if (!r) {
        why = httplib::to_string(r.error());
        continue;
      }
      if (r->status == 200) return r->body;
      if (r->status == 404 && missing) {
        *missing = true;
        return std::nullopt;
      }
      why = "HTTP " + std::to_string(r->status) + " " + r->body.substr(0, 200);
      if (r->status >= 400 && r->status < 500 && r->status != 429) break;  // a refusal; asking again won't help
    }
    offline_ = true;
    if (o_.warn)
      o_.warn(o_.warn_ctx, "MLflow tracking server " + o_.tracking_uri + ": " + method + " " + endpoint + " failed (" +
                               why + "); training goes on, and this run's MLflow requests are kept in " +
                               o_.unsent_path + " instead");
    keep_unsent(method, endpoint, body);
    return std::nullopt;
  }

  // A request that was not sent, as one JSON line {"method", "path", "body"}.
  void keep_unsent(const std::string& method, const std::string& endpoint, const std::string& body) {
    sdk::json::Writer w;
    w.begin_object().key("method").string(method).key("path").string(prefix_ + kApi + endpoint);
    w.key("body").raw(body.empty() ? "null" : body).end_object();
    if (std::FILE* f = std::fopen(o_.unsent_path.c_str(), "a")) {
      const std::string line = w.str() + "\n";
      std::fwrite(line.data(), 1, line.size(), f);
      std::fclose(f);
    }
  }

  std::string field(const std::string& body, const char* a, const char* b = nullptr, const char* c = nullptr) const {
    rapidjson::Document d;
    d.Parse(body.c_str());
    const rapidjson::Value* v = &d;
    for (const char* k : {a, b, c}) {
      if (!k) break;
      if (!v->IsObject() || !v->HasMember(k)) return "";
      v = &(*v)[k];
    }
    return v->IsString() ? v->GetString() : "";
  }

  // The experiment (created when missing) and the run (created, or reopened
  // for a resumed training run).
  void open_run() {
    std::string exp;
    bool missing = false;
    if (auto r = call(
            "GET",
            "experiments/get-by-name?experiment_name=" + httplib::detail::encode_query_param(info_.experiment_name), "",
            &missing))
      exp = field(*r, "experiment", "experiment_id");
    if (missing) {
      const std::string body =
          sdk::json::Writer().begin_object().key("name").string(info_.experiment_name).end_object().str();
      if (auto r = call("POST", "experiments/create", body)) exp = field(*r, "experiment_id");
    }
    std::string id;
    if (!info_.run_id.empty()) {
      id = info_.run_id;
      call("POST", "runs/update",
           sdk::json::Writer()
               .begin_object()
               .key("run_id")
               .string(id)
               .key("status")
               .string("RUNNING")
               .end_object()
               .str());
    } else {
      sdk::json::Writer w;
      w.begin_object().key("experiment_id").string(exp).key("run_name").string(info_.run_name);
      w.key("start_time").integer(info_.start_time_ms).key("user_id").string(info_.user);
      key_values(w, "tags", {{"mlflow.runName", info_.run_name}, {"mlflow.user", info_.user}}, 0, 2);
      w.end_object();
      if (auto r = call("POST", "runs/create", w.str())) id = field(*r, "run", "info", "run_id");
    }
    std::lock_guard<std::mutex> l(mu_);
    run_id_ = id;
  }

  // Sends what is queued, in requests within log-batch's limits.
  void flush(std::vector<Metric> m, std::vector<KeyValue> p, std::vector<KeyValue> t) {
    const std::string id = run_id();
    size_t mi = 0, pi = 0, ti = 0;
    while (mi < m.size() || pi < p.size() || ti < t.size()) {
      const size_t np = std::min<size_t>(100, p.size() - pi), nt = std::min<size_t>(100, t.size() - ti);
      const size_t nm = std::min<size_t>(1000 - np - nt, m.size() - mi);
      sdk::json::Writer w;
      w.begin_object().key("run_id").string(id).key("metrics").begin_array();
      for (size_t i = mi; i < mi + nm; ++i)
        w.begin_object()
            .key("key")
            .string(m[i].key)
            .key("value")
            .number(m[i].value)
            .key("timestamp")
            .integer(m[i].timestamp_ms)
            .key("step")
            .integer(m[i].step)
            .end_object();
      w.end_array();
      key_values(w, "params", p, pi, np);
      key_values(w, "tags", t, ti, nt);
      w.end_object();
      call("POST", "runs/log-batch", w.str());
      mi += nm;
      pi += np;
      ti += nt;
    }
  }

  void run() {
    open_run();
    for (;;) {
      std::vector<Metric> m;
      std::vector<KeyValue> p, t;
      bool ending = false;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait_for(l, std::chrono::duration<double>(o_.flush_interval_s),
                     [&] { return ending_ || metrics_.size() >= 1000; });
        m.swap(metrics_);
        p.swap(params_);
        t.swap(tags_);
        ending = ending_;
      }
      if (!m.empty() || !p.empty() || !t.empty()) flush(std::move(m), std::move(p), std::move(t));
      if (ending) break;
    }
    std::string status;
    int64_t end_ms = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      status = end_status_;
      end_ms = end_ms_;
    }
    call("POST", "runs/update",
         sdk::json::Writer()
             .begin_object()
             .key("run_id")
             .string(run_id())
             .key("status")
             .string(status)
             .key("end_time")
             .integer(end_ms)
             .end_object()
             .str());
  }

  RestOptions o_;
  std::string base_, prefix_;
  RunInfo info_;
  std::thread worker_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Metric> metrics_;
  std::vector<KeyValue> params_, tags_;
  bool ending_ = false;
  std::string end_status_ = "FINISHED";
  int64_t end_ms_ = 0;
  std::string run_id_;
  bool offline_ = false;         // sender thread only
  bool artifacts_said_ = false;  // training thread only
};

}  // namespace

std::unique_ptr<Store> make_rest_store(const RestOptions& options) { return std::make_unique<RestStore>(options); }

}  // namespace zcode::mlflow
