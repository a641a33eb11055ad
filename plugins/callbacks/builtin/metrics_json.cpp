// `metrics_json` callback (see callbacks.h).
#include "callbacks.h"

#include <zcode/sdk/file.h>
#include <zcode/sdk/json.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>

namespace zcode::callbacks {

namespace {
std::string with_step(const rapidjson::Value& m, uint64_t step) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("step");
  w.Uint64(step);
  for (auto it = m.MemberBegin(); it != m.MemberEnd(); ++it) {
    w.Key(it->name.GetString());
    it->value.Accept(w);
  }
  w.EndObject();
  return sb.GetString();
}
}  // namespace

MetricsJson::MetricsJson(const CreateContext& ctx) {
  every_ = every_option(ctx, "log_every", "callbacks.metrics_json.every");
  const std::string rel = ctx.options().get<std::string>("path", "metrics.json");
  if (ctx.run_dir().empty()) invalid_argument("metrics_json: no run folder (args.run_dir is empty)");
  path_ = rel.starts_with("/") ? rel : ctx.run_dir() + "/" + rel;
}

uint32_t MetricsJson::on_event(const zc_event& e) {
  switch (e.kind) {
    case ZC_EVENT_STEP_END: {
      if (e.step % static_cast<uint64_t>(every_) != 0 && e.step != 1 && e.step != e.max_steps) break;
      auto m = parse_metrics(e.metrics_json);
      last_train_ = with_step(m, e.step);
      if (!train_hist_.empty()) train_hist_ += ",";
      train_hist_ += last_train_;
      break;
    }
    case ZC_EVENT_EVAL_END: {
      auto m = parse_metrics(e.metrics_json);
      last_val_ = with_step(m, e.step);
      if (!val_hist_.empty()) val_hist_ += ",";
      val_hist_ += last_val_;
      const double loss = num(m, "loss", NAN);
      // Step 0 (training.eval_at_start) is the untrained model: history only,
      // never "best" (there is no checkpoint of it), as the engine counts it.
      if (e.step > 0 && std::isfinite(loss) && (!has_best_ || loss < best_)) {
        best_ = loss;
        best_step_ = e.step;
        has_best_ = true;
      }
      write();
      break;
    }
    case ZC_EVENT_CHECKPOINT:
    case ZC_EVENT_TEARDOWN: write(); break;
    default: break;
  }
  return 0;
}

// last_train_, last_val_ ("{}" until the first record) and the histories
// (records joined by ',') are JSON text already (with_step): spliced verbatim.
void MetricsJson::write() const {
  json::Writer w;
  w.begin_object().key("final").begin_object();
  w.key("train").raw(last_train_).key("val").raw(last_val_).end_object();
  w.key("best");
  if (has_best_) w.begin_object().key("val_loss").number(best_, 17).key("step").integer(best_step_).end_object();
  else w.null();
  w.key("history").begin_object();
  w.key("train").begin_array().raw(train_hist_).end_array();
  w.key("val").begin_array().raw(val_hist_).end_array();
  w.end_object().end_object();
  write_file_atomic(path_, w.str() + "\n");
}

void MetricsJson::save_state(const StateWriter& w) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> jw(sb);
  jw.StartObject();
  jw.Key("train_history");
  jw.String(train_hist_.c_str());
  jw.Key("val_history");
  jw.String(val_hist_.c_str());
  jw.Key("last_train");
  jw.String(last_train_.c_str());
  jw.Key("last_val");
  jw.String(last_val_.c_str());
  jw.Key("has_best");
  jw.Bool(has_best_);
  jw.Key("best");
  jw.Double(has_best_ ? best_ : 0.0);
  jw.Key("best_step");
  jw.Uint64(best_step_);
  jw.EndObject();
  w.put_json(sb.GetString());
}

void MetricsJson::load_state(const StateReader& r) {
  if (r.json().empty()) return;
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag>(r.json().data(), r.json().size());
  if (d.HasParseError() || !d.IsObject()) throw Error(ZC_ERR_DATA, "metrics_json: state is not a JSON object");
  auto str = [&](const char* k) {
    if (!d.HasMember(k) || !d[k].IsString())
      throw Error(ZC_ERR_DATA, std::string("metrics_json: state lacks \"") + k + "\"");
    return std::string(d[k].GetString(), d[k].GetStringLength());
  };
  train_hist_ = str("train_history");
  val_hist_ = str("val_history");
  last_train_ = str("last_train");
  last_val_ = str("last_val");
  has_best_ = d.HasMember("has_best") && d["has_best"].IsBool() && d["has_best"].GetBool();
  best_ = num(d, "best", 0);
  best_step_ = static_cast<uint64_t>(num(d, "best_step", 0));
}

}  // namespace zcode::callbacks
