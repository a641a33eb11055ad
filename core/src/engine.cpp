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

#include <zcode/core/dist/gradient_reducer.h>
#include <zcode/core/dist/launch.h>
#include <zcode/core/log.h>
#include <zcode/core/run_dir.h>
#include <zcode/sdk/json.h>

#include "dist/step_exchange.h"
#include "engine_impl.h"
#include "resume.h"
#include "step_metrics.h"
#include "trace.h"

#include <rapidjson/document.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace zcode {

namespace fs = std::filesystem;
using namespace engine_detail;

namespace {

// ---- signals ----------------------------------------------------------------

struct sigaction g_old_int, g_old_term;
volatile sig_atomic_t g_signals = 0;
volatile sig_atomic_t g_launched = 0;  // several ranks under mpirun/srun

void on_signal(int) {
  if (g_signals != 0) _exit(kExitInterrupted);  // a second Ctrl-C: stop now
  g_signals = 1;
  if (g_launched) {
    // mpirun stops reading the ranks' output once it is told to end the
    // job, so a rank printing a line would block (the write already blocked
    // is interrupted by this signal) and never reach its checkpoint: from
    // now on the console drops what it cannot take at once; every line
    // still reaches the log file (written first, core/src/log.cpp).
    for (int fd : {1, 2}) {
      const int fl = fcntl(fd, F_GETFL);
      if (fl != -1) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
  }
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
    g_launched = 0;
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
  for (EngineObserver* o : observers) all |= o->on_event(static_cast<uint32_t>(kind), step, metrics_json);
  return all;
}

double Engine::Impl::elapsed_s() const { return std::chrono::duration<double>(Clock::now() - run_start).count(); }

// ---- the loop -----------------------------------------------------------------

// What the loop holds across steps: the stages' tables, the parameters, the
// micro-batches of the step, the metrics sink and the trace.
struct Engine::Impl::Loop {
  Impl& e;
  const TrainingConfig& tc;
  const int profile_steps;  // > 0: `zcode-host profile` (no evaluation, no checkpoints)
  const uint64_t max_steps;
  const zc_model_table* mt;
  const zc_optimizer_table* ot;
  const zc_scheduler_table* sch;
  const zc_dataloader_table* dt;
  zc_param_list params{};
  uint64_t hessian_interval = 0;  // Sophia's k (0: no Hessian estimate)
  uint64_t hessian_seed;
  core::GradientAccumulator acc;
  core::StepSink sink;
  core::Trace trace;
  core::TraceSinkScope trace_sink;  // zc_host_services.tracer records into `trace`
  double ema_step_ms = 0;
  // Multi-process (zcode/core/dist/): this rank's place, the gradient sum
  // over ranks (also a one-process deterministic run's fold), the metrics
  // exchange, and the accumulator's options for both forward/backward kinds.
  dist::Communicator& comm;
  const int ranks, rank;
  std::unique_ptr<dist::GradientReducer> reducer;
  // Expert parallelism: `reducer` sums the dense tensors over the world,
  // this one the experts over EXPERT_DATA (none when every rank of that
  // group is alone: W = K).
  std::unique_ptr<dist::GradientReducer> expert_reducer;
  bool gather_grads_for_callbacks = false;
  dist::StepExchange exchange;
  core::GradientAccumulator::RunOptions train_opts, hessian_opts;

  Loop(Impl& impl, int profile)
      : e(impl),
        tc(impl.cfg.training()),
        profile_steps(profile),
        max_steps(profile > 0 ? impl.step + static_cast<uint64_t>(profile) : static_cast<uint64_t>(tc.max_steps)),
        mt(impl.model.component()->as<zc_model_table>()),
        ot(impl.optimizer.component()->as<zc_optimizer_table>()),
        sch(impl.scheduler.component()->as<zc_scheduler_table>()),
        dt(impl.train_data.component()->as<zc_dataloader_table>()),
        hessian_seed(impl.host->raw()->derive_seed(impl.host->raw()->host_ctx, "engine/hessian_labels")),
        trace(impl.cfg.profiling(), profile,
              {tc.gradient_accumulation, impl.cfg.data().batch_size, impl.cfg.model().max_seq_len}),
        trace_sink(*impl.host, trace),
        comm(impl.communicator()),
        ranks(comm.size()),
        rank(comm.rank()) {
    trace.set_memory_estimate(e.memory_estimate);
    check_plugin_call(*e.model.component(), "params", mt->params(e.model.get(), &params));
    check_plugin_call(*e.optimizer.component(), "hessian_interval",
                      ot->hessian_interval(e.optimizer.get(), &hessian_interval));
    // With ZeRO-1 a rank holds the summed gradients of its shard only; a
    // callback other than the built-in ones that read no gradients (the
    // debugger's histograms, a third party's) gets them all, gathered.
    static constexpr std::string_view kReadNoGradients[] = {"console",    "metrics_json", "metrics_jsonl",
                                                            "checkpoint", "model_card",   "early_stopping",
                                                            "prometheus", "mlflow",       "samples"};
    for (const auto& cb : e.cfg.callbacks())
      if (std::find(std::begin(kReadNoGradients), std::end(kReadNoGradients), cb.type) == std::end(kReadNoGradients))
        gather_grads_for_callbacks = e.zero();
    if (e.layout) {
      dist::GradientReducer::Options ro;
      ro.bucket_mb = e.cfg.distributed().bucket_mb;
      ro.deterministic = tc.deterministic;
      ro.zero = e.zero();
      if (e.experts) {
        reducer = std::make_unique<dist::GradientReducer>(comm, e.experts->dense(), *e.layout, e.plan, ro);
        dist::Communicator& ed = e.groups->get(ZC_GROUP_EXPERT_DATA);
        if (ed.size() > 1) {
          // The model adds the experts' gradients over the micro-batches
          // (in deterministic mode too: it adds each source's in global
          // micro-batch order); the replicas' totals are summed once.
          dist::GradientReducer::Options xo;
          xo.bucket_mb = ro.bucket_mb;
          xo.zero = e.zero();  // ZeRO-1: each replica keeps its shard of the experts' sum
          expert_reducer =
              std::make_unique<dist::GradientReducer>(ed, e.experts->experts(), *e.expert_layout, e.expert_plan, xo);
        } else {  // (the norm's partials of this rank's experts, computed here: no allocation in a step)
          own_expert_partials.reserve(core::grad_square_block_count(e.experts->experts()));
        }
      } else {
        reducer = std::make_unique<dist::GradientReducer>(comm, params, *e.layout, e.plan, ro);
      }
    }
    // Deterministic: each micro-batch's gradient from zero, folded by the
    // reducer. Under expert parallelism the model keeps adding the experts'
    // gradients (zeroed at the step's first micro-batch only) and the
    // engine zeroes the dense ones after each fold.
    train_opts.zero_grad_each = hessian_opts.zero_grad_each = tc.deterministic && !e.experts;
    if (reducer && !tc.deterministic && e.cfg.distributed().overlap) {
      // The last micro-batch's backward announces final gradients: their
      // buckets' reduction starts while it goes on.
      train_opts.grads_ready_ctx = this;
      train_opts.grads_ready = [](void* ctx, size_t first, size_t count) {
        Loop* l = static_cast<Loop*>(ctx);
        if (!l->e.experts) {
          l->reducer->on_grads_ready(first, count);
          return;
        }
        for (size_t i = first; i < first + count && i < l->e.experts->num_tensors(); ++i)
          if (const int64_t d = l->e.experts->dense_index(i); d >= 0)
            l->reducer->on_grads_ready(static_cast<size_t>(d), 1);
      };
    }
    train_opts.after_each = [this](size_t) {
      if (ranks > 1) exchange.end_micro();
      fold_micro();
    };
    hessian_opts.after_each = [this](size_t) { fold_micro(); };
  }
  // Deterministic path: one micro-batch's (dense) gradient into the fold.
  void fold_micro() {
    if (!reducer->deterministic()) return;
    reducer->add_micro();
    if (e.experts) e.experts->zero_dense_grads();
  }
  void begin_sum() {
    if (reducer->deterministic()) reducer->begin();
    else reducer->begin_fast();
    if (expert_reducer) expert_reducer->begin_fast();
  }
  bool profiling() const { return profile_steps > 0; }
  bool multi() const { return ranks > 1; }

  // What one optimizer step did.
  struct Step {
    double loss = 0, grad_norm = 0, lr = 0, data_wait_ms = 0, step_ms = 0;
    double comm_ms = 0;        // this rank's time in the gradient collectives (the exposed part)
    double sync_wait_ms = 0;   // the longest wait of a rank for the slowest one at the gradient reduction
    double slowest_fb_ms = 0;  // the slowest rank's forward/backward (several ranks)
    int slowest_rank = 0;
    int64_t tokens = 0;
    core::NonfiniteGuard::Action action = core::NonfiniteGuard::Action::kApply;
  };

  // The step's micro-batches into `acc` (the loader's memory is reused);
  // false when a stop request interrupted the wait. With N ranks the global
  // step is gradient_accumulation × N micro-batches of the one train stream,
  // and rank r's are the micro-batches j with j mod N = r: its loader hands
  // out only those (set_data_shard, ABI 1.8), or, for a loader that cannot,
  // it reads them all and keeps its own. Either way the loaders' state stays
  // the one-process state, so a resume on another number of ranks continues
  // the same stream.
  bool load_batches(Step& s) {
    acc.clear();
    const int64_t reads = tc.gradient_accumulation * (e.data_sharded ? 1 : ranks);
    for (int64_t m = 0; m < reads; ++m) {
      zc_batch b{};
      b.struct_size = sizeof(zc_batch);
      int32_t has = 0;
      const auto t0 = Clock::now();
      zc_status* ds = dt->next_batch(e.train_data.get(), &b, &has);
      if (ds && stop_requested()) {
        // Stopped while waiting for data: micro-batches of this step may
        // already be consumed, so a checkpoint now could not resume exactly.
        // The newest checkpoint stays the resume point.
        status_release(ds);
        if (multi())  // the other ranks are past their wait: end the job together
          throw RunFailure("stopped on request while waiting for data at step " + std::to_string(e.step) +
                               "; no new checkpoint (resume with --resume-from latest from the newest one)",
                           kExitInterrupted);
        log::warn("Stopped on request while waiting for data at step " + std::to_string(e.step) +
                  "; no new checkpoint (resume with --resume-from latest from the newest one)");
        return false;
      }
      check_plugin_call(*e.train_data.component(), "next_batch", ds);
      s.data_wait_ms += ms_since(t0);
      trace.span("data_wait", t0);
      if (!has) throw RunFailure("data: the train split ended (a train loader must cycle epochs)", kExitRuntimeError);
      if (e.data_sharded || m % ranks == rank) acc.add(b);
    }
    return true;
  }

  // Sophia: Hessian estimate from labels sampled from the model (Algorithm 3).
  void update_hessian(uint64_t update, int64_t step_tokens) {
    if (!core::hessian_due(update, hessian_interval)) return;
    const auto t0 = Clock::now();
    double ignored = 0;
    if (!reducer) {
      check_plugin_call(
          *e.model.component(), "forward_backward (sampled labels)",
          acc.run(mt, e.model.get(), tc.loss_scale, nullptr, &ignored, ZC_LABELS_SAMPLED, hessian_seed ^ update));
    } else {
      hessian_opts.step_target_tokens = step_tokens;
      begin_sum();
      check_plugin_call(*e.model.component(), "forward_backward (sampled labels)",
                        acc.run(mt, e.model.get(), tc.loss_scale, nullptr, &ignored, ZC_LABELS_SAMPLED,
                                hessian_seed ^ update, hessian_opts));
      sum_gradients();
    }
    check_plugin_call(*e.optimizer.component(), "update_hessian", ot->update_hessian(e.optimizer.get(), step_tokens));
    trace.span("hessian", t0);
  }

  // This rank's time so far in the gradient reducers' barriers, and in
  // their barriers and collectives together.
  double waited_ms() const { return reducer->wait_ms() + (expert_reducer ? expert_reducer->wait_ms() : 0.0); }
  double blocked_ms() const {
    return waited_ms() + reducer->comm_ms() + (expert_reducer ? expert_reducer->comm_ms() : 0.0);
  }

  // The gradients of this rank's micro-batches become the global step's
  // (with ZeRO-1, this rank's shard of them).
  void sum_gradients() {
    if (reducer->deterministic()) reducer->finish();
    else reducer->finish_fast();
    if (expert_reducer) expert_reducer->finish_fast();
  }

  // Under expert parallelism: every rank's experts count in the global norm,
  // in the one-process order (ExpertSplit), from the reducers' partials (a
  // ZeRO-1 reducer gathers its shards'). Three collectives, in this order on
  // every rank: the dense reducer's, the experts' reducer's, the expert
  // group's.
  double expert_parallel_norm() {
    const std::vector<double>& dense = reducer->gathered_partials();
    const std::vector<double>* mine = &own_expert_partials;
    if (expert_reducer) {
      mine = &expert_reducer->gathered_partials();
    } else {
      own_expert_partials.clear();
      core::grad_square_partials(e.experts->experts(), nullptr, nullptr, own_expert_partials);
    }
    return e.experts->norm(dense, *mine);
  }
  std::vector<double> own_expert_partials;  // W = K: this rank's experts are summed already

  // Forward/backward over the micro-batches (loss / step tokens), clip, the
  // non-finite guard, lr, update; advances e.step.
  void forward_backward_update(Step& s) {
    const uint64_t update = e.step + 1;
    // The loss normaliser: the target tokens of the whole global step.
    const int64_t step_tokens = multi() ? comm.sum(acc.target_tokens()) : acc.target_tokens();
    update_hessian(update, step_tokens);
    sink.reset();
    auto t0 = Clock::now();
    if (!reducer) {
      check_plugin_call(*e.model.component(), "forward_backward",
                        acc.run(mt, e.model.get(), tc.loss_scale, &sink.sink, &s.loss));
    } else {
      train_opts.step_target_tokens = step_tokens;
      if (multi()) exchange.begin();
      const double blocked0 = blocked_ms();  // (the Hessian pass, before t0, adds to the counts too)
      begin_sum();
      double local_loss = 0;
      check_plugin_call(*e.model.component(), "forward_backward",
                        acc.run(mt, e.model.get(), tc.loss_scale, multi() ? exchange.sink() : &sink.sink, &local_loss,
                                ZC_LABELS_TARGETS, 0, train_opts));
      sum_gradients();
      s.loss = local_loss;
      if (multi()) {
        // Every rank's metrics in global micro-batch order: the loss and the
        // model's metrics are those of one process with accumulation × N.
        // The ranks compare their forward/backward without this pass's
        // waits and collectives: after the barrier every rank's clock
        // would otherwise read about the slowest one's.
        const double compute = ms_since(t0) - (blocked_ms() - blocked0);
        const auto x = exchange.exchange(comm, acc.size(), s.data_wait_ms, compute, waited_ms(), sink);
        s.loss = x.loss;
        s.data_wait_ms = x.max_data_wait_ms;  // the slowest rank's
        s.slowest_fb_ms = x.max_compute_ms;
        s.slowest_rank = x.slowest_rank;
        s.sync_wait_ms = x.max_sync_wait_ms;  // the fastest rank's wait: the step's imbalance
      }
    }
    trace.span("forward_backward", t0);
    t0 = Clock::now();
    if (!reducer) {
      s.grad_norm = core::clip_grad_norm(params, tc.clip_grad_norm);
    } else {
      // The global norm (with ZeRO-1 from every rank's shard); each rank
      // scales the gradients it holds summed.
      s.grad_norm = e.experts ? expert_parallel_norm() : reducer->norm();
      const double coef = core::clip_coefficient(s.grad_norm, tc.clip_grad_norm);
      if (coef < 1.0) {
        reducer->scale(static_cast<float>(coef));
        if (expert_reducer) expert_reducer->scale(static_cast<float>(coef));
        else if (e.experts) core::scale_grads(e.experts->experts(), static_cast<float>(coef), nullptr, nullptr);
      }
    }
    trace.span("clip_grad_norm", t0);
    check_plugin_call(*e.scheduler.component(), "lr", sch->lr(e.scheduler.get(), e.step, e.cfg.optimizer().lr, &s.lr));
    s.action = e.guard->check(e.step, s.loss, s.grad_norm);
    if (s.action == core::NonfiniteGuard::Action::kApply) {
      t0 = Clock::now();
      check_plugin_call(*e.optimizer.component(), "step", ot->step(e.optimizer.get(), s.lr, update));
      trace.span("optimizer_step", t0);
      if (reducer && reducer->zero()) {  // every rank's updated shard to every rank
        t0 = Clock::now();
        reducer->allgather_params();
        if (expert_reducer) expert_reducer->allgather_params();
        trace.span("allgather_params", t0);
      }
    }
    if (gather_grads_for_callbacks) {
      reducer->allgather_grads();
      if (expert_reducer) expert_reducer->allgather_grads();
    }
    if (reducer) {
      s.comm_ms = reducer->take_comm_ms() + (expert_reducer ? expert_reducer->take_comm_ms() : 0.0);
      // (the counts restart; sync_wait_ms is the exchange's maximum over the ranks, above)
      reducer->take_wait_ms();
      if (expert_reducer) expert_reducer->take_wait_ms();
    }
    e.step = update;
    trace.sample_memory();
    s.tokens = step_tokens;
    e.tokens_seen += static_cast<uint64_t>(s.tokens);
  }

  // STEP_END's metrics: the engine's, then the model's (numbers as %.17g).
  std::string step_end_json(const Step& s) const {
    sdk::json::Writer w;
    w.begin_object();
    w.key("loss").number(s.loss, 17).key("lr").number(s.lr, 17).key("grad_norm").number(s.grad_norm, 17);
    w.key("tokens").number(static_cast<double>(s.tokens), 17);
    w.key("tokens_per_s").number(s.tokens / (s.step_ms / 1000.0), 17);
    w.key("step_time_ms").number(s.step_ms, 17).key("data_wait_ms").number(s.data_wait_ms, 17);
    w.key("data_wait_fraction").number(s.step_ms > 0 ? s.data_wait_ms / s.step_ms : 0, 17);
    w.key("eta_s").number((max_steps - e.step) * ema_step_ms / 1000.0, 17);
    w.key("skipped").number(s.action == core::NonfiniteGuard::Action::kApply ? 0 : 1, 17);
    if (multi()) {
      w.key("comm_ms").number(s.comm_ms, 17).key("sync_wait_ms").number(s.sync_wait_ms, 17);
      w.key("slowest_rank").number(s.slowest_rank, 17).key("slowest_rank_fb_ms").number(s.slowest_fb_ms, 17);
    }
    // The model's metrics follow, except those the engine already wrote:
    // each key once (the model's own "tokens" is the same target-token
    // count, summed over micro-batches; the engine's is what tokens_per_s uses).
    for (const auto& m : sink.entries)
      if (m.count && !core::engine_step_key(m.name)) w.key(m.name).number(sink.value(m), 17);
    // Expert parallelism: the load of each expert-group rank's experts
    // (moe_load_<e> summed over the E/K experts it holds), so a step line
    // shows whether the ranks of a group have even work.
    if (e.experts) {
      const int64_t K = e.cfg.distributed().expert_parallel;
      std::vector<std::pair<int64_t, double>> loads;  // expert, load
      for (const auto& m : sink.entries)
        if (m.count && m.name.starts_with("moe_load_")) {
          char* end = nullptr;
          const long long x = std::strtoll(m.name.c_str() + 9, &end, 10);
          if (end && *end == '\0') loads.emplace_back(x, sink.value(m));
        }
      const auto E = static_cast<int64_t>(loads.size());
      if (E > 0 && E % K == 0) {
        std::vector<double> group(static_cast<size_t>(K), 0.0);
        for (const auto& [x, v] : loads)
          if (x >= 0 && x < E) group[static_cast<size_t>(x / (E / K))] += v;
        for (int64_t q = 0; q < K; ++q) w.key("moe_rank_load_" + std::to_string(q)).number(group[size_t(q)], 17);
      }
    }
    w.end_object();
    return w.str();
  }

  bool log_due() const {
    const uint64_t step = e.step;
    return tc.log_every > 0 && (step % static_cast<uint64_t>(tc.log_every) == 0 || step == 1 || step == max_steps);
  }
  // (Not when a stop was requested: the checkpoint comes first, and the
  // evaluators would only return CANCELLED.)
  bool eval_scheduled() const {
    return (tc.eval_every > 0 && e.step % static_cast<uint64_t>(tc.eval_every) == 0) || e.step == max_steps;
  }
  // When a callback asks, and at the end / on a stop.
  bool save_due(uint32_t flags, bool stopping) const {
    return (flags & ZC_CALLBACK_REQUEST_CHECKPOINT) || e.step == max_steps || stopping;
  }

  void write_trace() const {
    // One trace per rank: rank 0's is trace.json, as in a one-process run.
    // trace_handler tensorboard: the folder and file name of
    // torch.profiler.tensorboard_trace_handler (<host>_<pid>.<ms>.pt.trace.json
    // in the TensorBoard log folder), where TensorBoard's PyTorch profiler
    // plugin looks; the pid keeps the ranks apart.
    fs::path path =
        e.run_dir / (e.leader() ? std::string("trace.json") : "trace_rank_" + std::to_string(e.rank()) + ".json");
    if (e.cfg.profiling().trace_handler == "tensorboard") {
      char host[256] = "localhost";
      if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      path = e.run_dir / "logs" / "tensorboard" /
             (std::string(host) + "_" + std::to_string(::getpid()) + "." + std::to_string(ms) + ".pt.trace.json");
      std::error_code ec;
      fs::create_directories(path.parent_path(), ec);  // write() names the path if this failed
    }
    trace.write(path);
    log::info(
        "Trace of " +
        std::string(profiling() ? std::to_string(profile_steps) + " steps" : "the profiling.schedule's active steps") +
        " written to " + path.string() + " (open in chrome://tracing)");
  }
};

// "experts split over groups of K ranks (E experts, E/K per rank)".
static std::string expert_layout_text(const std::string& experts, int64_t k) {
  std::string t = "experts split over groups of " + std::to_string(k) + " ranks (" + experts + " experts";
  char* end = nullptr;
  const long long e = std::strtoll(experts.c_str(), &end, 10);
  if (end && *end == '\0' && !experts.empty()) t += ", " + std::to_string(e / k) + " per rank";
  return t + ")";
}

// One decision for every rank: rank 0's callback flags (the only rank with
// callbacks) and whether any rank was asked to stop (a signal may reach some
// ranks only). One allreduce; a one-process run decides alone.
struct Agreement {
  uint32_t flags;
  bool stop;
};
static Agreement agree(dist::Communicator& comm, uint32_t flags, bool stop) {
  if (comm.size() == 1) return {flags, stop};
  int64_t v[2] = {static_cast<int64_t>(flags), stop ? 1 : 0};
  comm.allreduce(v, 2, dist::DType::kI64, dist::ReduceOp::kMax);
  return {static_cast<uint32_t>(v[0]), v[1] != 0};
}

int Engine::Impl::train(int profile_steps) {
  Loop loop(*this, profile_steps);
  dist::Communicator& c = communicator();
  // training.eval_at_start: the untrained model's val metrics as step 0 (a
  // fresh run only; a resumed run already has them in its history). Rank 0
  // evaluates; the others wait for its decision.
  // Under expert parallelism every rank evaluates (the experts' forward is
  // a collective of the expert group), on the same batches; rank 0 reports.
  // The ranks then first agree on whether to evaluate at all.
  const bool every_rank_evaluates = expert_parallel();
  auto no_stop_agreed = [&] { return every_rank_evaluates ? !agree(c, 0, stop_requested()).stop : !stop_requested(); };
  // One evaluation, as this rank's role wants: rank 0 evaluates and reports
  // (its callbacks' flags); under expert parallelism the others evaluate
  // with it, otherwise they do nothing. Then the others wait for rank 0
  // (its evaluation, its EVAL_END callbacks) as long as it takes: their
  // timeout is paused until the caller's agreement (pause_timeout(false)).
  auto evaluate_here = [&](bool count_best) -> uint32_t {
    if (leader()) return evaluate_and_emit(count_best);
    if (every_rank_evaluates) run_peer_evaluation();
    c.pause_timeout(true);
    return 0;
  };
  if (!loop.profiling() && !resumed && step == 0 && cfg.training().eval_at_start) {
    const bool go = no_stop_agreed();
    const uint32_t f = go ? evaluate_here(false) : 0;
    const uint32_t agreed = agree(c, f, false).flags;
    if (go && !leader()) c.pause_timeout(false);
    if (agreed & ZC_CALLBACK_REQUEST_STOP) {
      log::info("A callback asked to stop training at step 0");
      return kExitOk;
    }
  }
  bool stop_requested_by_callback = false, interrupted = false;
  while (step < loop.max_steps) {
    const auto t_step = Clock::now();
    c.note_step(step);
    loop.trace.begin_step(step + 1);
    // The whole step, as torch.profiler's ProfilerStep#N (N: the optimizer
    // step, from 1): TensorBoard's profiler plugin splits a trace at these.
    struct StepSpan {
      core::Trace& t;
      uint64_t update;
      Clock::time_point t0;
      ~StepSpan() {
        if (t.recording()) t.span_named("ProfilerStep#" + std::to_string(update), t0);
      }
    } step_span{loop.trace, step + 1, t_step};
    Loop::Step s;
    if (!loop.load_batches(s)) return kExitInterrupted;
    loop.forward_backward_update(s);
    if (s.action == core::NonfiniteGuard::Action::kStop) {
      // Every rank decides this from the same (global) loss and norm.
      if (!loop.profiling()) save_checkpoint_all();
      throw RunFailure(guard->message(), kExitRuntimeError);
    }
    s.step_ms = ms_since(t_step);
    loop.ema_step_ms = loop.ema_step_ms == 0 ? s.step_ms : 0.9 * loop.ema_step_ms + 0.1 * s.step_ms;
    const std::string ev = loop.step_end_json(s);
    if (loop.log_due()) last_train_json = ev;
    uint32_t flags = emit(ZC_EVENT_STEP_END, ev);  // callbacks live on rank 0 only
    if (loop.profiling()) {
      if (flags & ZC_CALLBACK_REQUEST_STOP) stop_requested_by_callback = true;
      continue;
    }
    const bool eval_due = loop.eval_scheduled() && no_stop_agreed();
    if (eval_due) {
      const auto t0 = Clock::now();
      flags |= evaluate_here(true) & ZC_CALLBACK_REQUEST_STOP;
      if (leader()) loop.trace.span("evaluation", t0);
    }
    const Agreement a = agree(c, flags, stop_requested());
    if (eval_due && !leader()) c.pause_timeout(false);
    flags = a.flags;
    if (flags & ZC_CALLBACK_REQUEST_STOP) stop_requested_by_callback = true;
    if (loop.save_due(flags, a.stop || stop_requested_by_callback)) {
      const auto t0 = Clock::now();
      save_checkpoint_all();
      loop.trace.span("checkpoint", t0);
    }
    if (a.stop) {
      interrupted = true;
      break;
    }
    if (stop_requested_by_callback) {
      log::info("A callback asked to stop training at step " + std::to_string(step));
      break;
    }
  }
  if (loop.trace.enabled()) {
    loop.write_trace();
    if (loop.profiling()) return kExitOk;
  }
  if (!interrupted) return kExitOk;
  request_stop();  // a rank the signal did not reach stops as the others do
  log::warn("Stopped on request at step " + std::to_string(step) + "/" + std::to_string(loop.max_steps) +
            "; resume with --resume-from latest");
  return kExitInterrupted;
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

// Runs one part of a multi-process run's start on every rank, then agrees:
// when any rank failed, every rank stops (the failed one with its own
// error, the others naming it), so no rank waits in a collective for a rank
// that gave up. A one-process run just runs `body`.
template <class F>
static void start_phase(dist::Communicator& comm, F&& body) {
  if (comm.size() == 1) {
    body();
    return;
  }
  std::exception_ptr err;
  try {
    body();
  } catch (...) {
    err = std::current_exception();
  }
  int64_t v[2] = {err ? 1 : 0, err ? comm.rank() : -1};
  comm.allreduce(v, 2, dist::DType::kI64, dist::ReduceOp::kMax);
  if (err) std::rethrow_exception(err);
  if (v[0])
    throw RunFailure("rank " + std::to_string(v[1]) +
                         " failed while starting the run (its log says why: rank 0's "
                         "console, or the run folder's logs/rank_" +
                         std::to_string(v[1]) + ".log)",
                     kExitRuntimeError);
}

int Engine::run() {
  Impl& m = *impl_;
  SignalScope signals(m.opts.install_signal_handlers);
  clear_stop_request();
  bool torn_down = false, training = false;
  try {
    m.comm = &dist::world();  // a plain process: the one-rank communicator, no MPI
    g_launched = m.comm->size() > 1 ? 1 : 0;
    if (!m.leader()) log::set_console_level(log::Level::Error);  // rank 0 prints; the others log to a file
    dist::Communicator& comm = *m.comm;
    start_phase(comm, [&] {
      m.make_registry();
      if (!m.leader()) log::set_console_level(log::Level::Error);  // (make_registry applied the config's level)
      m.check_devices();
    });
    m.check_same_run();
    start_phase(comm, [&] { m.make_groups(); });
    // A rank that hangs would keep the others in a collective forever.
    comm.set_timeout(static_cast<double>(m.cfg.distributed().timeout_s),
                     [](const std::string& line) { log::error(line); });
    const bool resume = !m.opts.resume_from.empty();
    std::optional<ckpt::LoadedCheckpoint> ck;
    start_phase(comm, [&] {
      m.preflight(true);  // before the run folder exists: a config that cannot run leaves nothing behind
      if (m.leader()) {
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
      } else {
        m.run_dir = fs::path(m.cfg.logging().output_dir) / m.cfg.experiment_name();
      }
    });
    start_phase(comm, [&] {
      // (Inside the phase: a rank that cannot open its log fails with the others.)
      if (!m.leader()) log::open_file(m.run_dir / "logs" / ("rank_" + std::to_string(m.rank()) + ".log"));
      comm.set_progress_dir((m.run_dir / "logs").string());  // the watchdog's rank_N.progress
      // Verify the checkpoint completely before any stage exists.
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
      if (m.leader()) m.write_run_config();
      m.guard = std::make_unique<core::NonfiniteGuard>(
          static_cast<int>(m.cfg.training().max_consecutive_nonfinite),
          [](zc_log_level l, const std::string& line) { log::write(static_cast<log::Level>(l), {}, line); });
      m.create_core_stages(true);
      if (m.leader()) m.create_callbacks();  // the callbacks write the run folder: rank 0 only
      auto [total, active] = m.num_params();
      std::string experts_text = "?";  // model.moe_experts as the plugin resolved it
      {
        // Variant and experts are the model plugin's options: its info_json says
        // what it resolved (core keeps no copy of them).
        rapidjson::Document mi;
        mi.Parse(m.model_info().c_str());
        auto info = [&](const char* k) -> std::string {
          if (!mi.IsObject() || !mi.HasMember(k)) return "?";
          const rapidjson::Value& v = mi[k];
          return v.IsString() ? v.GetString() : v.IsInt64() ? std::to_string(v.GetInt64()) : "?";
        };
        log::info("Initializing " + m.cfg.model().type + " (" + info("variant") + ") with " + info("moe_experts") +
                  " experts, top_k=" + info("moe_top_k") + ": " + std::to_string(total) + " parameters, " +
                  std::to_string(active) + " active per token");
        experts_text = info("moe_experts");
      }
      {
        rapidjson::Document ti;
        ti.Parse(m.tokenizer_info().c_str());
        std::string name =
            ti.HasMember("name") && ti["name"].IsString() ? ti["name"].GetString() : m.cfg.data().tokenizer;
        uint64_t v = ti.HasMember("vocab_size") && ti["vocab_size"].IsUint64() ? ti["vocab_size"].GetUint64() : 0;
        log::info("Tokenizer: " + name + " (vocab size " + std::to_string(v) + ")");
      }
      if (m.world_size() == 1) {
        log::info("Training on 1 device(s) (CPU, " + std::to_string(m.host->num_threads()) + " threads)");
      } else {
        const auto& d = m.cfg.data();
        const int64_t acc = m.cfg.training().gradient_accumulation, n = m.world_size();
        log::info("Training on " + std::to_string(n) + " processes (" + comm.describe() + ", CPU, " +
                  std::to_string(m.host->num_threads()) + " threads each), data parallel" +
                  (m.expert_parallel() ? ", " + expert_layout_text(experts_text, m.cfg.distributed().expert_parallel)
                                       : std::string()) +
                  (m.zero() ? ", ZeRO-1 (optimizer state sharded)" : "") +
                  (m.cfg.training().deterministic ? ", deterministic reduction order" : "") +
                  ": global batch = batch_size " + std::to_string(d.batch_size) + " x gradient_accumulation " +
                  std::to_string(acc) + " x " + std::to_string(n) +
                  " ranks = " + std::to_string(d.batch_size * acc * n) + " sequences per step" +
                  (m.data_sharded ? ", each rank reading only its own micro-batches"
                                  : ", each rank reading the whole stream and keeping its share (the loader "
                                    "cannot shard: no set_data_shard)"));
      }
    });
    // Expert parallelism's exchange of the ranks' tensor lists, in a phase of
    // its own (a collective: every rank gets here, whatever failed above).
    start_phase(comm, [&] { m.split_experts(); });
    start_phase(comm, [&] {
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
    });
    training = true;  // from here a failure may strike one rank only
    int rc = m.step >= static_cast<uint64_t>(m.cfg.training().max_steps) ? kExitOk : m.train(0);
    bool final_eval = m.leader() && m.step >= static_cast<uint64_t>(m.cfg.training().max_steps) && rc == kExitOk &&
                      m.last_val_json == "{}";
    // (Under expert parallelism every rank evaluates with rank 0: it decides for all.)
    if (m.expert_parallel()) final_eval = comm.max(static_cast<int64_t>(final_eval)) != 0;
    if (final_eval && m.leader()) {
      // A run resumed from its final checkpoint: evaluate so the summary has numbers.
      m.last_val_json = metrics_json(m.run_evaluation(m.cfg.evaluation().split));
    } else if (final_eval) {
      m.run_peer_evaluation();
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
    if (training && m.world_size() > 1) {
      // The other ranks may be waiting in a collective for this one: end
      // the whole job (MPI_Abort) rather than leave them hanging.
      log::error("rank " + std::to_string(m.rank()) + " failed at step " + std::to_string(m.step) +
                 "; ending every rank of the job");
      log::close_file();
      m.comm->abort(rc);
    }
    if (!torn_down && !m.callbacks.empty()) {
      try {
        m.emit(ZC_EVENT_TEARDOWN, "{\"failed\":true}");
      } catch (...) {
      }
    }
    // A start that failed before its first step must not block the retry.
    if (m.leader() && m.run_dir_opened && m.step == 0 && rundir::discard_failed_start(m.run_dir))
      log::info("No step was trained: " + m.run_dir.string() +
                " keeps only config.yaml and logs/, and the next run of this config reuses it");
    log::close_file();
    return rc;
  }
}

void Engine::preflight() { impl_->preflight(true); }

void Engine::add_observer(EngineObserver* observer) {
  if (observer) impl_->observers.push_back(observer);
}

zc_stage_ref Engine::model() const { return impl_->model.ref(); }
zc_stage_ref Engine::tokenizer() const { return impl_->tokenizer.ref(); }

fs::path Engine::save_checkpoint() {
  Impl& m = *impl_;
  if (!m.model || !m.optimizer || m.run_dir.empty())
    throw std::runtime_error("save_checkpoint: nothing to save before run() (or after a failed start)");
  const fs::path root = m.run_dir / "checkpoints";
  std::error_code ec;
  if (fs::exists(root / "latest", ec)) {
    const fs::path latest = ckpt::resolve("latest", m.run_dir);
    if (latest.filename() == "step_" + std::to_string(m.step)) return latest;
  }
  m.save_checkpoint_all();
  return ckpt::resolve("latest", m.run_dir);
}

int Engine::profile(int steps) {
  Impl& m = *impl_;
  SignalScope signals(m.opts.install_signal_handlers);
  clear_stop_request();
  try {
    dist::require_one_process("profile");
    if (steps < 1)
      throw RunFailure("--steps: expected an integer >= 1, found " + std::to_string(steps), kExitUsageError);
    m.preflight(true);  // as `run`: the environment, and the memory estimate the trace's counters show
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
