// bench_train_step: tokens/s of a full glm52 training step (forward,
// backward, fused AdamW) and of the forward alone, batch 8 × seq 256 on 2
// threads, for (a) a dense and (b) an MoE configuration, next to, in the same
// run: the PyTorch peer (/work/shared/peers/torch_lm_bench.py) as installed and
// tuned, and cblas_sgemm's peak at 2048³. Prints every figure, peak RSS against
// the analytic need, and, last, the ratio against tuned PyTorch.
//
// The shared machines drift (the same sgemm ran at 148–283 GFLOP/s within one
// hour), so a ratio pairs measurements taken back to back: each of --rounds
// rounds measures, per config, the sgemm peak, ZCode and tuned PyTorch in a
// row; the figures reported are the medians over rounds of those per-round
// ratios (each round printed too). PyTorch as installed runs in round 1, and
// peak RSS is round 1's (later rounds start on the heap earlier ones left).
// The FLOP rate is also paired at step granularity: every timed training step
// is followed by one in-process sgemm 2048³ (same threads, the model's GEMM
// engine: kernels::gemm), and the ratio is the median over those pairs.
//
//   bench_train_step [--threads 2] [--steps 10] [--warmup 3] [--rounds 3] [--no-peers] [--config dense|moe|both]
//                    [--blocking JSON]   (e.g. '{"head_fused_slice": 512}': pins fields of model.blocking)
//
// It prints first the CPU (model, caches, CPUs), the OpenBLAS kernel and the
// blocking the model resolved, so every figure names what it ran.
#include "common/glm52_bench.h"
#include "config.h"
#include "model.h"

#include <zcode/kernels/blas_env.h>
#include <zcode/kernels/gemm.h>
#include <zcode/kernels/threads.h>

#include <malloc.h>
#include <omp.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

const int kB = 8, kT = 256, kV = 50257;

struct Figures {
  double train_tok_s = 0, fwd_tok_s = 0, train_gflops = 0, fwd_gflops = 0, step_ms = 0;
  double peak_rss_mb = 0, analytic_mb = 0;
  double paired_peak_ratio = 0;  // median over steps of (step FLOP rate / the next sgemm 2048³ rate)
  double paired_peak_gflops = 0;
  bool ok = false;
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// VmHWM of this process in MiB.
double peak_rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  return 0;
}
/// Resets VmHWM to the current RSS. Free heap memory that glibc kept from
/// the previous config's model (a dense round after a MoE one measured
/// 521 MiB instead of 472 without this) goes back to the OS first, so each
/// measurement sees only its own model.
void reset_peak_rss() {
  malloc_trim(0);
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

std::string run_cmd(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  pclose(p);
  return out;
}

/// Model FLOPs per token, the peer's convention: 6·N_matmul_active + 12·L·T·d
/// for training and 2·N + 4·L·T·d forward (attention counted non-causal).
void flops_per_token(const glm52::Config& c, double& train, double& fwd) {
  const double d = c.d_model, L = c.n_layers, T = kT;
  double n = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    n += d * c.head_dim * (2.0 * c.n_heads + 2.0 * c.n_kv_heads);
    n += c.is_moe(l) ? c.moe_top_k * 3.0 * d * c.moe_ffn_hidden + d * c.moe_experts : 3.0 * d * c.ffn_hidden;
  }
  n += static_cast<double>(c.vocab_size) * d;
  train = 6 * n + 12 * L * T * d;
  fwd = 2 * n + 4 * L * T * d;
}

Figures measure(const char* name, const std::string& json, int threads, int warmup, int steps) {
  zcode::kernels::set_num_threads(threads);
  reset_peak_rss();
  zcode::sdk::Options mo(json.c_str(), "model"), co("{}", "config");
  const glm52::Config cfg = glm52::Config::resolve(mo, co, 0);
  glm52::Model<float> model(cfg, 1337);
  const int64_t n = model.num_elements();
  // AdamW state (Loshchilov & Hutter 2019, Alg. 2), allocated once.
  std::vector<float> m1(static_cast<size_t>(n), 0.f), m2(static_cast<size_t>(n), 0.f);
  std::mt19937 rng(0);
  std::vector<std::vector<int32_t>> ids(4), tg(4);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < kB * kT; ++j) {
      ids[i].push_back(static_cast<int32_t>(rng() % kV));
      tg[i].push_back(static_cast<int32_t>(rng() % kV));
    }
  glm52::StepMetrics met;
  int it = 0;
  std::vector<double> losses;
  auto train_step = [&] {
    glm52::BatchView b{ids[it % 4].data(), tg[it % 4].data(), nullptr, kB, kT};
    ++it;
    model.zero_grad();
    model.forward_backward(b, kB * kT, 1.0, false, 0, met);
    losses.push_back(met.loss);
    const float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
    const float c1 = 1.f / (1.f - std::pow(b1, static_cast<float>(it))),
                c2 = 1.f / (1.f - std::pow(b2, static_cast<float>(it)));
    for (const glm52::ParamInfo& p : model.param_infos()) {
      const float wdk = (p.flags & ZC_PARAM_NO_DECAY) ? 0.f : 0.1f;
      float *w = model.params() + p.offset, *g = model.grads() + p.offset, *pm = m1.data() + p.offset,
            *pv = m2.data() + p.offset;
#pragma omp parallel for schedule(static) if (p.numel > 65536)
      for (int64_t i = 0; i < p.numel; ++i) {
        pm[i] = b1 * pm[i] + (1 - b1) * g[i];
        pv[i] = b2 * pv[i] + (1 - b2) * g[i] * g[i];
        w[i] -= lr * (pm[i] * c1 / (std::sqrt(pv[i] * c2) + eps) + wdk * w[i]);
      }
    }
  };
  std::vector<float> lp(kB * kT);
  auto fwd_step = [&] {
    glm52::BatchView b{ids[it % 4].data(), tg[it % 4].data(), nullptr, kB, kT};
    ++it;
    model.forward_logprobs(b, lp.data());
  };
  auto timeit = [&](auto&& f) {
    for (int i = 0; i < warmup; ++i) f();
    std::vector<double> t;
    for (int i = 0; i < steps; ++i) {
      const double t0 = now_s();
      f();
      t.push_back(now_s() - t0);
    }
    return median(t);
  };
  Figures fg;
  const double tr = timeit(train_step);
  const double rss = peak_rss_mb();
  const double fw = timeit(fwd_step);
  double ftr = 0, ffw = 0;
  flops_per_token(cfg, ftr, ffw);
  // The FLOP rate against the sgemm peak, paired in time: each training step
  // is followed by one in-process sgemm 2048³ on the same threads, on the
  // engine the model's GEMMs run (kernels::gemm: gemm.h), and
  // the ratio is taken per pair (after the RSS reading: the matrices would
  // count in it).
  {
    const int n3 = 2048;
    std::vector<float> A(size_t(n3) * n3, 1.f), Bm(size_t(n3) * n3, 1.f), C(size_t(n3) * n3);
    auto sgemm = [&] {
      zcode::kernels::gemm(false, false, n3, n3, n3, 1.f, A.data(), n3, Bm.data(), n3, 0.f, C.data(), n3);
    };
    sgemm();
    std::vector<double> r, g;
    for (int i = 0; i < steps; ++i) {
      double t0 = now_s();
      train_step();
      const double ts = now_s() - t0;
      t0 = now_s();
      sgemm();
      const double tg = now_s() - t0;
      const double peak_i = 2.0 * n3 * n3 * n3 / tg / 1e9;
      g.push_back(peak_i);
      r.push_back(ftr * kB * kT / ts / 1e9 / peak_i);
    }
    fg.paired_peak_ratio = median(r);
    fg.paired_peak_gflops = median(g);
  }
  fg.step_ms = tr * 1e3;
  fg.train_tok_s = kB * kT / tr;
  fg.fwd_tok_s = kB * kT / fw;
  fg.train_gflops = ftr * kB * kT / tr / 1e9;
  fg.fwd_gflops = ffw * kB * kT / fw / 1e9;
  fg.peak_rss_mb = rss;
  fg.analytic_mb = (4.0 * n * sizeof(float) + static_cast<double>(model.activation_bytes(kB, kT))) / (1 << 20);
  fg.ok = std::isfinite(losses.back());
  std::printf(
      "zcode %-5s: train %7.1f tok/s (%6.1f ms/step, %6.1f GFLOP/s) | fwd %7.1f tok/s (%6.1f GFLOP/s) | "
      "loss %.4f -> %.4f | peak RSS %6.1f MiB, analytic %6.1f MiB (weights+grads+2 Adam moments %.1f, "
      "activations kept %.1f), workspace %.1f MiB | FLOP rate / paired sgemm %.2f (sgemm %.1f GFLOP/s)\n",
      name, fg.train_tok_s, fg.step_ms, fg.train_gflops, fg.fwd_tok_s, fg.fwd_gflops, losses.front(), losses.back(),
      fg.peak_rss_mb, fg.analytic_mb, 4.0 * n * sizeof(float) / (1 << 20),
      model.activation_bytes(kB, kT) / double(1 << 20), model.workspace_bytes() / double(1 << 20), fg.paired_peak_ratio,
      fg.paired_peak_gflops);
  std::fflush(stdout);
  return fg;
}

struct Peer {
  double train_tok_s = 0, fwd_tok_s = 0, train_gflops = 0, rss_mb = 0;
  bool ok = false;
};

Peer torch_peer(const char* config, bool tuned, int threads, int warmup, int steps) {
  const std::string tmp = "/tmp/zcode_bench_torch_" + std::to_string(getpid()) + ".json";
  const std::string rss = tmp + ".rss";
  std::remove(tmp.c_str());
  std::string env = "OMP_NUM_THREADS=" + std::to_string(threads) + " ";
  if (tuned)
    env +=
        "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp "
        "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 "
        "MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 ";
  const std::string cmd = env + "/usr/bin/time -f %M -o " + rss +
                          " /usr/bin/python3 " ZCODE_PEERS_DIR "/torch_lm_bench.py --config " + config + " --threads " +
                          std::to_string(threads) + " --warmup " + std::to_string(warmup) + " --steps " +
                          std::to_string(steps) + " --json " + tmp + " > /dev/null 2>&1";
  std::system(cmd.c_str());
  Peer p;
  std::ifstream f(tmp);
  std::string line;
  if (!std::getline(f, line)) return p;
  rapidjson::Document d;
  d.Parse(line.c_str());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("train_tok_s")) return p;
  p.train_tok_s = d["train_tok_s"].GetDouble();
  p.fwd_tok_s = d.HasMember("fwd_tok_s") ? d["fwd_tok_s"].GetDouble() : 0;
  p.train_gflops = d["train_gflops"].GetDouble();
  std::ifstream r(rss);
  double kb = 0;
  r >> kb;
  p.rss_mb = kb / 1024.0;
  p.ok = true;
  std::remove(tmp.c_str());
  std::remove(rss.c_str());
  std::printf("pytorch %-5s %-12s: train %7.1f tok/s (%6.1f GFLOP/s) | fwd %7.1f tok/s | peak RSS %6.1f MiB\n", config,
              tuned ? "tuned" : "as installed", p.train_tok_s, p.train_gflops, p.fwd_tok_s, p.rss_mb);
  std::fflush(stdout);
  return p;
}

double sgemm_peak(int threads) {
  const std::string dir = "/tmp/zcode_bench_sgemm_" + std::to_string(getpid());
  run_cmd("mkdir -p " + dir + " && gcc -O2 -march=native " ZCODE_PEERS_DIR "/sgemm_bench.c -o " + dir +
          "/sgemm -lopenblas 2>&1");
  const std::string out = run_cmd("OPENBLAS_NUM_THREADS=" + std::to_string(threads) + " " + dir + "/sgemm " +
                                  std::to_string(threads) + " 10 2>&1");
  run_cmd("rm -rf " + dir);
  std::istringstream is(out);
  std::string line;
  while (std::getline(is, line))
    if (line.find("M= 2048 N= 2048 K= 2048") != std::string::npos) {
      const size_t a = line.find("-> ");
      if (a != std::string::npos) return std::atof(line.c_str() + a + 3);
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, steps = 10, warmup = 3, rounds = 3;
  bool rounds_set = false;
  bool peers = true;
  std::string which = "both", blocking;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_train_step: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--steps") steps = std::atoi(next().c_str());
    else if (a == "--warmup") warmup = std::atoi(next().c_str());
    else if (a == "--rounds") rounds = std::max(1, std::atoi(next().c_str())), rounds_set = true;
    else if (a == "--no-peers") peers = false;
    else if (a == "--config") which = next();
    else if (a == "--blocking") blocking = next();
    else {
      std::fprintf(stderr, "bench_train_step: unknown argument '%s' (see the header of train_step.cpp)\n", a.c_str());
      return 2;
    }
  }
  // One OpenBLAS kernel choice for the product and the benchmarks.
  zcode::bench::use_the_products_blas_kernel("bench_train_step", argv);
  if (!peers && !rounds_set) rounds = 1;  // nothing to pair with
  zcode::kernels::set_num_threads(threads);
  std::printf("bench_train_step: CPU %s\n", glm52::this_machine().describe().c_str());
  std::printf("bench_train_step: OpenBLAS kernel %s (%s)\n", zcode::kernels::blas_core().c_str(),
              zcode::kernels::prepare_blas_environment().description.c_str());
  std::printf("bench_train_step: float GEMMs on %s\n", zcode::kernels::gemm_engine_description().c_str());
  std::printf(
      "bench_train_step: batch %d x seq %d, vocab %d, %d threads, OpenBLAS %s build, %d warm-up + %d timed "
      "steps (median)\n",
      kB, kT, kV, threads, zcode::kernels::blas_threading().c_str(), warmup, steps);
  const std::string dense = zcode::bench::kDenseJson, moe = zcode::bench::kMoeJson;  // bench/common/glm52_bench.h
  // --blocking pins fields of the model's blocking (the model option), in both configs.
  auto with_blocking = [&](const std::string& json) {
    return blocking.empty() ? json : "{\"blocking\": " + blocking + ", " + json.substr(json.find('{') + 1);
  };
  const std::string dense_json = with_blocking(dense), moe_json = with_blocking(moe);
  {
    zcode::sdk::Options mo(dense_json.c_str(), "model"), co("{}", "config");
    std::printf("bench_train_step: blocking %s (%s)\n", glm52::Config::resolve(mo, co, 0).blocking.to_json().c_str(),
                blocking.empty() ? "derived from this machine" : "--blocking over this machine's");
  }
  struct Round {
    double peak = 0;
    Figures f;
    Peer tuned;
  };
  struct Series {
    const char* name;
    const std::string* json;
    double target;  ///< #19 "Done when": train vs tuned PyTorch (dense 1.25x, MoE 1.4x)
    Peer installed;
    std::vector<Round> rounds;
  };
  std::vector<Series> series;
  if (which == "both" || which == "dense") series.push_back({"dense", &dense_json, 1.25, {}, {}});
  if (which == "both" || which == "moe") series.push_back({"moe", &moe_json, 1.4, {}, {}});
  for (int r = 0; r < rounds; ++r)
    for (Series& s : series) {
      if (rounds > 1) std::printf("round %d/%d, %s\n", r + 1, rounds, s.name);
      Round rd;
      if (peers) {
        rd.peak = sgemm_peak(threads);
        std::printf("sgemm 2048^3 peak (%d threads): %.1f GFLOP/s\n", threads, rd.peak);
      }
      rd.f = measure(s.name, *s.json, threads, warmup, steps);
      if (peers) {
        rd.tuned = torch_peer(s.name, true, threads, warmup, steps);
        if (r == 0) s.installed = torch_peer(s.name, false, threads, warmup, steps);
      }
      s.rounds.push_back(rd);
    }
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  // Median over rounds of a per-round ratio, with its range.
  auto over_rounds = [&](const Series& s, auto&& per_round) {
    std::vector<double> v;
    for (const Round& rd : s.rounds) v.push_back(per_round(rd));
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    char buf[96];
    if (v.size() > 1) std::snprintf(buf, sizeof buf, "%.2f (rounds %.2f-%.2f)", median(v), *lo, *hi);
    else std::snprintf(buf, sizeof buf, "%.2f", v[0]);
    return std::string(buf);
  };
  std::printf("--- ratios%s ---\n", rounds > 1 ? " (median of the per-round ratios)" : "");
  bool ok = true;
  for (const Series& s : series) {
    const Round& r0 = s.rounds[0];
    ok = ok && r0.f.ok;
    if (!r0.f.ok) continue;
    double rss_max = 0;  // the worst round: each measures its own model (reset_peak_rss)
    for (const Round& r : s.rounds) rss_max = std::max(rss_max, r.f.peak_rss_mb / r.f.analytic_mb);
    std::printf(
        "%-5s: peak RSS / analytic %.2f (highest of the rounds; target <= 1.25); zcode RSS / pytorch tuned "
        "RSS %.2f (round 1)\n",
        s.name, rss_max, ratio(r0.f.peak_rss_mb, r0.tuned.rss_mb));
    std::printf("%-5s: model FLOP rate / sgemm 2048^3 run right after each step: train %s (target >= 0.85)\n", s.name,
                over_rounds(s, [](const Round& r) { return r.f.paired_peak_ratio; }).c_str());
    if (r0.peak > 0)
      std::printf(
          "%-5s: model FLOP rate / the round's sgemm peak (peer script, before the round): train %s, fwd %s; "
          "pytorch tuned %s\n",
          s.name, over_rounds(s, [](const Round& r) { return r.f.train_gflops / r.peak; }).c_str(),
          over_rounds(s, [](const Round& r) { return r.f.fwd_gflops / r.peak; }).c_str(),
          over_rounds(s, [](const Round& r) { return r.tuned.train_gflops / r.peak; }).c_str());
    if (s.installed.ok)
      std::printf("%-5s: zcode / pytorch as installed (round 1): train %.2fx, fwd %.2fx\n", s.name,
                  ratio(r0.f.train_tok_s, s.installed.train_tok_s), ratio(r0.f.fwd_tok_s, s.installed.fwd_tok_s));
  }
  for (const Series& s : series)
    if (s.rounds[0].f.ok && s.rounds[0].tuned.ok)
      std::printf("%-5s: zcode / pytorch tuned: train %sx (target >= %.2fx), fwd %sx (target >= 1.3x)\n", s.name,
                  over_rounds(s, [&](const Round& r) { return ratio(r.f.train_tok_s, r.tuned.train_tok_s); }).c_str(),
                  s.target,
                  over_rounds(s, [&](const Round& r) { return ratio(r.f.fwd_tok_s, r.tuned.fwd_tok_s); }).c_str());
  return ok ? 0 : 1;
}
