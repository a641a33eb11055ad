// The plugin registry: search path, lazy lookup, duplicates, security checks.
// How a name finds its file without loading everything: core/README.md.
#include <zcode/core/registry.h>
#include <zcode/sdk/suggest.h>

#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/sdk/json.h>

#include "plugin_loader.h"

#include <rapidjson/document.h>
#include <sys/stat.h>
#include <boost/dll/runtime_symbol_info.hpp>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace zcode {
namespace fs = std::filesystem;

// ---- names -------------------------------------------------------------------

std::string normalize_component_name(std::string_view name) {
  std::string s(name);
  for (char& c : s) {
    if (c == '-') c = '_';
    else c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

const char* kind_name(zc_kind kind) { return zc_kind_name(kind); }

std::optional<zc_kind> parse_kind(std::string_view text) {
  std::string n = normalize_component_name(text);
  for (zc_kind k = ZC_KIND_TOKENIZER; k <= ZC_KIND_CALLBACK; ++k)
    if (n == kind_name(k)) return k;
  return std::nullopt;
}

size_t min_table_size(zc_kind kind) {
  switch (kind) {
    case ZC_KIND_TOKENIZER: return sizeof(zc_tokenizer_table);
    case ZC_KIND_DATALOADER: return sizeof(zc_dataloader_table);
    // Tables grown by appended slots: their version-1 (ABI 1.0) size, so that
    // older plugins keep loading; readers check each later slot with
    // ZC_TABLE_HAS_SLOT.
    case ZC_KIND_MODEL: return offsetof(zc_model_table, forward_eval);
    case ZC_KIND_OPTIMIZER: return offsetof(zc_optimizer_table, estimate_memory);
    case ZC_KIND_SCHEDULER: return sizeof(zc_scheduler_table);
    case ZC_KIND_EVALUATOR: return sizeof(zc_evaluator_table);
    case ZC_KIND_CALLBACK: return sizeof(zc_callback_table);
    default: return 0;
  }
}

std::string Component::label() const {
  return std::string(kind_name(kind)) + " '" + name + "' (" + (file ? file->path.string() : "?") + ")";
}

fs::path default_plugin_dir() {
  boost::dll::fs::error_code ec;
  auto exe = boost::dll::program_location(ec);
  if (ec) return {};
  return (fs::path(exe.string()).parent_path() / ".." / "lib" / "zcode" / "plugins").lexically_normal();
}

namespace {

bool world_writable(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return false;
  return (st.st_mode & S_IWOTH) != 0;
}

std::string insecure_hint() { return "chmod o-w it, or pass --allow-insecure-plugin-path"; }

/// What a sidecar index says a file provides.
struct IndexEntry {
  zc_kind kind;
  std::string name;  // normalized
};

/// Reads `<stem>.zcode.json`; nullopt when absent or unreadable (the file
/// is then treated as "unindexed").
std::optional<std::vector<IndexEntry>> read_index(const fs::path& plugin) {
  fs::path idx = detail::index_path_for(plugin);
  std::error_code ec;
  if (!fs::is_regular_file(idx, ec)) return std::nullopt;
  std::ifstream f(idx);
  std::stringstream ss;
  ss << f.rdbuf();
  rapidjson::Document d;
  const bool parsed = sdk::json::parse(d, ss.str()).ok();  // a file on disk: bounded (zcode/sdk/json.h)
  if (!parsed || !d.IsObject() || !d.HasMember("components") || !d["components"].IsArray()) {
    log::warn(idx.string() +
              ": not a valid plugin index (ignored; the plugin is loaded only when a name is not found elsewhere)");
    return std::nullopt;
  }
  std::vector<IndexEntry> out;
  for (const auto& c : d["components"].GetArray()) {
    if (!c.IsObject() || !c.HasMember("kind") || !c.HasMember("name") || !c["kind"].IsString() || !c["name"].IsString())
      continue;
    auto k = parse_kind(c["kind"].GetString());
    if (!k) continue;
    out.push_back({*k, normalize_component_name(c["name"].GetString())});
  }
  return out;
}

struct Candidate {
  fs::path path;
  std::optional<std::vector<IndexEntry>> index;
  std::string stem_name;  // normalized "<x>" of libzcode_<x>.so, or ""
  bool claims(zc_kind kind, const std::string& name) const {
    if (index) {
      for (const auto& e : *index)
        if (e.kind == kind && e.name == name) return true;
      return false;
    }
    return stem_name == name;
  }
};

}  // namespace

struct Registry::Impl {
  PluginSearchOptions opts;
  std::vector<SearchDir> dirs;
  mutable std::mutex mu;
  mutable bool listed = false;
  mutable std::vector<Candidate> candidates;                        // search order
  mutable std::map<std::string, const detail::LoadedFile*> loaded;  // by path string
  mutable std::vector<std::string> problems;
  mutable std::set<std::string> reported;  // problem lines already logged
  // (kind, normalized name) -> winner; duplicates warned once
  mutable std::map<std::pair<zc_kind, std::string>, const Component*> resolved;
  mutable std::set<std::pair<zc_kind, std::string>> dup_warned;
  mutable bool all_loaded = false;

  void problem(const std::string& line) const {
    if (reported.insert(line).second) {
      problems.push_back(line);
      log::error(line);
    }
  }

  void list() const {
    if (listed) return;
    listed = true;
    for (const SearchDir& d : dirs) {
      std::vector<fs::path> files;
      std::error_code ec;
      for (fs::directory_iterator it(d.path, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path& p = it->path();
        if (p.extension() != ".so") continue;
        std::error_code ec2;
        if (!fs::is_regular_file(p, ec2)) continue;
        files.push_back(p);
      }
      if (ec) problem(d.path.string() + ": cannot list the plugin folder: " + ec.message());
      std::sort(files.begin(), files.end());
      for (const fs::path& p : files) {
        Candidate c;
        c.path = p;
        c.index = read_index(p);
        std::string stem = p.stem().string();
        if (stem.rfind("libzcode_", 0) == 0) c.stem_name = normalize_component_name(stem.substr(9));
        candidates.push_back(std::move(c));
      }
    }
  }

  /// Loads one candidate (security check first); nullptr when refused.
  const detail::LoadedFile* load(const Candidate& c) const {
    auto it = loaded.find(c.path.string());
    if (it != loaded.end()) return it->second;
    if (!opts.allow_insecure && world_writable(c.path)) {
      problem(c.path.string() + ": refused: world-writable plugin file (" + insecure_hint() + ")");
      loaded.emplace(c.path.string(), nullptr);
      return nullptr;
    }
    const detail::LoadedFile& lf = detail::load_plugin_file(c.path);
    if (!lf.error.empty()) {
      problem(c.path.string() + ": " + lf.error);
      loaded.emplace(c.path.string(), nullptr);
      return nullptr;
    }
    if (c.index) {
      for (const auto& e : *c.index) {
        bool found = std::any_of(lf.components.begin(), lf.components.end(), [&](const Component& comp) {
          return comp.kind == e.kind && normalize_component_name(comp.name) == e.name;
        });
        if (!found)
          log::warn(detail::index_path_for(c.path).string() + ": stale index: lists " + kind_name(e.kind) + " '" +
                    e.name + "', which the plugin does not provide (rebuild it)");
      }
    }
    loaded.emplace(c.path.string(), &lf);
    return &lf;
  }

  static const Component* provides(const detail::LoadedFile* lf, zc_kind kind, const std::string& name) {
    if (!lf) return nullptr;
    for (const Component& comp : lf->components)
      if (comp.kind == kind && normalize_component_name(comp.name) == name) return &comp;
    return nullptr;
  }

  void warn_duplicate(const Component* winner, const Component* loser) const {
    auto key = std::make_pair(winner->kind, normalize_component_name(winner->name));
    if (!dup_warned.insert(key).second) return;
    log::warn(std::string(kind_name(winner->kind)) + " '" + winner->name + "' is provided by both " +
              winner->file->path.string() + " and " + loser->file->path.string() + "; using " +
              winner->file->path.string() + " (first on the plugin path)");
  }

  const Component* find(zc_kind kind, const std::string& name) const {
    auto key = std::make_pair(kind, name);
    auto r = resolved.find(key);
    if (r != resolved.end()) return r->second;
    list();
    // Phase 1: files that claim the name (index, or libzcode_<name>.so when
    // unindexed) and files already loaded. Loading every claimant also finds
    // duplicates, which are then warned about.
    const Component* winner = nullptr;
    for (const Candidate& c : candidates) {
      bool already = loaded.count(c.path.string()) != 0;
      if (!already && !c.claims(kind, name)) continue;
      const Component* comp = provides(load(c), kind, name);
      if (!comp) continue;
      if (!winner) winner = comp;
      else if (comp->file != winner->file) warn_duplicate(winner, comp);
    }
    // Phase 2: unindexed files whose name says nothing, in order, until found.
    if (!winner) {
      for (const Candidate& c : candidates) {
        if (c.index || loaded.count(c.path.string())) continue;
        const Component* comp = provides(load(c), kind, name);
        if (comp) {
          winner = comp;
          break;
        }
      }
    }
    if (winner) resolved.emplace(key, winner);
    return winner;
  }

  void load_all() const {
    if (all_loaded) return;
    list();
    for (const Candidate& c : candidates) load(c);
    all_loaded = true;
  }

  std::vector<const Component*> components() const {
    std::vector<const Component*> out;
    std::map<std::pair<zc_kind, std::string>, const Component*> first;
    for (const Candidate& c : candidates) {
      auto it = loaded.find(c.path.string());
      if (it == loaded.end() || !it->second) continue;
      for (const Component& comp : it->second->components) {
        auto key = std::make_pair(comp.kind, normalize_component_name(comp.name));
        auto [pos, inserted] = first.emplace(key, &comp);
        if (inserted) out.push_back(&comp);
        else if (pos->second->file != comp.file) warn_duplicate(pos->second, &comp);
      }
    }
    return out;
  }
};

Registry::Registry(PluginSearchOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(options);
  const PluginSearchOptions& o = impl_->opts;
  std::vector<SearchDir> wanted;
  for (const auto& p : o.cli_paths) wanted.push_back({p, "--plugin-path"});
  for (const auto& p : o.config_paths) wanted.push_back({p, "plugin_path"});
  if (o.use_env) {
    if (const char* env = std::getenv("ZCODE_PLUGIN_PATH")) {
      std::stringstream ss(env);
      std::string item;
      while (std::getline(ss, item, ':'))
        if (!item.empty()) wanted.push_back({item, "ZCODE_PLUGIN_PATH"});
    }
  }
  if (o.use_default) {
    fs::path d = o.default_dir.empty() ? default_plugin_dir() : o.default_dir;
    if (!d.empty()) wanted.push_back({d, "default"});
  }
  std::set<std::string> seen;
  for (auto& d : wanted) {
    std::error_code ec;
    if (!fs::is_directory(d.path, ec)) {
      const bool explicit_dir = d.origin == "--plugin-path" || d.origin == "plugin_path";
      if (fs::exists(d.path, ec)) {
        // Most likely the plugin file itself: name the folder to give instead.
        const fs::path parent = d.path.has_parent_path() ? d.path.parent_path() : fs::path(".");
        const std::string line = d.path.string() + " (" + d.origin +
                                 "): is a file, not a plugin folder; give the "
                                 "folder that holds plugin files (" +
                                 parent.string() + ")";
        if (explicit_dir) impl_->problem(line);
        else log::warn(line + "; skipped");
        continue;
      }
      log::write(explicit_dir ? log::Level::Warn : log::Level::Debug, {},
                 d.path.string() + " (" + d.origin + "): no such plugin folder; skipped");
      continue;
    }
    fs::path canon = fs::weakly_canonical(d.path, ec);
    if (!seen.insert(ec ? d.path.string() : canon.string()).second) continue;  // listed twice: search once
    if (!o.allow_insecure && world_writable(d.path)) {
      impl_->problem(d.path.string() + ": refused: world-writable plugin folder (" + insecure_hint() + ")");
      continue;
    }
    impl_->dirs.push_back(d);
  }
}

Registry::~Registry() = default;

const std::vector<SearchDir>& Registry::search_dirs() const { return impl_->dirs; }

std::vector<std::string> Registry::searched_folders() const {
  std::vector<std::string> out;
  for (const SearchDir& d : impl_->dirs) out.push_back(d.path.string());
  return out;
}

std::vector<fs::path> Registry::candidate_files() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->list();
  std::vector<fs::path> out;
  for (const auto& c : impl_->candidates) out.push_back(c.path);
  return out;
}

const Component* Registry::find(zc_kind kind, std::string_view name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->find(kind, normalize_component_name(name));
}

const Component& Registry::require(zc_kind kind, std::string_view name, std::string_view config_path) const {
  if (const Component* c = find(kind, name)) return *c;
  std::string msg = std::string(config_path) + ": no " + kind_name(kind) + " plugin named '" + std::string(name) +
                    "' on the plugin path";
  msg += sdk::did_you_mean_or_available(normalize_component_name(name), component_names(kind));
  throw PluginError(msg);
}

const Component* Registry::find_any(std::string_view name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->load_all();
  std::string n = normalize_component_name(name);
  for (const Component* c : impl_->components())
    if (normalize_component_name(c->name) == n) return c;
  return nullptr;
}

void Registry::load_all() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->load_all();
  impl_->components();  // emits the duplicate warnings
}

std::vector<const Component*> Registry::components() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->components();
}

std::vector<std::string> Registry::problems() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->problems;
}

std::optional<std::string> Registry::options_schema(zc_kind kind, std::string_view component_name) const {
  const Component* c = find(kind, component_name);
  if (!c) return std::nullopt;
  return c->options_schema_json;
}

std::vector<std::string> Registry::component_names(zc_kind kind) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->list();
  std::set<std::string> names;
  for (const Candidate& c : impl_->candidates) {
    auto it = impl_->loaded.find(c.path.string());
    if (it != impl_->loaded.end()) {
      if (!it->second) continue;  // refused
      for (const Component& comp : it->second->components)
        if (comp.kind == kind) names.insert(normalize_component_name(comp.name));
    } else if (c.index) {
      for (const auto& e : *c.index)
        if (e.kind == kind) names.insert(e.name);
    }
  }
  return {names.begin(), names.end()};
}

// ---- calling into a component ------------------------------------------------

void check_plugin_call(const Component& component, std::string_view what, zc_status* status) {
  if (!status) return;
  StatusPtr owned(status);
  throw PluginError(component.label() + ": " + std::string(what) + " failed: " + status_message(status));
}

StageInstance::StageInstance(const Component& component, const zc_create_args& args) : component_(&component) {
  void* inst = nullptr;
  zc_status* st = component.base()->create(&args, &inst);
  if (st) {
    component_ = nullptr;
    check_plugin_call(component, "create", st);
  }
  if (!inst) throw PluginError(component.label() + ": create returned no instance and no error");
  instance_ = inst;
}

StageInstance::~StageInstance() { reset(); }

StageInstance::StageInstance(StageInstance&& o) noexcept
    : component_(std::exchange(o.component_, nullptr)), instance_(std::exchange(o.instance_, nullptr)) {}

StageInstance& StageInstance::operator=(StageInstance&& o) noexcept {
  if (this != &o) {
    reset();
    component_ = std::exchange(o.component_, nullptr);
    instance_ = std::exchange(o.instance_, nullptr);
  }
  return *this;
}

void StageInstance::reset() {
  if (instance_ && component_) component_->base()->destroy(instance_);
  instance_ = nullptr;
}

}  // namespace zcode
