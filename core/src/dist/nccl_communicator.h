// nccl_communicator.h: the NCCL communicator (private to core/src/dist;
// compiled only when ZCODE_HAVE_NCCL). Its typed collectives take device
// pointers on the GPU `device`; its byte collectives and barrier go over
// `host`, the MPI world that bootstraps it (the unique id broadcast).
#pragma once

#include <zcode/core/dist/communicator.h>

#include <memory>

namespace zcode::dist {

/// Makes the NCCL world over `host` (a collective of the MPI world: every
/// rank calls it) on CUDA device `device` (usually the local rank). Throws
/// CommError naming the NCCL or CUDA call that failed. `host` must outlive it.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host, int device);

/// GPUs this process sees (0 when the CUDA runtime finds none or no driver).
int cuda_device_count();

}  // namespace zcode::dist
