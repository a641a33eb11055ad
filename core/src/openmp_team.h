// core/src/openmp_team.h: handing back a thread's idle OpenMP team.
#pragma once

namespace zcode {

/// Gives back the calling thread's idle OpenMP worker threads when a plugin
/// has loaded GNU libgomp (the host links no OpenMP runtime, so the function
/// is looked up in the loaded one): omp_pause_resource_all(omp_pause_soft)
/// (OpenMP 5.0 §3.2.43), which in libgomp (GCC ≥ 9, gomp_pause_host) frees
/// only the calling thread's team; the thread's next parallel region starts
/// a new one (tens of microseconds). Call it on a thread that is done with
/// compute while another thread goes on with it.
///
/// Why: libgomp counts the workers of every thread's team, and once they
/// outnumber the CPUs it stops spinning between parallel regions (whatever
/// GOMP_SPINCOUNT says) and parks each worker on a futex after ~100 spins.
/// The serving scheduler's thread then paid a futex wake for each of a decode
/// step's ~50 regions (tens of microseconds each in a KVM guest) only because
/// the main thread, which loaded and packed the model, still held a team.
///
/// Returns false, changing nothing, when libgomp is not loaded, lacks the
/// function, or refuses (a region of this thread is active). Other runtimes
/// (LLVM's libomp) are left alone: the specification lets a pause act on the
/// whole device, which would stop other threads' teams too. Thread-safe.
bool release_openmp_team();

}  // namespace zcode
