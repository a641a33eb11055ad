// Checkpoint folders: atomic write, `latest`, keep_last_n, verified load.
#include <zcode/core/checkpoint.h>
#include <zcode/core/host_services.h>
#include <zcode/core/registry.h>
#include <zcode/core/version.h>
#include <zcode/sdk/json.h>

#include "config_impl.h"

#include <openssl/evp.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace zcode::ckpt {

namespace fs = std::filesystem;
namespace st = zcode::sdk::safetensors;

namespace {

// The tensor files, in TensorFile order: the one table of their names.
constexpr const char* kTensorFiles[] = {"model.safetensors", "optimizer.safetensors", "extra.safetensors"};
constexpr TensorFile kAllTensorFiles[] = {TensorFile::kModel, TensorFile::kOptimizer, TensorFile::kExtra};
// Every file a step folder may hold besides SHA256SUMS.
const char* const kFiles[] = {kTensorFiles[0], kTensorFiles[1], kTensorFiles[2], "state.json"};

void fsync_path(const fs::path& p, bool dir) {
  int fd = ::open(p.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) throw CheckpointError(p.string() + ": cannot open for fsync (" + std::strerror(errno) + ")");
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw CheckpointError(p.string() + ": fsync failed (" + std::strerror(errno) + ")");
}

// Writes a file (not atomically: it is inside the temp folder) and fsyncs it.
void write_plain(const fs::path& p, const void* data, size_t n) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw CheckpointError(p.string() + ": cannot create (" + std::strerror(errno) + ")");
  const char* c = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::write(fd, c + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      ::close(fd);
      throw CheckpointError(p.string() + ": write failed (" + std::strerror(e) + ")");
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    throw CheckpointError(p.string() + ": fsync failed (" + std::strerror(e) + ")");
  }
  ::close(fd);
}

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw CheckpointError(p.string() + ": missing or unreadable");
  std::vector<uint8_t> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw CheckpointError(p.string() + ": read error");
  return buf;
}

// "optimizer-RRRRR-of-NNNNN.safetensors" (optimizer_part_name).
bool is_part_name(const std::string& f) {
  const std::string pre = "optimizer-", suf = ".safetensors";
  if (f.size() != pre.size() + 5 + 4 + 5 + suf.size() || f.rfind(pre, 0) != 0 ||
      f.compare(f.size() - suf.size(), suf.size(), suf) != 0 || f.compare(pre.size() + 5, 4, "-of-") != 0)
    return false;
  for (size_t i : {pre.size(), pre.size() + 9})
    for (size_t k = i; k < i + 5; ++k)
      if (f[k] < '0' || f[k] > '9') return false;
  return true;
}

std::optional<uint64_t> parse_step_name(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5) return std::nullopt;
  uint64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return v;
}

}  // namespace

const char* file_name(TensorFile f) { return kTensorFiles[static_cast<int>(f)]; }

std::string tensor_prefix(TensorFile f, const std::string& key) {
  return f == TensorFile::kExtra ? key + "/" : std::string();
}

st::Writer& CheckpointContents::tensors(TensorFile f) {
  return f == TensorFile::kModel ? model : f == TensorFile::kOptimizer ? optimizer : extra;
}
const st::Writer& CheckpointContents::tensors(TensorFile f) const {
  return const_cast<CheckpointContents*>(this)->tensors(f);
}

const st::Reader* LoadedCheckpoint::tensors(TensorFile f) const {
  return f == TensorFile::kModel ? model.get() : f == TensorFile::kOptimizer ? optimizer.get() : extra.get();
}

std::string sha256_hex(const void* data, size_t size) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, size, md, &len, EVP_sha256(), nullptr) != 1)
    throw CheckpointError("SHA-256: OpenSSL EVP_Digest failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(hex[md[i] >> 4]);
    out.push_back(hex[md[i] & 15]);
  }
  return out;
}

std::string sha256_file(const fs::path& path) {
  auto b = read_all(path);
  return sha256_hex(b.data(), b.size());
}

void write_file_atomic(const fs::path& path, const std::string& text) {
  try {
    st::Writer::write_file_atomic(path.string(),
                                  std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  } catch (const zcode::sdk::Error& e) {
    throw CheckpointError(e.what());
  }
}

std::vector<std::pair<uint64_t, fs::path>> list_checkpoints(const fs::path& root) {
  std::vector<std::pair<uint64_t, fs::path>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory()) continue;
    if (auto s = parse_step_name(e.path().filename().string())) out.emplace_back(*s, e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

fs::path begin_checkpoint(const fs::path& root, uint64_t step) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw CheckpointError(root.string() + ": cannot create (" + ec.message() + ")");
  const std::string name = "step_" + std::to_string(step);
  const fs::path tmp = root / (".tmp-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) throw CheckpointError(tmp.string() + ": cannot create (" + ec.message() + ")");
  return tmp;
}

std::string write_part(const fs::path& tmp, const std::string& name, const std::vector<uint8_t>& bytes) {
  write_plain(tmp / name, bytes.data(), bytes.size());
  return sha256_hex(bytes.data(), bytes.size());
}

fs::path write_checkpoint(const fs::path& root, const CheckpointContents& c, int64_t keep_last_n) {
  return finish_checkpoint(root, begin_checkpoint(root, c.step), c, keep_last_n);
}

fs::path finish_checkpoint(const fs::path& root, const fs::path& tmp, const CheckpointContents& c,
                           int64_t keep_last_n) {
  std::error_code ec;
  const std::string name = "step_" + std::to_string(c.step);
  const fs::path final_dir = root / name;
  rapidjson::Document state;
  state.Parse(c.state_json.c_str());
  if (state.HasParseError() || !state.IsObject())
    throw CheckpointError("state.json: internal error: state is not a JSON object");
  auto& al = state.GetAllocator();
  rapidjson::Value files(rapidjson::kObjectType);
  std::ostringstream sums;
  auto put = [&](const char* fname, const std::vector<uint8_t>& bytes) {
    write_plain(tmp / fname, bytes.data(), bytes.size());
    const std::string h = sha256_hex(bytes.data(), bytes.size());
    sums << h << "  " << fname << "\n";
    return h;
  };
  const bool parts = !c.optimizer_index.empty();
  for (TensorFile f : kAllTensorFiles) {
    if (f == TensorFile::kExtra && c.extra.size() == 0) continue;
    if (f == TensorFile::kOptimizer && parts) continue;
    const char* fname = file_name(f);
    const std::string h = put(fname, c.tensors(f).serialize());
    files.AddMember(rapidjson::Value(fname, al), rapidjson::Value(h.c_str(), al), al);
  }
  if (parts) {
    // The ranks wrote their parts already; their hashes join SHA256SUMS.
    for (const auto& [fname, h] : c.optimizer_parts) {
      sums << h << "  " << fname << "\n";
      files.AddMember(rapidjson::Value(fname.c_str(), al), rapidjson::Value(h.c_str(), al), al);
    }
    const std::string h =
        put(kOptimizerIndex, std::vector<uint8_t>(c.optimizer_index.begin(), c.optimizer_index.end()));
    files.AddMember(rapidjson::Value(kOptimizerIndex, al), rapidjson::Value(h.c_str(), al), al);
  }
  state.RemoveMember("files");
  state.AddMember("files", files, al);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> jw(sb);
  state.Accept(jw);
  std::string text(sb.GetString(), sb.GetSize());
  text.push_back('\n');
  put("state.json", std::vector<uint8_t>(text.begin(), text.end()));
  const std::string s = sums.str();
  write_plain(tmp / "SHA256SUMS", s.data(), s.size());
  fsync_path(tmp, true);

  // Replace an existing folder of the same step (a re-save) only after the new
  // one is complete: move the old one aside first.
  fs::path old_aside;
  if (fs::exists(final_dir, ec)) {
    old_aside = root / (".old-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(old_aside, ec);
    fs::rename(final_dir, old_aside, ec);
    if (ec) throw CheckpointError(final_dir.string() + ": cannot replace (" + ec.message() + ")");
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) throw CheckpointError(final_dir.string() + ": rename failed (" + ec.message() + ")");
  fsync_path(root, true);
  write_file_atomic(root / "latest", name + "\n");
  if (!old_aside.empty()) fs::remove_all(old_aside, ec);

  if (keep_last_n > 0) {
    auto all = list_checkpoints(root);
    const size_t keep = static_cast<size_t>(keep_last_n);
    size_t excess = all.size() > keep ? all.size() - keep : 0;
    for (size_t i = 0; i < all.size() && excess > 0; ++i) {
      if (all[i].second == final_dir) continue;
      fs::remove_all(all[i].second, ec);
      --excess;
    }
  }
  return final_dir;
}

std::vector<fs::path> remove_stale_temp_folders(const fs::path& root, SetAsideCleanup* set_aside) {
  std::vector<fs::path> removed;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return removed;
  // `.tmp-step_N-PID` (a copy being written) and `.old-step_N-PID` (the copy a
  // re-save of step N moved aside) of writers that are no longer running.
  std::vector<std::pair<fs::path, std::string>> stale_tmp, stale_old;  // folder, "step_N"
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    const bool is_tmp = name.rfind(".tmp-step_", 0) == 0, is_old = name.rfind(".old-step_", 0) == 0;
    if ((!is_tmp && !is_old) || !e.is_directory(ec)) continue;
    const size_t dash = name.rfind('-');
    if (dash == std::string::npos || dash + 1 >= name.size() || !parse_step_name(name.substr(5, dash - 5))) continue;
    const std::string pid_text = name.substr(dash + 1);
    if (pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    // This process has written nothing yet, so a folder with its PID is from
    // an earlier process that had the same PID (common in containers).
    const bool alive = pid != ::getpid() && pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
    if (!alive) (is_tmp ? stale_tmp : stale_old).emplace_back(e.path(), name.substr(5, dash - 5));
  }
  std::sort(stale_tmp.begin(), stale_tmp.end());
  std::sort(stale_old.begin(), stale_old.end());
  // A writer killed between moving step_N aside and renaming its new copy into
  // place leaves no step_N: the set-aside copy is complete (it was a
  // checkpoint), so it goes back before the temp folders are removed.
  for (const auto& [p, step_name] : stale_old) {
    const fs::path final_dir = root / step_name;
    if (!fs::exists(final_dir, ec)) {
      fs::rename(p, final_dir, ec);
      if (ec)
        throw CheckpointError(p.string() + ": cannot restore it as " + final_dir.string() + " (" + ec.message() + ")");
      if (set_aside) set_aside->restored.emplace_back(p, final_dir);
    } else {
      fs::remove_all(p, ec);
      if (ec) throw CheckpointError(p.string() + ": cannot remove a replaced checkpoint folder (" + ec.message() + ")");
      if (set_aside) set_aside->removed.push_back(p);
    }
  }
  for (const auto& [p, step_name] : stale_tmp) {
    fs::remove_all(p, ec);
    if (ec)
      throw CheckpointError(p.string() + ": cannot remove a half-written checkpoint folder (" + ec.message() + ")");
    removed.push_back(p);
  }
  return removed;
}

fs::path resolve(const std::string& spec, const fs::path& run_dir) {
  auto latest_of = [&](const fs::path& ckroot, const std::string& what) {
    std::ifstream in(ckroot / "latest");
    std::string name;
    if (!in || !std::getline(in, name) || name.empty())
      throw CheckpointError(what + ": no checkpoint in " + ckroot.string() + " (no 'latest' file)");
    while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
    if (!parse_step_name(name))
      throw CheckpointError((ckroot / "latest").string() + ": expected 'step_N', found '" + name + "'");
    return ckroot / name;
  };
  if (spec == "latest") return latest_of(run_dir / "checkpoints", "--resume-from latest");
  fs::path p(spec);
  std::error_code ec;
  if (!fs::exists(p, ec)) throw CheckpointError(spec + ": checkpoint folder not found");
  // `.../checkpoints/latest` is the path every run prints last: the pointer
  // file stands for the folder it names.
  if (!fs::is_directory(p, ec)) {
    if (p.filename() == "latest") return latest_of(p.parent_path().empty() ? fs::path(".") : p.parent_path(), spec);
    throw CheckpointError(spec +
                          ": is a file, not a checkpoint folder (expected .../checkpoints/step_N, "
                          ".../checkpoints/latest, a checkpoints/ folder or a run folder)");
  }
  if (fs::exists(p / "state.json", ec)) return p;
  if (fs::exists(p / "latest", ec)) return latest_of(p, spec);
  if (fs::exists(p / "checkpoints" / "latest", ec)) return latest_of(p / "checkpoints", spec);
  throw CheckpointError(spec +
                        ": not a checkpoint folder (expected .../checkpoints/step_N with state.json, "
                        ".../checkpoints/latest, a checkpoints/ folder or a run folder)");
}

LoadedCheckpoint load_checkpoint(const fs::path& dir, Parts parts) {
  LoadedCheckpoint out;
  out.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw CheckpointError(dir.string() + ": checkpoint folder not found");
  const bool model_only = parts == Parts::kModelOnly;
  // Named before SHA256SUMS is read: a checkpoint stripped of its optimizer
  // state (file and SHA256SUMS line removed) is the common case, and its
  // problem is the missing file, not the sums.
  const bool in_parts = !fs::exists(dir / "optimizer.safetensors", ec) && fs::exists(dir / kOptimizerIndex, ec);
  if (!model_only && !in_parts && !fs::exists(dir / "optimizer.safetensors", ec))
    throw CheckpointError((dir / "optimizer.safetensors").string() +
                          ": missing (resuming training needs the optimizer state; evaluate and generate need only "
                          "model.safetensors)");
  // 1. SHA256SUMS names every file with its hash; all must match.
  auto sums_bytes = read_all(dir / "SHA256SUMS");
  std::map<std::string, std::string> sums;
  std::istringstream ss(std::string(sums_bytes.begin(), sums_bytes.end()));
  std::string line;
  int lineno = 0;
  while (std::getline(ss, line)) {
    ++lineno;
    if (line.empty()) continue;
    if (line.size() < 67 || line.substr(64, 2) != "  ")
      throw CheckpointError((dir / "SHA256SUMS").string() + ":" + std::to_string(lineno) + ": malformed line");
    sums[line.substr(66)] = line.substr(0, 64);
  }
  // Files a model-only load neither needs nor reads.
  auto skipped = [&](const std::string& fname) {
    return model_only && (fname == file_name(TensorFile::kOptimizer) || fname == file_name(TensorFile::kExtra) ||
                          fname == kOptimizerIndex || is_part_name(fname));
  };
  for (const char* req :
       {file_name(TensorFile::kModel), in_parts ? kOptimizerIndex : file_name(TensorFile::kOptimizer), "state.json"})
    if (!skipped(req) && !sums.count(req))
      throw CheckpointError((dir / "SHA256SUMS").string() + ": no entry for " + req);
  std::map<std::string, std::vector<uint8_t>> bytes;
  for (const auto& [fname, hash] : sums) {
    if (std::find(std::begin(kFiles), std::end(kFiles), fname) == std::end(kFiles) && fname != kOptimizerIndex &&
        !is_part_name(fname))
      throw CheckpointError((dir / "SHA256SUMS").string() + ": unexpected file '" + fname + "'");
    if (skipped(fname)) continue;
    auto b = read_all(dir / fname);
    const std::string got = sha256_hex(b.data(), b.size());
    if (got != hash)
      throw CheckpointError((dir / fname).string() +
                            ": SHA-256 mismatch (file is corrupted or was modified: expected " + hash.substr(0, 12) +
                            "..., found " + got.substr(0, 12) + "...)");
    bytes[fname] = std::move(b);
  }
  // 2. state.json parses and its "files" agree.
  const auto& sj = bytes["state.json"];
  out.state_json.assign(sj.begin(), sj.end());
  rapidjson::Document state;
  const sdk::json::Result parsed = sdk::json::parse<rapidjson::kParseFullPrecisionFlag>(state, out.state_json);
  if (!parsed.ok())
    throw CheckpointError((dir / "state.json").string() + ":" + sdk::json::line_col(out.state_json, parsed.offset) +
                          ": " + parsed.message());
  if (!state.IsObject()) throw CheckpointError((dir / "state.json").string() + ": not a JSON object");
  if (!state.HasMember("step") || !state["step"].IsUint64())
    throw CheckpointError((dir / "state.json").string() + ": missing integer field \"step\"");
  out.step = state["step"].GetUint64();
  // A step folder renamed or copied over another: which step is it?
  const std::string folder = (dir.has_filename() ? dir : dir.parent_path()).filename().string();
  if (auto named = parse_step_name(folder); named && *named != out.step)
    throw CheckpointError((dir / "state.json").string() + ": step " + std::to_string(out.step) +
                          " disagrees with the folder name " + folder + " (step " + std::to_string(*named) + ")");
  if (!state.HasMember("files") || !state["files"].IsObject())
    throw CheckpointError((dir / "state.json").string() + ": missing object field \"files\"");
  for (auto it = state["files"].MemberBegin(); it != state["files"].MemberEnd(); ++it) {
    const std::string fname = it->name.GetString();
    if (skipped(fname)) continue;
    if (!it->value.IsString() || !sums.count(fname) || sums[fname] != it->value.GetString())
      throw CheckpointError((dir / "state.json").string() + ": hash of " + fname + " disagrees with SHA256SUMS");
  }
  // 3. Every safetensors file parses (bounds-checked).
  auto parse = [&](TensorFile f) {
    const char* fname = file_name(f);
    return std::make_unique<st::Reader>(bytes[fname], (dir / fname).string());
  };
  try {
    out.model = parse(TensorFile::kModel);
    if (!model_only && !in_parts) out.optimizer = parse(TensorFile::kOptimizer);
    if (bytes.count(file_name(TensorFile::kExtra))) out.extra = parse(TensorFile::kExtra);
    if (!model_only && in_parts) {
      std::map<std::string, std::unique_ptr<st::Reader>> parts;
      for (auto& [fname, b] : bytes)
        if (is_part_name(fname)) parts[fname] = std::make_unique<st::Reader>(b, (dir / fname).string());
      const auto& ib = bytes[kOptimizerIndex];
      out.optimizer_parts = std::make_unique<PartedTensors>(std::string(ib.begin(), ib.end()), std::move(parts),
                                                            (dir / kOptimizerIndex).string());
    }
  } catch (const zcode::sdk::Error& e) {
    throw CheckpointError(e.what());
  }
  return out;
}

namespace {
// state.json's "config", with its relative file paths made absolute against
// state.json's "cwd" (the folder the run resolved them against) when it has
// one: a checkpoint used from another folder still names the run's files.
// Checkpoints written before "cwd" was recorded keep their paths as written.
std::string config_of_state(const std::string& state_text, const fs::path& state_path) {
  rapidjson::Document st;
  // Bounded like every file read (sdk/json.h); full precision: floats round-trip exactly.
  const sdk::json::Result parsed = sdk::json::parse<rapidjson::kParseFullPrecisionFlag>(st, state_text);
  if (!parsed.ok())
    throw CheckpointError(state_path.string() + ":" + sdk::json::line_col(state_text, parsed.offset) + ": " +
                          parsed.message());
  if (!st.IsObject() || !st.HasMember("config") || !st["config"].IsObject())
    throw CheckpointError(state_path.string() + ": no \"config\" object; pass --config");
  if (st.HasMember("cwd") && st["cwd"].IsString()) {
    const fs::path cwd(std::string(st["cwd"].GetString(), st["cwd"].GetStringLength()));
    if (cwd.is_absolute()) config_detail::make_paths_absolute(st["config"], cwd, st.GetAllocator());
  }
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  st["config"].Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}
}  // namespace

std::string stored_config_json(const LoadedCheckpoint& ck) {
  return config_of_state(ck.state_json, ck.dir / "state.json");
}

std::string stored_config_json(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw CheckpointError(dir.string() + ": checkpoint folder not found");
  const auto bytes = read_all(dir / "state.json");
  return config_of_state(std::string(bytes.begin(), bytes.end()), dir / "state.json");
}

StateReaderView::StateReaderView(const st::Reader* file, const std::string& prefix, std::string json)
    : json_(std::move(json)) {
  if (file)
    for (const auto& t : file->tensors()) {
      if (t.name.rfind(prefix, 0) != 0) continue;
      names_.push_back(t.name.substr(prefix.size()));
      tensors_.push_back(t.dltensor());  // shape points into the Reader's TensorView
    }
  make_reader();
}

StateReaderView::StateReaderView(PartedTensors* parts, std::string json) : parts_(parts), json_(std::move(json)) {
  if (parts_) names_ = parts_->names();
  make_reader();
}

void StateReaderView::hide(const std::function<bool(std::string_view)>& hidden) {
  size_t kept = 0;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (hidden(names_[i])) continue;
    if (kept != i) {
      names_[kept] = std::move(names_[i]);
      if (!parts_) tensors_[kept] = tensors_[i];
    }
    ++kept;
  }
  names_.resize(kept);
  if (!parts_) tensors_.resize(kept);
}

void StateReaderView::make_reader() {
  reader_ = zc_state_reader{};
  reader_.struct_size = sizeof(zc_state_reader);
  reader_.ctx = this;
  reader_.get_tensor = &get_tensor;
  reader_.num_tensors = &num_tensors;
  reader_.tensor_name = &tensor_name;
  reader_.json = json_.c_str();
  reader_.json_len = json_.size();
  reader_.read_tensor_slice = &read_tensor_slice;
}

const DLTensor* StateReaderView::get_tensor(void* ctx, const char* name) {
  auto* v = static_cast<StateReaderView*>(ctx);
  if (!name) return nullptr;
  if (v->parts_) {
    if (std::find(v->names_.begin(), v->names_.end(), name) == v->names_.end()) return nullptr;
    try {
      return v->parts_->whole(name);
    } catch (const std::exception&) {
      return nullptr;  // (whole() fails only on memory; the slot cannot say more)
    }
  }
  for (size_t i = 0; i < v->names_.size(); ++i)
    if (v->names_[i] == name) return &v->tensors_[i];
  return nullptr;
}
size_t StateReaderView::num_tensors(void* ctx) { return static_cast<StateReaderView*>(ctx)->names_.size(); }
const char* StateReaderView::tensor_name(void* ctx, size_t i) {
  auto* v = static_cast<StateReaderView*>(ctx);
  return i < v->names_.size() ? v->names_[i].c_str() : nullptr;
}

zc_status* StateReaderView::read_tensor_slice(void* ctx, const char* name, int64_t numel, int64_t begin,
                                              DLTensor* dst) {
  auto* v = static_cast<StateReaderView*>(ctx);
  try {
    if (!name || !dst) return make_status(ZC_ERR_INVALID_ARGUMENT, "read_tensor_slice: NULL name or tensor");
    if (v->parts_) {
      if (std::find(v->names_.begin(), v->names_.end(), name) == v->names_.end())
        return make_status(ZC_ERR_NOT_FOUND, std::string("state: tensor '") + name + "' missing");
      v->parts_->read_slice(name, numel, begin, *dst);
      return nullptr;
    }
    const DLTensor* t = get_tensor(ctx, name);
    if (!t) return make_status(ZC_ERR_NOT_FOUND, std::string("state: tensor '") + name + "' missing");
    const int64_t n = sdk::numel(*t), count = sdk::numel(*dst);
    if (!sdk::same_dtype(t->dtype, dst->dtype) || n != numel || begin < 0 || count < 0 || begin + count > n)
      return make_status(ZC_ERR_DATA, std::string("state: tensor '") + name + "' has " + std::to_string(n) +
                                          " elements of its dtype; asked for [" + std::to_string(begin) + ", " +
                                          std::to_string(begin + count) + ") of " + std::to_string(numel));
    const size_t es = (t->dtype.bits * t->dtype.lanes + 7) / 8;
    std::memcpy(static_cast<char*>(dst->data) + dst->byte_offset,
                static_cast<const char*>(t->data) + t->byte_offset + static_cast<size_t>(begin) * es,
                static_cast<size_t>(count) * es);
    return nullptr;
  } catch (const std::exception& e) {
    return make_status(ZC_ERR_DATA, e.what());
  }
}

// ---- state.json ---------------------------------------------------------------

namespace {

bool is_json(const std::string& s) {
  rapidjson::Document d;
  d.Parse(s.c_str());
  return !d.HasParseError();
}

// Numbers of "engine" as %.17g, the form state.json has always had (it is
// parsed and rewritten once more by write_checkpoint).
void write_engine(sdk::json::Writer& w, const EngineState& e) {
  w.begin_object();
  w.key("step").number(static_cast<double>(e.step), 17);
  w.key("tokens_seen").number(static_cast<double>(e.tokens_seen), 17);
  w.key("best_val_loss").number(e.best_val_loss, 17);
  w.key("best_step").number(static_cast<double>(e.best_step), 17);
  w.key("wall_time_s").number(e.wall_time_s, 17);
  w.key("nonfinite_guard").raw(e.nonfinite_guard.empty() ? "{}" : e.nonfinite_guard);
  w.key("last_train").raw(e.last_train).key("last_val").raw(e.last_val);
  w.end_object();
}

std::string compact(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace

std::string state_json(const StateRecord& r) {
  sdk::json::Writer w;
  w.begin_object().key("format").string("zcode-checkpoint/1");
  w.key("step").integer(r.step).key("max_steps").integer(r.max_steps).key("seed").integer(r.seed);
  w.key("rng").begin_object();
  w.key("note").string(
      "every random stream is derived from seed and a stream name (zc_host_services.derive_seed); stages keep "
      "their own generator state in stages.<name>");
  w.key("seed").integer(r.seed).end_object();
  w.key("engine");
  write_engine(w, r.engine);
  w.key("stages").begin_object();
  for (const StageState& s : r.stages) {
    w.key(s.key);
    if (!s.json) w.null();
    else if (is_json(*s.json)) w.raw(*s.json);
    else w.string(*s.json);  // not JSON: kept verbatim as a string
  }
  w.end_object();
  if (r.cwd) w.key("cwd").string(r.cwd->string());
  w.key("config").raw(r.config_json);
  w.key("config_sha256").string(sha256_hex(r.config_json.data(), r.config_json.size()));
  w.key("overrides").begin_array();
  for (const std::string& o : r.overrides) w.string(o);
  w.end_array();
  w.key("git_commit").string(git_commit());
  w.key("environment").raw(r.environment_json);
  // The plugin files that made this checkpoint (environment snapshot).
  w.key("plugins").begin_array();
  for (const StageState& s : r.stages) {
    w.begin_object().key("stage").string(s.key).key("component").string(s.component->name);
    if (const PluginFile* f = s.component->file) {
      w.key("plugin").string(f->name).key("version").string(f->version).key("file").string(f->path.string());
      w.key("abi").string(std::to_string(f->abi_major) + "." + std::to_string(f->abi_minor));
    }
    w.end_object();
  }
  w.end_array().end_object();
  return w.str();
}

const std::string* StoredState::stage(const std::string& key) const {
  auto it = stages.find(key);
  return it == stages.end() ? nullptr : &it->second;
}

StoredState read_state(const LoadedCheckpoint& ck) {
  rapidjson::Document st;
  // Full precision: the numbers read back are the ones written.
  const sdk::json::Result parsed = sdk::json::parse<rapidjson::kParseFullPrecisionFlag>(st, ck.state_json);
  if (!parsed.ok() || !st.IsObject()) throw CheckpointError((ck.dir / "state.json").string() + ": not a JSON object");
  StoredState out;
  {
    // "config" with RapidJSON's default number parsing, as resume's config
    // comparison has always read it (both sides take the same round trip).
    rapidjson::Document dc;
    dc.Parse(ck.state_json.c_str());
    if (!dc.HasParseError() && dc.IsObject() && dc.HasMember("config")) out.config = compact(dc["config"]);
  }
  if (st.HasMember("stages") && st["stages"].IsObject()) {
    for (auto it = st["stages"].MemberBegin(); it != st["stages"].MemberEnd(); ++it) {
      const rapidjson::Value& v = it->value;
      std::string& json = out.stages[std::string(it->name.GetString(), it->name.GetStringLength())];
      if (v.IsString()) json.assign(v.GetString(), v.GetStringLength());
      else if (!v.IsNull()) json = compact(v);
    }
  }
  if (st.HasMember("engine") && st["engine"].IsObject()) {
    const rapidjson::Value& e = st["engine"];
    auto num = [&](const char* k, double d) { return e.HasMember(k) && e[k].IsNumber() ? e[k].GetDouble() : d; };
    EngineState es;
    es.step = ck.step;
    es.tokens_seen = static_cast<uint64_t>(num("tokens_seen", 0));
    es.best_val_loss = num("best_val_loss", INFINITY);
    es.best_step = static_cast<uint64_t>(num("best_step", 0));
    es.wall_time_s = num("wall_time_s", 0);
    if (e.HasMember("nonfinite_guard")) es.nonfinite_guard = compact(e["nonfinite_guard"]);
    out.engine = std::move(es);
  }
  return out;
}

StateWriterView::StateWriterView(st::Writer* tensors, std::string prefix, std::string stage, std::vector<Piece>* pieces)
    : tensors_(tensors), prefix_(std::move(prefix)), stage_(std::move(stage)), pieces_(pieces) {
  writer_ = zc_state_writer{};
  writer_.struct_size = sizeof(zc_state_writer);
  writer_.ctx = this;
  writer_.put_tensor = &put_tensor;
  writer_.put_json = &put_json;
  writer_.put_tensor_slice = &put_tensor_slice;
}

zc_status* StateWriterView::put_tensor(void* ctx, const char* name, const DLTensor* t) {
  auto* v = static_cast<StateWriterView*>(ctx);
  try {
    if (!name || !t) return make_status(ZC_ERR_INVALID_ARGUMENT, "save_state: NULL tensor or name");
    if (v->keep_ && !v->keep_(name)) return nullptr;  // not this writer's to keep
    v->tensors_->add(v->prefix_ + name, *t);
    if (v->pieces_) {
      Piece p;
      p.name = name;
      p.dtype = st::from_dlpack(t->dtype);
      p.shape.assign(t->shape, t->shape + t->ndim);
      p.count = sdk::numel(*t);
      p.whole = true;
      p.sha256 = sha256_hex(static_cast<const char*>(t->data) + t->byte_offset, sdk::nbytes(*t));
      v->pieces_->push_back(std::move(p));
    }
    return nullptr;
  } catch (const std::exception& e) {
    return make_status(ZC_ERR_INVALID_ARGUMENT, v->stage_ + ": save_state: " + e.what());
  }
}

zc_status* StateWriterView::put_tensor_slice(void* ctx, const char* name, const DLTensor* slice, int32_t ndim,
                                             const int64_t* shape, int64_t begin) {
  auto* v = static_cast<StateWriterView*>(ctx);
  try {
    if (!name || !slice || (ndim > 0 && !shape) || ndim < 0)
      return make_status(ZC_ERR_INVALID_ARGUMENT, v->stage_ + ": save_state: put_tensor_slice: NULL argument");
    int64_t numel = 1;
    for (int32_t d = 0; d < ndim; ++d) numel *= shape[d];
    const int64_t count = sdk::numel(*slice);
    if (begin < 0 || count < 0 || begin + count > numel)
      return make_status(ZC_ERR_INVALID_ARGUMENT, v->stage_ + ": save_state: slice [" + std::to_string(begin) + ", " +
                                                      std::to_string(begin + count) + ") of '" + name +
                                                      "' is outside its " + std::to_string(numel) + " elements");
    if (!v->pieces_) {
      if (begin != 0 || count != numel)
        return make_status(ZC_ERR_UNSUPPORTED, v->stage_ + ": save_state: '" + name +
                                                   "' is put in parts, but this checkpoint keeps the stage's "
                                                   "tensors whole (parts are for a sharded optimizer)");
      DLTensor whole = *slice;  // the whole tensor: store it under its shape
      whole.ndim = ndim;
      whole.shape = const_cast<int64_t*>(shape);
      whole.strides = nullptr;
      v->tensors_->add(v->prefix_ + name, whole);
      return nullptr;
    }
    if (count == 0) return nullptr;  // an empty part: nothing to store (the ABI allows skipping it)
    DLTensor flat = *slice;
    int64_t n[1] = {count};
    flat.ndim = 1;
    flat.shape = n;
    flat.strides = nullptr;
    v->tensors_->add(v->prefix_ + name, flat);
    Piece p;
    p.name = name;
    p.dtype = st::from_dlpack(slice->dtype);
    p.shape.assign(shape, shape + ndim);
    p.begin = begin;
    p.count = count;
    v->pieces_->push_back(std::move(p));
    return nullptr;
  } catch (const std::exception& e) {
    return make_status(ZC_ERR_INVALID_ARGUMENT, v->stage_ + ": save_state: " + e.what());
  }
}

zc_status* StateWriterView::put_json(void* ctx, const char* json, size_t len) {
  auto* v = static_cast<StateWriterView*>(ctx);
  if (v->json_) return make_status(ZC_ERR_INVALID_ARGUMENT, v->stage_ + ": save_state: put_json called twice");
  v->json_.emplace(json ? json : "", json ? len : 0);
  return nullptr;
}

}  // namespace zcode::ckpt
