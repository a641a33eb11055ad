// glm52/blocking.h: every tuned constant of the CPU path (LM-head row chunk
// and vocab slices, attention tiles, expert scheduling, embedding-gradient
// column blocks) in one struct, and the written rules that derive it from the
// machine's caches and CPU count (README.md, "Performance", "Blocking").
//
// Bit-identity: a field that changes the summation order (the head's slices,
// groups and row chunk, the attention tile) never depends on the thread count,
// so results stay identical across thread counts on one machine. Between
// machines the derived values, and so the last bits, may differ; the resolved
// value is recorded in the checkpoint and reused on resume.
#pragma once

#include <zcode/sdk/options.h>

#include <cstdint>
#include <string>

namespace glm52 {

/// Upper bound of Blocking::head_fused_groups (a fixed-size table in the head).
inline constexpr int kMaxHeadFusedGroups = 64;

/// The blocking of the CPU path. The default member values are those of the
/// 2-core Intel Xeon VM the path was tuned on (2026-11-30: 2 MiB L2 per core,
/// 64-byte lines, 2 CPUs), which derive_blocking gives for that machine, and
/// the values of every checkpoint written before the blocking was recorded.
struct Blocking {
  /// Vocab columns per slice of the fused LM head (lm_head.h); changes the
  /// summation order of ∂L/∂h. A slice's logits are post-processed while they
  /// are in the L2 of the core that computed them, so the slice of a 342-row
  /// chunk (the dense benchmark's), OpenBLAS's packed W slice (S rows × d =
  /// 256) and h (342 × 256) must fit in L2 together: 512 columns = 0.7 + 0.5 +
  /// 0.3 MiB in a 2 MiB L2. Measured there in paired steps (2026-11-30, 2
  /// threads): 512 1.0–1.8 % faster than 1024, 384 no faster than 512. Rule:
  /// the largest power of two in [128, 4096] with S·(342 + 256)·4 B +
  /// 342·256·4 B ≤ L2. A multiple of 16, so every slice starts on a 64-byte line.
  int head_fused_slice = 512;
  /// Fixed number of partial ∂L/∂h accumulators of the fused head (slices
  /// summed per group, groups in order: the result does not depend on the
  /// thread count), and the most threads the head uses. Group sizes shrink
  /// linearly so the last groups handed out are small and all cores finish
  /// together; measured on 2 CPUs: 12 groups cut the faster thread's idle time
  /// in pass 2 from 35–60 ms to 11–12 ms a step against 8 equal groups. Costs
  /// groups·rows·d elements of the chunk's memory. Rule: 6 per online CPU of
  /// the machine (sysconf, not the run's thread count), in [12, 64].
  int head_fused_groups = 12;
  /// Logits chunk of the LM head in elements, on top of the blocks' scratch it
  /// reuses (Workspace::plan); sets the row chunk, so the summation order of
  /// dW. Fewer chunks mean fewer re-packs of W by OpenBLAS: six chunks of 342
  /// rows (2048 rows, V 50257) measured 2.1–2.3 % faster a step than seven of
  /// 293 (2026-11-30), for 10 MiB more peak RSS (1.24× the analytic need; five
  /// chunks would pass the 1.25× budget). Rule: a memory budget, not a cache
  /// size, so the same on every machine: 29·2¹⁹ (58 MiB of fp32).
  int64_t logits_chunk_elems = int64_t{29} << 19;
  /// W rows per GEMM of the unfused LM head (sampled labels, OpenBLAS's pthread
  /// build); changes the summation order of ∂L/∂h there. One sgemm over the
  /// whole vocab makes OpenBLAS pack a K × GEMM_R panel of W per thread (18–19
  /// MiB each, 37 MiB of peak RSS, measured with smaps); slices of 4096 keep
  /// its buffers at ~5 MiB. Rule: OpenBLAS's buffer (peak RSS), not a cache
  /// size, so the same on every machine: 4096.
  int head_slice = 4096;
  /// Query rows per tile of the batched attention (attention.h); changes the
  /// summation order of dK and dV. Each tile's GEMMs run over keys 0..(its
  /// last row) only, so smaller tiles skip more of the causal half (62.5 % of
  /// the T×T square computed at T = 256 with 64) but make smaller GEMMs. Rule:
  /// a property of T and the GEMMs, not of the caches (a 64 × 256 fp32 tile
  /// of scores is 64 KiB, in any L2 we run on): 64 on every machine.
  int attn_tile = 64;
  /// Columns (fp32 elements) per parallel block of the embedding gradient's
  /// scatter-add; does not change any sum (rows are added in order per column).
  /// Rule: 4 cache lines (L1 line size from sysfs/sysconf) of fp32, so no two
  /// threads write one line: 64 with 64-byte lines.
  int embed_grad_cols = 64;
  /// An expert with more than this share of an even split of the kept rows
  /// (rows·threads > share·kept) runs alone with every thread in its GEMMs;
  /// the rest run one per thread, single-threaded (1.15–1.35× the GEMM rate on
  /// 8 experts × 512 rows, d 256, 2 threads, measured). No sum crosses
  /// experts. Rule: a load-balance ratio, the same on every machine: 1.0.
  double expert_alone_share = 1.0;

  bool operator==(const Blocking&) const = default;
  /// The fields as one JSON object (the checkpoint's record, the bench's header).
  std::string to_json() const;
};

/// What derive_blocking reads from the machine. Sizes in bytes; 0 = unknown.
struct MachineInfo {
  int64_t l1d = 0, l2 = 0, l3 = 0, line = 0;  ///< per-core L1d and L2, shared L3, line size
  int cpus = 0;                               ///< online CPUs (sysconf(_SC_NPROCESSORS_ONLN))
  std::string cpu_model;                      ///< /proc/cpuinfo "model name" ("unknown" when absent)
  std::string source;                         ///< "sysfs", "sysconf" or "none" (where the cache sizes came from)
  /// One line: model, caches, CPUs, source.
  std::string describe() const;
};

/// This machine: cache sizes from /sys/devices/system/cpu/cpu0/cache/index*/
/// (level, type, size, coherency_line_size), else sysconf(_SC_LEVEL1_DCACHE_SIZE,
/// _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL1_DCACHE_LINESIZE);
/// sysfs first because under KVM sysconf's CPUID-based L3 can be far off
/// (320 MiB reported for a 32 MiB L3 on the Zen 4 VM). Read once per process.
const MachineInfo& this_machine();

/// The blocking the rules in Blocking's field docs give for `m`. An unknown
/// size (0) takes the tuned machine's (L2 2 MiB, line 64 B, 2 CPUs).
Blocking derive_blocking(const MachineInfo& m);

/// Overlays the fields present in `o` (model option `blocking`, or a
/// checkpoint's record) on `base`, checking each: throws zcode::sdk::Error
/// with the option's path, the value found and the range expected. Unknown
/// keys are errors.
Blocking apply_blocking_options(const zcode::sdk::Options& o, Blocking base);

}  // namespace glm52
