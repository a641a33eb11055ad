#include "openmp_team.h"

#include <dlfcn.h>

namespace zcode {

bool release_openmp_team() {
  // Looked up on every call, not cached: a plugin's unloading may unload the
  // runtime. dlopen with RTLD_NOLOAD finds it only if loaded, and takes a
  // reference that dlclose gives back.
  void* h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return false;
  constexpr int kPauseSoft = 1;  // omp_pause_soft (OpenMP 5.0 omp_pause_resource_t)
  using PauseAll = int (*)(int);
  auto pause = reinterpret_cast<PauseAll>(dlsym(h, "omp_pause_resource_all"));
  const bool ok = pause && pause(kPauseSoft) == 0;
  dlclose(h);
  return ok;
}

}  // namespace zcode
