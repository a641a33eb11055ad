// zcode_plugin_index PLUGIN.so OUT.zcode.json
//
// Build-time helper run by zcode_add_plugin after linking a plugin: loads the
// plugin, calls its negotiation entry point (which by the ABI's rules only
// returns its static manifest: no allocation, no threads) and writes the
// sidecar index the host uses to find which file provides a component
// without loading every plugin (core/README.md):
//   {"plugin": "optimizers", "components": [{"kind": "optimizer", "name": "adamw"}, ...]}
// The host still checks the real manifest when it loads the file; the index
// is only a hint. Written atomically (sdk/file.h).
#include <zcode/abi.h>
#include <zcode/sdk/file.h>
#include <zcode/sdk/json.h>

#include <dlfcn.h>

#include <cstdio>
#include <exception>
#include <string>

namespace {

// Negotiation must not call services, but a plugin may store the pointer:
// give it a complete table of harmless functions.
struct zc_status* status_create(void*, zc_status_code, const char*) {
  static char dummy;
  return reinterpret_cast<zc_status*>(&dummy);
}
void log_fn(void*, zc_log_level, const char*, const char*) {}
void* alloc_fn(void*, size_t, size_t, DLDevice) { return nullptr; }
void free_fn(void*, void*, DLDevice) {}
uint64_t derive_fn(void*, const char*) { return 0; }
int32_t stop_fn(void*) { return 0; }
zc_status_code code_fn(void*, const zc_status*) { return ZC_ERR_INTERNAL; }
const char* msg_fn(void*, const zc_status*) { return ""; }
void release_fn(void*, zc_status*) {}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: zcode_plugin_index PLUGIN.so OUT.zcode.json\n");
    return 2;
  }
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "zcode_plugin_index: %s\n", dlerror());
    return 1;
  }
  auto fn = reinterpret_cast<zc_negotiate_fn>(dlsym(h, ZC_PLUGIN_ENTRY_SYMBOL));
  if (!fn) {
    std::fprintf(stderr, "zcode_plugin_index: %s: no entry symbol '%s'\n", argv[1], ZC_PLUGIN_ENTRY_SYMBOL);
    return 1;
  }
  zc_host_services s{};
  s.struct_size = sizeof s;
  s.abi_major = ZC_ABI_VERSION_MAJOR;
  s.abi_minor = ZC_ABI_VERSION_MINOR;
  s.log = log_fn;
  s.status_create = status_create;
  s.alloc = alloc_fn;
  s.free = free_fn;
  s.derive_seed = derive_fn;
  s.device = DLDevice{kDLCPU, 0};
  s.num_threads = 1;
  s.stop_requested = stop_fn;
  s.status_code = code_fn;
  s.status_message = msg_fn;
  s.status_release = release_fn;
  uint32_t maj = 0, min = 0;
  const zc_manifest* m = nullptr;
  zc_status_code rc = fn(ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR, &s, &maj, &min, &m);
  if (rc != ZC_OK || !m || maj != ZC_ABI_VERSION_MAJOR || !m->components || m->num_components == 0 ||
      m->components[0].struct_size < sizeof(zc_component)) {
    std::fprintf(stderr, "zcode_plugin_index: %s: negotiation failed (plugin ABI %u.%u, SDK %u.%u)\n", argv[1], maj,
                 min, ZC_ABI_VERSION_MAJOR, ZC_ABI_VERSION_MINOR);
    return 1;
  }
  namespace json = zcode::sdk::json;
  json::Writer w;
  w.begin_object().key("plugin").string(m->name ? m->name : "").key("components").begin_array();
  const char* base = reinterpret_cast<const char*>(m->components);
  const size_t stride = m->components[0].struct_size;
  for (uint32_t i = 0; i < m->num_components; ++i) {
    const zc_component& c = *reinterpret_cast<const zc_component*>(base + i * stride);
    const char* kind = zc_kind_name(c.kind);
    w.begin_object().key("kind").string(kind ? kind : "").key("name").string(c.name ? c.name : "").end_object();
  }
  w.end_array().end_object();
  try {
    zcode::sdk::write_file_atomic(argv[2], w.str() + "\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zcode_plugin_index: cannot write %s\n", e.what());
    return 1;
  }
  return 0;  // the plugin stays loaded until exit (never unloaded, as in the host)
}
