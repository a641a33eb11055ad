// zcode/kernels/memory.h: allocation of the large, long-lived buffers
// (parameters, gradients, activation workspaces) on transparent huge pages.
#pragma once

#include <cstddef>

namespace zcode::kernels {

/// Huge-page size the large buffers are aligned to and rounded up to, bytes.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// `bytes` (rounded up to kHugePageBytes) of uninitialised memory, aligned to
/// kHugePageBytes, with madvise(MADV_HUGEPAGE) on Linux: where transparent
/// huge pages are in "madvise" mode (Debian 12's default), the kernel backs
/// the buffer with 2 MiB pages, and the GEMMs that stream W, dW and the
/// logits through it miss the TLB far less often. Measured on the 2-core
/// dev VM (2026-11-30, paired training steps, both placements): 1-2 % a
/// step. Without THP the memory is ordinary. Returns nullptr when bytes is 0
/// or the allocation fails. Release with free_large.
void* alloc_large(std::size_t bytes) noexcept;

/// Releases memory from alloc_large (nullptr: no-op).
void free_large(void* p) noexcept;

/// Deleter for std::unique_ptr over alloc_large memory.
struct LargeDeleter {
  void operator()(void* p) const noexcept { free_large(p); }
};

}  // namespace zcode::kernels
