#include <zcode/kernels/memory.h>

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace zcode::kernels {

void* alloc_large(std::size_t bytes) noexcept {
  if (bytes == 0 || bytes > static_cast<std::size_t>(-1) - kHugePageBytes) return nullptr;
  const std::size_t n = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, n);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice only: it fails where THP is compiled out, and the memory is fine then.
  if (p) (void)madvise(p, n, MADV_HUGEPAGE);
#endif
  return p;
}

void free_large(void* p) noexcept { std::free(p); }

}  // namespace zcode::kernels
