// See blocking.h.
#include "blocking.h"

#include <zcode/sdk/error.h>
#include <zcode/sdk/json.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

namespace glm52 {
namespace {

using zcode::sdk::invalid_argument;

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// "1024K", "32M", "48K" (sysfs cache size) in bytes; 0 when unreadable.
int64_t parse_size(const std::string& s) {
  if (s.empty()) return 0;
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const char unit = used < s.size() ? s[used] : ' ';
  if (unit == 'K') v <<= 10;
  else if (unit == 'M') v <<= 20;
  else if (unit == 'G') v <<= 30;
  return v > 0 ? v : 0;
}

MachineInfo read_machine() {
  MachineInfo m;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string level = read_line(dir + "level");
    if (level.empty()) break;
    const std::string type = read_line(dir + "type");
    const int64_t size = parse_size(read_line(dir + "size"));
    if (level == "1" && type == "Data") {
      m.l1d = size;
      m.line = parse_size(read_line(dir + "coherency_line_size"));
    } else if (level == "2" && type != "Instruction") {
      m.l2 = size;
    } else if (level == "3" && type != "Instruction") {
      m.l3 = size;
    }
  }
  m.source = m.l2 > 0 ? "sysfs" : "none";
  if (m.l2 <= 0) {
    const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE),
               l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), ln = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
    if (l2 > 0) {
      m.source = "sysconf";
      m.l1d = std::max(0L, l1), m.l2 = l2, m.l3 = std::max(0L, l3), m.line = std::max(0L, ln);
    }
  }
  if (m.line <= 0) m.line = std::max(0L, sysconf(_SC_LEVEL1_DCACHE_LINESIZE));
  m.cpus = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) m.cpu_model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  if (m.cpu_model.empty()) m.cpu_model = "unknown";
  return m;
}

std::string kib(int64_t b) { return b > 0 ? std::to_string(b >> 10) + " KiB" : "?"; }

}  // namespace

std::string Blocking::to_json() const {
  zcode::sdk::json::Writer w;
  w.begin_object();
  w.key("head_fused_slice").integer(head_fused_slice).key("head_fused_groups").integer(head_fused_groups);
  w.key("logits_chunk_elems").integer(logits_chunk_elems).key("head_slice").integer(head_slice);
  w.key("attn_tile").integer(attn_tile).key("embed_grad_cols").integer(embed_grad_cols);
  w.key("expert_alone_share").number(expert_alone_share, 17);
  w.end_object();
  return w.str();
}

std::string MachineInfo::describe() const {
  return cpu_model + ", L1d " + kib(l1d) + ", L2 " + kib(l2) + ", L3 " + kib(l3) + ", line " +
         (line > 0 ? std::to_string(line) + " B" : "?") + ", " + std::to_string(cpus) + " CPUs (caches from " + source +
         ")";
}

const MachineInfo& this_machine() {
  static const MachineInfo m = read_machine();
  return m;
}

Blocking derive_blocking(const MachineInfo& m) {
  const Blocking tuned;  // the tuned machine's values, for what m does not know
  const int64_t l2 = m.l2 > 0 ? m.l2 : int64_t{2} << 20;
  const int64_t line = m.line > 0 ? m.line : 64;
  const int cpus = m.cpus > 0 ? m.cpus : 2;
  Blocking b = tuned;
  // Logits slice + packed W slice + h of the dense benchmark's chunk in L2.
  constexpr int64_t kRows = 342, kD = 256, kF32 = 4;
  int64_t s = 4096;
  while (s > 128 && s * (kRows + kD) * kF32 + kRows * kD * kF32 > l2) s /= 2;
  b.head_fused_slice = static_cast<int>(s);
  b.head_fused_groups = std::clamp(6 * cpus, 12, kMaxHeadFusedGroups);
  b.embed_grad_cols = static_cast<int>(std::clamp<int64_t>(4 * line / kF32, 16, 256));
  return b;
}

Blocking apply_blocking_options(const zcode::sdk::Options& o, Blocking b) {
  static const char* const keys[] = {"head_fused_slice", "head_fused_groups", "logits_chunk_elems", "head_slice",
                                     "attn_tile",        "embed_grad_cols",   "expert_alone_share"};
  const rapidjson::Value& obj = o.json();
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it) {
    const std::string k(it->name.GetString(), it->name.GetStringLength());
    if (std::find(std::begin(keys), std::end(keys), k) == std::end(keys))
      invalid_argument(o.path(k) +
                       ": unknown option (expected head_fused_slice, head_fused_groups, logits_chunk_elems, "
                       "head_slice, attn_tile, embed_grad_cols, expert_alone_share)");
  }
  auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t multiple, int64_t fallback) {
    const int64_t v = o.get<int64_t>(key, fallback);
    if (v < lo || v > hi || v % multiple != 0)
      invalid_argument(o.path(key) + ": " + std::to_string(v) + " (expected " + std::to_string(lo) + ".." +
                       std::to_string(hi) + (multiple > 1 ? ", a multiple of " + std::to_string(multiple) : "") + ")");
    return v;
  };
  b.head_fused_slice = static_cast<int>(integer("head_fused_slice", 16, 65536, 16, b.head_fused_slice));
  b.head_fused_groups = static_cast<int>(integer("head_fused_groups", 1, kMaxHeadFusedGroups, 1, b.head_fused_groups));
  b.logits_chunk_elems = integer("logits_chunk_elems", 4096, int64_t{1} << 40, 1, b.logits_chunk_elems);
  b.head_slice = static_cast<int>(integer("head_slice", 16, 1 << 20, 1, b.head_slice));
  b.attn_tile = static_cast<int>(integer("attn_tile", 1, 65536, 1, b.attn_tile));
  b.embed_grad_cols = static_cast<int>(integer("embed_grad_cols", 1, 65536, 1, b.embed_grad_cols));
  b.expert_alone_share = o.get<double>("expert_alone_share", b.expert_alone_share);
  if (!(b.expert_alone_share > 0) || !std::isfinite(b.expert_alone_share))
    invalid_argument(o.path("expert_alone_share") + ": " + zcode::sdk::describe_json(obj["expert_alone_share"]) +
                     " (expected a finite number > 0)");
  return b;
}

}  // namespace glm52
