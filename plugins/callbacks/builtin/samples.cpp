// `samples` callback (see callbacks.h): text from fixed prompts during training.
#include <zcode/generation/config_options.h>
#include <zcode/generation/generate.h>
#include <zcode/generation/model_decoder.h>
#include <zcode/sdk/buffers.h>
#include <zcode/sdk/file.h>
#include <zcode/sdk/json.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "callbacks.h"

namespace zcode::callbacks {

Samples::Samples(const CreateContext& ctx) : host_(ctx.host()), tokenizer_(ctx.tokenizer()) {
  const Options& o = ctx.options();
  every_ = every_option(ctx, "eval_every", "callbacks.samples.every");
  prompts_ = o.get_list<std::string>("prompts", {"The meaning of life is", "You will", "A fortune: "});
  if (prompts_.empty()) invalid_argument("callbacks.samples.prompts: expected at least one prompt, found []");
  opts_ = gen::options_from_config(ctx.config().object("generation"), ctx.config().get<uint64_t>("seed", 0),
                                   static_cast<int32_t>(o.get<int64_t>("max_new_tokens", 32)), "callbacks.samples");
  max_seq_len_ = static_cast<int32_t>(ctx.config().object("model").get<int64_t>("max_seq_len", 256));
  const std::string rel = o.get<std::string>("path", "logs/samples.jsonl");
  if (ctx.run_dir().empty() && !rel.starts_with("/"))
    invalid_argument("samples: no run folder (args.run_dir is empty)");
  path_ = rel.starts_with("/") ? rel : ctx.run_dir() + "/" + rel;
}

uint32_t Samples::on_event(const zc_event& e) {
  if (e.kind == ZC_EVENT_SETUP) {
    // A resumed run keeps the samples up to its checkpoint (as metrics.jsonl).
    const auto m = parse_metrics(e.metrics_json);
    resumed_ = static_cast<uint64_t>(num(m, "resumed_step", 0));
    open();  // now, so that a reader of the file (tensorboard) sees it settled from the start
    return 0;
  }
  const bool due =
      (e.kind == ZC_EVENT_STEP_END && e.step % static_cast<uint64_t>(every_) == 0) ||
      (e.kind == ZC_EVENT_TEARDOWN && e.step != last_ && !parse_metrics(e.metrics_json).HasMember("failed"));
  if (!due || !e.model.table || !tokenizer_) return 0;
  last_ = e.step;
  write(e.step, e.model);
  return 0;
}

void Samples::open() {
  if (!file_) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
    std::string kept;
    if (resumed_ > 0) {
      std::ifstream in(path_);
      for (std::string line; std::getline(in, line);) {
        rapidjson::Document d;
        d.Parse(line.c_str());
        if (!d.HasParseError() && d.IsObject() && d.HasMember("step") && d["step"].IsUint64() &&
            d["step"].GetUint64() <= resumed_)
          kept += line + '\n';
      }
    }
    sdk::write_file_atomic(path_, kept);
    file_ = std::fopen(path_.c_str(), "a");
    if (!file_) throw Error(ZC_ERR_IO, "samples: cannot open " + path_ + ": " + std::strerror(errno));
  }
}

void Samples::write(uint64_t step, zc_stage_ref model) {
  open();
  // The special ids of the tokenizer (info_json's bos_id / eos_id, -1 when absent).
  rapidjson::Document ti;
  ti.Parse(tokenizer_.info_json().c_str());
  auto id_of = [&](const char* k) { return ti.IsObject() && ti.HasMember(k) && ti[k].IsInt() ? ti[k].GetInt() : -1; };
  gen::ModelRefDecoder dec(host_.raw(), model, static_cast<int64_t>(tokenizer_.vocab_size()));
  for (const std::string& prompt : prompts_) {
    const std::vector<int32_t> ids = tokenizer_.encode(prompt);
    gen::Hooks hooks;
    hooks.warn = [this](const std::string& w) { host_.warn("samples", w); };
    const gen::Result r = gen::generate(dec, ids, opts_, id_of("bos_id"), id_of("eos_id"), max_seq_len_, hooks);
    const std::string text = tokenizer_.decode(r.generated);
    host_.info("samples", "step " + std::to_string(step) + ": " + prompt + "|" + text);
    json::Writer w;
    w.begin_object().key("step").integer(step).key("prompt").string(prompt).key("text").string(text);
    w.key("tokens").integer(static_cast<int64_t>(r.generated.size()));
    w.key("stop_reason").string(gen::stop_reason_name(r.reason)).key("strategy").string(opts_.strategy).end_object();
    const std::string line = w.str() + "\n";
    if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
      throw Error(ZC_ERR_IO, "samples: cannot write " + path_ + ": " + std::strerror(errno));
  }
}

Samples::~Samples() {
  if (file_) std::fclose(file_);
}

}  // namespace zcode::callbacks
