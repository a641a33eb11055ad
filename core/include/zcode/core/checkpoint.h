// zcode/core/checkpoint.h: checkpoint folders, written atomically and
// verified completely before anything is loaded.
//
// Layout of `<run>/checkpoints/`:
//   step_N/model.safetensors      the model's tensors (its save_state names)
//   step_N/optimizer.safetensors  the optimizer's tensors
//   step_N/extra.safetensors      other stages' tensors, "<stage>/<name>" (only if any)
//   step_N/optimizer.index.json   instead of optimizer.safetensors when the
//   step_N/optimizer-R-of-N.safetensors  optimizer was sharded (ZeRO-1): one
//                                 part per rank, written by that rank, and
//                                 the index of every tensor's pieces (see
//                                 "Optimizer state in parts" below)
//   step_N/state.json             step, every stage's JSON, RNG and data state,
//                                 config + its SHA-256, environment, and the
//                                 SHA-256 of every .safetensors file
//   step_N/SHA256SUMS             `sha256sum -c` format over all files above
//   latest                        one line: the newest complete folder name
//
// Writing: files go into a hidden temp folder `.tmp-step_N-<pid>`, each file
// is fsync'ed, then the folder, then it is renamed to step_N, the parent is
// fsync'ed, and only then `latest` is replaced (temp file + rename). A crash
// at any point leaves the previous checkpoint intact and `latest` naming it.
// With parts, rank 0 makes the temp folder (begin_checkpoint), every rank
// writes and fsyncs its part into it (write_part), and rank 0, once it has
// every part's hash and has checked that the pieces tile every tensor,
// writes the rest and publishes the folder (finish_checkpoint).
#pragma once

#include <zcode/sdk/safetensors.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zcode {
struct Component;  // zcode/core/registry.h
}

namespace zcode::ckpt {

/// A checkpoint that cannot be used, one line naming the file:
/// `outputs/x/checkpoints/step_4/model.safetensors: SHA-256 mismatch (...)`.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The tensor files of a step folder. The model's tensors go to kModel and
/// the optimizer's to kOptimizer under their own names; every other stage's
/// go to kExtra, each name prefixed with "<stage key>/" (tensor_prefix).
enum class TensorFile { kModel, kOptimizer, kExtra };

/// The file's name in the step folder: "model.safetensors",
/// "optimizer.safetensors", "extra.safetensors".
const char* file_name(TensorFile f);

/// What the tensors of stage `key` are prefixed with in `f`: "<key>/" in
/// kExtra (one file shared by several stages), "" otherwise.
std::string tensor_prefix(TensorFile f, const std::string& key);

/// Lower-case hex SHA-256 (FIPS 180-4, via OpenSSL EVP) of bytes / a file.
/// sha256_file throws CheckpointError when the file cannot be read.
std::string sha256_hex(const void* data, size_t size);
std::string sha256_file(const std::filesystem::path& path);

/// Writes `text` to `path` atomically (temp file, fsync, rename, fsync dir).
/// Throws CheckpointError naming the path.
void write_file_atomic(const std::filesystem::path& path, const std::string& text);

// ---- Optimizer state in parts (ZeRO-1) ---------------------------------------
//
// Each rank's part file holds what its optimizer put: a tensor it holds
// whole under its name and shape, and its slice of a tensor held in parts
// (zc_state_writer.put_tensor_slice) as a 1-D tensor under the tensor's
// name. optimizer.index.json (format "zcode-optimizer-parts/1") lists every
// tensor once: {"name": {"dtype": "F32", "shape": [...], "pieces": [{"part":
// "optimizer-00001-of-00002.safetensors", "begin": b, "count": c}, ...]}}, the
// pieces in element order, tiling [0, numel) exactly. A checkpoint in parts
// loads on any layout: get_tensor assembles a tensor whole, and
// read_tensor_slice copies any range from the pieces that hold it.

/// "optimizer-00000-of-00002.safetensors": rank `rank`'s part of `parts`.
std::string optimizer_part_name(int rank, int parts);
/// The index file's name, "optimizer.index.json".
extern const char* const kOptimizerIndex;

/// One tensor, or a rank's slice of one, that a stage put while saving in parts.
struct Piece {
  std::string name, dtype;       ///< the tensor's name and safetensors dtype ("F32")
  std::vector<int64_t> shape;    ///< the whole tensor's
  int64_t begin = 0, count = 0;  ///< elements [begin, begin + count) of its row-major order
  bool whole = false;            ///< put whole (put_tensor), not as a slice
  std::string sha256;            ///< of a whole tensor's bytes (ranks that hold it must agree)
};
/// One rank's pieces as JSON (for the all-gather to rank 0), with its part file's name.
std::string pieces_json(const std::vector<Piece>& pieces, const std::string& part_file);
/// optimizer.index.json from every rank's pieces_json, in rank order. A
/// tensor put whole by several ranks is kept once (their hashes must be
/// equal). Throws CheckpointError naming the tensor when its pieces overlap,
/// leave a gap, or disagree on shape or dtype.
std::string build_part_index(const std::vector<std::string>& rank_pieces);

/// The tensors of a checkpoint's optimizer parts, indexed (load_checkpoint).
class PartedTensors {
 public:
  /// Parses the index and checks it against the parts (each piece inside its
  /// part's tensor of the same dtype). Throws CheckpointError naming `where`.
  PartedTensors(const std::string& index_json,
                std::map<std::string, std::unique_ptr<zcode::sdk::safetensors::Reader>> parts,
                const std::string& where);
  ~PartedTensors();
  const std::vector<std::string>& names() const { return names_; }
  /// The tensor whole (assembled on first use and kept), or nullptr.
  const DLTensor* whole(const std::string& name);
  /// Copies elements [begin, begin + numel(dst)) of `name` into `dst` (see
  /// zc_state_reader.read_tensor_slice). Throws CheckpointError.
  void read_slice(const std::string& name, int64_t numel, int64_t begin, DLTensor& dst) const;

 private:
  struct Entry;
  std::map<std::string, std::unique_ptr<zcode::sdk::safetensors::Reader>> parts_;
  std::vector<std::string> names_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;
  std::string where_;
};

/// What one checkpoint holds, before it goes to disk.
struct CheckpointContents {
  uint64_t step = 0;
  zcode::sdk::safetensors::Writer model;
  zcode::sdk::safetensors::Writer optimizer;
  zcode::sdk::safetensors::Writer extra;
  /// In parts (ZeRO-1): optimizer.index.json's text and every part already
  /// written into the temp folder, (file name, SHA-256); `optimizer` is then
  /// not written.
  std::string optimizer_index;
  std::vector<std::pair<std::string, std::string>> optimizer_parts;
  /// state.json without the "files" entry (added by write_checkpoint): a JSON
  /// object as text, as state_json() builds it.
  std::string state_json;

  /// The writer of file `f`.
  zcode::sdk::safetensors::Writer& tensors(TensorFile f);
  const zcode::sdk::safetensors::Writer& tensors(TensorFile f) const;
};

/// The engine's own loop state, state.json's "engine" object.
struct EngineState {
  uint64_t step = 0;                ///< optimizer steps done
  uint64_t tokens_seen = 0;         ///< target tokens trained on
  double best_val_loss = INFINITY;  ///< null in state.json until an evaluation ran
  uint64_t best_step = 0;
  double wall_time_s = 0;  ///< seconds, all segments of a resumed run
  /// NonfiniteGuard::state_json(); "" = none (written as {}, and read back
  /// as "" when state.json has no entry).
  std::string nonfinite_guard;
  /// The last logged STEP_END metrics and the last EVAL_END metrics (JSON
  /// objects; written, not read back: a resumed run reports its own).
  std::string last_train = "{}", last_val = "{}";
};

/// One stage of the run: its part of state.json's "stages" (its save_state
/// JSON) and of "plugins" (which plugin file made it).
struct StageState {
  std::string key;  ///< "model", "data.train", "evaluation.lm", "callbacks[0].console"
  const Component* component = nullptr;
  /// What its save_state gave put_json: kept as JSON when it parses, else as
  /// a JSON string; nullopt (put_json not called) is written as null.
  std::optional<std::string> json;
};

/// Everything state.json records about a run at one step.
struct StateRecord {
  uint64_t step = 0;
  int64_t max_steps = 0;
  uint64_t seed = 0;
  EngineState engine;
  std::vector<StageState> stages;
  /// The folder the config's relative paths resolve against (for evaluate and
  /// generate with the stored config from another folder); nullopt: unknown.
  std::optional<std::filesystem::path> cwd;
  std::string config_json;             ///< HarnessConfig::to_json(); hashed into "config_sha256"
  std::vector<std::string> overrides;  ///< the --set overrides, as given
  std::string environment_json;        ///< rundir::environment_json()
};

/// state.json's text for `r`, without "files" (CheckpointContents::state_json).
/// The schema ("format": "zcode-checkpoint/1"), in this order: format, step,
/// max_steps, seed, rng, engine, stages, cwd (when known), config,
/// config_sha256, overrides, git_commit, environment, plugins; write_checkpoint
/// adds files.
std::string state_json(const StateRecord& r);

/// Writes `root/step_<step>` atomically (see the file comment), updates
/// `root/latest`, then removes the oldest step folders beyond `keep_last_n`
/// (0 keeps all; the folder just written is never removed). Returns the
/// folder. Throws CheckpointError.
std::filesystem::path write_checkpoint(const std::filesystem::path& root, const CheckpointContents& c,
                                       int64_t keep_last_n);

/// write_checkpoint in three steps, for several ranks: begin_checkpoint
/// (one rank) makes and returns the empty temp folder of `root/step_<step>`;
/// write_part (any rank) writes one file into it, fsyncs it and returns its
/// SHA-256; finish_checkpoint (the rank that began) writes the rest of `c`
/// (whose optimizer_parts name the parts written) and publishes the folder
/// as write_checkpoint does. Throw CheckpointError.
std::filesystem::path begin_checkpoint(const std::filesystem::path& root, uint64_t step);
std::string write_part(const std::filesystem::path& tmp, const std::string& name, const std::vector<uint8_t>& bytes);
std::filesystem::path finish_checkpoint(const std::filesystem::path& root, const std::filesystem::path& tmp,
                                        const CheckpointContents& c, int64_t keep_last_n);

/// Step folders under `root` sorted by step (hidden temp folders ignored).
std::vector<std::pair<uint64_t, std::filesystem::path>> list_checkpoints(const std::filesystem::path& root);

/// What remove_stale_temp_folders did with set-aside `.old-step_N-<pid>`
/// folders (the previous copy of a step being saved again).
struct SetAsideCleanup {
  /// (set-aside folder, step folder it was renamed back to): step_N was missing.
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> restored;
  /// Set-aside folders removed because their step_N exists.
  std::vector<std::filesystem::path> removed;
};

/// Removes the hidden temp folders `.tmp-step_N-<pid>` under `root` (a
/// `checkpoints/` folder) that a killed writer left: those whose PID is not a
/// running process (or is this process, which has written none yet). A
/// folder of a live process (another run writing there) is left alone.
/// First, a dead writer's `.old-step_N-<pid>` (step_N moved aside by a
/// re-save) is renamed back to step_N when step_N is missing (the writer was
/// killed between the two renames), else removed; `set_aside`, when given,
/// receives what was done with those. Returns the `.tmp-` folders removed,
/// sorted; throws CheckpointError when a folder cannot be removed or restored.
std::vector<std::filesystem::path> remove_stale_temp_folders(const std::filesystem::path& root,
                                                             SetAsideCleanup* set_aside = nullptr);

/// Resolves a --resume-from / --checkpoint value, for every command that
/// takes one: "latest" -> the folder named by `<run_dir>/checkpoints/latest`;
/// the pointer file `.../checkpoints/latest` itself -> the folder it names; a
/// run folder -> its latest; a `checkpoints/` folder -> its latest; a step
/// folder as is. Throws CheckpointError (`--resume-from latest: no
/// checkpoint in <dir>`, `P: not a checkpoint folder (...)`).
std::filesystem::path resolve(const std::string& spec, const std::filesystem::path& run_dir);

/// A loaded and fully verified checkpoint.
struct LoadedCheckpoint {
  std::filesystem::path dir;
  uint64_t step = 0;
  std::unique_ptr<zcode::sdk::safetensors::Reader> model, optimizer, extra;  // extra may be null
  /// The optimizer's state in parts (ZeRO-1), when optimizer.index.json
  /// replaced optimizer.safetensors (`optimizer` is then null).
  std::unique_ptr<PartedTensors> optimizer_parts;
  std::string state_json;  // the whole state.json text

  /// The reader of file `f` (null for an absent extra.safetensors, and for
  /// the optimizer's and extra's in a Parts::kModelOnly load).
  const zcode::sdk::safetensors::Reader* tensors(TensorFile f) const;
};

/// What a load needs: everything (resume), or the model and state.json only
/// (evaluate, generate: optimizer.safetensors and extra.safetensors may be
/// absent and are not read; `optimizer` and `extra` stay null).
enum class Parts { kAll, kModelOnly };

/// Reads every needed file of `dir`, checks SHA256SUMS and the hashes in
/// state.json, parses the safetensors files and state.json, and only then
/// returns. Throws CheckpointError naming the offending file (missing,
/// truncated, hash mismatch, bad header, a state.json step that disagrees
/// with a `step_N` folder name). Never returns half a checkpoint.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& dir, Parts parts = Parts::kAll);

/// state.json as the engine and generate read it back.
struct StoredState {
  /// "engine", when state.json has that object (a field it lacks keeps
  /// its default; best_val_loss is INFINITY unless a number).
  std::optional<EngineState> engine;
  /// "config" as compact JSON, when present.
  std::optional<std::string> config;
  /// "stages".<key> for each key present: "" for null, a string's contents,
  /// else the value as compact JSON.
  std::map<std::string, std::string> stages;

  /// The state JSON of stage `key`, or nullptr when state.json has none.
  const std::string* stage(const std::string& key) const;
};

/// Parses `ck.state_json` (verified by load_checkpoint) into a StoredState.
/// Throws CheckpointError naming state.json when it is not a JSON object.
StoredState read_state(const LoadedCheckpoint& ck);

/// The config the checkpoint was trained with (state.json's "config"), as
/// JSON text for HarnessConfig::from_string. Its relative file paths
/// (HarnessConfig::is_path_field) are made absolute against state.json's
/// "cwd", the working directory of the run that wrote it, so they name the
/// run's files from any folder; a state.json without "cwd" (written before it
/// was recorded) keeps them as written. Throws CheckpointError naming
/// state.json when it has no config.
std::string stored_config_json(const LoadedCheckpoint& ck);
/// The same from the step folder `dir`, reading only its state.json (not
/// verified against SHA256SUMS: for a command that loads, and so verifies,
/// the whole checkpoint afterwards). Throws CheckpointError when state.json
/// is missing or unreadable or has no config.
std::string stored_config_json(const std::filesystem::path& dir);

/// A zc_state_writer for one stage's save_state: tensors go into `tensors`
/// with `prefix` prepended, the JSON blob is kept (json()). Errors name
/// `stage`: "<stage>: save_state: put_json called twice".
class StateWriterView {
 public:
  /// `pieces` set: the stage saves in parts (ZeRO-1): every tensor it puts is
  /// recorded there too, and put_tensor_slice is accepted; otherwise a slice
  /// that is not the whole tensor is ZC_ERR_UNSUPPORTED.
  StateWriterView(zcode::sdk::safetensors::Writer* tensors, std::string prefix, std::string stage,
                  std::vector<Piece>* pieces = nullptr);
  StateWriterView(const StateWriterView&) = delete;
  StateWriterView& operator=(const StateWriterView&) = delete;
  const zc_state_writer* get() const { return &writer_; }
  /// What put_json gave; nullopt when the stage did not call it.
  const std::optional<std::string>& json() const { return json_; }
  /// Keeps only the whole tensors (put_tensor) for which keep(name) is
  /// true and drops the others unread (under expert parallelism a rank
  /// sends rank 0 its experts only). Not with `pieces`.
  void keep_only(std::function<bool(std::string_view)> keep) { keep_ = std::move(keep); }

 private:
  static zc_status* put_tensor(void* ctx, const char* name, const DLTensor* t);
  static zc_status* put_json(void* ctx, const char* json, size_t len);
  static zc_status* put_tensor_slice(void* ctx, const char* name, const DLTensor* slice, int32_t ndim,
                                     const int64_t* shape, int64_t begin);
  zcode::sdk::safetensors::Writer* tensors_;
  std::string prefix_, stage_;
  std::vector<Piece>* pieces_;
  std::optional<std::string> json_;
  std::function<bool(std::string_view)> keep_;
  zc_state_writer writer_{};
};

/// A zc_state_reader over the tensors of `file` whose names start with
/// `prefix` (the prefix is stripped), or over the tensors of `parts`, and a
/// JSON blob, for a stage's load_state; read_tensor_slice serves either.
/// Borrows `file` / `parts`; valid while they live.
class StateReaderView {
 public:
  StateReaderView(const zcode::sdk::safetensors::Reader* file, const std::string& prefix, std::string json);
  StateReaderView(PartedTensors* parts, std::string json);
  StateReaderView(const StateReaderView&) = delete;
  StateReaderView& operator=(const StateReaderView&) = delete;
  const zc_state_reader* get() const { return &reader_; }
  /// Leaves out every tensor for which `hidden(name)` is true (listing,
  /// get_tensor and read_tensor_slice alike): under expert parallelism a
  /// rank's stages see only the experts they hold.
  void hide(const std::function<bool(std::string_view)>& hidden);

 private:
  static const DLTensor* get_tensor(void* ctx, const char* name);
  static size_t num_tensors(void* ctx);
  static const char* tensor_name(void* ctx, size_t i);
  static zc_status* read_tensor_slice(void* ctx, const char* name, int64_t numel, int64_t begin, DLTensor* dst);
  void make_reader();
  PartedTensors* parts_ = nullptr;
  std::vector<std::string> names_;
  std::vector<DLTensor> tensors_;
  std::string json_;
  zc_state_reader reader_{};
};

}  // namespace zcode::ckpt
