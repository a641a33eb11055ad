// `zcode-host generate`: tokenizer + model from the config, weights from a
// verified checkpoint, then gen::generate over the model's KV cache.
#include <zcode/core/checkpoint.h>
#include <zcode/core/config.h>
#include <zcode/core/dist/launch.h>
#include <zcode/core/generate.h>
#include <zcode/core/host_services.h>
#include <zcode/core/inference_model.h>
#include <zcode/core/log.h>
#include <zcode/core/registry.h>
#include <zcode/core/serve/text_stream.h>
#include <zcode/core/stage_factory.h>
#include <zcode/generation/model_decoder.h>
#include <zcode/sdk/buffers.h>

#include <rapidjson/document.h>

#include <algorithm>
#include <thread>

namespace zcode::gen {

namespace fs = std::filesystem;

namespace {

// The SDK's decoder over a model's decode_* slots, with the host's errors
// (check_plugin_call: the component and the slot named).
class ModelDecoder : public ModelRefDecoder {
 public:
  ModelDecoder(const StageInstance& model, int64_t vocab)
      : ModelRefDecoder(process_host_services(), zc_stage_ref{model.component()->table, model.get()}, vocab),
        comp_(*model.component()) {}

 protected:
  void check(const char* slot, zc_status* st) override { check_plugin_call(comp_, slot, st); }

 private:
  const Component& comp_;
};

// A flag the chosen strategy ignores is a mistake, not a no-op: `--top-p 0.9`
// with greedy decoding would silently print the greedy text. Only flags given
// on the command line are checked (the config's generation section holds
// every field, with defaults).
void check_flags_fit_strategy(const Command& c, const GenerationOptions& o) {
  const std::string where =
      c.strategy ? "--strategy " + o.strategy : "strategy '" + o.strategy + "' (generation.strategy; set --strategy)";
  auto only = [&](bool given, const char* flag, const std::vector<std::string>& users, const char* what) {
    if (!given || std::find(users.begin(), users.end(), o.strategy) != users.end()) return;
    std::string names;
    for (const auto& u : users) names += (names.empty() ? "--strategy " : " or ") + u;
    throw InferenceUsageError(std::string(flag) + " is used only by " + names + " (" + what + "), not by " + where);
  };
  only(c.temperature.has_value(), "--temperature", {"sample"}, "sampling temperature");
  only(c.top_p.has_value(), "--top-p", {"sample"}, "nucleus sampling");
  only(c.top_k.has_value(), "--top-k", {"sample", "contrastive"},
       "sampling: the k most likely tokens; contrastive: candidates");
  only(c.num_beams.has_value(), "--num-beams", {"beam"}, "beam width");
  only(c.length_penalty.has_value(), "--length-penalty", {"beam"}, "beam score / length^length_penalty");
  only(c.penalty_alpha.has_value(), "--penalty-alpha", {"contrastive"}, "degeneration penalty");
  if (o.strategy == "beam" && o.num_beams < 2)
    throw InferenceUsageError("--strategy beam needs --num-beams >= 2, found " + std::to_string(o.num_beams));
}

// The penalties steer greedy and sample token by token; beam and contrastive
// search do not take them (validate() refuses them too, naming the option).
void check_penalty_flags_fit_strategy(const Command& c, const GenerationOptions& o) {
  const char* flag = c.presence_penalty      ? "--presence-penalty"
                     : c.frequency_penalty   ? "--frequency-penalty"
                     : !c.logit_bias.empty() ? "--logit-bias"
                                             : nullptr;
  if (!flag) return;
  const std::string where =
      c.strategy ? "--strategy " + o.strategy : "strategy '" + o.strategy + "' (generation.strategy; set --strategy)";
  throw InferenceUsageError(std::string(flag) + " is used only by --strategy greedy or sample, not by " + where);
}

}  // namespace

int run_command(const Command& c, std::ostream& out) {
  try {
    dist::require_one_process("generate");
    // 1. Config, tokenizer, model and weights.
    InferenceModel im(
        InferenceSource{c.checkpoint, c.config_path, c.sets, c.plugin_paths, c.allow_insecure_plugin_path});
    const HarnessConfig& cfg = im.config();

    // 2. Options: defaults <- config.generation <- command line.
    const GenerationConfig& g = cfg.generation();
    GenerationOptions o;
    o.strategy = c.strategy.value_or(g.strategy);
    o.temperature = c.temperature.value_or(g.temperature);
    o.top_k = c.top_k.value_or(static_cast<int32_t>(g.top_k));
    o.top_p = c.top_p.value_or(g.top_p);
    o.num_beams =
        c.num_beams.value_or(static_cast<int32_t>(std::max<int64_t>(g.num_beams, o.strategy == "beam" ? 2 : 1)));
    o.length_penalty = c.length_penalty.value_or(g.length_penalty);
    o.penalty_alpha = c.penalty_alpha.value_or(g.penalty_alpha);
    o.max_new_tokens = c.max_new_tokens.value_or(static_cast<int32_t>(g.max_new_tokens));
    o.seed = c.seed.value_or(g.seed.value_or(cfg.seed()));
    o.stop = g.stop;
    o.stop.insert(o.stop.end(), c.stop.begin(), c.stop.end());
    o.presence_penalty = c.presence_penalty.value_or(0.0);
    o.frequency_penalty = c.frequency_penalty.value_or(0.0);
    o.logit_bias = c.logit_bias;
    // Before validate(), so the message names the flag, not generation.* (these
    // options come only from the command line).
    if (o.strategy == "beam" || o.strategy == "contrastive") check_penalty_flags_fit_strategy(c, o);
    for (const auto& [id, bias] : o.logit_bias)
      if (id < 0 || id >= im.vocab_size())
        throw InferenceUsageError("--logit-bias: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(im.vocab_size()) + ")");
    try {
      validate(o);
    } catch (const std::invalid_argument& e) {
      throw InferenceUsageError(e.what());
    }
    check_flags_fit_strategy(c, o);

    const int32_t bos = im.bos_id(), eos = im.eos_id();

    // 3. Encode, generate, decode.
    const std::vector<int32_t> ids_buf = im.encode(c.prompt);
    auto decode = [&](std::span<const int32_t> ids) { return im.decode(ids); };
    // Text is cut before the first stop string; streaming holds back what a
    // stop string could still claim and any part of a UTF-8 character
    // (serve::TextStream, the server's rule too). Every strategy but beam
    // reports each token as it is chosen: the stream sees the text once per
    // token and says when a stop string appeared. Beam reports only its final
    // hypothesis, so its hypotheses are checked as they grow.
    serve::TextStream stream(o.stop);
    const bool incremental = o.strategy != "beam";
    std::vector<int32_t> so_far;
    Hooks hooks;
    hooks.warn = [](const std::string& w) { log::warn(w); };
    if (incremental)
      hooks.on_token = [&](int32_t id) {
        so_far.push_back(id);
        bool stopped = false;
        const std::string piece = stream.push(decode(so_far), &stopped);
        if (c.stream) out << piece << std::flush;
      };
    if (!o.stop.empty()) {
      if (incremental) hooks.should_stop = [&](std::span<const int32_t>) { return stream.stopped(); };
      else
        hooks.should_stop = [&](std::span<const int32_t> gen) {
          return serve::first_stop(decode(gen), o.stop) != std::string_view::npos;
        };
    }
    ModelDecoder dec(im.model(), im.vocab_size());
    Result r = generate(dec, ids_buf, o, bos, eos, static_cast<int32_t>(cfg.model().max_seq_len), hooks);
    const std::string rest = stream.finish(decode(r.generated));
    out << (c.stream && incremental ? rest : stream.text()) << "\n" << std::flush;
    log::debug("generate: " + std::to_string(r.generated.size()) + " tokens, stopped by " + stop_reason_name(r.reason));
    return 0;
  } catch (...) {
    return inference_command_failed("generate");
  }
}

}  // namespace zcode::gen
