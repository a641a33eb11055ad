// core/src/openmp_team.h: handing back a thread's idle OpenMP team.
#pragma once

namespace zcode {

/// Gives back the calling thread's idle OpenMP worker threads
/// (omp_pause_resource_all(omp_pause_soft), OpenMP 5.0 §3.2.43) when a
/// plugin has loaded an OpenMP runtime (libgomp or LLVM's libomp; the host
/// links none, so the symbol is looked up in the loaded runtime). Call it on
/// a thread that is done with compute while another thread goes on with it.
///
/// Why: libgomp counts the workers of every thread's team, and once they
/// outnumber the CPUs it stops spinning between parallel regions (whatever
/// GOMP_SPINCOUNT says) and parks each worker on a futex after ~100 spins.
/// The serving scheduler's thread then pays a futex wake for each of a decode
/// step's ~50 regions (tens of microseconds each in a KVM guest) only because
/// the main thread, which loaded and packed the model, still holds a team.
///
/// Returns false when no runtime is loaded or it refused (a region of this
/// thread is active); nothing changes then. Thread-safe: it touches the
/// calling thread's team only.
bool release_openmp_team();

}  // namespace zcode
