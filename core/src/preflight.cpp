// Preflight: the config's files on this machine (see zcode/core/preflight.h).
#include <zcode/core/preflight.h>

#include <zcode/core/host_services.h>
#include <zcode/core/registry.h>

#include <glob.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace zcode {
namespace fs = std::filesystem;

namespace {

/// The scheme of "s3://bucket/x" ("s3"), or nullopt for a local path.
std::optional<std::string> url_scheme(const std::string& ref) {
  const size_t p = ref.find("://");
  if (p == std::string::npos || p == 0) return std::nullopt;
  return ref.substr(0, p);
}

bool has_glob(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }

bool glob_matches(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  const bool any = rc == 0 && g.gl_pathc > 0;
  globfree(&g);
  return any;
}

/// A local data or tokenizer path: a remote scheme, a glob without a match,
/// or a missing file is one error at `where`.
void check_local(const std::string& where, const std::string& value, const std::string& origin,
                 const char* what_reads_it, std::vector<ConfigError>& errors) {
  if (value.empty()) return;  // the schema reports empty strings
  if (auto scheme = url_scheme(value)) {
    errors.push_back({where, "'" + value + "' uses the '" + *scheme + "://' scheme; " + what_reads_it +
                                 " reads local files only (download the data or mount it, then give its local path)"});
    return;
  }
  std::error_code ec;
  if (has_glob(value)) {
    if (!glob_matches(value))
      errors.push_back({where, "no file matches '" + value +
                                   "' (relative patterns are relative to the current folder, " +
                                   fs::current_path(ec).string() + ")"});
    return;
  }
  if (!fs::exists(value, ec)) errors.push_back({where, path_not_found_message(value, origin)});
}

}  // namespace

std::string path_not_found_message(const std::string& path, const std::string& config_origin) {
  std::error_code ec;
  const fs::path p(path);
  const fs::path cwd = fs::current_path(ec);
  std::string msg =
      "'" + path + "' not found: looked for " + (p.is_absolute() ? p : cwd / p).lexically_normal().string();
  if (p.is_relative()) {
    msg += " (relative paths are relative to the current folder, " + cwd.string() + ")";
    if (!config_origin.empty()) {
      const fs::path config_dir = fs::absolute(config_origin, ec).parent_path().lexically_normal();
      const fs::path beside = (config_dir / p).lexically_normal();
      if (fs::exists(beside, ec))
        msg += "; it exists beside the config file, as " + beside.string() + ": give that path, or run from " +
               config_dir.string();
    }
  }
  return msg;
}

std::vector<ConfigError> check_environment(const HarnessConfig& cfg, const EnvironmentCheckOptions& options) {
  std::vector<ConfigError> errors;
  const DataConfig& d = cfg.data();
  const std::string origin = cfg.origin();
  const bool origin_is_file = [&] {
    std::error_code ec;
    return !origin.empty() && fs::is_regular_file(origin, ec);
  }();
  const std::string cfg_file = origin_is_file ? origin : "";
  const bool evaluates = !cfg.evaluation().plugins.empty();
  if (options.training) {
    if (d.train_shard_pattern) {
      // The pattern names files inside train_path, which must be a folder.
      std::error_code ec;
      if (auto scheme = url_scheme(d.train_path); !scheme && !fs::is_directory(d.train_path, ec))
        errors.push_back({"data.train_path", fs::exists(d.train_path, ec)
                                                 ? "'" + d.train_path +
                                                       "' is not a folder (data.train_shard_pattern "
                                                       "names files inside it)"
                                                 : path_not_found_message(d.train_path, cfg_file)});
      else check_local("data.train_path", d.train_path, cfg_file, "the data loader", errors);
    } else {
      check_local("data.train_path", d.train_path, cfg_file, "the data loader", errors);
    }
  }
  if (d.val_path) check_local("data.val_path", *d.val_path, cfg_file, "the data loader", errors);
  if (options.training && evaluates && cfg.evaluation().split == "val" && !d.val_path && !(d.val_fraction > 0))
    errors.push_back({"data.val_path",
                      "not set and data.val_fraction is 0, so there is no validation split, which evaluation "
                      "(every training.eval_every steps and at the end of the run) reads; set data.val_path, or "
                      "data.val_fraction (e.g. 0.05), or evaluation.split: train"});
  // Tokenizer: hf://NAME is resolved offline by the tokenizer plugin; any
  // other scheme is refused, a local reference must exist.
  if (auto scheme = url_scheme(d.tokenizer); !scheme || *scheme != "hf")
    check_local("data.tokenizer", d.tokenizer, cfg_file, "the tokenizer", errors);
  if (const auto& t = cfg.model_card().template_path) {
    std::error_code ec;
    if (!fs::exists(*t, ec)) errors.push_back({"model_card.template", path_not_found_message(*t, cfg_file)});
  }
  return errors;
}

// ---- memory -----------------------------------------------------------------

namespace {

std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return b;
}

/// The parameters a model's estimate listed, as the params() of a model
/// table whose tensors have shapes and NULL data (the optimizer's estimate
/// reads shapes only).
struct ShapeOnlyModel {
  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t flags;
  };
  std::vector<Entry> entries;
  std::vector<DLTensor> values, grads;
  std::vector<zc_param> list;
  zc_model_table table{};

  static void put(void* ctx, const char* name, int32_t ndim, const int64_t* shape, uint32_t flags) {
    auto* self = static_cast<ShapeOnlyModel*>(ctx);
    self->entries.push_back({name ? name : "", std::vector<int64_t>(shape, shape + std::max(ndim, 0)), flags});
  }
  static zc_status* params(void* inst, zc_param_list* out) {
    auto* self = static_cast<ShapeOnlyModel*>(inst);
    *out = zc_param_list{self->list.data(), self->list.size()};
    return nullptr;
  }
  /// Builds the tensors once every entry is in (pointers into `entries`).
  zc_stage_ref ref() {
    values.resize(entries.size());
    grads.resize(entries.size());
    list.clear();
    for (size_t i = 0; i < entries.size(); ++i) {
      DLTensor t{};
      t.device = DLDevice{kDLCPU, 0};
      t.ndim = static_cast<int32_t>(entries[i].shape.size());
      t.dtype = DLDataType{kDLFloat, 32, 1};
      t.shape = entries[i].shape.data();
      values[i] = grads[i] = t;
      list.push_back(zc_param{entries[i].name.c_str(), &values[i], &grads[i], entries[i].flags, 0});
    }
    table.header = zc_table_header{sizeof(zc_model_table), ZC_KIND_MODEL, ZC_MODEL_TABLE_VERSION, 0};
    table.params = &ShapeOnlyModel::params;
    return zc_stage_ref{&table, this};
  }
};

/// Runs one estimate slot: true when it answered, false for
/// ZC_ERR_UNSUPPORTED; other failures throw PluginError.
bool call_estimate(const Component& c, zc_status* st) {
  if (!st) return true;
  StatusPtr owned(st);
  if (status_code(st) == ZC_ERR_UNSUPPORTED) return false;
  check_plugin_call(c, "estimate_memory", owned.release());
  return true;
}

std::optional<uint64_t> read_u64(const std::string& path) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word) || word == "max") return std::nullopt;
  try {
    return std::stoull(word);
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

uint64_t MemoryEstimate::known_total() const {
  uint64_t t = 0;
  for (const auto& p : {parameters, gradients, optimizer_state, activations})
    if (p) t += *p;
  return t;
}

std::string MemoryEstimate::describe() const {
  std::string s;
  auto part = [&](const char* name, const std::optional<uint64_t>& v) {
    s += (s.empty() ? "" : ", ") + std::string(name) + " " + (v ? mib(*v) : std::string("unknown"));
  };
  part("parameters", parameters);
  part("gradients", gradients);
  part("optimizer state", optimizer_state);
  part("activation workspace", activations);
  s += ": total " + mib(known_total());
  if (!unknown.empty()) s += " + unknown";
  return s;
}

MemoryEstimate estimate_run_memory(const Component& model, const zc_create_args& model_args, const Component* optimizer,
                                   zc_create_args optimizer_args) {
  MemoryEstimate est;
  ShapeOnlyModel shapes;
  const auto* mt = model.as<zc_model_table>();
  bool model_known = false;
  if (ZC_TABLE_HAS_SLOT(mt, zc_model_table, estimate_memory)) {
    zc_memory_estimate m{};
    m.struct_size = sizeof m;
    zc_param_shape_sink sink{&shapes, &ShapeOnlyModel::put};
    if (call_estimate(model, mt->estimate_memory(&model_args, &sink, &m))) {
      model_known = true;
      est.parameters = m.parameter_bytes;
      est.gradients = m.gradient_bytes;
      est.activations = m.activation_bytes;
    } else {
      est.unknown.push_back("model: " + model.label() + " does not estimate its memory");
    }
  } else {
    est.unknown.push_back("model: " + model.label() + " has no estimate_memory (built for ABI 1.2 or older)");
  }
  if (!optimizer) return est;
  const auto* ot = optimizer->as<zc_optimizer_table>();
  if (!ZC_TABLE_HAS_SLOT(ot, zc_optimizer_table, estimate_memory)) {
    est.unknown.push_back("optimizer state: " + optimizer->label() +
                          " has no estimate_memory (built for ABI 1.2 or older)");
  } else if (!model_known) {
    est.unknown.push_back("optimizer state: needs the model's parameter list, which the model did not give");
  } else {
    optimizer_args.model = shapes.ref();
    zc_memory_estimate m{};
    m.struct_size = sizeof m;
    if (call_estimate(*optimizer, ot->estimate_memory(&optimizer_args, &m)))
      est.optimizer_state = m.optimizer_state_bytes;
    else est.unknown.push_back("optimizer state: " + optimizer->label() + " does not estimate its memory");
  }
  return est;
}

std::optional<uint64_t> available_memory_bytes() {
  std::optional<uint64_t> avail;
  {
    std::ifstream f("/proc/meminfo");
    std::string key, unit;
    uint64_t kib = 0;
    while (f >> key >> kib) {
      std::getline(f, unit);
      if (key == "MemAvailable:") {
        avail = kib * 1024;
        break;
      }
    }
  }
  // The cgroup of this process (v2 unified hierarchy, then v1's memory
  // controller): a container's limit can be far below the machine's memory.
  auto lower = [&](std::optional<uint64_t> limit, std::optional<uint64_t> usage) {
    if (!limit) return;
    const uint64_t room = usage && *usage < *limit ? *limit - *usage : (usage ? 0 : *limit);
    if (!avail || room < *avail) avail = room;
  };
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    // "0::/path" (v2) or "N:memory:/path" (v1)
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), rel = line.substr(b + 1);
    if (controllers.empty()) {
      const std::string dir = "/sys/fs/cgroup" + rel;
      lower(read_u64(dir + "/memory.max"), read_u64(dir + "/memory.current"));
    } else if (controllers.find("memory") != std::string::npos) {
      const std::string dir = "/sys/fs/cgroup/memory" + rel;
      auto limit = read_u64(dir + "/memory.limit_in_bytes");
      if (limit && *limit >= (uint64_t{1} << 62)) limit.reset();  // v1 "no limit" is a huge number
      lower(limit, read_u64(dir + "/memory.usage_in_bytes"));
    }
  }
  return avail;
}

}  // namespace zcode
