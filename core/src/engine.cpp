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

#include <zcode/core/log.h>
#include <zcode/core/run_dir.h>
#include <zcode/sdk/json.h>

#include "engine_impl.h"
#include "resume.h"
#include "trace.h"

#include <rapidjson/document.h>

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
using namespace engine_detail;

namespace {

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

}  // namespace

// ---- events, state, run folder ------------------------------------------------

uint32_t Engine::Impl::emit(zc_event_kind kind, const std::string& metrics_json) {
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

std::vector<Engine::Impl::StageSlot> Engine::Impl::stage_slots() const {
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

ckpt::EngineState Engine::Impl::engine_state() const {
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

double Engine::Impl::elapsed_s() const { return std::chrono::duration<double>(Clock::now() - run_start).count(); }

fs::path Engine::Impl::save_checkpoint() {
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
  sdk::json::Writer ev;
  ev.begin_object().key("path").string(dir.string()).key("step").integer(step).end_object();
  emit(ZC_EVENT_CHECKPOINT, ev.str());
  return dir;
}

void Engine::Impl::restore(const ckpt::LoadedCheckpoint& ck, bool only_model) {
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

std::string Engine::Impl::summary_json(bool interrupted) const {
  auto [total, active] = num_params();
  const double wall = wall_s_before + elapsed_s();
  // Numbers as %.17g, as the callbacks (model_card, metrics_json) have always read them.
  sdk::json::Writer w;
  w.begin_object();
  w.key("step").number(static_cast<double>(step), 17);
  w.key("max_steps").number(static_cast<double>(cfg.training().max_steps), 17);
  w.key("tokens_seen").number(static_cast<double>(tokens_seen), 17);
  w.key("wall_time_s").number(wall, 17);
  w.key("num_threads").number(host->num_threads(), 17);
  w.key("cpu_core_hours").number(wall * host->num_threads() / 3600.0, 17);
  w.key("params_total").number(static_cast<double>(total), 17);
  w.key("params_active").number(static_cast<double>(active), 17);
  w.key("best_val_loss").number(best_val_loss, 17);
  w.key("best_step").number(static_cast<double>(best_step), 17);
  w.key("interrupted").boolean(interrupted);
  w.key("experiment_name").string(cfg.experiment_name());
  w.key("run_dir").string(run_dir.string());
  w.key("cpu_model").string(rundir::cpu_model());
  w.key("final_train").raw(last_train_json).key("final_val").raw(last_val_json);
  w.key("model_info").raw(model_info()).key("tokenizer_info").raw(tokenizer_info());
  w.key("provenance").raw(provenance());
  w.key("environment").raw(rundir::environment_json(host->num_threads()));
  w.key("config").raw(config_json);
  w.end_object();
  return w.str();
}

void Engine::Impl::open_run_dir(bool resume, bool overwrite) {
  run_dir = fs::path(cfg.logging().output_dir) / cfg.experiment_name();
  const bool reused = rundir::prepare(run_dir, resume, overwrite);
  run_dir_opened = !resume;
  log::open_file(run_dir / "logs" / "console.log");
  if (reused)
    log::info("Reusing " + run_dir.string() +
              ": it holds only what a start that failed before its first step left (config.yaml, logs/, "
              "a step-0 metrics.json; logs/console.log is appended to)");
}

void Engine::Impl::write_run_config() const {
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

// ---- the loop -----------------------------------------------------------------

int Engine::Impl::train(int profile_steps) {
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
    sdk::json::Writer w;
    w.begin_object();
    w.key("loss").number(loss, 17).key("lr").number(lr, 17).key("grad_norm").number(norm, 17);
    w.key("tokens").number(static_cast<double>(step_tokens), 17);
    w.key("tokens_per_s").number(step_tokens / (step_ms / 1000.0), 17);
    w.key("step_time_ms").number(step_ms, 17).key("data_wait_ms").number(wait_ms, 17);
    w.key("data_wait_fraction").number(step_ms > 0 ? wait_ms / step_ms : 0, 17);
    w.key("eta_s").number((max_steps - step) * ema_step_ms / 1000.0, 17);
    w.key("skipped").number(action == core::NonfiniteGuard::Action::kApply ? 0 : 1, 17);
    // The model's metrics follow, except those the engine already wrote:
    // each key once (the model's own "tokens" is the same target-token
    // count, summed over micro-batches; the engine's is what tokens_per_s uses).
    for (const auto& e : sink.entries)
      if (e.count && !engine_step_key(e.name)) w.key(e.name).number(sink.value(e), 17);
    w.end_object();
    const std::string ev = w.str();
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

// ---------------------------------------------------------------------------

Engine::Engine(HarnessConfig cfg, EngineOptions opts)
    : impl_(std::make_unique<Impl>(std::move(cfg), std::move(opts))) {}
Engine::~Engine() = default;
const fs::path& Engine::run_dir() const { return impl_->run_dir; }

// Maps an exception from a run to its one-line message and exit code.
int engine_detail::report(const char* what) {
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
      if (const auto stored = ckpt::read_state(*ck).config) {
        // Architecture/tokenizer changes are errors, anything else a warning per field.
        const core::ConfigDiff diff = core::diff_resume_config(*stored, m.config_json, m.registry.get());
        for (const std::string& line : diff.changed) log::warn("resume: config differs: " + line);
        if (!diff.fatal.empty()) throw RunFailure(diff.fatal_message(), kExitUsageError);
      }
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
    m.emit(ZC_EVENT_SETUP, sdk::json::Writer()
                               .begin_object()
                               .key("run_dir")
                               .string(m.run_dir.string())
                               .key("resumed_step")
                               .integer(m.step)
                               .end_object()
                               .str());
    int rc = m.step >= static_cast<uint64_t>(m.cfg.training().max_steps) ? kExitOk : m.train(0);
    if (m.step >= static_cast<uint64_t>(m.cfg.training().max_steps) && rc == kExitOk && m.last_val_json == "{}") {
      // A run resumed from its final checkpoint: evaluate so the summary has numbers.
      m.last_val_json = metrics_json(m.run_evaluation(m.cfg.evaluation().split));
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
