#include "openmp_team.h"

#include <dlfcn.h>

#include <initializer_list>

namespace zcode {

bool release_openmp_team() {
  // omp_pause_soft is 1 in every runtime (OpenMP 5.0 omp_pause_resource_t).
  constexpr int kPauseSoft = 1;
  for (const char* lib : {"libgomp.so.1", "libomp.so.5", "libomp.so"}) {
    void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);  // only a runtime already loaded
    if (!h) continue;
    using PauseAll = int (*)(int);
    auto pause = reinterpret_cast<PauseAll>(dlsym(h, "omp_pause_resource_all"));
    const bool ok = pause && pause(kPauseSoft) == 0;
    dlclose(h);
    return ok;
  }
  return false;
}

}  // namespace zcode
