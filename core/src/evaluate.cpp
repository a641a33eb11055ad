// Evaluation: every evaluator over a split, in the loop (EVAL_END) and as
// `zcode-host evaluate` (Engine::evaluate).
#include <zcode/core/dist/launch.h>
#include <zcode/core/log.h>
#include <zcode/sdk/json.h>

#include "engine_impl.h"

#include <cmath>
#include <cstdio>
#include <optional>

namespace zcode {

namespace fs = std::filesystem;
using namespace engine_detail;

namespace {

// Plain name -> value sink for the evaluators.
struct MapSink {
  std::vector<std::pair<std::string, double>> values;
  std::string prefix;
  zc_metrics_sink sink{this, &MapSink::put_thunk};
  static void put_thunk(void* ctx, const char* name, double v) {
    auto* s = static_cast<MapSink*>(ctx);
    s->values.emplace_back(s->prefix + name, v);
  }
};

void put_metrics(sdk::json::Writer& w, const std::vector<std::pair<std::string, double>>& values) {
  for (const auto& [k, v] : values) w.key(k).number(v, 17);
}

// Name -> value; a name reported twice keeps its last value.
std::map<std::string, double> by_name(const std::vector<std::pair<std::string, double>>& values) {
  std::map<std::string, double> m;
  for (const auto& [k, v] : values) m[k] = v;
  return m;
}

}  // namespace

std::string engine_detail::metrics_json(const std::vector<std::pair<std::string, double>>& values) {
  sdk::json::Writer w;
  w.begin_object();
  put_metrics(w, values);
  w.end_object();
  return w.str();
}

std::vector<std::pair<std::string, double>> Engine::Impl::run_evaluation(const std::string& split) {
  // Under expert parallelism every rank's evaluators run the same batches
  // through a collective forward: none may stop early on its own (a signal
  // reaches the ranks at different moments). The loop acts on a stop once
  // the ranks agree, after the evaluation.
  std::optional<StopDeferral> together;
  if (expert_parallel()) together.emplace();
  const StageInstance& data = eval_data(split);
  MapSink sink;
  for (auto& [name, ev] : evaluators) {
    sink.prefix = name == "lm" ? "" : name + "_";
    check_plugin_call(*ev.component(), "evaluate",
                      ev.component()->as<zc_evaluator_table>()->evaluate(ev.get(), data.ref(), &sink.sink));
  }
  return std::move(sink.values);
}

uint32_t Engine::Impl::evaluate_and_emit(bool count_best) {
  const auto te = Clock::now();
  std::vector<std::pair<std::string, double>> values;
  try {
    values = run_evaluation(cfg.evaluation().split);
  } catch (const PluginError&) {
    if (!stop_requested()) throw;
    log::warn("Evaluation at step " + std::to_string(step) + " interrupted by the stop request");
    return 0;
  }
  if (count_best) {
    last_val_json = metrics_json(values);
    const auto m = by_name(values);
    if (auto it = m.find("loss"); it != m.end() && it->second < best_val_loss) {
      best_val_loss = it->second;
      best_step = step;
    }
  }
  sdk::json::Writer w;
  w.begin_object();
  put_metrics(w, values);
  w.key("best_val_loss").number(best_val_loss, 17);
  w.key("best_step").number(static_cast<double>(best_step), 17);
  w.key("eval_time_ms").number(ms_since(te), 17);
  w.end_object();
  return emit(ZC_EVENT_EVAL_END, w.str());
}

void Engine::Impl::run_peer_evaluation() {
  try {
    (void)run_evaluation(cfg.evaluation().split);
  } catch (const PluginError&) {
    if (!stop_requested()) throw;
  }
}

int Engine::evaluate(const std::string& checkpoint, const std::string& split, const std::string& out_json) {
  return evaluate(checkpoint, split, out_json, nullptr);
}

int Engine::evaluate(const std::string& checkpoint, const std::string& split, const std::string& out_json,
                     std::vector<std::pair<std::string, double>>* metrics) {
  Impl& m = *impl_;
  try {
    dist::require_one_process("evaluate");
    if (split != "val" && split != "train")
      throw RunFailure("--split: '" + split + "' is not one of val, train", kExitUsageError);
    m.make_registry();
    m.run_dir = fs::path(m.cfg.logging().output_dir) / m.cfg.experiment_name();
    fs::path dir = ckpt::resolve(checkpoint, m.run_dir);
    auto ck = ckpt::load_checkpoint(dir, ckpt::Parts::kModelOnly);
    m.create_core_stages(false);
    m.restore(ck, true);
    const auto values = m.run_evaluation(split);
    const auto vals = by_name(values);
    // A NaN or infinite loss is a broken model, not a result (the JSON would
    // say "loss": null and a script would take exit 0 as success).
    if (auto it = vals.find("loss"); it != vals.end() && !std::isfinite(it->second))
      throw RunFailure("evaluate: " + dir.string() + " gives a " + (std::isnan(it->second) ? "NaN" : "non-finite") +
                           " loss on the " + split + " split (the weights are not usable: diverged or corrupted)",
                       kExitRuntimeError);
    std::string line = "Evaluation of " + dir.string() + " on " + split + ":";
    for (const auto& [k, v] : vals) {
      char b[64];
      std::snprintf(b, sizeof b, " %s %.6g", k.c_str(), v);
      line += b;
    }
    // The result: {"checkpoint","step","split","metrics"}; as a record on
    // stdout it starts with "event":"evaluate".
    auto result = [&](bool record) {
      sdk::json::Writer w;
      w.begin_object();
      if (record) w.key("event").string("evaluate");
      w.key("checkpoint").string(dir.string()).key("step").integer(ck.step).key("split").string(split);
      w.key("metrics").begin_object();
      put_metrics(w, values);
      w.end_object().end_object();
      return w.str();
    };
    if (log::console_format() == log::Format::Json) {
      // The result is a record on stdout, shown under --quiet too (it is what
      // the command is for, not a log line); the text form stays at DEBUG.
      log::write_record(result(true), true);
      log::debug(line);
    } else {
      log::info(line);
    }
    if (!out_json.empty()) {
      ckpt::write_file_atomic(out_json, result(false) + "\n");
      log::info("Metrics written to " + out_json);
    }
    if (metrics) *metrics = values;
    return kExitOk;
  } catch (...) {
    return report("evaluate");
  }
}

}  // namespace zcode
