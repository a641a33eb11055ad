// core/src/step_metrics.h: the model's per-micro-batch metrics gathered
// into one optimizer step's values (the loop's STEP_END event).
#pragma once

#include <zcode/abi.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zcode::core {

// The keys the engine itself writes into a STEP_END event (a model metric of
// the same name is not repeated: JSON objects must not have duplicate keys).
inline bool engine_step_key(std::string_view name) {
  static constexpr std::string_view kKeys[] = {"loss",         "lr",
                                               "grad_norm",    "tokens",
                                               "tokens_per_s", "step_time_ms",
                                               "data_wait_ms", "data_wait_fraction",
                                               "eta_s",        "skipped",
                                               "comm_ms",      "sync_wait_ms",
                                               "slowest_rank", "slowest_rank_fb_ms"};
  for (std::string_view k : kKeys)
    if (k == name) return true;
  return false;
}

// Collects the model's per-micro-batch metrics into per-step values: loss-like
// quantities and token counts are summed over micro-batches (each micro-batch
// loss is already divided by the step's token count), everything else
// (moe_load_<e>, fractions) is averaged. Names are interned on first sight, so
// steady-state steps do not allocate.
struct StepSink {
  struct Entry {
    std::string name;
    double sum = 0;
    int count = 0;
    bool additive = false;
  };
  std::vector<Entry> entries;
  zc_metrics_sink sink{this, &StepSink::put_thunk};

  static void put_thunk(void* ctx, const char* name, double v) { static_cast<StepSink*>(ctx)->put(name, v); }
  void put(const char* name, double v) {
    for (Entry& e : entries)
      if (e.name == name) {
        e.sum += v;
        ++e.count;
        return;
      }
    Entry e;
    e.name = name;
    e.sum = v;
    e.count = 1;
    e.additive = e.name == "loss" || e.name == "ce_loss" || e.name == "aux_loss" || e.name == "z_loss" ||
                 e.name == "tokens" || e.name == "dropped_tokens";
    entries.push_back(std::move(e));
  }
  void reset() {
    for (Entry& e : entries) {
      e.sum = 0;
      e.count = 0;
    }
  }
  double value(const Entry& e) const { return e.additive ? e.sum : (e.count ? e.sum / e.count : 0); }
  std::optional<double> get(std::string_view name) const {
    for (const Entry& e : entries)
      if (e.name == name && e.count) return value(e);
    return std::nullopt;
  }
};

}  // namespace zcode::core
