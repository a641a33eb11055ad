// zcode-host run | train | evaluate | profile: validate the config, then hand
// it to zcode::Engine (core/include/zcode/core/engine.h).
#include "cli_common.h"
#include "commands.h"

#include <zcode/core/log.h>

#include <zcode/core/checkpoint.h>
#include <zcode/core/dist/launch.h>
#include <zcode/core/engine.h>

#include <iostream>
#include <optional>

namespace zcode::host {
namespace {

struct RunFlags {
  std::string config;
  std::vector<std::string> sets;
  PluginFlags plugins;
  bool overwrite = false;
  std::string resume_from;
  bool quiet = false;
  std::string log_format = "text";
};

// --quiet and --log-format (run, train, evaluate): the console's lines only;
// logs/console.log keeps everything as text.
void add_output_options(po::options_description& d, RunFlags& f) {
  d.add_options()("quiet,q", po::bool_switch(&f.quiet),
                  "print only warnings and errors (stderr); logs/console.log keeps everything")(
      "log-format", po::value(&f.log_format)->default_value("text"),
      "text or json (one JSON object a line: step and eval events with their metrics; other lines as level, "
      "component, message)");
}

// Applies the output flags; kUsageError (after saying why) for a bad format.
std::optional<int> apply_output_options(const std::string& cmd, const RunFlags& f) {
  auto format = log::parse_format(f.log_format);
  if (!format) {
    std::cerr << "zcode-host " << cmd << ": --log-format: expected text or json, found '" << f.log_format << "'\n";
    return kUsageError;
  }
  log::set_console_format(*format);
  log::set_console_quiet(f.quiet);
  return std::nullopt;
}

void add_run_options(po::options_description& d, RunFlags& f, bool config_flag) {
  if (config_flag) d.add_options()("config,c", po::value(&f.config)->required(), "experiment config (YAML or JSON)");
  d.add_options()("set", po::value<std::vector<std::string>>(&f.sets)->composing(),
                  "override a config field before validation, e.g. --set optimizer.lr=1e-3 (repeatable)")(
      "overwrite", po::bool_switch(&f.overwrite), "reuse a run folder that already holds a run")(
      "resume-from", po::value(&f.resume_from), "resume from a checkpoint folder (.../checkpoints/step_N) or 'latest'");
  add_output_options(d, f);
  f.plugins.add_to(d);
}

EngineOptions engine_options(const RunFlags& f) {
  EngineOptions o;
  o.plugin_paths = f.plugins.paths;
  o.allow_insecure_plugin_path = f.plugins.allow_insecure;
  o.overwrite = f.overwrite;
  o.resume_from = f.resume_from;
  o.overrides = f.sets;
  o.config_path = f.config;
  return o;
}

int train_like(const std::string& cmd, const std::vector<std::string>& args, bool config_flag,
               const CommandHelp& help) {
  RunFlags f;
  po::options_description d("options");
  add_run_options(d, f, config_flag);
  po::positional_options_description pos;
  if (!config_flag) {
    d.add_options()("config", po::value(&f.config)->required(), "experiment config (YAML or JSON)");
    pos.add("config", 1);
  }
  po::variables_map vm;
  if (auto rc = parse_args(cmd, args, d, pos, vm, help)) return *rc;
  if (auto rc = apply_output_options(cmd, f)) return *rc;
  try {
    // Under a launcher, ranks other than 0 say only errors on the console
    // (the engine gives them logs/rank_N.log once the run folder exists).
    if (dist::detect_launch().rank != 0) log::set_console_level(log::Level::Error);
    log::info("Loading config from " + f.config);
    ValidatedConfig vc;
    if (auto rc = load_and_validate(f.config, f.sets, f.plugins, vc)) return *rc;
    Engine engine(std::move(vc.config), engine_options(f));
    return engine.run();
  } catch (...) {
    return report_current_exception(cmd);
  }
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  return train_like("run", args, false,
                    {"zcode-host run CONFIG [--set k=v]... [--plugin-path P]... [--allow-insecure-plugin-path] "
                     "[--overwrite] [--resume-from P|latest] [--quiet] [--log-format text|json]",
                     "Validate CONFIG, then train, evaluate and checkpoint as it says.",
                     "  zcode-host run examples/quickstart/config.yaml --set training.max_steps=50"});
}

int cmd_train(const std::vector<std::string>& args) {
  return train_like("train", args, true,
                    {"zcode-host train --config C [--resume-from P|latest] [options]",
                     "The same as `run`, with the guide's flag spelling.",
                     "  zcode-host train --config config.yaml --resume-from latest"});
}

int cmd_evaluate(const std::vector<std::string>& args) {
  const CommandHelp help{"zcode-host evaluate [--config C] --checkpoint P --split val|train [--out metrics.json]",
                         "Evaluate a checkpoint with the config's evaluators, data loader and tokenizer; no training. "
                         "Without --config, the config stored in the checkpoint is used.",
                         "  zcode-host evaluate --checkpoint outputs/glm5pt2_hello/checkpoints/latest --split val "
                         "--out val.json"};
  RunFlags f;
  std::string checkpoint, split, out;
  po::options_description d("options");
  d.add_options()("config,c", po::value(&f.config),
                  "experiment config (YAML or JSON; default: the one stored in the checkpoint)")(
      "checkpoint", po::value(&checkpoint)->required(),
      "checkpoint: a step folder (.../checkpoints/step_N), .../checkpoints/latest, a checkpoints/ or run folder, "
      "or 'latest' (with --config)")("split", po::value(&split)->default_value("val"), "val or train")(
      "out", po::value(&out), "also write the metrics as JSON to this file")(
      "set", po::value<std::vector<std::string>>(&f.sets)->composing(), "override a config field (repeatable)");
  add_output_options(d, f);
  f.plugins.add_to(d);
  po::variables_map vm;
  if (auto rc = parse_args("evaluate", args, d, {}, vm, help)) return *rc;
  if (auto rc = apply_output_options("evaluate", f)) return *rc;
  if (split != "val" && split != "train") {
    std::cerr << "zcode-host evaluate: --split: '" << split << "' is not one of val, train\n";
    return kUsageError;
  }
  try {
    ValidatedConfig vc;
    if (f.config.empty()) {
      // As `generate` does: the config the checkpoint was trained with.
      if (checkpoint == "latest") {
        std::cerr << "zcode-host evaluate: --checkpoint latest needs --config (to find the run folder); or give "
                     "the path, e.g. outputs/<experiment>/checkpoints/latest\n";
        return kUsageError;
      }
      // Only state.json here: Engine::evaluate reads and verifies the whole checkpoint.
      const std::filesystem::path dir = ckpt::resolve(checkpoint, ".");
      const std::string text = ckpt::stored_config_json(dir);
      if (auto rc = load_and_validate((dir / "state.json").string(), f.sets, f.plugins, vc, &text)) return *rc;
      checkpoint = dir.string();
    } else if (auto rc = load_and_validate(f.config, f.sets, f.plugins, vc)) {
      return *rc;
    }
    Engine engine(std::move(vc.config), engine_options(f));
    return engine.evaluate(checkpoint, split, out);
  } catch (...) {
    return report_current_exception("evaluate");
  }
}

int cmd_profile(const std::vector<std::string>& args) {
  const CommandHelp help{"zcode-host profile --config C --steps N [options]",
                         "Run N training steps without checkpoints and write a Chrome trace (trace.json) "
                         "into the run folder.",
                         "  zcode-host profile --config config.yaml --steps 50"};
  RunFlags f;
  int steps = 0;
  po::options_description d("options");
  d.add_options()("config,c", po::value(&f.config)->required(), "experiment config (YAML or JSON)")(
      "steps", po::value(&steps)->required(), "training steps to trace (>= 1)")(
      "set", po::value<std::vector<std::string>>(&f.sets)->composing(), "override a config field (repeatable)")(
      "overwrite", po::bool_switch(&f.overwrite), "reuse a run folder that already holds a run");
  f.plugins.add_to(d);
  po::variables_map vm;
  if (auto rc = parse_args("profile", args, d, {}, vm, help)) return *rc;
  if (steps < 1) {
    std::cerr << "zcode-host profile: --steps: " << steps << " is not >= 1\n";
    return kUsageError;
  }
  try {
    ValidatedConfig vc;
    if (auto rc = load_and_validate(f.config, f.sets, f.plugins, vc)) return *rc;
    Engine engine(std::move(vc.config), engine_options(f));
    return engine.profile(steps);
  } catch (...) {
    return report_current_exception("profile");
  }
}

}  // namespace zcode::host
