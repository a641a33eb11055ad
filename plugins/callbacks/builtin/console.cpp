// `console` callback (see callbacks.h).
#include "callbacks.h"

#include <unistd.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <cstdio>
#include <string_view>

namespace zcode::callbacks {

Console::Console(const CreateContext& ctx) : host_(ctx.host()) {
  every_ = every_option(ctx, "log_every", "callbacks.console.every");
  const std::string bar = ctx.options().get<std::string>("progress_bar", "auto");
  if (bar != "auto" && bar != "on" && bar != "off")
    invalid_argument("callbacks.console.progress_bar: expected auto, on or off, found \"" + bar + "\"");
  bar_ = bar == "on" || (bar == "auto" && ::isatty(STDOUT_FILENO));  // the bar goes with the step lines
  const std::string format = ctx.options().get<std::string>("log_format", "text");
  if (format != "text" && format != "json")
    invalid_argument("callbacks.console.log_format: expected text or json, found \"" + format + "\"");
  json_ = format == "json";
  if (json_) bar_ = false;
}

std::string event_record(const char* kind, const zc_event& e, const rapidjson::Value& metrics) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("event");
  w.String(kind);
  w.Key("step");
  w.Uint64(e.step);
  w.Key("max_steps");
  w.Uint64(e.max_steps);
  for (auto it = metrics.MemberBegin(); it != metrics.MemberEnd(); ++it) {
    const std::string_view k(it->name.GetString(), it->name.GetStringLength());
    if (k == "event" || k == "step" || k == "max_steps") continue;
    w.Key(it->name.GetString(), it->name.GetStringLength());
    it->value.Accept(w);
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

void Console::print_json(const char* kind, const zc_event& e, const rapidjson::Value& metrics) const {
  // Through the host's logger (component "zcode.record", abi.h): one write
  // under its lock, so a JSON line is never split by another thread's line,
  // and --quiet / a disabled console apply.
  host_.log(ZC_LOG_INFO, "zcode.record", event_record(kind, e, metrics));
}

namespace {
std::string eta(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long long v = static_cast<long long>(s + 0.5);
  char b[32];
  std::snprintf(b, sizeof b, "%lld:%02lld:%02lld", v / 3600, (v / 60) % 60, v % 60);
  return b;
}
}  // namespace

uint32_t Console::on_event(const zc_event& e) {
  if (e.kind == ZC_EVENT_STEP_END) {
    auto m = parse_metrics(e.metrics_json);
    const bool line = log_step(e.step, e.max_steps, every_);
    if (bar_ && bar_shown_ && line) {
      std::fputs("\r\033[K", stdout);
      bar_shown_ = false;
    }
    if (line) {
      char b[512];
      int n = std::snprintf(
          b, sizeof b, "Step %llu/%llu | loss: %.4f | lr: %.4g | grad_norm: %.3g | tokens/s: %.0f | data_wait: %.0f%%",
          static_cast<unsigned long long>(e.step), static_cast<unsigned long long>(e.max_steps), num(m, "loss", NAN),
          num(m, "lr", NAN), num(m, "grad_norm", NAN), num(m, "tokens_per_s", 0),
          100.0 * num(m, "data_wait_fraction", 0));
      std::string s(b, static_cast<size_t>(n));
      // min-max of the numbers whose key starts with `prefix`, as " | label: lo-hi".
      auto range = [&](std::string_view prefix, const char* label) {
        double lo = INFINITY, hi = -INFINITY;
        for (auto it = m.MemberBegin(); it != m.MemberEnd(); ++it)
          if (std::string_view(it->name.GetString()).starts_with(prefix) && it->value.IsNumber()) {
            lo = std::min(lo, it->value.GetDouble());
            hi = std::max(hi, it->value.GetDouble());
          }
        if (!std::isfinite(lo)) return;
        std::snprintf(b, sizeof b, " | %s: %.3f-%.3f", label, lo, hi);
        s += b;
      };
      range("moe_load_", "moe_load");
      range("moe_rank_load_", "expert ranks");  // expert parallelism: each expert-group rank's experts
      if (m.HasMember("moe_dropped_fraction")) {
        std::snprintf(b, sizeof b, " | dropped: %.1f%%", 100.0 * num(m, "moe_dropped_fraction", 0));
        s += b;
      }
      if (m.HasMember("comm_ms")) {  // several ranks: exposed communication, the wait for the slowest rank
        std::snprintf(b, sizeof b, " | comm: %.0f ms, wait %.0f ms | slowest: rank %.0f, fwd/bwd %.0f ms",
                      num(m, "comm_ms", 0), num(m, "sync_wait_ms", 0), num(m, "slowest_rank", 0),
                      num(m, "slowest_rank_fb_ms", 0));
        s += b;
      }
      if (num(m, "skipped", 0) > 0) s += " | SKIPPED (non-finite)";
      s += " | ETA " + eta(num(m, "eta_s", NAN));
      if (json_) print_json("step", e, m);
      host_.log(json_ ? ZC_LOG_DEBUG : ZC_LOG_INFO, "", s);
    } else if (bar_) {
      const int width = 30;
      const double frac = e.max_steps ? static_cast<double>(e.step) / static_cast<double>(e.max_steps) : 0;
      const int fill = static_cast<int>(frac * width);
      std::string bar(static_cast<size_t>(fill), '=');
      bar.resize(width, ' ');
      std::fprintf(stdout, "\r[%s] %llu/%llu loss %.4f ETA %s\033[K", bar.c_str(),
                   static_cast<unsigned long long>(e.step), static_cast<unsigned long long>(e.max_steps),
                   num(m, "loss", NAN), eta(num(m, "eta_s", NAN)).c_str());
      std::fflush(stdout);
      bar_shown_ = true;
    }
  } else if (e.kind == ZC_EVENT_EVAL_END) {
    if (bar_ && bar_shown_) {
      std::fputs("\r\033[K", stdout);
      bar_shown_ = false;
    }
    auto m = parse_metrics(e.metrics_json);
    char b[512];
    if (e.step == 0) {  // training.eval_at_start: the untrained model
      std::snprintf(b, sizeof b, "Step 0/%llu | val_loss: %.4f | val_ppl: %.4g | bits/byte: %.4f",
                    static_cast<unsigned long long>(e.max_steps), num(m, "loss", NAN), num(m, "perplexity", NAN),
                    num(m, "bits_per_byte", NAN));
      if (json_) print_json("eval", e, m);
      host_.log(json_ ? ZC_LOG_DEBUG : ZC_LOG_INFO, "", b);
      return 0;
    }
    std::snprintf(b, sizeof b,
                  "Eval at step %llu | val loss: %.4f | perplexity: %.4g | bits/byte: %.4f | accuracy: %.4f",
                  static_cast<unsigned long long>(e.step), num(m, "loss", NAN), num(m, "perplexity", NAN),
                  num(m, "bits_per_byte", NAN), num(m, "accuracy", NAN));
    if (json_) print_json("eval", e, m);
    host_.log(json_ ? ZC_LOG_DEBUG : ZC_LOG_INFO, "", b);
  } else if (e.kind == ZC_EVENT_TEARDOWN && bar_ && bar_shown_) {
    std::fputs("\r\033[K", stdout);
    bar_shown_ = false;
  }
  return 0;
}

}  // namespace zcode::callbacks
