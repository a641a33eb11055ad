// What the engine records of a run: the stages' and the loop's state in a
// checkpoint and restoring them (the format itself is checkpoint.cpp's), the
// run folder and its config.yaml, and the TEARDOWN summary.
#include <zcode/core/log.h>
#include <zcode/core/run_dir.h>
#include <zcode/sdk/json.h>

#include "engine_impl.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace zcode {

namespace fs = std::filesystem;

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

namespace {

// Every tensor of a safetensors file (bytes) into `out`, names prefixed.
void add_tensors(sdk::safetensors::Writer& out, const std::string& prefix, const std::string& bytes,
                 const std::string& source) {
  if (bytes.empty()) return;
  const sdk::safetensors::Reader r(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), source);
  for (const auto& t : r.tensors()) out.add(prefix + t.name, t.dtype.c_str(), t.shape, t.data, t.nbytes);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> Engine::Impl::gather_expert_state(std::string* failure) {
  if (!experts) return {};
  dist::Communicator& group = groups->get(ZC_GROUP_EXPERT);
  // The first expert group (world ranks 0..K-1) holds every expert once.
  if (rank() >= group.size()) return {};
  // Each rank's experts only (the dense tensors are rank 0's own), to rank 0
  // only: the memory a rank adds is its own experts' bytes, rank 0's the
  // group's (what the checkpoint file holds anyway). A rank whose stage
  // cannot save sends "!" and the reason ("+" and the bytes otherwise), so
  // that the collective completes and rank 0 reports it.
  auto own_experts = [&](const StageInstance& st, const char* key) -> std::string {
    if (leader() || !st) return {};
    try {
      sdk::safetensors::Writer kept;
      ckpt::StateWriterView w(&kept, "", key);
      w.keep_only([this](std::string_view n) { return experts->is_local_expert(n); });
      check_plugin_call(*st.component(), "save_state", st.component()->base()->save_state(st.get(), w.get()));
      const std::vector<uint8_t> out = kept.serialize();
      return "+" + std::string(out.begin(), out.end());
    } catch (const std::exception& e) {
      return std::string("!") + e.what();
    }
  };
  const std::vector<std::string> m = group.gather_bytes(own_experts(model, "model"), 0);
  // (With ZeRO-1 every rank writes its part of the experts' optimizer state
  // with the dense ones': nothing of it to gather.)
  const std::vector<std::string> o =
      zero() ? std::vector<std::string>(m.size()) : group.gather_bytes(own_experts(optimizer, "optimizer"), 0);
  std::vector<std::pair<std::string, std::string>> out;
  if (!leader()) return out;
  auto take = [&](const std::string& got, size_t q, const char* what) -> std::string {
    if (got.empty()) return {};
    if (got[0] == '!' && failure->empty())
      *failure = "expert-group rank " + std::to_string(q) + " could not save its experts' " + what +
                 " state: " + got.substr(1);
    return got[0] == '+' ? got.substr(1) : std::string();
  };
  for (size_t q = 1; q < m.size(); ++q) out.emplace_back(take(m[q], q, "model"), take(o[q], q, "optimizer"));
  return out;
}

fs::path Engine::Impl::save_checkpoint(const OptimizerParts* parts,
                                       const std::vector<std::pair<std::string, std::string>>* expert_parts) {
  ckpt::CheckpointContents c;
  c.step = step;
  ckpt::StateRecord r;
  r.step = step;
  r.max_steps = cfg.training().max_steps;
  r.seed = cfg.seed();
  r.engine = engine_state();
  for (const auto& slot : stage_slots()) {
    if (parts && slot.file == ckpt::TensorFile::kOptimizer) {  // saved by every rank already
      r.stages.push_back({slot.key, slot.inst->component(), parts->json});
      continue;
    }
    ckpt::StateWriterView w(&c.tensors(slot.file), ckpt::tensor_prefix(slot.file, slot.key), slot.key);
    check_plugin_call(*slot.inst->component(), "save_state",
                      slot.inst->component()->base()->save_state(slot.inst->get(), w.get()));
    r.stages.push_back({slot.key, slot.inst->component(), w.json()});
  }
  if (expert_parts)  // the experts of the other expert-group ranks, under their global names
    for (size_t q = 0; q < expert_parts->size(); ++q) {
      const std::string from = "expert-group rank " + std::to_string(q + 1);
      add_tensors(c.tensors(ckpt::TensorFile::kModel), ckpt::tensor_prefix(ckpt::TensorFile::kModel, "model"),
                  (*expert_parts)[q].first, from + " model state");
      add_tensors(c.tensors(ckpt::TensorFile::kOptimizer),
                  ckpt::tensor_prefix(ckpt::TensorFile::kOptimizer, "optimizer"), (*expert_parts)[q].second,
                  from + " optimizer state");
    }
  std::error_code cwd_ec;
  const fs::path cwd = fs::current_path(cwd_ec);
  if (!cwd_ec) r.cwd = cwd;
  r.config_json = config_json;
  r.overrides = cfg.overrides();
  r.environment_json = rundir::environment_json(host->num_threads());
  c.state_json = ckpt::state_json(r);
  fs::path dir;
  if (parts) {
    c.optimizer_index = parts->index;
    c.optimizer_parts = parts->files;
    dir = ckpt::finish_checkpoint(run_dir / "checkpoints", parts->tmp, c, cfg.training().keep_last_n);
  } else {
    dir = ckpt::write_checkpoint(run_dir / "checkpoints", c, cfg.training().keep_last_n);
  }
  log::info("Checkpoint saved to " + dir.string());
  sdk::json::Writer ev;
  ev.begin_object().key("path").string(dir.string()).key("step").integer(step).end_object();
  emit(ZC_EVENT_CHECKPOINT, ev.str());
  return dir;
}

void Engine::Impl::save_checkpoint_all() {
  // The others wait for rank 0's write as long as it takes (rank 0 itself
  // still times out when one of them hangs).
  struct Pause {
    dist::Communicator& c;
    bool on;
    Pause(dist::Communicator& comm, bool pause) : c(comm), on(pause) {
      if (on) c.pause_timeout(true);
    }
    ~Pause() {
      if (on) c.pause_timeout(false);
    }
  } pause(communicator(), !leader());
  if (world_size() == 1 && !zero()) {
    save_checkpoint();
    return;
  }
  // Several ranks: rank 0's outcome goes to every rank (one message), so a
  // checkpoint that fails fails everywhere at once, with or without ZeRO.
  std::string outcome;                                             // rank 0's: "" or the error every rank reports
  std::string expert_failure;                                      // rank 0's: an expert-group rank that could not save
  const auto expert_parts = gather_expert_state(&expert_failure);  // (expert parallelism: to rank 0 first)
  if (!zero()) {
    if (leader()) {
      try {
        if (!expert_failure.empty()) throw ckpt::CheckpointError(expert_failure);
        save_checkpoint(nullptr, experts ? &expert_parts : nullptr);
      } catch (const std::exception& e) {
        outcome = e.what();
      }
    }
    communicator().broadcast_bytes(outcome, 0);
    if (!outcome.empty()) throw ckpt::CheckpointError("checkpoint of step " + std::to_string(step) + ": " + outcome);
    return;
  }
  // ZeRO-1: each rank writes its part of the optimizer state into the
  // temp folder rank 0 made; rank 0 publishes the folder once every part is
  // there and the pieces tile every tensor. Every step below is agreed on,
  // so a rank that fails makes every rank fail, and none waits forever.
  // Under expert parallelism the parts hold the experts' state too (each
  // expert split among its EXPERT_DATA ranks), and the model's experts came
  // to rank 0 first, as without ZeRO.
  dist::Communicator& c = communicator();
  const fs::path root = run_dir / "checkpoints";
  std::string tmp;  // "!" + message: rank 0 could not make it
  if (leader()) {
    try {
      tmp = ckpt::begin_checkpoint(root, step).string();
    } catch (const std::exception& e) {
      tmp = std::string("!") + e.what();
    }
  }
  c.broadcast_bytes(tmp, 0);
  if (!tmp.empty() && tmp[0] == '!') throw ckpt::CheckpointError(tmp.substr(1));
  std::string mine, json;
  try {
    sdk::safetensors::Writer w;
    std::vector<ckpt::Piece> pieces;
    ckpt::StateWriterView view(&w, "", "optimizer", &pieces);
    check_plugin_call(*optimizer.component(), "save_state",
                      optimizer.component()->base()->save_state(optimizer.get(), view.get()));
    if (view.json()) json = *view.json();
    const std::string part = ckpt::optimizer_part_name(rank(), world_size());
    const std::string sha = ckpt::write_part(tmp, part, w.serialize());
    mine = sdk::json::Writer()
               .begin_object()
               .key("sha256")
               .string(sha)
               .key("pieces")
               .raw(ckpt::pieces_json(pieces, part))
               .end_object()
               .str();
  } catch (const std::exception& e) {
    mine = sdk::json::Writer().begin_object().key("error").string(e.what()).end_object().str();
  }
  const std::vector<std::string> all = c.allgather_bytes(mine);
  std::string failure;
  OptimizerParts parts;
  parts.tmp = tmp;
  parts.json = json;
  std::vector<std::string> rank_pieces;
  for (size_t q = 0; q < all.size() && failure.empty(); ++q) {
    rapidjson::Document d;
    d.Parse(all[q].c_str());
    if (d.HasParseError() || !d.IsObject() || d.HasMember("error") || !d.HasMember("sha256"))
      failure = "rank " + std::to_string(q) + " could not write its part of the optimizer state: " +
                (d.IsObject() && d.HasMember("error") && d["error"].IsString() ? d["error"].GetString() : "?");
    else {
      parts.files.emplace_back(ckpt::optimizer_part_name(static_cast<int>(q), world_size()), d["sha256"].GetString());
      rapidjson::StringBuffer sb;
      rapidjson::Writer<rapidjson::StringBuffer> jw(sb);
      d["pieces"].Accept(jw);
      rank_pieces.emplace_back(sb.GetString(), sb.GetSize());
    }
  }
  if (leader()) {
    try {
      if (failure.empty()) failure = expert_failure;
      if (!failure.empty()) throw ckpt::CheckpointError(failure);
      parts.index = ckpt::build_part_index(rank_pieces);
      save_checkpoint(&parts, experts ? &expert_parts : nullptr);
    } catch (const std::exception& e) {
      outcome = e.what();
      std::error_code ec;
      fs::remove_all(tmp, ec);  // the previous checkpoint and `latest` stay
    }
  }
  c.broadcast_bytes(outcome, 0);
  if (!outcome.empty()) throw ckpt::CheckpointError("checkpoint of step " + std::to_string(step) + ": " + outcome);
}

void Engine::Impl::restore(const ckpt::LoadedCheckpoint& ck, bool only_model) {
  const ckpt::StoredState state = ckpt::read_state(ck);
  for (const auto& slot : stage_slots()) {
    if (only_model && slot.key != "model") continue;
    std::string json;
    if (const std::string* j = state.stage(slot.key)) json = *j;
    else if (!only_model) log::warn("resume: the checkpoint has no state for " + slot.key + " (it starts fresh)");
    std::unique_ptr<ckpt::StateReaderView> rd;
    if (slot.file == ckpt::TensorFile::kOptimizer && ck.optimizer_parts)  // saved in parts (ZeRO-1), any layout
      rd = std::make_unique<ckpt::StateReaderView>(ck.optimizer_parts.get(), std::move(json));
    else
      rd = std::make_unique<ckpt::StateReaderView>(ck.tensors(slot.file), ckpt::tensor_prefix(slot.file, slot.key),
                                                   std::move(json));
    // Expert parallelism: the checkpoint holds every expert (whatever layout
    // wrote it); a rank's model and optimizer see the ones it holds.
    if (experts && slot.file != ckpt::TensorFile::kExtra)
      rd->hide([this](std::string_view n) { return experts->is_foreign_expert(n); });
    check_plugin_call(*slot.inst->component(), "load_state",
                      slot.inst->component()->base()->load_state(slot.inst->get(), rd->get()));
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
  w.key("processes").number(world_size(), 17);
  w.key("cpu_core_hours").number(wall * host->num_threads() * world_size() / 3600.0, 17);
  {
    // The process layout the run ended on (a resumed run may have changed it).
    const auto& t = cfg.training();
    std::string layout = world_size() == 1 ? "one process"
                                           : "data parallel over " + std::to_string(world_size()) + " processes (" +
                                                 (comm ? comm->describe() : std::string("?")) + ")";
    layout += ", global batch " + std::to_string(cfg.data().batch_size) + " x " +
              std::to_string(t.gradient_accumulation) + " x " + std::to_string(world_size()) + " sequences";
    if (expert_parallel())
      layout += ", experts split over groups of " + std::to_string(cfg.distributed().expert_parallel) + " ranks";
    if (zero()) layout += ", ZeRO-1 (optimizer state sharded)";
    if (t.deterministic) layout += ", deterministic reduction";
    w.key("layout").string(layout);
  }
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

}  // namespace zcode
