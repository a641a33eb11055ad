// The bundled callbacks plugin: registration and small shared helpers.
#include "callbacks.h"

namespace zcode::callbacks {

rapidjson::Document parse_metrics(const char* json) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag>(json && *json ? json : "{}");
  if (d.HasParseError() || !d.IsObject()) d.Parse("{}");
  return d;
}

double num(const rapidjson::Value& obj, const char* key, double fallback) {
  if (!obj.IsObject()) return fallback;
  auto it = obj.FindMember(key);
  return it != obj.MemberEnd() && it->value.IsNumber() ? it->value.GetDouble() : fallback;
}

}  // namespace zcode::callbacks

using namespace zcode::callbacks;

ZCODE_PLUGIN(
    "callbacks", "0.1.0", "Apache-2.0",
    "Bundled callbacks: console, metrics_json, metrics_jsonl, samples, checkpoint, early_stopping, debugger, "
    "model_card",
    ZCODE_COMPONENT(Console, "console", "Step lines every log_every steps (progress bar on a TTY) and evaluation lines",
                    R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "every":{"type":"integer","minimum":1,"description":"steps between lines (default training.log_every)"},
      "progress_bar":{"type":"string","enum":["auto","on","off"],"default":"auto","description":"live bar on stdout (auto: when stdout is a TTY; off with --quiet or --log-format json)"},
      "log_format":{"type":"string","enum":["text","json"],"default":"text","description":"json: step and evaluation events as JSON objects on stdout, the text lines at DEBUG (the host sets it for --log-format json)"}}})JS"),
    ZCODE_COMPONENT(MetricsJson, "metrics_json",
                    "Writes metrics.json: final and best train/val metrics and their history",
                    R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "every":{"type":"integer","minimum":1,"description":"steps between train history entries (default training.log_every)"},
      "path":{"type":"string","minLength":1,"default":"metrics.json","description":"file, relative to the run folder"}}})JS"),
    ZCODE_COMPONENT(MetricsJsonl, "metrics_jsonl",
                    "Appends logs/metrics.jsonl: one JSON record per log step and per evaluation, flushed",
                    R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "every":{"type":"integer","minimum":1,"description":"steps between step records (default training.log_every)"},
      "path":{"type":"string","minLength":1,"default":"logs/metrics.jsonl","description":"file, relative to the run folder"}}})JS"),
    ZCODE_COMPONENT(Samples, "samples",
                    "Generates from fixed prompts every `every` steps and at the end: console and logs/samples.jsonl",
                    R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "every":{"type":"integer","minimum":1,"description":"steps between samples (default training.eval_every)"},
      "prompts":{"type":"array","minItems":1,"items":{"type":"string"},"default":["The meaning of life is","You will","A fortune: "],"description":"prompts, each sampled with the generation section's strategy"},
      "max_new_tokens":{"type":"integer","minimum":1,"maximum":4096,"default":32,"description":"tokens generated per prompt"},
      "path":{"type":"string","minLength":1,"default":"logs/samples.jsonl","description":"file, relative to the run folder"}}})JS"),
    ZCODE_COMPONENT(Checkpoint, "checkpoint", "Asks the engine for a checkpoint every `every` steps",
                    R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "every":{"type":"integer","minimum":1,"description":"steps between checkpoints (default training.save_every)"}}})JS"),
    ZCODE_COMPONENT(EarlyStopping, "early_stopping", "Stops training when a validation metric stops improving",
                    R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "metric":{"type":"string","default":"loss","description":"validation metric, lower is better"},
      "patience":{"type":"integer","minimum":1,"default":3,"description":"evaluations without improvement before stopping"},
      "min_delta":{"type":"number","minimum":0,"default":0,"description":"smallest decrease that counts as improvement"}}})JS"),
    ZCODE_COMPONENT(Debugger, "debugger", "Per-group gradient/parameter norms and magnitude histograms to JSONL",
                    R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "every":{"type":"integer","minimum":1,"default":100,"description":"steps between records"},
      "bins":{"type":"integer","minimum":2,"maximum":200,"default":20,"description":"histogram bins over log10|x| in [-12, 2)"},
      "path":{"type":"string","minLength":1,"default":"logs/debug.jsonl","description":"file, relative to the run folder"}}})JS"),
    ZCODE_COMPONENT(ModelCard, "model_card", "Renders model_card.md at the end of a run (Mustache)",
                    R"JS({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},
      "watts_per_core":{"type":"number","exclusiveMinimum":0,"default":10,"description":"assumed average power per busy CPU core, W"},
      "pue":{"type":"number","minimum":1,"default":1.0,"description":"power usage effectiveness of the machine room"},
      "kg_co2_per_kwh":{"type":"number","minimum":0,"default":0.475,"description":"grid carbon intensity, kg CO2e per kWh"}}})JS"))
