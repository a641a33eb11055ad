// zcode/core/dist/launch.h: how this process was started (one process, or
// one rank of an Open MPI or Slurm job), read from the launcher's
// environment before anything initialises MPI.
//
// A plain `zcode-host run` has none of the variables and stays a single
// process that never touches MPI (so it pays nothing for it). Variables read,
// in this order (the first launcher found wins):
//   Open MPI's mpirun/mpiexec  OMPI_COMM_WORLD_SIZE, _RANK, _LOCAL_RANK, _LOCAL_SIZE
//                              (Open MPI 4.1 docs, mpirun(1), "Environment variables")
//   PMIx (srun --mpi=pmix)     PMIX_RANK with SLURM_NTASKS, SLURM_LOCALID,
//                              SLURM_NTASKS_PER_NODE (sbatch(1)/srun(1), "OUTPUT
//                              ENVIRONMENT VARIABLES")
// A malformed value (not an integer, rank >= size) is an error naming the
// variable: a launcher that says something impossible must not silently
// become a one-process run that trains on the wrong share of the data.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace zcode::dist {

/// The process's place in the job.
struct LaunchInfo {
  bool launched = false;  ///< started by a launcher (mpirun, srun); false: plain process
  std::string launcher;   ///< "mpirun", "srun" or "" (plain)
  int rank = 0;           ///< in [0, size)
  int size = 1;           ///< processes in the job (world size)
  int local_rank = 0;     ///< on this node, in [0, local_size)
  int local_size = 1;     ///< processes on this node
  bool operator==(const LaunchInfo&) const = default;
};

/// Reads an environment variable (std::nullopt when unset); the default
/// reads the process's environment, tests pass a map.
using EnvReader = std::function<std::optional<std::string>(const char* name)>;
EnvReader process_environment();

/// The launch of this process. Throws std::invalid_argument naming the
/// variable and its value when a launcher's variables are malformed.
LaunchInfo detect_launch(const EnvReader& env = process_environment());

/// Throws std::invalid_argument when this process is one of several ranks
/// (`command`, e.g. "evaluate", runs in one process; the message says so).
void require_one_process(const char* command, const EnvReader& env = process_environment());

/// Compute threads for one rank: `configured` when > 0 (an explicit
/// hardware.num_threads wins), else the node's `cores` divided by the ranks
/// on it (at least 1).
int threads_per_rank(long configured, unsigned cores, const LaunchInfo& launch);

}  // namespace zcode::dist
