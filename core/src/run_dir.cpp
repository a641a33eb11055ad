// Run folder preparation and the environment snapshot.
#include <zcode/core/run_dir.h>

#include <zcode/abi.h>
#include <zcode/core/build_info.h>
#include <zcode/core/version.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <thread>

namespace zcode::rundir {

namespace fs = std::filesystem;

namespace {
const char* const kRunFiles[] = {"config.yaml", "metrics.json", "checkpoints", "model_card.md", "logs", "trace.json"};
}

bool is_used(const fs::path& dir) {
  std::error_code ec;
  for (const char* f : {"config.yaml", "metrics.json", "checkpoints"})
    if (fs::exists(dir / f, ec)) return true;
  return false;
}

namespace {
// Does `dir` hold nothing but config.yaml, logs/, an empty checkpoints/ and
// the files in `also`? (false when `dir` cannot be listed).
bool only_start_files(const fs::path& dir, std::initializer_list<const char*> also) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return false;
  for (; it != end; it.increment(ec)) {
    if (ec) return false;
    const std::string name = it->path().filename().string();
    if (name == "config.yaml" && it->is_regular_file(ec)) continue;
    if (name == "logs" && it->is_directory(ec)) continue;
    if (name == "checkpoints" && it->is_directory(ec) && fs::is_empty(it->path(), ec) && !ec) continue;
    if (std::find_if(also.begin(), also.end(), [&](const char* a) { return name == a; }) != also.end() &&
        it->is_regular_file(ec))
      continue;
    return false;
  }
  return true;
}

// Was `dir`/config.yaml written by ZCode (first line kResolvedConfigHeader)?
bool has_resolved_header(const fs::path& dir) {
  std::ifstream in(dir / "config.yaml", std::ios::binary);
  std::string first;
  if (!in || !std::getline(in, first)) return false;
  return first.rfind(kResolvedConfigHeader, 0) == 0;
}

// A metrics.json that records no training step: what the step-0 evaluation
// of a start killed before its first step leaves.
bool metrics_without_training(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return true;
  if (fs::file_size(p, ec) > (64u << 20) || ec) return false;  // not a step-0 file; never parse a huge one
  std::ifstream in(p, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseStopWhenDoneFlag>(
      text.c_str());  // iterative: no recursion on deep nesting
  if (d.HasParseError() || !d.IsObject()) return false;
  auto h = d.FindMember("history");
  if (h == d.MemberEnd() || !h->value.IsObject()) return false;
  auto t = h->value.FindMember("train");
  return t != h->value.MemberEnd() && t->value.IsArray() && t->value.Empty();
}
}  // namespace

bool is_failed_start(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "config.yaml", ec) && has_resolved_header(dir) &&
         fs::is_regular_file(dir / "logs" / "console.log", ec) &&
         only_start_files(dir, {"metrics.json", "model_card.md", "trace.json"}) &&
         metrics_without_training(dir / "metrics.json");
}

bool discard_failed_start(const fs::path& dir) {
  if (!only_start_files(dir, {"metrics.json", "model_card.md", "trace.json"})) return false;
  std::error_code ec;
  for (const char* f : {"metrics.json", "model_card.md", "trace.json"}) fs::remove(dir / f, ec);
  fs::remove(dir / "checkpoints", ec);  // only when empty (only_start_files checked)
  return true;
}

bool prepare(const fs::path& dir, bool resume, bool overwrite) {
  std::error_code ec;
  bool reused = false;
  if (is_used(dir) && !resume) {
    if (!overwrite && is_failed_start(dir)) {
      reused = true;
      // What a start killed after its step-0 evaluation wrote; this run writes its own.
      for (const char* f : {"metrics.json", "model_card.md", "trace.json"}) fs::remove(dir / f, ec);
    } else if (!overwrite) {
      std::string found;
      for (const char* f : {"checkpoints", "metrics.json", "config.yaml"})
        if (fs::exists(dir / f, ec)) {
          found = std::string(f) + (std::string(f) == "checkpoints" ? "/" : "");
          break;
        }
      throw RunDirError(dir.string() + ": run folder already used (found " + found +
                        "); pass --resume-from latest to continue or --overwrite to start over");
    } else {
      for (const char* f : kRunFiles) fs::remove_all(dir / f, ec);
    }
  }
  fs::create_directories(dir / "logs", ec);
  if (ec) throw RunDirError(dir.string() + ": cannot create the run folder (" + ec.message() + ")");
  if (::access(dir.c_str(), W_OK) != 0) throw RunDirError(dir.string() + ": run folder is not writable");
  return reused;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      if (c != std::string::npos) {
        std::string v = line.substr(c + 1);
        while (!v.empty() && v.front() == ' ') v.erase(v.begin());
        return v;
      }
    }
  }
  return "unknown";
}

std::string environment_json(int num_threads) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("zcode_version");
  w.String(ZCODE_VERSION_STRING);
  w.Key("git_commit");
  w.String(git_commit());
  w.Key("abi_version");
  w.String((std::to_string(ZC_ABI_VERSION_MAJOR) + "." + std::to_string(ZC_ABI_VERSION_MINOR)).c_str());
  w.Key("build_type");
  w.String(ZCODE_BUILD_TYPE);
  w.Key("compiler");
  w.String(ZCODE_CXX_COMPILER);
  w.Key("dependencies");
  w.StartObject();
  w.Key("boost");
  w.String(ZCODE_BOOST_VERSION);
  w.Key("yaml-cpp");
  w.String(ZCODE_YAML_CPP_VERSION);
  w.Key("rapidjson");
  w.String(ZCODE_RAPIDJSON_VERSION);
  w.Key("openblas");
  w.String(ZCODE_OPENBLAS_VERSION);
  w.Key("sentencepiece");
  w.String(ZCODE_SENTENCEPIECE_VERSION);
  w.Key("zstd");
  w.String(ZCODE_ZSTD_VERSION);
  w.Key("openssl");
  w.String(ZCODE_OPENSSL_VERSION);
  w.EndObject();
  struct utsname u {};
  if (::uname(&u) == 0) {
    w.Key("os");
    w.String((std::string(u.sysname) + " " + u.release + " " + u.machine).c_str());
    w.Key("hostname");
    w.String(u.nodename);
  }
  w.Key("cpu_model");
  w.String(cpu_model().c_str());
  w.Key("logical_cores");
  w.Uint(std::thread::hardware_concurrency());
  w.Key("num_threads");
  w.Int(num_threads);
  w.EndObject();
  return sb.GetString();
}

}  // namespace zcode::rundir
