// `checkpoint` and `early_stopping` callbacks (see callbacks.h).
#include "callbacks.h"

#include <zcode/sdk/json.h>

#include <cmath>

namespace zcode::callbacks {

Checkpoint::Checkpoint(const CreateContext& ctx) {
  every_ = every_option(ctx, "save_every", "callbacks.checkpoint.every");
}

uint32_t Checkpoint::on_event(const zc_event& e) {
  if (e.kind == ZC_EVENT_STEP_END && e.step > 0 && e.step % static_cast<uint64_t>(every_) == 0)
    return ZC_CALLBACK_REQUEST_CHECKPOINT;
  return 0;
}

EarlyStopping::EarlyStopping(const CreateContext& ctx) : host_(ctx.host()) {
  metric_ = ctx.options().get<std::string>("metric", "loss");
  patience_ = positive_option(ctx.options(), "patience", 3, "callbacks.early_stopping.patience");
  min_delta_ = ctx.options().get<double>("min_delta", 0.0);
  if (!(min_delta_ >= 0)) invalid_argument("callbacks.early_stopping.min_delta: expected a number >= 0");
}

uint32_t EarlyStopping::on_event(const zc_event& e) {
  if (e.kind != ZC_EVENT_EVAL_END) return 0;
  if (e.step == 0) return 0;  // training.eval_at_start: the untrained model is no candidate for "best"
  auto m = parse_metrics(e.metrics_json);
  const double v = num(m, metric_.c_str(), NAN);
  if (!std::isfinite(v)) {
    host_.warn("early_stopping", "metric '" + metric_ + "' not in the evaluation results; ignored");
    return 0;
  }
  if (!has_best_ || v < best_ - min_delta_) {
    best_ = v;
    has_best_ = true;
    bad_ = 0;
    return 0;
  }
  if (++bad_ < patience_) return 0;
  char b[160];
  std::snprintf(b, sizeof b, "val %s has not improved on %.6g for %lld evaluations: stopping", metric_.c_str(), best_,
                static_cast<long long>(bad_));
  host_.info("early_stopping", b);
  return ZC_CALLBACK_REQUEST_STOP;
}

void EarlyStopping::save_state(const StateWriter& w) {
  sdk::json::Writer j;
  j.begin_object().key("has_best").boolean(has_best_).key("best").number(has_best_ ? best_ : 0.0, 17);
  j.key("bad").integer(static_cast<long long>(bad_)).end_object();
  w.put_json(j.str());
}

void EarlyStopping::load_state(const StateReader& r) {
  if (r.json().empty()) return;
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag>(r.json().data(), r.json().size());
  if (d.HasParseError() || !d.IsObject()) throw Error(ZC_ERR_DATA, "early_stopping: state is not a JSON object");
  has_best_ = d.HasMember("has_best") && d["has_best"].IsBool() && d["has_best"].GetBool();
  best_ = num(d, "best", 0);
  bad_ = static_cast<int64_t>(num(d, "bad", 0));
}

}  // namespace zcode::callbacks
