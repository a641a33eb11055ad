// launch.cpp: see zcode/core/dist/launch.h.
#include <zcode/core/dist/launch.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace zcode::dist {
namespace {

// A non-negative integer variable; nullopt when unset.
std::optional<int> int_var(const EnvReader& env, const char* name) {
  const auto v = env(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long x = std::strtol(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0 || x < 0 || x > 1 << 24)
    throw std::invalid_argument(std::string("launcher environment: ") + name + "='" + *v +
                                "': expected a non-negative integer");
  return static_cast<int>(x);
}

void check(const LaunchInfo& l, const char* size_var) {
  if (l.size < 1) throw std::invalid_argument(std::string("launcher environment: ") + size_var + " = 0 processes");
  if (l.rank >= l.size || l.local_rank >= l.local_size || l.local_size > l.size)
    throw std::invalid_argument("launcher environment (" + l.launcher + "): rank " + std::to_string(l.rank) + " of " +
                                std::to_string(l.size) + ", local rank " + std::to_string(l.local_rank) + " of " +
                                std::to_string(l.local_size) + " is not a valid place in a job");
}

}  // namespace

EnvReader process_environment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

LaunchInfo detect_launch(const EnvReader& env) {
  LaunchInfo l;
  if (auto size = int_var(env, "OMPI_COMM_WORLD_SIZE")) {
    l.launched = true;
    l.launcher = "mpirun";
    l.size = *size;
    l.rank = int_var(env, "OMPI_COMM_WORLD_RANK").value_or(0);
    l.local_rank = int_var(env, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(0);
    l.local_size = int_var(env, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(l.size);
    check(l, "OMPI_COMM_WORLD_SIZE");
    return l;
  }
  if (env("PMIX_RANK") && env("SLURM_NTASKS")) {
    l.launched = true;
    l.launcher = "srun";
    l.size = *int_var(env, "SLURM_NTASKS");
    l.rank = *int_var(env, "PMIX_RANK");
    l.local_rank = int_var(env, "SLURM_LOCALID").value_or(0);
    // SLURM_NTASKS_PER_NODE is set only with --ntasks-per-node; a one-node
    // job without it has every task local.
    l.local_size = int_var(env, "SLURM_NTASKS_PER_NODE").value_or(l.size);
    check(l, "SLURM_NTASKS");
    return l;
  }
  return l;
}

void require_one_process(const char* command, const EnvReader& env) {
  const LaunchInfo l = detect_launch(env);
  if (l.size > 1)
    throw std::invalid_argument(std::string("zcode-host ") + command + " runs in one process, but " + l.launcher +
                                " started " + std::to_string(l.size) + " (rank " + std::to_string(l.rank) +
                                "): run it without mpirun/srun (only `run` trains on several processes)");
}

int threads_per_rank(long configured, unsigned cores, const LaunchInfo& launch) {
  if (configured > 0) return static_cast<int>(configured);
  const unsigned per = (cores == 0 ? 1u : cores) / static_cast<unsigned>(launch.local_size < 1 ? 1 : launch.local_size);
  return per < 1 ? 1 : static_cast<int>(per);
}

}  // namespace zcode::dist
