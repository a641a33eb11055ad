// Config diffing on resume (see resume.h).
#include "resume.h"

#include <zcode/core/config.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <filesystem>
#include <map>
#include <string_view>

namespace zcode::core {

namespace fs = std::filesystem;

namespace {

// Flattens a JSON value into "a.b[0].c" -> compact value text.
void flatten(const rapidjson::Value& v, const std::string& path, std::map<std::string, std::string>& out) {
  if (v.IsObject()) {
    for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it)
      flatten(it->value, path.empty() ? it->name.GetString() : path + "." + it->name.GetString(), out);
  } else if (v.IsArray() && !v.Empty() && (v[0].IsObject() || v[0].IsArray())) {
    for (rapidjson::SizeType i = 0; i < v.Size(); ++i) flatten(v[i], path + "[" + std::to_string(i) + "]", out);
  } else {
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    v.Accept(w);
    out[path] = sb.GetString();
  }
}

// Two JSON string values naming the same file: equal, or one relative and
// equal to the other made absolute against the working directory.
bool same_file_value(const rapidjson::Value& a, const rapidjson::Value& b) {
  if (!a.IsString() || !b.IsString()) return false;
  std::error_code ec;
  const fs::path pa = fs::absolute(a.GetString(), ec).lexically_normal();
  if (ec) return false;
  const fs::path pb = fs::absolute(b.GetString(), ec).lexically_normal();
  return !ec && pa == pb;
}

// Two JSON texts naming the same file(s): strings as same_file_value, lists
// of strings (plugin_path) element by element (a run resumed with its run
// folder's config.yaml, which records absolute paths).
bool same_file_path(const std::string& a_json, const std::string& b_json) {
  rapidjson::Document a, b;
  a.Parse(a_json.c_str());
  b.Parse(b_json.c_str());
  if (a.HasParseError() || b.HasParseError()) return false;
  if (a.IsArray() && b.IsArray()) {
    if (a.Size() != b.Size()) return false;
    for (rapidjson::SizeType i = 0; i < a.Size(); ++i)
      if (!same_file_value(a[i], b[i])) return false;
    return true;
  }
  return same_file_value(a, b);
}

// Model fields that change neither the weights' layout nor what training
// computes beyond the last bits: evaluation's capacity (forward_eval) and the
// CPU blocking (model.blocking.*, which the checkpoint records and the model
// reuses unless the config pins it). A checkpoint can follow a change of them.
bool is_non_architecture_model_field(std::string_view path) {
  return path == "model.eval_capacity_factor" || path == "model.blocking" || path.rfind("model.blocking.", 0) == 0;
}

// The fields of the process layout: a resume may change them without a
// warning as long as the global batch stays, and is refused when it does not
// (zcode/core/dist/: the checkpoint is one logical checkpoint, whatever the
// number of ranks, ZeRO stage or accumulation, but a different global batch
// is a different run: its data position and schedule no longer match).
bool is_layout_field(std::string_view path) {
  return path == "hardware.devices" || path == "hardware.num_threads" || path == "training.gradient_accumulation" ||
         path == "distributed" || path.rfind("distributed.", 0) == 0;
}

// data.batch_size x training.gradient_accumulation x hardware.devices of a
// flattened resolved config (0 when a field is missing).
int64_t global_batch(const std::map<std::string, std::string>& f) {
  int64_t g = 1;
  for (const char* k : {"data.batch_size", "training.gradient_accumulation", "hardware.devices"}) {
    auto it = f.find(k);
    if (it == f.end()) return 0;
    try {
      g *= std::stoll(it->second);
    } catch (const std::exception&) {
      return 0;
    }
  }
  return g;
}

}  // namespace

std::string ConfigDiff::fatal_message() const {
  std::string m = "resume: the checkpoint cannot follow this change: " + fatal[0];
  if (fatal.size() > 1) m += " (and " + std::to_string(fatal.size() - 1) + " more)";
  return m;
}

ConfigDiff diff_resume_config(const std::string& checkpoint_json, const std::string& config_json,
                              const SchemaProvider* schemas) {
  ConfigDiff diff;
  std::string old_resolved = checkpoint_json;
  try {
    HarnessConfig old = HarnessConfig::from_string(checkpoint_json, "the checkpoint's config");
    old.validate(schemas);
    old_resolved = old.to_json();
  } catch (const std::exception&) {
    // Not valid under today's schemas: compare it as written (every
    // difference is reported below).
  }
  rapidjson::Document a, b;
  a.Parse(old_resolved.c_str());
  b.Parse(config_json.c_str());
  if (!a.IsObject() || !b.IsObject()) return diff;
  std::map<std::string, std::string> fa, fb;
  flatten(a, "", fa);
  flatten(b, "", fb);
  const int64_t batch_was = global_batch(fa), batch_now = global_batch(fb);
  auto value = [](const std::map<std::string, std::string>& f, const char* k) {
    auto it = f.find(k);
    return it == f.end() ? std::string("?") : it->second;
  };
  bool batch_said = false;
  auto report = [&](const std::string& path, const std::string& was, const std::string& now) {
    if (path == "overrides") return;
    if (is_layout_field(path) || path == "data.batch_size") {
      if (batch_was == batch_now) {
        if (path == "data.batch_size") diff.changed.push_back(path + ": checkpoint has " + was + ", config has " + now);
        return;  // another layout of the same run
      }
      if (batch_said) return;
      batch_said = true;  // one line for the product, however many of its factors changed
      diff.fatal.push_back(
          "the global batch (data.batch_size x training.gradient_accumulation x hardware.devices) changes from " +
          std::to_string(batch_was) + " (" + value(fa, "data.batch_size") + " x " +
          value(fa, "training.gradient_accumulation") + " x " + value(fa, "hardware.devices") + ") to " +
          std::to_string(batch_now) + " (" + value(fb, "data.batch_size") + " x " +
          value(fb, "training.gradient_accumulation") + " x " + value(fb, "hardware.devices") +
          "); a resume keeps it: on N processes set gradient_accumulation = " + std::to_string(batch_was) +
          " / (batch_size x N)");
      return;
    }
    if (HarnessConfig::is_path_field(path) && same_file_path(was, now)) return;
    const bool arch = (path.rfind("model.", 0) == 0 && !is_non_architecture_model_field(path)) ||
                      path.rfind("data.tokenizer", 0) == 0;
    (arch ? diff.fatal : diff.changed).push_back(path + ": checkpoint has " + was + ", config has " + now);
  };
  for (const auto& [k, v] : fa) {
    auto it = fb.find(k);
    if (it == fb.end()) report(k, v, "(absent)");
    else if (it->second != v) report(k, v, it->second);
  }
  for (const auto& [k, v] : fb)
    if (!fa.count(k)) report(k, "(absent)", v);
  return diff;
}

}  // namespace zcode::core
