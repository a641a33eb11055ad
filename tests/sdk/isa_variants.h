// The kernel tests' one way to run a test on every instruction-set variant
// (zcode/kernels/isa.h): the list, a fixture that skips, visibly, a variant
// this CPU lacks, and the test-name suffix (gtest names allow [A-Za-z0-9_]).
#pragma once

#include <zcode/kernels/isa.h>

#include <gtest/gtest.h>

#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace zcode::kernels {
// gtest prints a parameter with this (the failure messages then say the variant, not its bytes).
inline void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }
}  // namespace zcode::kernels

namespace zcode_test {

/// n floats uniform in [-1, 1) from mt19937(seed): the kernels' test inputs.
inline std::vector<float> uniform(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

inline constexpr zcode::kernels::Isa kAllIsas[] = {zcode::kernels::Isa::kScalar, zcode::kernels::Isa::kAvx2Fma,
                                                   zcode::kernels::Isa::kAvx512f};

/// isa_name with '+' as '_' ("avx2_fma"): a test-name suffix.
inline std::string isa_test_name(const ::testing::TestParamInfo<zcode::kernels::Isa>& info) {
  std::string name = zcode::kernels::isa_name(info.param);
  for (char& c : name)
    if (c == '+') c = '_';
  return name;
}

/// A test parameterized by the variant; skipped, with the reason, where this CPU lacks it.
class IsaVariantTest : public ::testing::TestWithParam<zcode::kernels::Isa> {
 protected:
  void SetUp() override {
    if (!zcode::kernels::isa_supported(GetParam()))
      GTEST_SKIP() << zcode::kernels::isa_name(GetParam()) << " is not supported by this CPU";
  }
};

}  // namespace zcode_test
