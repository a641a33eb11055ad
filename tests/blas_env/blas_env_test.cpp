// zcode::kernels::prepare_blas_environment never overrides a value the user or the machine set,
// and sets one only from the CPU's own feature flags (checked here in a child
// process each, since the choice is made once per process).
#include <zcode/kernels/blas_env.h>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <string>

namespace {

// Runs `body` in a forked child; returns its exit status.
template <class F>
int in_child(F body) {
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

TEST(BlasEnv, KeepsAValueFromTheEnvironment) {
  EXPECT_EQ(in_child([] {
              setenv("OPENBLAS_CORETYPE", "Haswell", 1);
              const zcode::kernels::BlasEnvironment e = zcode::kernels::prepare_blas_environment();
              if (e.description != "OPENBLAS_CORETYPE=Haswell (from the environment)" || e.set_here) return 1;
              return std::string(std::getenv("OPENBLAS_CORETYPE")) == "Haswell" ? 0 : 2;
            }),
            0);
}

TEST(BlasEnv, OptOutLeavesItUnset) {
  EXPECT_EQ(in_child([] {
              unsetenv("OPENBLAS_CORETYPE");
              setenv("ZCODE_KEEP_BLAS_CORETYPE", "1", 1);
              zcode::kernels::prepare_blas_environment();
              return std::getenv("OPENBLAS_CORETYPE") == nullptr ? 0 : 1;
            }),
            0);
}

TEST(BlasEnv, UnsetChoosesFromCpuFlags) {
  // The expected value comes from /proc/cpuinfo's flags, read independently.
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) GTEST_SKIP() << "no /proc/cpuinfo on this system";
  std::string flags;
  char line[8192];
  while (std::fgets(line, sizeof line, f))
    if (std::string(line).rfind("flags", 0) == 0) {
      flags = line;
      break;
    }
  std::fclose(f);
  auto has = [&](const char* x) {
    return flags.find(std::string(" ") + x + " ") != std::string::npos ||
           flags.find(std::string(" ") + x + "\n") != std::string::npos;
  };
  std::string expect;
  if (has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl")) expect = "SkylakeX";
  else if (has("avx2") && has("fma")) expect = "Haswell";
  EXPECT_EQ(in_child([&] {
              unsetenv("OPENBLAS_CORETYPE");
              unsetenv("ZCODE_KEEP_BLAS_CORETYPE");
              const bool set_here = zcode::kernels::prepare_blas_environment().set_here;
              const char* v = std::getenv("OPENBLAS_CORETYPE");
              if (set_here != !expect.empty()) return 2;  // a re-exec is asked for exactly when it set one
              return (v ? std::string(v) : std::string()) == expect ? 0 : 1;
            }),
            0)
      << "expected OPENBLAS_CORETYPE='" << expect << "'";
}

}  // namespace
