// core/src/engine_impl.h: Engine::Impl, the engine's state, shared by the
// files that implement it:
//   engine.cpp        lifecycle (run, profile, preflight) and the training loop
//   engine_setup.cpp  registry, stage creation, memory check, stage info
//   engine_record.cpp checkpoint state of the stages and loop, the run folder,
//                     config.yaml, the TEARDOWN summary
//   evaluate.cpp      evaluation (in the loop and `zcode-host evaluate`)
//   checkpoint.cpp    the checkpoint format (the engine fills a StateRecord)
//   resume.cpp        the config comparison of a resumed run
#pragma once

#include <zcode/core/checkpoint.h>
#include <zcode/core/config.h>
#include <zcode/core/dist/communicator.h>
#include <zcode/core/dist/expert_split.h>
#include <zcode/core/dist/flat_layout.h>
#include <zcode/core/dist/process_groups.h>
#include <zcode/core/engine.h>
#include <zcode/core/host_services.h>
#include <zcode/core/preflight.h>
#include <zcode/core/registry.h>
#include <zcode/core/stage_factory.h>
#include <zcode/core/train_step.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace zcode {

namespace engine_detail {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// A fatal problem of a run: message and exit code.
struct RunFailure : std::runtime_error {
  int code;
  RunFailure(const std::string& m, int c) : std::runtime_error(m), code(c) {}
};

/// `values` as one JSON object, numbers as %.17g (null when not finite).
std::string metrics_json(const std::vector<std::pair<std::string, double>>& values);

/// Maps the exception being handled to its one-line message (logged) and
/// exit code; `what` prefixes a message that is not one of ZCode's own.
int report(const char* what);

}  // namespace engine_detail

struct Engine::Impl {
  HarnessConfig cfg;
  EngineOptions opts;
  std::filesystem::path run_dir;
  std::string config_json;
  std::unique_ptr<Registry> registry;
  std::unique_ptr<HostServices> host;
  // The job's process groups and the collectives plugins reach them by
  // (zc_host_services.collectives); a run sets them up before any stage.
  std::unique_ptr<dist::ProcessGroups> groups;
  std::unique_ptr<dist::CollectivesService> collectives;
  std::unique_ptr<StageFactory> stages;  // over registry, host, config_json, run_dir
  // The job's processes: dist::world() for `run` (set first thing), a
  // one-process communicator otherwise (evaluate, generate, profile).
  dist::Communicator* comm = nullptr;
  std::unique_ptr<dist::Communicator> own_comm;
  dist::Communicator& communicator() {
    if (!comm) {
      own_comm = dist::make_single_process();
      comm = own_comm.get();
    }
    return *comm;
  }
  int rank() const { return comm ? comm->rank() : 0; }
  int world_size() const { return comm ? comm->size() : 1; }
  bool leader() const { return rank() == 0; }

  // Stages (declaration order = reverse destruction order: dependents last).
  StageInstance tokenizer, train_data, val_data, model, optimizer, scheduler;
  // A second loader over the train split for evaluation.split: train, so that
  // evaluating never moves the training iterator.
  StageInstance eval_train_data;
  std::vector<std::pair<std::string, StageInstance>> evaluators;  // name, instance
  std::vector<std::pair<std::string, StageInstance>> callbacks;   // "callbacks[i].type", instance
  std::vector<EngineObserver*> observers;                         // Engine::add_observer, after the callbacks

  // The flat parameter layout and the ranks' shards of it (multi-process
  // or deterministic runs), and with ZeRO-1 this rank's part of every
  // parameter, as the optimizer received it (zc_param_shard).
  std::unique_ptr<dist::FlatLayout> layout;
  dist::ShardPlan plan;
  std::vector<int64_t> shard_begin, shard_end;
  std::vector<uint32_t> shard_groups;  // per parameter, its zc_group (ABI 1.9)
  zc_param_shard shard_spec{};
  bool zero() const { return cfg.distributed().zero_stage == 1; }
  // Expert parallelism (distributed.expert_parallel > 1): the model's dense
  // and expert tensors apart (`layout` and `plan` then index the dense ones,
  // summed over the world), and the experts' own layout over EXPERT_DATA
  // (with ZeRO-1 each list split among its group's ranks).
  std::unique_ptr<dist::ExpertSplit> experts;
  std::unique_ptr<dist::FlatLayout> expert_layout;
  dist::ShardPlan expert_plan;
  // (A one-process command on an expert-parallel config runs every expert.)
  bool expert_parallel() const { return cfg.distributed().expert_parallel > 1 && world_size() > 1; }

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
  engine_detail::Clock::time_point run_start = engine_detail::Clock::now();

  Impl(HarnessConfig c, EngineOptions o) : cfg(std::move(c)), opts(std::move(o)) {}
  ~Impl();

  // ---- setup (engine_setup.cpp) ----------------------------------------------
  void make_registry();
  // hardware.devices against the launched world size (ConfigValidationError).
  void check_devices();
  // A multi-process run: every rank's config and build hash against rank
  // 0's, refused on a mismatch (a collective: every rank calls it).
  void check_same_run();
  void create_tokenizer();
  // The memory estimate (see Engine::preflight): logged, then checked
  // against what the machine has left, before any buffer exists.
  void check_memory(bool training);
  MemoryEstimate memory_estimate;  // check_memory's, for the trace's memory counters
  // Engine::preflight: files, tokenizer, memory; nothing written.
  void preflight(bool training);
  void create_core_stages(bool training);
  // The flat layout and the shard plan (see `layout`), before the optimizer
  // is created: with ZeRO-1 the plan follows its shard_granularity. Under
  // expert parallelism, `experts` and the dense and expert layouts and
  // plans (on this rank alone).
  void plan_shards();
  // The groups and collective service of a run (every rank, in order).
  void make_groups();
  // Expert parallelism: every expert-group rank's tensor lists exchanged
  // and checked (ExpertSplit::exchange; a collective of each expert group: a
  // start phase of its own, so that every rank reaches it whatever failed
  // before).
  void split_experts();
  // Several ranks: the train loader hands each rank only its micro-batches
  // (zc_dataloader_table.set_data_shard), when it can (data_sharded).
  void shard_train_data();
  bool data_sharded = false;
  // The resolved list: the defaults merged with the config's entries
  // (HarnessConfig's merge_callbacks), in that order.
  void create_callbacks();
  // The loader an evaluation of `split` reads (created on first use).
  const StageInstance& eval_data(const std::string& split);
  std::string tokenizer_info() const;
  std::string model_info() const;
  std::pair<uint64_t, uint64_t> num_params() const;
  std::string provenance() const;

  // ---- events (engine.cpp); records of the run (engine_record.cpp) ----------
  uint32_t emit(zc_event_kind kind, const std::string& metrics_json);
  double elapsed_s() const;
  // Every stage with state, under its state.json key, and the file its
  // tensors go to.
  struct StageSlot {
    std::string key;
    const StageInstance* inst;
    ckpt::TensorFile file;
  };
  std::vector<StageSlot> stage_slots() const;
  ckpt::EngineState engine_state() const;
  // Writes the checkpoint of this step from rank 0's stages; with `parts`
  // (ZeRO-1) the optimizer's state is the ranks' parts already in the temp
  // folder, and its JSON the one given.
  struct OptimizerParts {
    std::filesystem::path tmp;
    std::string index, json;
    std::vector<std::pair<std::string, std::string>> files;  // part, SHA-256
  };
  // `expert_parts` (expert parallelism): the other expert-group ranks'
  // expert tensors, {model, optimizer} safetensors bytes per rank, added to
  // rank 0's so that the checkpoint holds every expert once.
  std::filesystem::path save_checkpoint(const OptimizerParts* parts = nullptr,
                                        const std::vector<std::pair<std::string, std::string>>* expert_parts = nullptr);
  // Expert parallelism: each rank's expert tensors of the model's and the
  // optimizer's state, gathered to rank 0 (gather_bytes) over the first
  // expert group (a collective on ranks 0..K-1; the others return at once);
  // rank 0 gets {model, optimizer} bytes of ranks 1..K-1 (with ZeRO-1 the
  // optimizer's are empty: the ranks' parts hold that state), and in
  // `failure` (when empty) the first group rank's reason it could not save.
  std::vector<std::pair<std::string, std::string>> gather_expert_state(std::string* failure);
  // The checkpoint of every rank's step. The ranks hold the same weights and
  // data position (data parallel, replicated), so rank 0 writes them, as one
  // process would; with ZeRO-1 every rank writes its part of the optimizer
  // state first, and rank 0 publishes the folder only when every part is
  // there (a collective: every rank calls it). Rank 0's outcome reaches
  // every rank: a failed checkpoint throws ckpt::CheckpointError on all.
  void save_checkpoint_all();
  // Loads every stage's state from a verified checkpoint. `only_model` for evaluate/generate.
  void restore(const ckpt::LoadedCheckpoint& ck, bool only_model);
  std::string summary_json(bool interrupted) const;
  void open_run_dir(bool resume, bool overwrite);
  // The run folder's config.yaml: written only once the run will start (after
  // a resume's checkpoint is checked), so a refused resume leaves the folder's
  // record of its config as it was.
  void write_run_config() const;

  // ---- the loop (engine.cpp) -------------------------------------------------
  // Trains up to training.max_steps (or `profile_steps` > 0 more steps, for
  // `profile`); returns an ExitCode.
  int train(int profile_steps);
  struct Loop;  // what the loop holds across steps

  // ---- evaluation (evaluate.cpp) ---------------------------------------------
  // Runs every evaluator over `split`; returns its metrics in the order they
  // were reported (the "lm" evaluator's unprefixed, others' as "<name>_<metric>").
  std::vector<std::pair<std::string, double>> run_evaluation(const std::string& split);
  // Evaluates at the current step and emits EVAL_END (metrics + best_val_loss,
  // best_step, eval_time_ms); returns the callbacks' flags (0 when a stop
  // request interrupted the evaluation). `count_best`: false for the step-0
  // evaluation, which measures the untrained model and has no checkpoint to
  // point best_step at.
  uint32_t evaluate_and_emit(bool count_best);
  // Under expert parallelism, a rank other than 0 runs the same evaluation
  // with it (its model's forward is a collective); the result is rank 0's
  // to report.
  void run_peer_evaluation();
};

}  // namespace zcode
