// zcode-host serve: an OpenAI-compatible HTTP server over a checkpoint
// (logic in core/src/serve/; this file only parses flags).
#include "cli_common.h"
#include "commands.h"

#include <zcode/core/dist/launch.h>
#include <zcode/core/log.h>
#include <zcode/core/serve/server.h>

#include <cstdlib>
#include <iostream>

namespace zcode::host {

int cmd_serve(const std::vector<std::string>& args) {
  // stdout carries the one "listening on" line (scripts read the port there): log lines go to stderr.
  log::set_data_on_stdout(true);
  const CommandHelp help{
      "zcode-host serve --checkpoint P [--host 127.0.0.1] [--port 8000] [options]",
      "Serve a checkpoint over HTTP with OpenAI's API (completions, chat, streaming) and continuous batching.",
      "  zcode-host serve --checkpoint outputs/glm5pt2_hello/checkpoints/latest --port 8000\n"
      "  curl -s localhost:8000/v1/completions -H 'Content-Type: application/json' \\\n"
      "      -d '{\"model\": \"glm5pt2_hello\", \"prompt\": \"Hello\", \"max_tokens\": 20, \"temperature\": 0}'"};
  InferenceSource src;
  serve::ServerOptions o;
  PluginFlags plugins;
  double max_body_mb = static_cast<double>(o.max_body_bytes) / (1 << 20);
  po::options_description d("options");
  d.add_options()(
      "checkpoint", po::value(&src.checkpoint)->required(),
      "checkpoint: a step folder, .../checkpoints/latest, a checkpoints/ or run folder, or 'latest' (with --config)")(
      "config,c", po::value(&src.config_path), "config (default: the one stored in the checkpoint)")(
      "set", po::value<std::vector<std::string>>(&src.sets)->composing(), "override a config field (repeatable)")(
      "host", po::value(&o.host)->default_value(o.host), "address to listen on (loopback unless told otherwise)")(
      "port", po::value(&o.port)->default_value(o.port), "port; 0 = any free port (printed)")(
      "api-key", po::value(&o.api_key),
      "require 'Authorization: Bearer KEY' on /v1/* (default: $ZCODE_API_KEY, else no check)")(
      "slots", po::value(&o.scheduler.slots)->default_value(o.scheduler.slots),
      "sequences decoded together (KV-cache slots, allocated at start)")(
      "max-len", po::value(&o.scheduler.max_len)->default_value(o.scheduler.max_len),
      "tokens per slot, prompt and completion; 0 = model.max_seq_len")(
      "prefill-chunk", po::value(&o.scheduler.prefill_chunk)->default_value(o.scheduler.prefill_chunk),
      "prompt tokens of one sequence per decode step")(
      "max-step-tokens", po::value(&o.scheduler.max_step_tokens)->default_value(o.scheduler.max_step_tokens),
      "tokens through the model per step, decode and prompt chunks; 0 = slots + 4 x prefill-chunk")(
      "max-queue", po::value(&o.scheduler.max_queue)->default_value(o.scheduler.max_queue),
      "sequences waiting for a slot; more get 429")("timeout",
                                                    po::value(&o.request_timeout_s)->default_value(o.request_timeout_s),
                                                    "seconds a request may run (then 504)")(
      "max-prompt-tokens", po::value(&o.max_prompt_tokens)->default_value(o.max_prompt_tokens),
      "longest prompt accepted; 0 = the context - 1")("max-tokens-limit",
                                                      po::value(&o.max_tokens_limit)->default_value(o.max_tokens_limit),
                                                      "largest max_tokens accepted; 0 = the context - 1")(
      "max-n", po::value(&o.max_n)->default_value(o.max_n), "choices per request (n)")(
      "max-body-mb", po::value(&max_body_mb)->default_value(max_body_mb), "request body limit in MiB (then 413)");
  plugins.add_to(d);
  po::positional_options_description pos;
  po::variables_map vm;
  if (auto rc = parse_args("serve", args, d, pos, vm, help)) return *rc;
  if (!vm.count("api-key"))
    if (const char* k = std::getenv("ZCODE_API_KEY")) o.api_key = k;
  if (!(max_body_mb > 0)) {
    std::cerr << "zcode-host serve: --max-body-mb: " << max_body_mb << " must be > 0\n";
    return kUsageError;
  }
  if (o.port < 0 || o.port > 65535) {
    std::cerr << "zcode-host serve: --port: " << o.port << " is outside 0..65535\n";
    return kUsageError;
  }
  if (!(o.request_timeout_s > 0 && o.request_timeout_s <= 1e6)) {
    std::cerr << "zcode-host serve: --timeout: " << o.request_timeout_s << " must be in (0, 1e6] seconds\n";
    return kUsageError;
  }
  if (!(max_body_mb <= 1024)) {
    std::cerr << "zcode-host serve: --max-body-mb: " << max_body_mb << " must be <= 1024\n";
    return kUsageError;
  }
  if (o.max_n < 1) {
    std::cerr << "zcode-host serve: --max-n: " << o.max_n << " must be >= 1\n";
    return kUsageError;
  }
  if (o.max_prompt_tokens < 0 || o.max_tokens_limit < 0) {
    std::cerr << "zcode-host serve: --max-prompt-tokens and --max-tokens-limit must be >= 0 (0: the context)\n";
    return kUsageError;
  }
  o.max_body_bytes = static_cast<size_t>(max_body_mb * (1 << 20));
  src.plugin_paths = plugins.paths;
  src.allow_insecure_plugin_path = plugins.allow_insecure;
  try {
    dist::require_one_process("serve");
  } catch (const std::exception& e) {
    log::error(e.what());
    return kUsageError;
  }
  return serve::run_serve_command(src, o);
}

}  // namespace zcode::host
