// mpi_communicator.h: the Open MPI communicator behind dist::world() for a
// launched process (private to core/src/dist).
#pragma once

#include <zcode/core/dist/communicator.h>

#include <memory>

namespace zcode::dist {

/// Initialises MPI (MPI_Init_thread, MPI_THREAD_FUNNELED) and returns the
/// communicator over MPI_COMM_WORLD, with MPI_ERRORS_RETURN so that a failed
/// call becomes a CommError instead of MPI's default abort. Throws CommError
/// when MPI cannot start or its world disagrees with `launch` (a launcher
/// that set the variables but started another job). Its destructor calls
/// MPI_Finalize.
std::unique_ptr<Communicator> make_mpi_communicator(const LaunchInfo& launch);

}  // namespace zcode::dist
