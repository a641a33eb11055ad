// The Engine: setup -> train/eval -> checkpoint -> teardown (see engine.h).
//
// Division of labour with the callbacks (plugins/callbacks/):
//   - the engine owns the loop, the stages, checkpoint WRITING (atomic folder,
//     `latest`, keep_last_n) and the lifecycle log lines;
//   - the `checkpoint` callback decides the cadence (ZC_CALLBACK_REQUEST_CHECKPOINT
//     every `every` steps, default training.save_every); the engine also writes
//     one at the end and when stopped by a signal or the non-finite guard;
//   - `console` prints the step lines / progress bar, `metrics_json` writes
//     metrics.json, `model_card` renders model_card.md from the TEARDOWN summary.
#include <zcode/core/engine.h>

#include <zcode/core/checkpoint.h>
#include <zcode/core/config.h>
#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/core/preflight.h>
#include <zcode/core/registry.h>
#include <zcode/core/run_dir.h>
#include <zcode/core/train_step.h>

#include "trace.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

namespace zcode {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// ---- JSON helpers -----------------------------------------------------------

// Appends `"name":value` to a JSON object being built in `out` (no allocation
// once `out` has grown to its steady size).
void json_num(std::string& out, const char* name, double v) {
  char buf[96];
  int n;
  if (std::isfinite(v)) n = std::snprintf(buf, sizeof buf, "%s\"%s\":%.17g", out.size() > 1 ? "," : "", name, v);
  else n = std::snprintf(buf, sizeof buf, "%s\"%s\":null", out.size() > 1 ? "," : "", name);
  out.append(buf, static_cast<size_t>(std::max(0, std::min<int>(n, static_cast<int>(sizeof buf) - 1))));
}

std::string json_escape(std::string_view s) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return sb.GetString();
}

bool is_json(const std::string& s) {
  rapidjson::Document d;
  d.Parse(s.c_str());
  return !d.HasParseError();
}

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

// Model fields that only change evaluation (forward_eval), not the weights'
// layout or what training computes: a checkpoint can follow a change of them.
bool is_eval_only_model_field(std::string_view path) { return path == "model.eval_capacity_factor"; }

// ---- metrics sink -----------------------------------------------------------

// The keys the engine itself writes into a STEP_END event (a model metric of
// the same name is not repeated: JSON objects must not have duplicate keys).
bool engine_step_key(std::string_view name) {
  static constexpr std::string_view kKeys[] = {"loss",         "lr",           "grad_norm",    "tokens",
                                               "tokens_per_s", "step_time_ms", "data_wait_ms", "data_wait_fraction",
                                               "eta_s",        "skipped"};
  for (std::string_view k : kKeys)
    if (k == name) return true;
  return false;
}

// Collects the model's per-micro-batch metrics into per-step values: loss-like
// quantities and token counts are summed over micro-batches (each micro-batch
// loss is already divided by the step's token count), everything else
// (moe_load_<e>, fractions) is averaged. Names are interned on first sight, so
// steady-state steps do not allocate.
struct StepSink {
  struct Entry {
    std::string name;
    double sum = 0;
    int count = 0;
    bool additive = false;
  };
  std::vector<Entry> entries;
  zc_metrics_sink sink{this, &StepSink::put_thunk};

  static void put_thunk(void* ctx, const char* name, double v) { static_cast<StepSink*>(ctx)->put(name, v); }
  void put(const char* name, double v) {
    for (Entry& e : entries)
      if (e.name == name) {
        e.sum += v;
        ++e.count;
        return;
      }
    Entry e;
    e.name = name;
    e.sum = v;
    e.count = 1;
    e.additive = e.name == "loss" || e.name == "ce_loss" || e.name == "aux_loss" || e.name == "z_loss" ||
                 e.name == "tokens" || e.name == "dropped_tokens";
    entries.push_back(std::move(e));
  }
  void reset() {
    for (Entry& e : entries) {
      e.sum = 0;
      e.count = 0;
    }
  }
  double value(const Entry& e) const { return e.additive ? e.sum : (e.count ? e.sum / e.count : 0); }
  std::optional<double> get(std::string_view name) const {
    for (const Entry& e : entries)
      if (e.name == name && e.count) return value(e);
    return std::nullopt;
  }
};

// Plain name -> value sink for evaluators and the data loader's stats.
struct MapSink {
  std::vector<std::pair<std::string, double>> values;
  std::string prefix;
  zc_metrics_sink sink{this, &MapSink::put_thunk};
  static void put_thunk(void* ctx, const char* name, double v) {
    auto* s = static_cast<MapSink*>(ctx);
    s->values.emplace_back(s->prefix + name, v);
  }
};

// ---- signals ----------------------------------------------------------------

struct sigaction g_old_int, g_old_term;
volatile sig_atomic_t g_signals = 0;

void on_signal(int) {
  if (g_signals != 0) _exit(kExitInterrupted);  // a second Ctrl-C: stop now
  g_signals = 1;
  request_stop();
}

struct SignalScope {
  bool active = false;
  explicit SignalScope(bool install) {
    if (!install) return;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_signals = 0;
    active = true;
  }
  ~SignalScope() {
    if (!active) return;
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
  }
};

// A fatal problem of a run: message and exit code.
struct RunFailure : std::runtime_error {
  int code;
  RunFailure(const std::string& m, int c) : std::runtime_error(m), code(c) {}
};

}  // namespace

// ---------------------------------------------------------------------------

struct Engine::Impl {
  HarnessConfig cfg;
  EngineOptions opts;
  fs::path run_dir;
  std::string config_json;
  std::unique_ptr<Registry> registry;
  std::unique_ptr<HostServices> host;

  // Stages (declaration order = reverse destruction order: dependents last).
  StageInstance tokenizer, train_data, val_data, model, optimizer, scheduler;
  // A second loader over the train split for evaluation.split: train, so that
  // evaluating never moves the training iterator.
  StageInstance eval_train_data;
  std::vector<std::pair<std::string, StageInstance>> evaluators;  // name, instance
  std::vector<std::pair<std::string, StageInstance>> callbacks;   // "callbacks[i].type", instance

  // Loop state.
  uint64_t step = 0;  // optimizer steps done
  uint64_t tokens_seen = 0;
  double best_val_loss = INFINITY;
  uint64_t best_step = 0;
  double wall_s_before = 0;     // wall time of earlier segments of a resumed run
  bool resumed = false;         // restored from a checkpoint (no step-0 evaluation)
  bool run_dir_opened = false;  // run() prepared a fresh (not resumed) run folder
  std::string last_train_json = "{}", last_val_json = "{}";
  std::unique_ptr<core::NonfiniteGuard> guard;

  Impl(HarnessConfig c, EngineOptions o) : cfg(std::move(c)), opts(std::move(o)) {}

  ~Impl() {
    // Dependents first: callbacks and evaluators hold the model/tokenizer.
    callbacks.clear();
    evaluators.clear();
    scheduler.reset();
    optimizer.reset();
    eval_train_data.reset();
    val_data.reset();
    train_data.reset();
    model.reset();
    tokenizer.reset();
  }

  // ---- setup ---------------------------------------------------------------

  void make_registry() {
    if (registry) return;
    PluginSearchOptions so;
    for (const auto& p : opts.plugin_paths) so.cli_paths.emplace_back(p);
    for (const auto& p : cfg.plugin_path()) so.config_paths.emplace_back(p);
    so.allow_insecure = opts.allow_insecure_plugin_path;
    registry = std::make_unique<Registry>(so);
    if (!cfg.validated()) cfg.validate(registry.get());
    log::set_console_level(static_cast<log::Level>(cfg.logging().console_log_level));
    config_json = cfg.to_json();
    int threads = static_cast<int>(cfg.hardware().num_threads);
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    host = std::make_unique<HostServices>(cfg.seed(), threads, DLDevice{kDLCPU, 0});
  }

  zc_create_args args(const std::string& options, zc_stage_ref tok = {}, zc_stage_ref mdl = {},
                      const char* split = nullptr) const {
    zc_create_args a{};
    a.struct_size = sizeof(zc_create_args);
    a.host = host->raw();
    a.options_json = options.c_str();
    a.config_json = config_json.c_str();
    a.run_dir = run_dir.c_str();
    a.tokenizer = tok;
    a.model = mdl;
    a.split = split;
    return a;
  }

  void create_tokenizer() {
    if (tokenizer) return;  // preflight created it
    const std::string tok_opts = cfg.section_json("data.tokenizer");
    const auto& tc = registry->require(ZC_KIND_TOKENIZER, cfg.data().tokenizer_type, "data.tokenizer");
    tokenizer = StageInstance(tc, args(tok_opts));
  }

  // The memory estimate (see Engine::preflight): logged, then checked
  // against what the machine has left, before any buffer exists.
  void check_memory(bool training) {
    const std::string model_opts = cfg.section_json("model");
    const auto& mc = registry->require(ZC_KIND_MODEL, cfg.model().type, "model.type");
    const Component* oc =
        training ? &registry->require(ZC_KIND_OPTIMIZER, cfg.optimizer().name, "optimizer.name") : nullptr;
    const std::string opt_opts = cfg.section_json("optimizer");
    const MemoryEstimate est = estimate_run_memory(mc, args(model_opts, tokenizer.ref()), oc, args(opt_opts));
    const auto avail = available_memory_bytes();
    char b[64];
    std::snprintf(b, sizeof b, "%.1f MiB", avail ? static_cast<double>(*avail) / (1024.0 * 1024.0) : 0.0);
    log::info("Memory estimate: " + est.describe() + (avail ? std::string(" of ") + b + " available" : std::string()));
    for (const std::string& u : est.unknown) log::warn("Memory estimate unknown for " + u);
    if (avail && est.known_total() > *avail)
      throw ConfigValidationError(
          cfg.origin(), {{"data.batch_size",
                          "the run needs about " + est.describe() + ", more than the " + b +
                              " this machine has available (MemAvailable, cgroup limit); lower data.batch_size (raise "
                              "training.gradient_accumulation to keep the tokens per step) or model.max_seq_len, or "
                              "evaluation.batch_size when it is the larger"}});
  }

  // Engine::preflight: files, tokenizer, memory; nothing written.
  void preflight(bool training) {
    make_registry();
    EnvironmentCheckOptions eo;
    eo.training = training;
    if (auto errors = check_environment(cfg, eo); !errors.empty())
      throw ConfigValidationError(cfg.origin(), std::move(errors));
    create_tokenizer();
    check_memory(training);
  }

  void create_core_stages(bool training) {
    create_tokenizer();
    const std::string model_opts = cfg.section_json("model");
    const auto& mc = registry->require(ZC_KIND_MODEL, cfg.model().type, "model.type");
    model = StageInstance(mc, args(model_opts, tokenizer.ref()));
    if (training) {
      const std::string data_opts = cfg.section_json("data");
      const auto& dc = registry->require(ZC_KIND_DATALOADER, cfg.data().loader, "data.loader");
      train_data = StageInstance(dc, args(data_opts, tokenizer.ref(), {}, "train"));
      const std::string opt_opts = cfg.section_json("optimizer");
      const auto& oc = registry->require(ZC_KIND_OPTIMIZER, cfg.optimizer().name, "optimizer.name");
      optimizer = StageInstance(oc, args(opt_opts, {}, model.ref()));
      const std::string sch_opts = cfg.section_json("scheduler");
      const auto& sc = registry->require(ZC_KIND_SCHEDULER, cfg.scheduler().type, "scheduler.type");
      scheduler = StageInstance(sc, args(sch_opts));
    }
    const std::string eval_opts = cfg.section_json("evaluation");
    for (const auto& name : cfg.evaluation().plugins) {
      const auto& ec = registry->require(ZC_KIND_EVALUATOR, name, "evaluation.plugins");
      evaluators.emplace_back(name, StageInstance(ec, args(eval_opts, tokenizer.ref(), model.ref())));
    }
  }

  // The resolved list: the defaults merged with the config's entries
  // (HarnessConfig's merge_callbacks), in that order.
  void create_callbacks() {
    const auto& list = cfg.callbacks();
    // --quiet and --log-format json: no progress bar between the lines
    // (it would be the only non-JSON, non-warning output on stdout); with
    // json (and not quiet) the console prints its events as JSON objects.
    const bool quiet = log::console_quiet();
    const bool json = log::console_format() == log::Format::Json && !quiet;
    const bool no_bar = quiet || json;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = "callbacks[" + std::to_string(i) + "].type";
      const auto& cc = registry->require(ZC_KIND_CALLBACK, list[i].type, where);
      std::string options = list[i].options_json;
      if (no_bar && list[i].type == "console") {
        rapidjson::Document d;
        d.Parse(options.c_str());
        if (!d.HasParseError() && d.IsObject()) {
          d.RemoveMember("progress_bar");
          d.AddMember("progress_bar", "off", d.GetAllocator());
          if (json) {
            d.RemoveMember("log_format");
            d.AddMember("log_format", "json", d.GetAllocator());
          }
          rapidjson::StringBuffer sb;
          rapidjson::Writer<rapidjson::StringBuffer> w(sb);
          d.Accept(w);
          options = sb.GetString();
        }
      }
      callbacks.emplace_back("callbacks[" + std::to_string(i) + "]." + list[i].type,
                             StageInstance(cc, args(options, tokenizer.ref(), model.ref())));
    }
  }

  // The loader an evaluation of `split` reads (created on first use).
  const StageInstance& eval_data(const std::string& split) {
    StageInstance& slot = split == "train" ? eval_train_data : val_data;
    if (!slot) {
      const std::string data_opts = cfg.section_json("data");
      const auto& dc = registry->require(ZC_KIND_DATALOADER, cfg.data().loader, "data.loader");
      slot = StageInstance(dc, args(data_opts, tokenizer.ref(), {}, split == "train" ? "train" : "val"));
    }
    return slot;
  }

  // ---- info ----------------------------------------------------------------

  std::string tokenizer_info() const {
    const char* j = nullptr;
    check_plugin_call(*tokenizer.component(), "info_json",
                      tokenizer.component()->as<zc_tokenizer_table>()->info_json(tokenizer.get(), &j));
    return j && is_json(j) ? j : "{}";
  }
  std::string model_info() const {
    const char* j = nullptr;
    check_plugin_call(*model.component(), "info_json",
                      model.component()->as<zc_model_table>()->info_json(model.get(), &j));
    return j && is_json(j) ? j : "{}";
  }
  std::pair<uint64_t, uint64_t> num_params() const {
    uint64_t t = 0, a = 0;
    check_plugin_call(*model.component(), "num_params",
                      model.component()->as<zc_model_table>()->num_params(model.get(), &t, &a));
    return {t, a};
  }
  std::string provenance() const {
    if (!train_data) return "[]";
    const char* j = nullptr;
    check_plugin_call(*train_data.component(), "provenance_json",
                      train_data.component()->as<zc_dataloader_table>()->provenance_json(train_data.get(), &j));
    return j && is_json(j) ? j : "[]";
  }

  // ---- events ----------------------------------------------------------------

  uint32_t emit(zc_event_kind kind, const std::string& metrics_json) {
    zc_event e{};
    e.struct_size = sizeof(zc_event);
    e.kind = kind;
    e.step = step;
    e.max_steps = static_cast<uint64_t>(cfg.training().max_steps);
    e.metrics_json = metrics_json.c_str();
    e.model = model.ref();
    uint32_t all = 0;
    for (auto& [name, cb] : callbacks) {
      uint32_t flags = 0;
      check_plugin_call(*cb.component(), "on_event",
                        cb.component()->as<zc_callback_table>()->on_event(cb.get(), &e, &flags));
      all |= flags;
    }
    return all;
  }

  // ---- state -------------------------------------------------------------------

  // Every stage with state, under its state.json key, and the file its
  // tensors go to.
  struct StageSlot {
    std::string key;
    const StageInstance* inst;
    ckpt::TensorFile file;
  };
  std::vector<StageSlot> stage_slots() const {
    using ckpt::TensorFile;
    std::vector<StageSlot> s;
    if (tokenizer) s.push_back({"tokenizer", &tokenizer, TensorFile::kExtra});
    if (train_data) s.push_back({"data.train", &train_data, TensorFile::kExtra});
    if (model) s.push_back({"model", &model, TensorFile::kModel});
    if (optimizer) s.push_back({"optimizer", &optimizer, TensorFile::kOptimizer});
    if (scheduler) s.push_back({"scheduler", &scheduler, TensorFile::kExtra});
    for (const auto& [n, e] : evaluators) s.push_back({"evaluation." + n, &e, TensorFile::kExtra});
    for (const auto& [n, c] : callbacks) s.push_back({n, &c, TensorFile::kExtra});
    return s;
  }

  ckpt::EngineState engine_state() const {
    ckpt::EngineState e;
    e.step = step;
    e.tokens_seen = tokens_seen;
    e.best_val_loss = best_val_loss;
    e.best_step = best_step;
    e.wall_time_s = wall_s_before + elapsed_s();
    if (guard) e.nonfinite_guard = guard->state_json();
    e.last_train = last_train_json;
    e.last_val = last_val_json;
    return e;
  }

  Clock::time_point run_start = Clock::now();
  double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - run_start).count(); }

  fs::path save_checkpoint() {
    ckpt::CheckpointContents c;
    c.step = step;
    ckpt::StateRecord r;
    r.step = step;
    r.max_steps = cfg.training().max_steps;
    r.seed = cfg.seed();
    r.engine = engine_state();
    for (const auto& slot : stage_slots()) {
      ckpt::StateWriterView w(&c.tensors(slot.file), ckpt::tensor_prefix(slot.file, slot.key), slot.key);
      check_plugin_call(*slot.inst->component(), "save_state",
                        slot.inst->component()->base()->save_state(slot.inst->get(), w.get()));
      r.stages.push_back({slot.key, slot.inst->component(), w.json()});
    }
    std::error_code cwd_ec;
    const fs::path cwd = fs::current_path(cwd_ec);
    if (!cwd_ec) r.cwd = cwd;
    r.config_json = config_json;
    r.overrides = cfg.overrides();
    r.environment_json = rundir::environment_json(host->num_threads());
    c.state_json = ckpt::state_json(r);
    fs::path dir = ckpt::write_checkpoint(run_dir / "checkpoints", c, cfg.training().keep_last_n);
    log::info("Checkpoint saved to " + dir.string());
    emit(ZC_EVENT_CHECKPOINT, "{\"path\":" + json_escape(dir.string()) + ",\"step\":" + std::to_string(step) + "}");
    return dir;
  }

  // Compares the checkpoint's config with this run's; architecture/tokenizer
  // changes are errors, anything else a warning per field.
  //
  // The checkpoint's config is resolved against today's schemas first, so a
  // key added since it was written (absent there) counts only when this
  // run's value differs from that key's default.
  void compare_configs(const std::string& old_json) {
    std::string old_resolved = old_json;
    try {
      HarnessConfig old = HarnessConfig::from_string(old_json, "the checkpoint's config");
      old.validate(registry.get());
      old_resolved = old.to_json();
    } catch (const std::exception&) {
      // Not valid under today's schemas: compare it as written (every
      // difference is reported below).
    }
    rapidjson::Document a, b;
    a.Parse(old_resolved.c_str());
    b.Parse(config_json.c_str());
    if (!a.IsObject() || !b.IsObject()) return;
    std::map<std::string, std::string> fa, fb;
    flatten(a, "", fa);
    flatten(b, "", fb);
    std::vector<std::string> fatal;
    auto report = [&](const std::string& path, const std::string& was, const std::string& now) {
      if (path == "overrides") return;
      if (HarnessConfig::is_path_field(path) && same_file_path(was, now)) return;
      const bool arch =
          (path.rfind("model.", 0) == 0 && !is_eval_only_model_field(path)) || path.rfind("data.tokenizer", 0) == 0;
      const std::string line = path + ": checkpoint has " + was + ", config has " + now;
      if (arch) fatal.push_back(line);
      else log::warn("resume: config differs: " + line);
    };
    for (const auto& [k, v] : fa) {
      auto it = fb.find(k);
      if (it == fb.end()) report(k, v, "(absent)");
      else if (it->second != v) report(k, v, it->second);
    }
    for (const auto& [k, v] : fb)
      if (!fa.count(k)) report(k, "(absent)", v);
    if (!fatal.empty()) {
      std::string m = "resume: the architecture or tokenizer changed, which a checkpoint cannot follow: " + fatal[0];
      if (fatal.size() > 1) m += " (and " + std::to_string(fatal.size() - 1) + " more)";
      throw RunFailure(m, kExitUsageError);
    }
  }

  // Loads every stage's state from a verified checkpoint. `only_model` for evaluate/generate.
  void restore(const ckpt::LoadedCheckpoint& ck, bool only_model) {
    const ckpt::StoredState state = ckpt::read_state(ck);
    for (const auto& slot : stage_slots()) {
      if (only_model && slot.key != "model") continue;
      std::string json;
      if (const std::string* j = state.stage(slot.key)) json = *j;
      else if (!only_model) log::warn("resume: the checkpoint has no state for " + slot.key + " (it starts fresh)");
      ckpt::StateReaderView rd(ck.tensors(slot.file), ckpt::tensor_prefix(slot.file, slot.key), std::move(json));
      check_plugin_call(*slot.inst->component(), "load_state",
                        slot.inst->component()->base()->load_state(slot.inst->get(), rd.get()));
    }
    if (only_model) return;
    resumed = true;
    step = ck.step;
    if (state.engine) {
      tokens_seen = state.engine->tokens_seen;
      best_val_loss = state.engine->best_val_loss;
      best_step = state.engine->best_step;
      wall_s_before = state.engine->wall_time_s;
      if (!state.engine->nonfinite_guard.empty() && guard) guard->load_state_json(state.engine->nonfinite_guard);
    }
  }

  // ---- evaluation ----------------------------------------------------------------

  // Runs every evaluator over `split`; returns the metrics as a JSON object.
  std::string run_evaluation(const std::string& split, std::map<std::string, double>* out = nullptr) {
    const StageInstance& data = eval_data(split);
    MapSink sink;
    for (auto& [name, ev] : evaluators) {
      sink.prefix = name == "lm" ? "" : name + "_";
      check_plugin_call(*ev.component(), "evaluate",
                        ev.component()->as<zc_evaluator_table>()->evaluate(ev.get(), data.ref(), &sink.sink));
    }
    std::string j = "{";
    for (const auto& [k, v] : sink.values) {
      json_num(j, k.c_str(), v);
      if (out) (*out)[k] = v;
    }
    return j + "}";
  }

  // Evaluates at the current step and emits EVAL_END (metrics + best_val_loss,
  // best_step, eval_time_ms); returns the callbacks' flags (0 when a stop
  // request interrupted the evaluation). `count_best`: false for the step-0
  // evaluation, which measures the untrained model and has no checkpoint to
  // point best_step at.
  uint32_t evaluate_and_emit(bool count_best) {
    const auto te = Clock::now();
    std::map<std::string, double> m;
    std::string val;
    try {
      val = run_evaluation(cfg.evaluation().split, &m);
    } catch (const PluginError&) {
      if (!stop_requested()) throw;
      log::warn("Evaluation at step " + std::to_string(step) + " interrupted by the stop request");
      return 0;
    }
    if (count_best) {
      last_val_json = val;
      if (m.count("loss") && m["loss"] < best_val_loss) {
        best_val_loss = m["loss"];
        best_step = step;
      }
    }
    std::string j = val;
    j.pop_back();
    json_num(j, "best_val_loss", best_val_loss);
    json_num(j, "best_step", static_cast<double>(best_step));
    json_num(j, "eval_time_ms", ms_since(te));
    j += "}";
    return emit(ZC_EVENT_EVAL_END, j);
  }

  // ---- the loop ----------------------------------------------------------------

  int train(int profile_steps) {
    const TrainingConfig& tc = cfg.training();
    const bool profiling = profile_steps > 0;
    const uint64_t max_steps =
        profiling ? step + static_cast<uint64_t>(profile_steps) : static_cast<uint64_t>(tc.max_steps);
    const auto* mt = model.component()->as<zc_model_table>();
    const auto* ot = optimizer.component()->as<zc_optimizer_table>();
    const auto* st_ = scheduler.component()->as<zc_scheduler_table>();
    const auto* dt = train_data.component()->as<zc_dataloader_table>();
    zc_param_list params{};
    check_plugin_call(*model.component(), "params", mt->params(model.get(), &params));
    uint64_t hess_k = 0;
    check_plugin_call(*optimizer.component(), "hessian_interval", ot->hessian_interval(optimizer.get(), &hess_k));
    const uint64_t hessian_seed = host->raw()->derive_seed(host->raw()->host_ctx, "engine/hessian_labels");

    core::GradientAccumulator acc;
    StepSink sink;
    std::string ev;  // STEP_END metrics, reused
    ev.reserve(4096);
    core::Trace trace(cfg.profiling(), profile_steps,
                      {tc.gradient_accumulation, cfg.data().batch_size, cfg.model().max_seq_len});
    double ema_step_ms = 0;
    bool stop_requested_by_callback = false, interrupted = false;
    int exit_code = kExitOk;

    // training.eval_at_start: the untrained model's val metrics as step 0 (a
    // fresh run only; a resumed run already has them in its history).
    if (!profiling && !resumed && step == 0 && tc.eval_at_start && !stop_requested()) {
      if (evaluate_and_emit(false) & ZC_CALLBACK_REQUEST_STOP) {
        log::info("A callback asked to stop training at step 0");
        return exit_code;
      }
    }

    while (step < max_steps) {
      const auto t_step = Clock::now();
      trace.begin_step(step + 1);
      // 1. Data: hold the step's micro-batches (the loader's memory is reused).
      acc.clear();
      double wait_ms = 0;
      for (int64_t m = 0; m < tc.gradient_accumulation; ++m) {
        zc_batch b{};
        b.struct_size = sizeof(zc_batch);
        int32_t has = 0;
        const auto t0 = Clock::now();
        zc_status* ds = dt->next_batch(train_data.get(), &b, &has);
        if (ds && stop_requested()) {
          // Stopped while waiting for data: micro-batches of this step may
          // already be consumed, so a checkpoint now could not resume exactly.
          // The newest checkpoint stays the resume point.
          status_release(ds);
          log::warn("Stopped on request while waiting for data at step " + std::to_string(step) +
                    "; no new checkpoint (resume with --resume-from latest from the newest one)");
          return kExitInterrupted;
        }
        check_plugin_call(*train_data.component(), "next_batch", ds);
        wait_ms += ms_since(t0);
        trace.span("data_wait", t0);
        if (!has) throw RunFailure("data: the train split ended (a train loader must cycle epochs)", kExitRuntimeError);
        acc.add(b);
      }
      const uint64_t update = step + 1;
      // 2. Sophia: Hessian estimate from labels sampled from the model (Algorithm 3).
      if (core::hessian_due(update, hess_k)) {
        const auto t0 = Clock::now();
        double ignored = 0;
        check_plugin_call(
            *model.component(), "forward_backward (sampled labels)",
            acc.run(mt, model.get(), tc.loss_scale, nullptr, &ignored, ZC_LABELS_SAMPLED, hessian_seed ^ update));
        check_plugin_call(*optimizer.component(), "update_hessian",
                          ot->update_hessian(optimizer.get(), acc.target_tokens()));
        trace.span("hessian", t0);
      }
      // 3. Forward/backward over the micro-batches, loss / step tokens.
      sink.reset();
      double loss = 0;
      {
        const auto t0 = Clock::now();
        check_plugin_call(*model.component(), "forward_backward",
                          acc.run(mt, model.get(), tc.loss_scale, &sink.sink, &loss));
        trace.span("forward_backward", t0);
      }
      // 4. Clip, guard, lr, update.
      auto t0 = Clock::now();
      const double norm = core::clip_grad_norm(params, tc.clip_grad_norm);
      trace.span("clip_grad_norm", t0);
      double lr = 0;
      check_plugin_call(*scheduler.component(), "lr", st_->lr(scheduler.get(), step, cfg.optimizer().lr, &lr));
      const auto action = guard->check(step, loss, norm);
      if (action == core::NonfiniteGuard::Action::kApply) {
        t0 = Clock::now();
        check_plugin_call(*optimizer.component(), "step", ot->step(optimizer.get(), lr, update));
        trace.span("optimizer_step", t0);
      }
      step = update;
      trace.sample_memory();
      const int64_t step_tokens = acc.target_tokens();
      tokens_seen += static_cast<uint64_t>(step_tokens);
      if (action == core::NonfiniteGuard::Action::kStop) {
        if (!profiling) save_checkpoint();
        throw RunFailure(guard->message(), kExitRuntimeError);
      }
      // 5. Report.
      const double step_ms = ms_since(t_step);
      ema_step_ms = ema_step_ms == 0 ? step_ms : 0.9 * ema_step_ms + 0.1 * step_ms;
      ev.clear();
      ev.push_back('{');
      json_num(ev, "loss", loss);
      json_num(ev, "lr", lr);
      json_num(ev, "grad_norm", norm);
      json_num(ev, "tokens", static_cast<double>(step_tokens));
      json_num(ev, "tokens_per_s", step_tokens / (step_ms / 1000.0));
      json_num(ev, "step_time_ms", step_ms);
      json_num(ev, "data_wait_ms", wait_ms);
      json_num(ev, "data_wait_fraction", step_ms > 0 ? wait_ms / step_ms : 0);
      json_num(ev, "eta_s", (max_steps - step) * ema_step_ms / 1000.0);
      json_num(ev, "skipped", action == core::NonfiniteGuard::Action::kApply ? 0 : 1);
      // The model's metrics follow, except those the engine already wrote:
      // each key once (the model's own "tokens" is the same target-token
      // count, summed over micro-batches; the engine's is what tokens_per_s uses).
      for (const auto& e : sink.entries)
        if (e.count && !engine_step_key(e.name)) json_num(ev, e.name.c_str(), sink.value(e));
      ev.push_back('}');
      if (tc.log_every > 0 && (step % static_cast<uint64_t>(tc.log_every) == 0 || step == 1 || step == max_steps))
        last_train_json = ev;  // (allocates only on logging steps)
      const uint32_t flags = emit(ZC_EVENT_STEP_END, ev);
      if (flags & ZC_CALLBACK_REQUEST_STOP) stop_requested_by_callback = true;
      if (profiling) continue;
      // 6. Evaluate.
      // (Skipped when a stop was requested: the checkpoint comes first, and
      // the evaluators would only return CANCELLED.)
      if (((tc.eval_every > 0 && step % static_cast<uint64_t>(tc.eval_every) == 0) || step == max_steps) &&
          !stop_requested()) {
        if (evaluate_and_emit(true) & ZC_CALLBACK_REQUEST_STOP) stop_requested_by_callback = true;
      }
      // 7. Checkpoint when a callback asks, and at the end / on a stop.
      const bool stopping = stop_requested() || stop_requested_by_callback;
      if ((flags & ZC_CALLBACK_REQUEST_CHECKPOINT) || step == max_steps || stopping) save_checkpoint();
      if (stop_requested()) {
        interrupted = true;
        break;
      }
      if (stop_requested_by_callback) {
        log::info("A callback asked to stop training at step " + std::to_string(step));
        break;
      }
    }
    if (trace.enabled()) {
      trace.write(run_dir / "trace.json");
      log::info(
          "Trace of " +
          std::string(profiling ? std::to_string(profile_steps) + " steps" : "the profiling.schedule's active steps") +
          " written to " + (run_dir / "trace.json").string() + " (open in chrome://tracing)");
      if (profiling) return kExitOk;
    }
    if (interrupted) {
      log::warn("Stopped on request at step " + std::to_string(step) + "/" + std::to_string(max_steps) +
                "; resume with --resume-from latest");
      exit_code = kExitInterrupted;
    }
    return exit_code;
  }

  std::string summary_json(bool interrupted) const {
    auto [total, active] = num_params();
    const double wall = wall_s_before + elapsed_s();
    std::string s = "{";
    json_num(s, "step", static_cast<double>(step));
    json_num(s, "max_steps", static_cast<double>(cfg.training().max_steps));
    json_num(s, "tokens_seen", static_cast<double>(tokens_seen));
    json_num(s, "wall_time_s", wall);
    json_num(s, "num_threads", host->num_threads());
    json_num(s, "cpu_core_hours", wall * host->num_threads() / 3600.0);
    json_num(s, "params_total", static_cast<double>(total));
    json_num(s, "params_active", static_cast<double>(active));
    json_num(s, "best_val_loss", best_val_loss);
    json_num(s, "best_step", static_cast<double>(best_step));
    s += ",\"interrupted\":" + std::string(interrupted ? "true" : "false");
    s += ",\"experiment_name\":" + json_escape(cfg.experiment_name());
    s += ",\"run_dir\":" + json_escape(run_dir.string());
    s += ",\"cpu_model\":" + json_escape(rundir::cpu_model());
    s += ",\"final_train\":" + last_train_json + ",\"final_val\":" + last_val_json;
    s += ",\"model_info\":" + model_info() + ",\"tokenizer_info\":" + tokenizer_info();
    s += ",\"provenance\":" + provenance();
    s += ",\"environment\":" + rundir::environment_json(host->num_threads());
    s += ",\"config\":" + config_json + "}";
    return s;
  }

  void open_run_dir(bool resume, bool overwrite) {
    run_dir = fs::path(cfg.logging().output_dir) / cfg.experiment_name();
    const bool reused = rundir::prepare(run_dir, resume, overwrite);
    run_dir_opened = !resume;
    log::open_file(run_dir / "logs" / "console.log");
    if (reused)
      log::info("Reusing " + run_dir.string() +
                ": it holds only what a start that failed before its first step left (config.yaml, logs/, "
                "a step-0 metrics.json; logs/console.log is appended to)");
  }

  // The run folder's config.yaml: written only once the run will start (after
  // a resume's checkpoint is checked), so a refused resume leaves the folder's
  // record of its config as it was.
  void write_run_config() const {
    std::string yaml = rundir::kResolvedConfigHeader;
    if (!opts.config_path.empty()) yaml += "; from " + opts.config_path;
    yaml += "\n";
    for (const auto& o : cfg.overrides()) yaml += "# --set " + o + "\n";
    std::error_code ec;
    const fs::path cwd = fs::current_path(ec);
    yaml += ec ? cfg.to_yaml() : cfg.to_yaml_absolute_paths(cwd);
    if (!yaml.empty() && yaml.back() != '\n') yaml += "\n";
    ckpt::write_file_atomic(run_dir / "config.yaml", yaml);
  }
};

// ---------------------------------------------------------------------------

Engine::Engine(HarnessConfig cfg, EngineOptions opts)
    : impl_(std::make_unique<Impl>(std::move(cfg), std::move(opts))) {}
Engine::~Engine() = default;
const fs::path& Engine::run_dir() const { return impl_->run_dir; }

namespace {
// Maps an exception from a run to its one-line message and exit code.
int report(const char* what) {
  try {
    throw;
  } catch (const RunFailure& e) {
    log::error(e.what());
    return e.code;
  } catch (const ConfigValidationError& e) {
    log::error(e.what());
    return kExitUsageError;
  } catch (const rundir::RunDirError& e) {
    log::error(e.what());
    return kExitUsageError;
  } catch (const ckpt::CheckpointError& e) {
    log::error(e.what());
    return kExitRuntimeError;
  } catch (const PluginError& e) {
    log::error(e.what());
    const std::string m = e.what();
    return m.find("no ") != std::string::npos && m.find(" plugin named ") != std::string::npos ? kExitUsageError
                                                                                               : kExitRuntimeError;
  } catch (const std::exception& e) {
    log::error(std::string(what) + ": " + e.what());
    return kExitRuntimeError;
  }
}
}  // namespace

int Engine::run() {
  Impl& m = *impl_;
  SignalScope signals(m.opts.install_signal_handlers);
  clear_stop_request();
  bool torn_down = false;
  try {
    m.preflight(true);  // before the run folder exists: a config that cannot run leaves nothing behind
    const bool resume = !m.opts.resume_from.empty();
    m.open_run_dir(resume, m.opts.overwrite);  // config.yaml is written below, once the resume is checked
    ckpt::SetAsideCleanup set_aside;
    for (const auto& p : ckpt::remove_stale_temp_folders(m.run_dir / "checkpoints", &set_aside))
      log::warn("Removed " + p.string() + ": a checkpoint left half-written by a process that was killed");
    for (const auto& [from, to] : set_aside.restored)
      log::warn("Restored " + to.string() + " from " + from.string() +
                ": a process was killed while saving that step again");
    for (const auto& p : set_aside.removed)
      log::warn("Removed " + p.string() +
                ": the replaced copy of a checkpoint saved again by a process that was killed");
    // Verify the checkpoint completely before any stage exists.
    std::optional<ckpt::LoadedCheckpoint> ck;
    if (resume) {
      fs::path dir = ckpt::resolve(m.opts.resume_from, m.run_dir);
      ck = ckpt::load_checkpoint(dir);
      const auto max_steps = static_cast<uint64_t>(m.cfg.training().max_steps);
      if (ck->step > max_steps)
        throw RunFailure("--resume-from " + dir.string() + ": the checkpoint is at step " + std::to_string(ck->step) +
                             ", past training.max_steps = " + std::to_string(max_steps) +
                             " (raise training.max_steps, or resume from an earlier checkpoint)",
                         kExitUsageError);
      if (const auto stored = ckpt::read_state(*ck).config) m.compare_configs(*stored);
    }
    m.write_run_config();
    m.guard = std::make_unique<core::NonfiniteGuard>(
        static_cast<int>(m.cfg.training().max_consecutive_nonfinite),
        [](zc_log_level l, const std::string& line) { log::write(static_cast<log::Level>(l), {}, line); });
    m.create_core_stages(true);
    m.create_callbacks();
    auto [total, active] = m.num_params();
    log::info("Initializing " + m.cfg.model().type + " (" + m.cfg.model().variant + ") with " +
              std::to_string(m.cfg.model().moe_experts) + " experts, top_k=" + std::to_string(m.cfg.model().moe_top_k) +
              ": " + std::to_string(total) + " parameters, " + std::to_string(active) + " active per token");
    {
      rapidjson::Document ti;
      ti.Parse(m.tokenizer_info().c_str());
      std::string name =
          ti.HasMember("name") && ti["name"].IsString() ? ti["name"].GetString() : m.cfg.data().tokenizer;
      uint64_t v = ti.HasMember("vocab_size") && ti["vocab_size"].IsUint64() ? ti["vocab_size"].GetUint64() : 0;
      log::info("Tokenizer: " + name + " (vocab size " + std::to_string(v) + ")");
    }
    log::info("Training on 1 device(s) (CPU, " + std::to_string(m.host->num_threads()) + " threads)");
    if (ck) {
      m.restore(*ck, false);
      log::info("Resumed from " + ck->dir.string() + " at step " + std::to_string(m.step));
    }
    m.emit(ZC_EVENT_SETUP,
           "{\"run_dir\":" + json_escape(m.run_dir.string()) + ",\"resumed_step\":" + std::to_string(m.step) + "}");
    int rc = m.step >= static_cast<uint64_t>(m.cfg.training().max_steps) ? kExitOk : m.train(0);
    if (m.step >= static_cast<uint64_t>(m.cfg.training().max_steps) && rc == kExitOk && m.last_val_json == "{}") {
      // A run resumed from its final checkpoint: evaluate so the summary has numbers.
      m.last_val_json = m.run_evaluation(m.cfg.evaluation().split);
    }
    const std::string summary = m.summary_json(rc == kExitInterrupted);
    torn_down = true;
    m.emit(ZC_EVENT_TEARDOWN, summary);
    if (rc == kExitOk) {
      char b[64];
      std::snprintf(b, sizeof b, "%.4g", m.best_val_loss);
      log::info(std::string("Training complete. Best val loss: ") + (std::isfinite(m.best_val_loss) ? b : "n/a"));
      // Where everything is, last, so a new user knows what to open next.
      // Only the files this run's callbacks did write (a config may disable
      // metrics_json or model_card).
      const fs::path ck = m.run_dir / "checkpoints";
      std::string outputs;
      std::error_code ec;
      for (const char* f : {"config.yaml", "metrics.json", "model_card.md", "logs/console.log"})
        if (fs::is_regular_file(m.run_dir / f, ec)) outputs += std::string(outputs.empty() ? "" : ", ") + f;
      log::info("Outputs in " + m.run_dir.string() + ": " + outputs);
      if (fs::exists(ck / "latest")) log::info("Latest checkpoint: " + (ck / "latest").string());
    }
    log::close_file();
    return rc;
  } catch (...) {
    int rc = report("run");
    if (!torn_down && !m.callbacks.empty()) {
      try {
        m.emit(ZC_EVENT_TEARDOWN, "{\"failed\":true}");
      } catch (...) {
      }
    }
    // A start that failed before its first step must not block the retry.
    if (m.run_dir_opened && m.step == 0 && rundir::discard_failed_start(m.run_dir))
      log::info("No step was trained: " + m.run_dir.string() +
                " keeps only config.yaml and logs/, and the next run of this config reuses it");
    log::close_file();
    return rc;
  }
}

void Engine::preflight() { impl_->preflight(true); }

int Engine::evaluate(const std::string& checkpoint, const std::string& split, const std::string& out_json) {
  Impl& m = *impl_;
  try {
    if (split != "val" && split != "train")
      throw RunFailure("--split: '" + split + "' is not one of val, train", kExitUsageError);
    m.make_registry();
    m.run_dir = fs::path(m.cfg.logging().output_dir) / m.cfg.experiment_name();
    fs::path dir = ckpt::resolve(checkpoint, m.run_dir);
    auto ck = ckpt::load_checkpoint(dir, ckpt::Parts::kModelOnly);
    m.create_core_stages(false);
    m.restore(ck, true);
    std::map<std::string, double> vals;
    std::string j = m.run_evaluation(split, &vals);
    // A NaN or infinite loss is a broken model, not a result (the JSON would
    // say "loss": null and a script would take exit 0 as success).
    if (auto it = vals.find("loss"); it != vals.end() && !std::isfinite(it->second))
      throw RunFailure("evaluate: " + dir.string() + " gives a " + (std::isnan(it->second) ? "NaN" : "non-finite") +
                           " loss on the " + split + " split (the weights are not usable: diverged or corrupted)",
                       kExitRuntimeError);
    std::string line = "Evaluation of " + dir.string() + " on " + split + ":";
    for (const auto& [k, v] : vals) {
      char b[64];
      std::snprintf(b, sizeof b, " %s %.6g", k.c_str(), v);
      line += b;
    }
    const std::string result = "{\"checkpoint\":" + json_escape(dir.string()) + ",\"step\":" + std::to_string(ck.step) +
                               ",\"split\":" + json_escape(split) + ",\"metrics\":" + j + "}";
    if (log::console_format() == log::Format::Json) {
      // The result is a record on stdout, shown under --quiet too (it is what
      // the command is for, not a log line); the text form stays at DEBUG.
      log::write_record("{\"event\":\"evaluate\"," + result.substr(1), true);
      log::debug(line);
    } else {
      log::info(line);
    }
    if (!out_json.empty()) {
      ckpt::write_file_atomic(out_json, result + "\n");
      log::info("Metrics written to " + out_json);
    }
    return kExitOk;
  } catch (...) {
    return report("evaluate");
  }
}

int Engine::profile(int steps) {
  Impl& m = *impl_;
  SignalScope signals(m.opts.install_signal_handlers);
  clear_stop_request();
  try {
    if (steps < 1)
      throw RunFailure("--steps: expected an integer >= 1, found " + std::to_string(steps), kExitUsageError);
    m.make_registry();
    m.run_dir = fs::path(m.cfg.logging().output_dir) / m.cfg.experiment_name() / "profile";
    std::error_code ec;
    fs::create_directories(m.run_dir, ec);
    m.guard = std::make_unique<core::NonfiniteGuard>(static_cast<int>(m.cfg.training().max_consecutive_nonfinite));
    m.create_core_stages(true);
    return m.train(steps);
  } catch (...) {
    return report("profile");
  }
}

}  // namespace zcode
