// `mlflow` callback: the run in MLflow, as a local file store (mlruns) or
// through a tracking server's REST API (see README.md).
#include <zcode/sdk/json.h>
#include <zcode/sdk/plugin.h>

#include <pwd.h>
#include <rapidjson/document.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cadence.h"
#include "store.h"

namespace {

using namespace zcode::sdk;
namespace mf = zcode::mlflow;

// MLflow's limits (2.x): param keys up to 250 characters, values up to 6000.
constexpr size_t kMaxKey = 250, kMaxParamValue = 6000;

std::string json_text(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

// The resolved config as MLflow params: one per leaf, named by its path
// ("optimizer.lr", "callbacks.0.type"); arrays of scalars as their JSON
// text; strings as they are; nulls left out.
void flatten(const rapidjson::Value& v, const std::string& path, std::vector<mf::KeyValue>& out) {
  if (v.IsObject()) {
    for (const auto& m : v.GetObject())
      flatten(m.value, path.empty() ? m.name.GetString() : path + "." + m.name.GetString(), out);
    return;
  }
  if (v.IsArray()) {
    bool scalars = true;
    for (const auto& e : v.GetArray()) scalars = scalars && !e.IsObject() && !e.IsArray();
    if (!scalars) {
      for (rapidjson::SizeType i = 0; i < v.Size(); ++i) flatten(v[i], path + "." + std::to_string(i), out);
      return;
    }
  }
  if (v.IsNull() || path.size() > kMaxKey) return;
  std::string text = v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : json_text(v);
  if (text.size() > kMaxParamValue) text.resize(kMaxParamValue);
  out.push_back({path, text});
}

std::string user_name() {
  if (const char* u = std::getenv("USER"); u && *u) return u;
  if (const passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return "unknown";
}

class MlflowCallback : public Callback {
 public:
  explicit MlflowCallback(const CreateContext& ctx) : host_(ctx.host()) {
    const Options& o = ctx.options();
    run_dir_ = ctx.run_dir();
    if (run_dir_.empty()) invalid_argument("mlflow: no run folder (args.run_dir is empty)");
    every_ = zcode::callbacks::every_option(ctx, "log_every", "callbacks.mlflow.every");
    experiment_ = o.get<std::string>("experiment_name", ctx.config().get<std::string>("experiment_name", "zcode"));
    run_name_ = o.get<std::string>("run_name", experiment_);
    // Where to: the option, logging.mlflow_tracking_uri, $MLFLOW_TRACKING_URI,
    // else a file store in the run folder.
    std::string uri =
        o.get<std::string>("tracking_uri", ctx.config().object("logging").get<std::string>("mlflow_tracking_uri", ""));
    if (uri.empty())
      if (const char* env = std::getenv("MLFLOW_TRACKING_URI")) uri = env;
    if (uri.starts_with("http://") || uri.starts_with("https://")) {
      mf::RestOptions r;
      r.tracking_uri = uri;
      r.flush_interval_s = o.get<double>("flush_interval_s", 5);
      r.timeout_s = o.get<double>("timeout_s", 10);
      r.retries = static_cast<int>(o.get<int64_t>("retries", 3));
      if (!(r.flush_interval_s > 0) || !(r.timeout_s > 0) || r.retries < 0)
        invalid_argument("callbacks.mlflow: flush_interval_s and timeout_s must be > 0 and retries >= 0");
      r.unsent_path = run_dir_ + "/logs/mlflow_unsent.jsonl";
      r.warn = [](void* c, const std::string& m) { static_cast<Host*>(c)->warn("mlflow", m); };
      r.warn_ctx = &host_;
      store_ = mf::make_rest_store(r);
      where_ = uri;
    } else {
      std::string root = uri.empty() ? run_dir_ + "/logs/mlflow" : uri;
      if (root.starts_with("file://")) root = root.substr(7);
      if (root.find("://") != std::string::npos || root.empty())
        invalid_argument("callbacks.mlflow.tracking_uri: '" + uri +
                         "' is not supported; use http(s)://host:port (a tracking server), file:///path or a folder "
                         "(a file store)");
      store_ = mf::make_file_store(root);
      where_ = root;
    }
    config_json_ = json_text(ctx.config().json());
  }

  uint32_t on_event(const zc_event& e) override {
    switch (e.kind) {
      case ZC_EVENT_SETUP: {
        rapidjson::Document d;
        d.Parse(e.metrics_json && *e.metrics_json ? e.metrics_json : "{}");
        const int64_t resumed = d.IsObject() && d.HasMember("resumed_step") && d["resumed_step"].IsInt64()
                                    ? d["resumed_step"].GetInt64()
                                    : 0;
        const bool reopen = resumed > 0 && !run_id_.empty();
        mf::RunInfo info{experiment_, run_name_, reopen ? run_id_ : "", mf::now_ms(), resumed, user_name()};
        run_id_ = store_->start(info);
        if (!reopen) {  // a param's value cannot change in MLflow: logged once per run
          rapidjson::Document cfg;
          cfg.Parse(config_json_.c_str());
          std::vector<mf::KeyValue> params;
          flatten(cfg, "", params);
          store_->log({}, std::move(params),
                      {{"mlflow.runName", run_name_},
                       {"mlflow.user", user_name()},
                       {"mlflow.source.name", "zcode-host"},
                       {"mlflow.source.type", "LOCAL"},
                       {"zcode.run_dir", run_dir_}});
        }
        host_.info("mlflow", std::string(reopen ? "continuing" : "logging") + " run '" + run_name_ +
                                 "' of experiment '" + experiment_ + "' to " + where_);
        break;
      }
      case ZC_EVENT_STEP_END:
        if (zcode::callbacks::log_step(e.step, e.max_steps, every_)) store_->log(points("train_", e), {}, {});
        break;
      case ZC_EVENT_EVAL_END: store_->log(points("eval_", e), {}, {}); break;
      case ZC_EVENT_TEARDOWN: {
        rapidjson::Document d;
        d.Parse(e.metrics_json && *e.metrics_json ? e.metrics_json : "{}");
        const bool failed = d.IsObject() && d.HasMember("failed") && d["failed"].IsTrue();
        const bool interrupted = d.IsObject() && d.HasMember("interrupted") && d["interrupted"].IsTrue();
        for (const char* f : {"config.yaml", "model_card.md", "metrics.json"}) store_->artifact(run_dir_ + "/" + f);
        store_->end(failed ? "FAILED" : interrupted ? "KILLED" : "FINISHED", mf::now_ms());
        run_id_ = store_->run_id();
        break;
      }
      default: break;
    }
    return 0;
  }

  // The MLflow run id, so that a resumed training run continues its run.
  void save_state(const StateWriter& w) override {
    const std::string id = store_->run_id();
    w.put_json(json::Writer().begin_object().key("run_id").string(id.empty() ? run_id_ : id).end_object().str());
  }
  void load_state(const StateReader& r) override {
    if (r.json().empty()) return;
    rapidjson::Document d;
    d.Parse(r.json().data(), r.json().size());
    if (d.IsObject() && d.HasMember("run_id") && d["run_id"].IsString()) run_id_ = d["run_id"].GetString();
  }

 private:
  // Every number of the event's metrics as "<prefix><key>" at the event's step.
  static std::vector<mf::Metric> points(const char* prefix, const zc_event& e) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(e.metrics_json && *e.metrics_json ? e.metrics_json : "{}");
    std::vector<mf::Metric> out;
    if (!d.IsObject()) return out;
    const int64_t t = mf::now_ms();
    for (const auto& m : d.GetObject())
      if (m.value.IsNumber())
        out.push_back({std::string(prefix) + m.name.GetString(), m.value.GetDouble(), t, static_cast<int64_t>(e.step)});
    return out;
  }

  Host host_;
  std::string run_dir_, experiment_, run_name_, where_, config_json_, run_id_;
  int64_t every_ = 10;
  std::unique_ptr<mf::Store> store_;
};

}  // namespace

ZCODE_PLUGIN("mlflow", "0.1.0", "Apache-2.0",
             "MLflow tracking: a local mlruns file store or a tracking server's REST API",
             ZCODE_COMPONENT(MlflowCallback, "mlflow",
                             "Logs params (the resolved config), train and eval metrics, tags and artifacts to MLflow",
                             R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "tracking_uri":{"type":"string","description":"http(s)://host:port (REST), file:///path or a folder (file store); default logging.mlflow_tracking_uri, $MLFLOW_TRACKING_URI, else <run>/logs/mlflow"},
      "experiment_name":{"type":"string","minLength":1,"description":"MLflow experiment (default: the config's experiment_name)"},
      "run_name":{"type":"string","minLength":1,"description":"MLflow run name (default: the experiment name)"},
      "every":{"type":"integer","minimum":1,"description":"steps between metric points (default training.log_every)"},
      "flush_interval_s":{"type":"number","exclusiveMinimum":0,"default":5,"description":"REST: seconds between batched requests"},
      "timeout_s":{"type":"number","exclusiveMinimum":0,"default":10,"description":"REST: connect and read timeout per request"},
      "retries":{"type":"integer","minimum":0,"maximum":10,"default":3,"description":"REST: attempts after the first (backoff 0.5 s x 2^k)"}}})JS"))
