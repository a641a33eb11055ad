// zcode/kernels/memory.h: alloc_large's alignment, size and huge pages.
#include <zcode/kernels/memory.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace {

using zcode::kernels::alloc_large;
using zcode::kernels::free_large;
using zcode::kernels::kHugePageBytes;

TEST(AllocLarge, AlignedWritableAndRoundedUp) {
  // 3 bytes past 5 MiB: the allocation spans three whole 2 MiB pages, all writable.
  const std::size_t bytes = (std::size_t{5} << 20) + 3;
  std::unique_ptr<void, zcode::kernels::LargeDeleter> p(alloc_large(bytes));
  ASSERT_NE(p.get(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.get()) % kHugePageBytes, 0u);
  auto* b = static_cast<unsigned char*>(p.get());
  std::memset(b, 0xAB, 3 * kHugePageBytes);
  EXPECT_EQ(b[0], 0xAB);
  EXPECT_EQ(b[3 * kHugePageBytes - 1], 0xAB);
}

TEST(AllocLarge, ZeroAndOverflowingSizesGiveNull) {
  EXPECT_EQ(alloc_large(0), nullptr);
  EXPECT_EQ(alloc_large(static_cast<std::size_t>(-1)), nullptr);
  free_large(nullptr);  // a no-op
}

// Where the kernel offers transparent huge pages on madvise, a touched
// buffer is backed by them (AnonHugePages of its mapping in smaps). THP may
// be off, or memory too fragmented for a huge page: then the test says so.
TEST(AllocLarge, BackedByHugePagesWhereTheKernelAllows) {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!mode || !std::getline(mode, line) ||
      (line.find("[madvise]") == std::string::npos && line.find("[always]") == std::string::npos))
    GTEST_SKIP() << "transparent huge pages are not offered on madvise here ('" << line << "')";
  const std::size_t bytes = 8 * kHugePageBytes;
  std::unique_ptr<void, zcode::kernels::LargeDeleter> p(alloc_large(bytes));
  ASSERT_NE(p.get(), nullptr);
  std::memset(p.get(), 1, bytes);
  const auto lo = reinterpret_cast<std::uintptr_t>(p.get());
  std::ifstream smaps("/proc/self/smaps");
  ASSERT_TRUE(smaps) << "cannot read /proc/self/smaps";
  bool in_mapping = false;
  long huge_kb = -1;
  while (std::getline(smaps, line)) {
    std::uintptr_t a = 0, b = 0;
    char dash = 0;
    std::istringstream hdr(line);
    if (hdr >> std::hex >> a >> dash >> b && dash == '-') {  // a mapping's header line
      in_mapping = a <= lo && lo < b;
      continue;
    }
    if (in_mapping && line.rfind("AnonHugePages:", 0) == 0) {
      huge_kb = std::stol(line.substr(14));
      break;
    }
  }
  ASSERT_GE(huge_kb, 0) << "no smaps entry for the buffer";
  if (huge_kb == 0) GTEST_SKIP() << "THP is offered but the kernel gave no huge page (fragmented memory?)";
  EXPECT_GE(huge_kb, 2048);
}

}  // namespace
