// Loading one plugin file: ELF check, Boost.DLL load, negotiation, manifest
// and table-header checks. See plugin_loader.h.
#include "plugin_loader.h"

#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/kernels/blas_env.h>

#include <dlfcn.h>
#include <boost/dll/shared_library.hpp>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

namespace zcode::detail {
namespace {

std::string version_str(uint32_t major, uint32_t minor) { return std::to_string(major) + "." + std::to_string(minor); }

// Most names and descriptions are short; a bound keeps a corrupt manifest
// from making us read megabytes of garbage.
constexpr size_t kMaxString = 1u << 20;
constexpr uint32_t kMaxComponents = 4096;

std::string safe_string(const char* s) {
  if (!s) return {};
  size_t n = strnlen(s, kMaxString);
  return std::string(s, n);
}

struct Cache {
  std::mutex mu;  // the one loading mutex
  std::map<std::string, std::unique_ptr<LoadedFile>> files;
  // Libraries are kept here forever: plugins are never unloaded (abi.h). The
  // Cache itself is leaked on purpose (see cache()), so no destructor ever
  // runs dlclose, not even at exit, when plugin threads might still be
  // winding down in other stages' destructors.
  std::vector<std::unique_ptr<boost::dll::shared_library>> libraries;
};

Cache& cache() {
  static Cache* c = new Cache();
  return *c;
}

bool is_elf(const std::filesystem::path& path, std::string& error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    error = std::string("cannot read the file: ") + std::strerror(errno);
    return false;
  }
  char magic[4] = {0, 0, 0, 0};
  f.read(magic, 4);
  if (f.gcount() != 4 || std::memcmp(magic,
                                     "\x7f"
                                     "ELF",
                                     4) != 0) {
    error = "not a ZCode plugin (not an ELF shared object)";
    return false;
  }
  return true;
}

// Boost.DLL clears dlerror() on failure, so the reason is lost. Ask the
// dynamic loader once more, directly, to get its message ("undefined symbol:
// foo", "wrong ELF class", ...). If this second attempt succeeds (the file
// changed in between), the handle is kept: plugins are never unloaded.
std::string dlopen_reason(const std::filesystem::path& path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h) return "the dynamic loader refused it the first time but not the second (file changed?)";
  const char* e = dlerror();
  return e ? e : "unknown dynamic loader error";
}

std::string classify_dlopen_error(const std::string& reason) {
  // dlerror text starts with the path; keep only what follows it.
  std::string r = reason;
  auto pos = r.find(": ");
  if (pos != std::string::npos && r.compare(0, 1, "/") == 0) r = r.substr(pos + 2);
  auto sym = r.find("undefined symbol: ");
  if (sym != std::string::npos) {
    std::string name = r.substr(sym + std::strlen("undefined symbol: "));
    auto paren = name.find_first_of(" (");
    if (paren != std::string::npos) name = name.substr(0, paren);
    return "missing symbol '" + name + "' (" + r + ")";
  }
  if (r.find("invalid ELF header") != std::string::npos || r.find("file too short") != std::string::npos ||
      r.find("only ET_DYN") != std::string::npos)
    return "not a ZCode plugin (not an ELF shared object: " + r + ")";
  return "cannot load: " + r;
}

// Checks one component and its table; "" when fine.
std::string check_component(const zc_component& c, size_t index) {
  std::string who = c.name ? "component '" + safe_string(c.name) + "'" : "component #" + std::to_string(index);
  if (c.struct_size < sizeof(zc_component))
    return who + ": struct_size " + std::to_string(c.struct_size) + " is smaller than the " +
           std::to_string(sizeof(zc_component)) + " bytes of a zc_component";
  if (!c.name || !*c.name) return who + ": has no name";
  if (min_table_size(c.kind) == 0) return who + ": unknown kind " + std::to_string(c.kind);
  if (!c.table) return who + ": has no table";
  const auto* h = static_cast<const zc_table_header*>(c.table);
  if (h->kind != c.kind)
    return who + ": table header kind is " + std::to_string(h->kind) + " (" + kind_name(h->kind) +
           "), the manifest says " + std::to_string(c.kind) + " (" + kind_name(c.kind) + ")";
  if (h->struct_size < min_table_size(c.kind))
    return who + ": table struct_size " + std::to_string(h->struct_size) + " is smaller than the " +
           std::to_string(min_table_size(c.kind)) + " bytes of a " + kind_name(c.kind) + " table (version 1)";
  if (h->kind_version < 1) return who + ": table kind_version 0 (expected >= 1)";
  const auto* base = static_cast<const zc_table_base*>(c.table);
  if (!base->create || !base->destroy) return who + ": table has a NULL create or destroy";
  return {};
}

void load_into(LoadedFile& out, const std::filesystem::path& path) {
  std::string error;
  if (!is_elf(path, error)) {
    out.error = error;
    return;
  }
  // Before any plugin can pull in OpenBLAS, which reads its core type once at load.
  static const bool blas_logged = [] {
    log::debug(kernels::prepare_blas_environment().description);
    return true;
  }();
  (void)blas_logged;
  auto lib = std::make_unique<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  lib->load(boost::dll::fs::path(path.string()), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local,
            ec);
  if (ec || !lib->is_loaded()) {
    out.error = classify_dlopen_error(dlopen_reason(path));
    return;
  }
  // From here on the library stays loaded whatever happens.
  boost::dll::shared_library* raw = lib.get();
  cache().libraries.push_back(std::move(lib));

  if (!raw->has(ZC_PLUGIN_ENTRY_SYMBOL)) {
    out.error = std::string("not a ZCode plugin (no entry symbol '") + ZC_PLUGIN_ENTRY_SYMBOL + "')";
    return;
  }
  auto negotiate = reinterpret_cast<zc_negotiate_fn>(raw->get<void()>(ZC_PLUGIN_ENTRY_SYMBOL));
  uint32_t pmaj = 0, pmin = 0;
  const zc_manifest* m = nullptr;
  zc_status_code rc = negotiate(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, process_host_services(), &pmaj, &pmin, &m);
  out.info.abi_major = pmaj;
  out.info.abi_minor = pmin;
  const std::string both =
      "plugin " + version_str(pmaj, pmin) + ", host " + version_str(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR);
  if (pmaj != ZC_ABI_VERSION_MAJOR) {
    out.error = "ABI major mismatch: " + both;
    return;
  }
  if (pmin > ZC_ABI_VERSION_MINOR) {
    out.error = "ABI minor too new: " + both + " (rebuild the plugin against this host's SDK, or upgrade the host)";
    return;
  }
  if (rc != ZC_OK) {
    out.error = std::string("negotiation failed with ") + status_code_name(rc) + " (" + both + ")";
    return;
  }
  if (!m) {
    out.error = "negotiation returned no manifest";
    return;
  }
  if (m->struct_size < sizeof(zc_manifest)) {
    out.error = "manifest struct_size " + std::to_string(m->struct_size) + " is smaller than the " +
                std::to_string(sizeof(zc_manifest)) + " bytes the host reads";
    return;
  }
  if (m->num_components == 0 || m->num_components > kMaxComponents || !m->components) {
    out.error = "manifest lists " + std::to_string(m->num_components) + " components (expected 1 to " +
                std::to_string(kMaxComponents) + ")";
    return;
  }
  out.info.name = safe_string(m->name);
  out.info.version = safe_string(m->version);
  out.info.license = safe_string(m->license);
  out.info.description = safe_string(m->description);
  // Components are an array of zc_component as the plugin compiled it: a
  // newer minor may append fields, so the stride is the first element's
  // struct_size (at least the host's sizeof, checked per element).
  std::vector<Component> comps;
  std::set<std::pair<zc_kind, std::string>> seen;
  const size_t stride = m->components[0].struct_size;
  if (stride < sizeof(zc_component)) {
    out.error = "component #0: struct_size " + std::to_string(stride) + " is smaller than the " +
                std::to_string(sizeof(zc_component)) + " bytes of a zc_component";
    return;
  }
  const char* base_ptr = reinterpret_cast<const char*>(m->components);
  for (uint32_t i = 0; i < m->num_components; ++i) {
    const zc_component& c = *reinterpret_cast<const zc_component*>(base_ptr + i * stride);
    std::string bad = check_component(c, i);
    if (!bad.empty()) {
      out.error = bad;
      return;
    }
    Component comp;
    comp.kind = c.kind;
    comp.name = safe_string(c.name);
    comp.description = safe_string(c.description);
    comp.options_schema_json = c.options_schema_json ? safe_string(c.options_schema_json) : "{}";
    comp.table = c.table;
    if (!seen.emplace(comp.kind, normalize_component_name(comp.name)).second) {
      out.error = "component '" + comp.name + "' (" + kind_name(comp.kind) + ") is listed twice in the manifest";
      return;
    }
    comps.push_back(std::move(comp));
  }
  out.components = std::move(comps);
}

}  // namespace

std::filesystem::path index_path_for(const std::filesystem::path& plugin_file) {
  return plugin_file.parent_path() / (plugin_file.stem().string() + ".zcode.json");
}

const LoadedFile& load_plugin_file(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path canon = std::filesystem::weakly_canonical(path, ec);
  const std::string key = ec ? path.lexically_normal().string() : canon.string();
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.files.find(key);
  if (it != c.files.end()) return *it->second;
  auto lf = std::make_unique<LoadedFile>();
  lf->info.path = path;
  log::write(log::Level::Debug, {}, "loading plugin " + path.string());
  load_into(*lf, path);
  // file pointers are set after the LoadedFile has its final address
  for (Component& comp : lf->components) comp.file = &lf->info;
  if (!lf->error.empty()) lf->components.clear();
  const LoadedFile& ref = *lf;
  c.files.emplace(key, std::move(lf));
  return ref;
}

}  // namespace zcode::detail
