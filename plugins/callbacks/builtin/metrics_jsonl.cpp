// `metrics_jsonl` callback (see callbacks.h): the live metrics stream.
#include "callbacks.h"

#include <zcode/sdk/file.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace zcode::callbacks {

MetricsJsonl::MetricsJsonl(const CreateContext& ctx) {
  every_ = every_option(ctx, "log_every", "callbacks.metrics_jsonl.every");
  const std::string rel = ctx.options().get<std::string>("path", "logs/metrics.jsonl");
  if (ctx.run_dir().empty()) invalid_argument("metrics_jsonl: no run folder (args.run_dir is empty)");
  path_ = rel.starts_with("/") ? rel : ctx.run_dir() + "/" + rel;
}

MetricsJsonl::~MetricsJsonl() {
  if (file_) std::fclose(file_);
}

// A fresh run starts the file empty. A resumed run keeps the records of the
// steps up to its checkpoint (a line torn by a crash does not parse and goes
// too), rewritten atomically before anything is appended.
void MetricsJsonl::open(uint64_t resumed_step) {
  if (file_) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  std::string kept;
  if (resumed_step > 0) {
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      rapidjson::Document d;
      d.Parse(line.c_str());
      if (d.HasParseError() || !d.IsObject() || !d.HasMember("step") || !d["step"].IsUint64()) continue;
      if (d["step"].GetUint64() <= resumed_step) kept += line + '\n';
    }
  }
  sdk::write_file_atomic(path_, kept);
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw sdk::Error(ZC_ERR_IO, "metrics_jsonl: cannot open " + path_ + ": " + std::strerror(errno));
}

void MetricsJsonl::append(const std::string& record) {
  if (!file_) open(0);  // events without a SETUP first (a host that sends none)
  const std::string line = record + '\n';
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw sdk::Error(ZC_ERR_IO, "metrics_jsonl: cannot write " + path_ + ": " + std::strerror(errno));
}

uint32_t MetricsJsonl::on_event(const zc_event& e) {
  switch (e.kind) {
    case ZC_EVENT_SETUP: {
      const auto m = parse_metrics(e.metrics_json);
      open(static_cast<uint64_t>(num(m, "resumed_step", 0)));
      break;
    }
    case ZC_EVENT_STEP_END:
      if (log_step(e.step, e.max_steps, every_)) append(event_record("step", e, parse_metrics(e.metrics_json)));
      break;
    case ZC_EVENT_EVAL_END: append(event_record("eval", e, parse_metrics(e.metrics_json))); break;
    case ZC_EVENT_TEARDOWN:
      if (file_) {
        std::fclose(file_);
        file_ = nullptr;
      }
      break;
    default: break;
  }
  return 0;
}

}  // namespace zcode::callbacks
