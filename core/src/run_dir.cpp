// Run folder preparation and the environment snapshot.
#include <zcode/core/run_dir.h>

#include <zcode/abi.h>
#include <zcode/core/build_info.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
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

void prepare(const fs::path& dir, bool resume, bool overwrite) {
  std::error_code ec;
  if (is_used(dir) && !resume) {
    if (!overwrite) {
      std::string found;
      for (const char* f : {"checkpoints", "metrics.json", "config.yaml"})
        if (fs::exists(dir / f, ec)) {
          found = std::string(f) + (std::string(f) == "checkpoints" ? "/" : "");
          break;
        }
      throw RunDirError(dir.string() + ": run folder already used (found " + found +
                        "); pass --resume-from latest to continue or --overwrite to start over");
    }
    for (const char* f : kRunFiles) fs::remove_all(dir / f, ec);
  }
  fs::create_directories(dir / "logs", ec);
  if (ec) throw RunDirError(dir.string() + ": cannot create the run folder (" + ec.message() + ")");
  if (::access(dir.c_str(), W_OK) != 0) throw RunDirError(dir.string() + ": run folder is not writable");
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
  w.Key("zcode_version"); w.String(ZCODE_VERSION_STRING);
  w.Key("git_commit"); w.String(ZCODE_GIT_COMMIT);
  w.Key("abi_version"); w.String((std::to_string(ZC_ABI_VERSION_MAJOR) + "." + std::to_string(ZC_ABI_VERSION_MINOR)).c_str());
  w.Key("build_type"); w.String(ZCODE_BUILD_TYPE);
  w.Key("compiler"); w.String(ZCODE_CXX_COMPILER);
  w.Key("dependencies");
  w.StartObject();
  w.Key("boost"); w.String(ZCODE_BOOST_VERSION);
  w.Key("yaml-cpp"); w.String(ZCODE_YAML_CPP_VERSION);
  w.Key("rapidjson"); w.String(ZCODE_RAPIDJSON_VERSION);
  w.Key("openblas"); w.String(ZCODE_OPENBLAS_VERSION);
  w.Key("sentencepiece"); w.String(ZCODE_SENTENCEPIECE_VERSION);
  w.Key("zstd"); w.String(ZCODE_ZSTD_VERSION);
  w.Key("openssl"); w.String(ZCODE_OPENSSL_VERSION);
  w.EndObject();
  struct utsname u {};
  if (::uname(&u) == 0) {
    w.Key("os"); w.String((std::string(u.sysname) + " " + u.release + " " + u.machine).c_str());
    w.Key("hostname"); w.String(u.nodename);
  }
  w.Key("cpu_model"); w.String(cpu_model().c_str());
  w.Key("logical_cores"); w.Uint(std::thread::hardware_concurrency());
  w.Key("num_threads"); w.Int(num_threads);
  w.EndObject();
  return sb.GetString();
}

}  // namespace zcode::rundir
