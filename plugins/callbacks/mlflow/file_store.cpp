// The MLflow 2.x file store ("mlruns") layout, from MLflow's FileStore
// documentation and the files it keeps:
//   <root>/<experiment_id>/meta.yaml           artifact_location, creation_time, experiment_id,
//                                              last_update_time, lifecycle_stage, name
//   <root>/<experiment_id>/<run_id>/meta.yaml  artifact_uri, end_time, entry_point_name,
//                                              experiment_id, lifecycle_stage, run_id, run_name,
//                                              run_uuid, source_name, source_type, source_version,
//                                              start_time, status (RUNNING 1, FINISHED 3, FAILED 4,
//                                              KILLED 5), tags, user_id
//   .../<run_id>/metrics/<key>                 one line per point: "timestamp value step"
//   .../<run_id>/params/<key>, tags/<key>      the value, the whole file
//   .../<run_id>/artifacts/                    files
// plus <root>/0 ("Default") and <root>/.trash, which MLflow creates with a store.
#include <zcode/sdk/error.h>
#include <zcode/sdk/file.h>

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "store.h"

namespace zcode::mlflow {

namespace fs = std::filesystem;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

int status_code(const std::string& s) {
  if (s == "RUNNING") return 1;
  if (s == "FINISHED") return 3;
  if (s == "FAILED") return 4;
  return 5;  // KILLED
}

std::string uri(const fs::path& p) { return "file://" + fs::absolute(p).lexically_normal().string(); }

std::string experiment_yaml(const fs::path& dir, const std::string& id, const std::string& name, int64_t t) {
  YAML::Emitter y;
  y << YAML::BeginMap << YAML::Key << "artifact_location" << YAML::Value << uri(dir);
  y << YAML::Key << "creation_time" << YAML::Value << t;
  y << YAML::Key << "experiment_id" << YAML::Value << YAML::SingleQuoted << id;
  y << YAML::Key << "last_update_time" << YAML::Value << t;
  y << YAML::Key << "lifecycle_stage" << YAML::Value << "active";
  y << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << name << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

// A point's line: timestamp, the value as the shortest decimal that reads
// back to the same double (std::to_chars), step.
std::string metric_line(const Metric& m) {
  char v[64];
  auto r = std::to_chars(v, v + sizeof v, m.value);
  return std::to_string(m.timestamp_ms) + " " + std::string(v, r.ptr) + " " + std::to_string(m.step) + "\n";
}

// MLflow's key rule: alphanumerics, '_', '-', '.', ' ', '/'; and no ".."
// path parts (a key names a file). Others become '_'.
std::string safe_key(const std::string& k) {
  std::string out = k.empty() || k.front() == '/' ? "_" : "";
  for (char c : k) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ' ' || c == '/';
    // '.' after '.' would make a ".." path part: '_' instead.
    out.push_back(!ok || (c == '.' && !out.empty() && out.back() == '.') ? '_' : c);
  }
  return out;
}

class FileStore : public Store {
 public:
  explicit FileStore(std::string root) : root_(std::move(root)) {}

  std::string start(const RunInfo& info) override {
    const int64_t t = info.start_time_ms;
    std::error_code ec;
    fs::create_directories(fs::path(root_) / ".trash", ec);
    if (!fs::exists(fs::path(root_) / "0" / "meta.yaml"))
      write(fs::path(root_) / "0" / "meta.yaml", experiment_yaml(fs::path(root_) / "0", "0", "Default", t));
    exp_id_ = find_or_create_experiment(info.experiment_name, t);
    if (!info.run_id.empty() && fs::is_directory(fs::path(root_) / exp_id_ / info.run_id)) {
      run_id_ = info.run_id;
      run_dir_ = fs::path(root_) / exp_id_ / run_id_;
      drop_points_after(info.resumed_step);
      YAML::Node meta = YAML::LoadFile((run_dir_ / "meta.yaml").string());
      start_ms_ = meta["start_time"].as<int64_t>(t);
      run_name_ = meta["run_name"].as<std::string>(info.run_name);
    } else {
      run_id_ = new_run_id();
      run_dir_ = fs::path(root_) / exp_id_ / run_id_;
      start_ms_ = t;
      run_name_ = info.run_name;
      for (const char* d : {"metrics", "params", "tags", "artifacts"}) fs::create_directories(run_dir_ / d, ec);
    }
    user_ = info.user;
    write_meta("RUNNING", -1);
    return run_id_;
  }

  void log(std::vector<Metric> metrics, std::vector<KeyValue> params, std::vector<KeyValue> tags) override {
    for (const auto& p : params) write(run_dir_ / "params" / safe_key(p.key), p.value);
    for (const auto& t : tags) write(run_dir_ / "tags" / safe_key(t.key), t.value);
    for (const auto& m : metrics) {
      const fs::path f = run_dir_ / "metrics" / safe_key(m.key);
      std::error_code ec;
      fs::create_directories(f.parent_path(), ec);
      std::FILE* out = std::fopen(f.c_str(), "a");
      const std::string line = metric_line(m);
      if (!out || std::fwrite(line.data(), 1, line.size(), out) != line.size() || std::fclose(out) != 0)
        throw sdk::Error(ZC_ERR_IO, "mlflow: cannot append to " + f.string());
    }
  }

  void artifact(const std::string& file) override {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return;
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    write(run_dir_ / "artifacts" / fs::path(file).filename(), ss.str());
  }

  void end(const std::string& status, int64_t end_ms) override { write_meta(status, end_ms); }
  std::string run_id() const override { return run_id_; }

 private:
  static void write(const fs::path& p, const std::string& text) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    sdk::write_file_atomic(p.string(), text);  // throws sdk::Error naming the file
  }

  std::string find_or_create_experiment(const std::string& name, int64_t t) {
    int64_t max_id = 0;
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(root_, ec)) {
      const fs::path meta = d.path() / "meta.yaml";
      if (!d.is_directory() || !fs::is_regular_file(meta)) continue;
      try {
        YAML::Node y = YAML::LoadFile(meta.string());
        if (y["name"] && y["name"].as<std::string>() == name) return d.path().filename().string();
      } catch (const YAML::Exception&) {
        continue;  // not an experiment of ours to read; never rewritten
      }
      int64_t id = 0;
      const std::string s = d.path().filename().string();
      if (std::from_chars(s.data(), s.data() + s.size(), id).ec == std::errc()) max_id = std::max(max_id, id);
    }
    const std::string id = std::to_string(max_id + 1);
    write(fs::path(root_) / id / "meta.yaml", experiment_yaml(fs::path(root_) / id, id, name, t));
    return id;
  }

  static std::string new_run_id() {  // 32 hex digits, as MLflow's uuid4().hex
    std::random_device rd;
    std::mt19937_64 g((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(now_ms()));
    char b[33];
    std::snprintf(b, sizeof b, "%016llx%016llx", static_cast<unsigned long long>(g()),
                  static_cast<unsigned long long>(g()));
    return b;
  }

  // A resumed training run: the points of steps after its checkpoint, which
  // the interrupted run may have logged, go (each metric file rewritten atomically).
  void drop_points_after(int64_t step) {
    if (step <= 0) return;
    std::error_code ec;
    for (const auto& f : fs::recursive_directory_iterator(run_dir_ / "metrics", ec)) {
      if (!f.is_regular_file()) continue;
      std::ifstream in(f.path());
      std::string line, kept;
      while (std::getline(in, line)) {
        std::istringstream ls(line);
        int64_t ts = 0, s = 0;
        double v = 0;
        if (ls >> ts >> v >> s && s <= step) kept += line + "\n";
      }
      in.close();
      write(f.path(), kept);
    }
  }

  void write_meta(const std::string& status, int64_t end_ms) {
    YAML::Emitter y;
    y << YAML::BeginMap << YAML::Key << "artifact_uri" << YAML::Value << uri(run_dir_ / "artifacts");
    y << YAML::Key << "end_time" << YAML::Value;
    if (end_ms < 0) y << YAML::Null;
    else y << end_ms;
    y << YAML::Key << "entry_point_name" << YAML::Value << YAML::SingleQuoted << "";
    y << YAML::Key << "experiment_id" << YAML::Value << YAML::SingleQuoted << exp_id_;
    y << YAML::Key << "lifecycle_stage" << YAML::Value << "active";
    y << YAML::Key << "run_id" << YAML::Value << run_id_;
    y << YAML::Key << "run_name" << YAML::Value << YAML::DoubleQuoted << run_name_;
    y << YAML::Key << "run_uuid" << YAML::Value << run_id_;
    y << YAML::Key << "source_name" << YAML::Value << YAML::SingleQuoted << "";
    y << YAML::Key << "source_type" << YAML::Value << 4;  // SourceType.LOCAL
    y << YAML::Key << "source_version" << YAML::Value << YAML::SingleQuoted << "";
    y << YAML::Key << "start_time" << YAML::Value << start_ms_;
    y << YAML::Key << "status" << YAML::Value << status_code(status);
    y << YAML::Key << "tags" << YAML::Value << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
    y << YAML::Key << "user_id" << YAML::Value << YAML::DoubleQuoted << user_ << YAML::EndMap;
    write(run_dir_ / "meta.yaml", std::string(y.c_str()) + "\n");
  }

  std::string root_, exp_id_, run_id_, run_name_, user_;
  fs::path run_dir_;
  int64_t start_ms_ = 0;
};

}  // namespace

std::unique_ptr<Store> make_file_store(const std::string& root) { return std::make_unique<FileStore>(root); }

}  // namespace zcode::mlflow
