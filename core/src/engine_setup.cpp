// The engine's setup: registry and host, stage creation, the memory check
// of preflight, and what the stages report about themselves.
#include <zcode/core/dist/launch.h>
#include <zcode/core/log.h>
#include <zcode/core/preflight.h>
#include <zcode/core/version.h>

#include "engine_impl.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <thread>

namespace zcode {

namespace {

bool is_json(const char* s) {
  rapidjson::Document d;
  d.Parse(s);
  return !d.HasParseError();
}

}  // namespace

Engine::Impl::~Impl() {
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

void Engine::Impl::make_registry() {
  if (registry) return;
  PluginSearchOptions so;
  for (const auto& p : opts.plugin_paths) so.cli_paths.emplace_back(p);
  for (const auto& p : cfg.plugin_path()) so.config_paths.emplace_back(p);
  so.allow_insecure = opts.allow_insecure_plugin_path;
  registry = std::make_unique<Registry>(so);
  if (!cfg.validated()) cfg.validate(registry.get());
  log::set_console_level(static_cast<log::Level>(cfg.logging().console_log_level));
  config_json = cfg.to_json();
  // 0: the node's cores shared among the ranks on it (an explicit value wins).
  const int threads =
      dist::threads_per_rank(cfg.hardware().num_threads, std::thread::hardware_concurrency(), communicator().launch());
  host = std::make_unique<HostServices>(cfg.seed(), threads, DLDevice{kDLCPU, 0});
  // run_dir is read at each create: the tokenizer of preflight gets "" (no
  // run folder yet), the stages after open_run_dir get the folder.
  stages = std::make_unique<StageFactory>(*registry, *host, config_json, run_dir);
}

void Engine::Impl::create_tokenizer() {
  if (tokenizer) return;  // preflight created it
  tokenizer = stages->create(ZC_KIND_TOKENIZER, cfg.data().tokenizer_type, "data.tokenizer",
                             cfg.section_json("data.tokenizer"));
}

void Engine::Impl::check_memory(bool training) {
  const std::string model_opts = cfg.section_json("model");
  const auto& mc = registry->require(ZC_KIND_MODEL, cfg.model().type, "model.type");
  const Component* oc =
      training ? &registry->require(ZC_KIND_OPTIMIZER, cfg.optimizer().name, "optimizer.name") : nullptr;
  const std::string opt_opts = cfg.section_json("optimizer");
  MemoryEstimate est =
      estimate_run_memory(mc, stages->args(model_opts, {.tokenizer = tokenizer.ref()}), oc, stages->args(opt_opts));
  // ZeRO-1: this rank keeps about 1/N of the optimizer state (its range of
  // the flat layout; the ranges differ by less than a block of rows).
  if (training && zero() && est.optimizer_state && world_size() > 1)
    est.optimizer_state =
        (*est.optimizer_state + static_cast<uint64_t>(world_size()) - 1) / static_cast<uint64_t>(world_size());
  const auto avail = available_memory_bytes();
  char b[64];
  std::snprintf(b, sizeof b, "%.1f MiB", avail ? static_cast<double>(*avail) / (1024.0 * 1024.0) : 0.0);
  log::info("Memory estimate: " + est.describe() + (avail ? std::string(" of ") + b + " available" : std::string()));
  for (const std::string& u : est.unknown) log::warn("Memory estimate unknown for " + u);
  memory_estimate = est;
  // Every process on this node needs its own copy.
  const int local = communicator().launch().local_size;
  const std::string per_node =
      local > 1 ? " per process, x " + std::to_string(local) + " processes on this node," : std::string();
  if (avail && est.known_total() * static_cast<uint64_t>(local) > *avail)
    throw ConfigValidationError(
        cfg.origin(), {{"data.batch_size",
                        "the run needs about " + est.describe() + per_node + " more than the " + b +
                            " this machine has available (MemAvailable, cgroup limit); lower data.batch_size (raise "
                            "training.gradient_accumulation to keep the tokens per step) or model.max_seq_len, or "
                            "evaluation.batch_size when it is the larger"}});
}

void Engine::Impl::preflight(bool training) {
  make_registry();
  EnvironmentCheckOptions eo;
  eo.training = training;
  if (auto errors = check_environment(cfg, eo); !errors.empty())
    throw ConfigValidationError(cfg.origin(), std::move(errors));
  create_tokenizer();
  check_memory(training);
}

void Engine::Impl::create_core_stages(bool training) {
  create_tokenizer();
  model = stages->create(ZC_KIND_MODEL, cfg.model().type, "model.type", cfg.section_json("model"),
                         {.tokenizer = tokenizer.ref()});
  if (training) {
    train_data = stages->create(ZC_KIND_DATALOADER, cfg.data().loader, "data.loader", cfg.section_json("data"),
                                {.tokenizer = tokenizer.ref(), .split = "train"});
    shard_train_data();
    plan_shards();
    optimizer = stages->create(ZC_KIND_OPTIMIZER, cfg.optimizer().name, "optimizer.name", cfg.section_json("optimizer"),
                               {.model = model.ref(), .shard = zero() ? &shard_spec : nullptr});
    scheduler =
        stages->create(ZC_KIND_SCHEDULER, cfg.scheduler().type, "scheduler.type", cfg.section_json("scheduler"));
  }
  for (const auto& name : cfg.evaluation().plugins)
    evaluators.emplace_back(
        name, stages->create(ZC_KIND_EVALUATOR, name, "evaluation.plugins", cfg.evaluator_options_json(name),
                             {.tokenizer = tokenizer.ref(), .model = model.ref()}));
}

void Engine::Impl::split_experts() {
  if (experts) experts->exchange(groups->get(ZC_GROUP_EXPERT));
}

void Engine::Impl::shard_train_data() {
  data_sharded = false;
  if (world_size() == 1) return;
  // Every rank reads only its micro-batches (ABI 1.8); a loader that cannot
  // is read whole, each rank keeping its share (Loop::load_batches).
  const auto* dt = train_data.component()->as<zc_dataloader_table>();
  if (!ZC_TABLE_HAS_SLOT(dt, zc_dataloader_table, set_data_shard) || !dt->set_data_shard) return;
  zc_status* st =
      dt->set_data_shard(train_data.get(), static_cast<uint64_t>(rank()), static_cast<uint64_t>(world_size()));
  if (st && status_code(st) == ZC_ERR_UNSUPPORTED) {
    status_release(st);
    return;
  }
  check_plugin_call(*train_data.component(), "set_data_shard", st);
  data_sharded = true;
}

void Engine::Impl::make_groups() {
  groups = std::make_unique<dist::ProcessGroups>(communicator(), static_cast<int>(cfg.distributed().expert_parallel));
  collectives = std::make_unique<dist::CollectivesService>(*groups);
  host->set_collectives(collectives->table());
}

void Engine::Impl::plan_shards() {
  if (!zero() && world_size() == 1 && !cfg.training().deterministic) return;  // nothing moves between ranks
  zc_param_list params{};
  check_plugin_call(*model.component(), "params",
                    model.component()->as<zc_model_table>()->params(model.get(), &params));
  std::vector<int64_t> multiples(params.count, 1);
  if (zero()) {
    const Component& oc = registry->require(ZC_KIND_OPTIMIZER, cfg.optimizer().name, "optimizer.name");
    const auto* ot = oc.as<zc_optimizer_table>();
    if (!ZC_TABLE_HAS_SLOT(ot, zc_optimizer_table, shard_granularity))
      throw ConfigValidationError(
          cfg.origin(), {{"distributed.zero_stage",
                          "1 needs an optimizer that can keep state for a part of the parameters; " + oc.label() +
                              " cannot (its table has no shard_granularity, ABI 1.5); use zero_stage 0"}});
    // An optimizer built before ABI 1.9 reads one group for every parameter
    // (zc_param_shard.group) and would reduce the experts' statistics over
    // the dense tensors' ranks.
    if (expert_parallel() && oc.file && oc.file->abi_minor < 9)
      throw ConfigValidationError(
          cfg.origin(), {{"distributed.zero_stage",
                          "1 with distributed.expert_parallel = " + std::to_string(cfg.distributed().expert_parallel) +
                              " needs an optimizer built for ABI 1.9 or newer (zc_param_shard.groups); " + oc.label() +
                              " is built for ABI 1." + std::to_string(oc.file->abi_minor) +
                              "; rebuild it against this SDK or use zero_stage 0"}});
    const std::string opts = cfg.section_json("optimizer");
    const zc_create_args a = stages->args(opts, {.model = model.ref()});
    check_plugin_call(oc, "shard_granularity", ot->shard_granularity(&a, multiples.data(), multiples.size()));
  }
  shard_begin.assign(params.count, 0);
  shard_end.assign(params.count, 0);
  shard_groups.assign(params.count, ZC_GROUP_DATA);
  if (!expert_parallel()) {
    layout = std::make_unique<dist::FlatLayout>(params);
    plan = dist::plan_shards(*layout, world_size(), multiples);
    for (size_t i = 0; i < params.count; ++i) plan.tensor_range(*layout, rank(), i, &shard_begin[i], &shard_end[i]);
  } else {
    // The dense tensors are summed over the world (DATA) and, with ZeRO-1,
    // split among all its ranks; the experts are summed over the ranks that
    // hold the same experts (EXPERT_DATA) and split among those. Each list
    // has its own flat layout (local: the groups' exchange of the lists,
    // split_experts(), comes in a phase of its own).
    experts = std::make_unique<dist::ExpertSplit>(params);
    std::vector<int64_t> dense_multiples, expert_multiples;
    for (size_t i = 0; i < params.count; ++i)
      (experts->dense_index(i) >= 0 ? dense_multiples : expert_multiples).push_back(multiples[i]);
    layout = std::make_unique<dist::FlatLayout>(experts->dense());
    plan = dist::plan_shards(*layout, world_size(), dense_multiples);
    expert_layout = std::make_unique<dist::FlatLayout>(experts->experts());
    const dist::Communicator& ed = groups->get(ZC_GROUP_EXPERT_DATA);
    expert_plan = dist::plan_shards(*expert_layout, ed.size(), expert_multiples);
    for (size_t i = 0, x = 0; i < params.count; ++i) {
      if (const int64_t d = experts->dense_index(i); d >= 0) {
        plan.tensor_range(*layout, rank(), static_cast<size_t>(d), &shard_begin[i], &shard_end[i]);
      } else {
        expert_plan.tensor_range(*expert_layout, ed.rank(), x++, &shard_begin[i], &shard_end[i]);
        shard_groups[i] = ZC_GROUP_EXPERT_DATA;
      }
    }
  }
  shard_spec = zc_param_shard{sizeof(zc_param_shard), ZC_GROUP_DATA,    params.count,
                              shard_begin.data(),     shard_end.data(), shard_groups.data()};
}

void Engine::Impl::create_callbacks() {
  const auto& list = cfg.callbacks();
  // --quiet and --log-format json: no progress bar between the lines
  // (it would be the only non-JSON, non-warning output on stdout); with
  // json (and not quiet) the console prints its events as JSON objects.
  const bool quiet = log::console_quiet();
  const bool json = log::console_format() == log::Format::Json && !quiet;
  const bool no_bar = quiet || json;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "callbacks[" + std::to_string(i) + "].type";
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
                           stages->create(ZC_KIND_CALLBACK, list[i].type, where, options,
                                          {.tokenizer = tokenizer.ref(), .model = model.ref()}));
  }
}

const StageInstance& Engine::Impl::eval_data(const std::string& split) {
  StageInstance& slot = split == "train" ? eval_train_data : val_data;
  if (!slot) {
    slot = stages->create(ZC_KIND_DATALOADER, cfg.data().loader, "data.loader", cfg.section_json("data"),
                          {.tokenizer = tokenizer.ref(), .split = split == "train" ? "train" : "val"});
  }
  return slot;
}

std::string Engine::Impl::tokenizer_info() const {
  const char* j = nullptr;
  check_plugin_call(*tokenizer.component(), "info_json",
                    tokenizer.component()->as<zc_tokenizer_table>()->info_json(tokenizer.get(), &j));
  return j && is_json(j) ? j : "{}";
}
std::string Engine::Impl::model_info() const {
  const char* j = nullptr;
  check_plugin_call(*model.component(), "info_json",
                    model.component()->as<zc_model_table>()->info_json(model.get(), &j));
  return j && is_json(j) ? j : "{}";
}
std::pair<uint64_t, uint64_t> Engine::Impl::num_params() const {
  uint64_t t = 0, a = 0;
  check_plugin_call(*model.component(), "num_params",
                    model.component()->as<zc_model_table>()->num_params(model.get(), &t, &a));
  return {t, a};
}
std::string Engine::Impl::provenance() const {
  if (!train_data) return "[]";
  const char* j = nullptr;
  check_plugin_call(*train_data.component(), "provenance_json",
                    train_data.component()->as<zc_dataloader_table>()->provenance_json(train_data.get(), &j));
  return j && is_json(j) ? j : "[]";
}

void Engine::Impl::check_devices() {
  const int64_t devices = cfg.hardware().devices, n = world_size();
  if (devices != n) {
    const dist::LaunchInfo& l = communicator().launch();
    const std::string what = l.launched ? l.launcher + " started " + std::to_string(n) + " process(es)"
                                        : std::string("this process was started alone (world size 1)");
    throw ConfigValidationError(
        cfg.origin(),
        {{"hardware.devices", std::to_string(devices) + " processes, but " + what + ": launch with `mpirun -np " +
                                  std::to_string(devices) + " zcode-host run ...` (or `srun -n " +
                                  std::to_string(devices) + "`), or set hardware.devices to " + std::to_string(n)}});
  }
}

void Engine::Impl::check_same_run() {
  if (world_size() == 1) return;
  // The same config and the same build on every rank: a rank that trains
  // another model or computes differently would corrupt the sums silently.
  std::string mine = ckpt::sha256_hex(config_json.data(), config_json.size());
  mine += ' ';
  mine += git_commit();
  mine += ' ';
  try {
    mine += ckpt::sha256_file("/proc/self/exe");
  } catch (const std::exception&) {
    mine += '?';
  }
  const std::vector<std::string> all = communicator().allgather_bytes(mine);
  for (size_t q = 1; q < all.size(); ++q)
    if (all[q] != all[0]) {
      const bool config = all[q].compare(0, 64, all[0], 0, 64) != 0;
      std::string m = "rank " + std::to_string(q) + " runs a different ";
      m += config ? "config (hardware, data, model or training fields differ)" : "build (zcode-host binary or commit)";
      m += " than rank 0: every rank must run the same zcode-host on the same config";
      throw engine_detail::RunFailure(m, kExitUsageError);
    }
}

}  // namespace zcode
