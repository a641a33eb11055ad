// `prometheus` callback: the run's metrics as a Prometheus /metrics endpoint
// (text exposition format 0.0.4, served by prometheus-cpp's civetweb
// Exposer). See README.md for the metric names.
#include <zcode/sdk/collectives.h>
#include <zcode/sdk/plugin.h>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "cadence.h"

namespace {

using namespace zcode::sdk;

// A metric key as a Prometheus name and the factor its value is scaled by,
// after Prometheus's naming practice (what `promtool check metrics` lints):
// base units spelled out (…_ms -> …_seconds / 1000, …_s -> …_seconds,
// per_s -> per_second), no "bits" (bits_per_byte -> bpb, bits_per_char ->
// bpc), no prefix twice (eval_time_ms -> zcode_eval_time_seconds), and only
// [a-zA-Z0-9_] (a third party's model metric names).
struct Named {
  std::string name;
  double scale = 1;
};
Named metric_name(const std::string& prefix, std::string key) {
  double scale = 1;
  auto ends = [&](std::string_view suffix) { return key.ends_with(suffix); };
  auto swap_end = [&](size_t cut, const char* with) { key = key.substr(0, key.size() - cut) + with; };
  if (ends("_per_s")) {
    swap_end(1, "second");
  } else if (ends("_ms")) {
    swap_end(2, "seconds");
    scale = 1e-3;
  } else if (ends("_s")) {
    swap_end(1, "seconds");
  }
  if (key == "bits_per_byte") key = "bpb";
  if (key == "bits_per_char") key = "bpc";
  const std::string bare = prefix.substr(std::string("zcode_").size());  // "train_", "eval_"
  if (key.starts_with(bare)) key = key.substr(bare.size());
  std::string n = prefix + key;
  for (char& c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) c = '_';
  return {n, scale};
}

// Resident set size in bytes (/proc/self/statm's second field, in pages).
double resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) : 0;
}

// The number after `"key":` in a flat JSON object, without parsing the rest
// (every step, so no allocation); 0 when absent.
double scan_number(const char* json, const char* quoted_key_colon) {
  const char* p = json ? std::strstr(json, quoted_key_colon) : nullptr;
  return p ? std::strtod(p + std::strlen(quoted_key_colon), nullptr) : 0;
}

class PrometheusExporter : public Callback {
 public:
  explicit PrometheusExporter(const CreateContext& ctx)
      : host_(ctx.host()), registry_(std::make_shared<prometheus::Registry>()) {
    const Options& o = ctx.options();
    const std::string bind_host = o.get<std::string>("host", "127.0.0.1");
    const int64_t port = o.get<int64_t>("port", 9464);
    if (port < 0 || port > 65535)
      invalid_argument("callbacks.prometheus.port: expected an integer in [0, 65535], found " + std::to_string(port));
    linger_s_ = o.get<double>("linger_s", 0);
    if (!(linger_s_ >= 0 && linger_s_ <= 3600))
      invalid_argument("callbacks.prometheus.linger_s: expected a number in [0, 3600], found " +
                       std::to_string(linger_s_));
    every_ = zcode::callbacks::every_option(ctx, "log_every", "callbacks.prometheus.every");
    labels_ = {{"experiment", ctx.config().get<std::string>("experiment_name", "")},
               {"rank", std::to_string(Collectives(ctx.host().raw()).rank())}};
    steps_ = &prometheus::BuildCounter()
                  .Name("zcode_train_steps_total")
                  .Help("Optimizer steps taken by this process")
                  .Labels(labels_)
                  .Register(*registry_)
                  .Add({});
    tokens_ = &prometheus::BuildCounter()
                   .Name("zcode_train_tokens_total")
                   .Help("Target tokens trained on by this process")
                   .Labels(labels_)
                   .Register(*registry_)
                   .Add({});
    evals_ = &prometheus::BuildCounter()
                  .Name("zcode_evaluations_total")
                  .Help("Evaluations run by this process")
                  .Labels(labels_)
                  .Register(*registry_)
                  .Add({});
    bind_ = bind_host + ":" + std::to_string(port);
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(bind_, 1);
    } catch (const std::exception& ex) {
      throw Error(ZC_ERR_IO, "callbacks.prometheus: cannot serve /metrics on " + bind_ + " (" + ex.what() +
                                 "); is the port in use? set another port, or 0 for any free one");
    }
    exposer_->RegisterCollectable(registry_);
    const auto ports = exposer_->GetListeningPorts();
    host_.info("prometheus", "serving /metrics on http://" + bind_host + ":" +
                                 (ports.empty() ? std::to_string(port) : std::to_string(ports.front())) + "/metrics");
  }

  uint32_t on_event(const zc_event& e) override {
    switch (e.kind) {
      case ZC_EVENT_STEP_END:
        steps_->Increment();
        tokens_->Increment(scan_number(e.metrics_json, "\"tokens\":"));
        if (zcode::callbacks::log_step(e.step, e.max_steps, every_)) {
          gauge("zcode_step", "Optimizer step of the last update").Set(static_cast<double>(e.step));
          gauge("zcode_max_steps", "training.max_steps").Set(static_cast<double>(e.max_steps));
          gauge("zcode_resident_memory_bytes", "Resident set size of this process").Set(resident_bytes());
          set_all("zcode_train_", e.metrics_json, {});
        }
        break;
      case ZC_EVENT_EVAL_END:
        evals_->Increment();
        set_all("zcode_eval_", e.metrics_json, {{"split", "val"}});
        break;
      case ZC_EVENT_TEARDOWN: linger(); break;
      default: break;
    }
    return 0;
  }

 private:
  prometheus::Gauge& gauge(const std::string& name, const std::string& help, const prometheus::Labels& extra = {}) {
    auto it = families_.find(name);
    if (it == families_.end())
      it = families_.emplace(name, &prometheus::BuildGauge().Name(name).Help(help).Labels(labels_).Register(*registry_))
               .first;
    return it->second->Add(extra);  // the same gauge again for the same labels
  }

  // Every number of an event's metrics object as a gauge; the model's
  // per-expert loads (moe_load_<e>) as one gauge with an `expert` label.
  void set_all(const std::string& prefix, const char* json, const prometheus::Labels& extra) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(json && *json ? json : "{}");
    if (d.HasParseError() || !d.IsObject()) return;
    for (const auto& m : d.GetObject()) {
      if (!m.value.IsNumber()) continue;
      const std::string key = m.name.GetString();
      static constexpr const char kLoad[] = "moe_load_";
      if (key.starts_with(kLoad) && key.size() > sizeof(kLoad) - 1 &&
          key.find_first_not_of("0123456789", sizeof(kLoad) - 1) == std::string::npos) {
        prometheus::Labels l = extra;
        l["expert"] = key.substr(sizeof(kLoad) - 1);
        gauge(prefix + "moe_load", "Share of routed assignments per expert", l).Set(m.value.GetDouble());
      } else {
        const Named n = metric_name(prefix, key);
        gauge(n.name, "'" + key + "' of logs/metrics.jsonl" + (n.scale != 1 ? " / 1000" : ""), extra)
            .Set(m.value.GetDouble() * n.scale);
      }
    }
  }

  // Keeps /metrics up for linger_s after the run so that a scrape can read
  // the last values (a short run may end between two scrapes); not when the
  // run is stopping on a signal.
  void linger() const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(linger_s_);
    while (std::chrono::steady_clock::now() < until && !host_.stop_requested())
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  Host host_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Labels labels_;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> families_;
  prometheus::Counter* steps_ = nullptr;
  prometheus::Counter* tokens_ = nullptr;
  prometheus::Counter* evals_ = nullptr;
  std::string bind_;
  int64_t every_ = 10;
  double linger_s_ = 0;
};

}  // namespace

ZCODE_PLUGIN(
    "prometheus", "0.1.0", "Apache-2.0", "Prometheus /metrics endpoint for a run's metrics",
    ZCODE_COMPONENT(PrometheusExporter, "prometheus",
                    "Serves the run's step and evaluation metrics as Prometheus gauges and counters (zcode_* names)",
                    R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "host":{"type":"string","minLength":1,"default":"127.0.0.1","description":"address to listen on (0.0.0.0: every interface)"},
      "port":{"type":"integer","minimum":0,"maximum":65535,"default":9464,"description":"TCP port; 0 = any free port (logged)"},
      "every":{"type":"integer","minimum":1,"description":"steps between gauge updates (default training.log_every)"},
      "linger_s":{"type":"number","minimum":0,"maximum":3600,"default":0,"description":"seconds /metrics stays up after the run, for a last scrape"}}})JS"))
