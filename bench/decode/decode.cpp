// bench_decode: greedy KV-cache decoding of the glm52 model, tokens/s of the
// prefill and of the decode loop at batch 1 and 8 on 2 threads, for
// bench_train_step's dense and MoE configurations (bench/common/glm52_bench.h),
// next to, in the same run, the PyTorch GLM-5.2 with a KV cache
// (bench/quickstart_vs_pytorch/glm52_torch.py, GLM52.extend; driven by
// torch_decode.py here) as installed and tuned (/work/shared/peers/README.md),
// on the same weights and the same prompts. Checks that both produce the same
// greedy tokens and prints, last, the decode ratio ZCode / tuned PyTorch.
//
// Same job on both sides:
//   - weights: the model is created here from seed 1337 (glm52 "Init") and
//     written to a safetensors file under its spec names; the peer loads it
//     (GLM52.load_spec);
//   - prompts: 8 rows of --prompt ids uniform in [0, V) (mt19937, seed 2026);
//     batch b decodes the first b rows;
//   - decode: prefill (ZCode: one decode_extend over the whole prompt, ABI
//     1.8, what `zcode-host generate` runs; PyTorch: one extend over the whole
//     prompt) gives new token 0 = arg-max of the last logits (ties: lowest
//     id); then --new steps each feed the last token and take the next, so
//     --new + 1 new tokens per sequence. MoE dropless on both (the plugin's
//     decode semantics), no document mask.
//   - warm: per batch, one untimed decode first (it also records top-2 logits
//     and the mean logit of every step, for the comparison), then the timed
//     one, which must reproduce its tokens. ZCode's decode runs in this
//     process, each peer's in one python process per round (both batches).
//   - timing: decode tokens/s = b·new / wall time of the decode loop
//     (decode_step / extend plus the arg-max); prefill tokens/s = b·prompt /
//     wall time of the prefill. Session / cache allocation is not timed.
// Token check, per config, batch and peer: the first position where a
// sequence's tokens differ is printed with both sides' top-2 logits. It is a
// float32 near-tie when each side's runner-up is the other's choice and both
// margins are <= 1e-4·max(1, |logit|): reported (and counted), not failed;
// anything else fails the run (exit 1). Also printed: max |Δ| of the top-1
// logit and of the mean logit over the positions where both agree.
//
// Paired rounds, as bench_train_step: each of --rounds rounds measures, per
// config, ZCode then tuned PyTorch back to back (as installed in round 1 only);
// ratios are the medians over rounds of the per-round ratios.
//
//   bench_decode [--threads 2] [--rounds 3] [--prompt 64] [--new 64] [--config dense|moe|both]
//                [--peers both|tuned|installed|none] [--small] [--keep DIR]
// --small: two tiny models (a deepnorm dense one; a prenorm, RMSNorm, sigmoid-router MoE with a
// shared expert, untied head, grouped KV heads and partial rotary), prompts 8 x 16, 16 new tokens:
// the token check as a quick test (ctest bench.decode.zcode_vs_torch_tokens).
// --keep DIR: write the job files and the peers' JSON into DIR and keep them.
// Exit status: 0 ok, 1 a check or a peer failed, 2 bad arguments or a missing peer environment.
#include "common/glm52_bench.h"
#include "config.h"
#include "model.h"

#include <zcode/kernels/gemm.h>
#include <zcode/kernels/gemm_packed.h>
#include <zcode/kernels/gemm_small_m.h>
#include <zcode/kernels/threads.h>
#include <zcode/sdk/file.h>
#include <zcode/sdk/json.h>
#include <zcode/sdk/safetensors.h>

#include <rapidjson/document.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kPrompts = 8;
constexpr uint64_t kInitSeed = 1337, kPromptSeed = 2026;
const int kBatches[] = {1, 8};
const char* const kTunedEnv =
    "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp "
    "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 "
    "MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 ";

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// One greedy decode of one batch: tokens and, for the recorded (warm-up)
/// decode, per position the top-2 ids and logits and the mean logit. Every
/// array is [batch][new + 1], row-major.
struct Run {
  int batch = 0;
  double prefill_s = 0, decode_s = 0;
  std::vector<int32_t> tokens, top2;
  std::vector<double> top1_logit, top2_logit, mean_logit;
  bool timed_equal_warmup = false;
  bool ok = false;
  double head_s = 0;          // the LM head's GEMM alone, [batch, d]·[V, d]ᵀ (median of 20): the timing split
  double head_sgemm_s = 0;    // ZCode only: the same product as one cblas_sgemm, for comparison
  double head_small_m_s = 0;  // ZCode only: streamed unpacked (gemm_small_m.h, the decode head until 2026-12-06)
};

/// Arg-max (lowest id on ties), runner-up and mean of one row of V logits.
void row_stats(const float* row, int64_t V, Run& r, size_t at) {
  int64_t i1 = 0, i2 = -1;
  float b1 = row[0], b2 = -INFINITY;
  double sum = row[0];
  for (int64_t v = 1; v < V; ++v) {
    const float x = row[v];
    sum += x;
    if (x > b1) {
      b2 = b1, i2 = i1, b1 = x, i1 = v;
    } else if (x > b2 || i2 < 0) {
      b2 = x, i2 = v;
    }
  }
  r.tokens[at] = static_cast<int32_t>(i1);
  r.top2[at] = static_cast<int32_t>(i2);
  r.top1_logit[at] = b1;
  r.top2_logit[at] = b2;
  r.mean_logit[at] = sum / static_cast<double>(V);
}

int32_t argmax(const float* row, int64_t V) {
  int64_t best = 0;
  for (int64_t v = 1; v < V; ++v)
    if (row[v] > row[best]) best = v;
  return static_cast<int32_t>(best);
}

/// ZCode's greedy decode of the first b prompts (see the header).
Run zcode_greedy(glm52::Model<float>& m, const std::vector<int32_t>& prompts, int P, int N, int b, bool record) {
  const int64_t V = m.config().vocab_size;
  const int W = N + 1;
  Run r;
  r.batch = b;
  r.tokens.assign(size_t(b) * W, 0);
  if (record) {
    r.top2.assign(r.tokens.size(), 0);
    r.top1_logit.assign(r.tokens.size(), 0);
    r.top2_logit.assign(r.tokens.size(), 0);
    r.mean_logit.assign(r.tokens.size(), 0);
  }
  std::vector<float> logits(size_t(b) * V);
  std::vector<int32_t> tok(static_cast<size_t>(b));
  auto* s = m.decode_begin(b, P + N);
  auto take = [&](int t) {  // new token t of every sequence from `logits`
    for (int i = 0; i < b; ++i) {
      const float* row = logits.data() + size_t(i) * V;
      const size_t at = size_t(i) * W + t;
      if (record) row_stats(row, V, r, at);
      else r.tokens[at] = argmax(row, V);
      tok[i] = r.tokens[at];
    }
  };
  const double t0 = now_s();
  m.decode_extend(s, P, prompts.data(), logits.data());  // rows 0..b-1 of the [8, P] prompts
  take(0);
  const double t1 = now_s();
  for (int t = 1; t <= N; ++t) {
    m.decode_step(s, tok.data(), logits.data());
    take(t);
  }
  const double t2 = now_s();
  m.decode_end(s);
  r.prefill_s = t1 - t0;
  r.decode_s = t2 - t1;
  r.ok = true;
  return r;
}

/// The LM head products head_gemm_s can time.
enum class Head {
  kDecode,  ///< what decode_step runs: linear_fwd_packed on the panels packed at decode_begin
  kSmallM,  ///< W streamed unpacked, one dot product per logit (gemm_small_m.h; the decode head until 2026-12-06)
  kSgemm,   ///< one cblas_sgemm (the decode head before gemm_small_m.h)
};

/// Seconds of one LM-head product logits[b, V] = h[b, d]·W[V, d]ᵀ over the
/// model's head weight on the same threads (median of 20 after one warm-up):
/// the part of a decode step that is the head, with PyTorch's `h @ head.t()`
/// timed alike in the peer. The packing (once per session) is not timed.
double head_gemm_s(glm52::Model<float>& m, int b, Head how) {
  const glm52::Config& c = m.config();
  const glm52::ParamInfo* w = m.find_param(c.tie_embeddings ? "embed.weight" : "lm_head.weight");
  const int d = c.d_model, V = static_cast<int>(c.vocab_size);
  const float* W = m.params() + w->offset;
  std::vector<float> h(size_t(b) * d, 0.01f), y(size_t(b) * V), Wp;
  if (how == Head::kDecode) {
    Wp.resize(size_t(zcode::kernels::packed_w_elems(V, d)));
    zcode::kernels::pack_w_panels(V, d, W, Wp.data());
  }
  auto once = [&] {
    switch (how) {
      case Head::kDecode: zcode::kernels::linear_fwd_packed(b, V, d, h.data(), Wp.data(), y.data(), V); break;
      case Head::kSmallM: zcode::kernels::linear_fwd_small_m(b, V, d, h.data(), W, y.data(), V); break;
      case Head::kSgemm: zcode::kernels::gemm(false, true, b, V, d, 1.f, h.data(), d, W, d, 0.f, y.data(), V); break;
    }
  };
  once();
  std::vector<double> t;
  for (int i = 0; i < 20; ++i) {
    const double t0 = now_s();
    once();
    t.push_back(now_s() - t0);
  }
  return median(t);
}

/// Warm-up (recorded) decode, then the timed one, for one batch size.
Run zcode_run(glm52::Model<float>& m, const std::vector<int32_t>& prompts, int P, int N, int b) {
  Run warm = zcode_greedy(m, prompts, P, N, b, true);
  Run timed = zcode_greedy(m, prompts, P, N, b, false);
  warm.prefill_s = timed.prefill_s;
  warm.decode_s = timed.decode_s;
  warm.timed_equal_warmup = timed.tokens == warm.tokens;
  warm.head_s = head_gemm_s(m, b, Head::kDecode);
  warm.head_sgemm_s = head_gemm_s(m, b, Head::kSgemm);
  warm.head_small_m_s = head_gemm_s(m, b, Head::kSmallM);
  return warm;
}

struct Job {
  std::string name;
  std::string model_json;  // `model` options
  std::string info;        // the resolved architecture (info_json)
  std::unique_ptr<glm52::Model<float>> model;
  std::string job;  // the peer's job file
  std::vector<int32_t> prompts;
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

/// Writes the model's tensors (spec names, float32) and the peer's job file.
void write_job(Job& c, const std::string& dir, int P, int N) {
  zcode::sdk::safetensors::Writer w;
  for (const glm52::ParamInfo& p : c.model->param_infos())
    w.add(p.name, "F32", p.shape, c.model->params() + p.offset, sizeof(float) * static_cast<size_t>(p.numel));
  const std::string weights = dir + "/" + c.name + ".safetensors";
  w.save(weights);
  zcode::sdk::json::Writer j;
  j.begin_object().key("model").raw(c.info).key("weights").string(weights).key("prompts").begin_array();
  for (int i = 0; i < kPrompts; ++i) {
    j.begin_array();
    for (int t = 0; t < P; ++t) j.integer(c.prompts[size_t(i) * P + t]);
    j.end_array();
  }
  j.end_array().key("new_tokens").integer(N).key("batches").begin_array();
  for (int b : kBatches) j.integer(b);
  j.end_array().key("warmup").integer(1).end_object();
  c.job = dir + "/" + c.name + ".job.json";
  zcode::sdk::write_file_atomic(c.job, j.str());
}

template <class T>
bool read_rows(const rapidjson::Value& run, const char* key, int b, int W, std::vector<T>& out) {
  if (!run.HasMember(key) || !run[key].IsArray() || run[key].Size() != static_cast<unsigned>(b)) return false;
  out.assign(size_t(b) * W, T(0));
  for (int i = 0; i < b; ++i) {
    const rapidjson::Value& row = run[key][i];
    if (!row.IsArray() || row.Size() != static_cast<unsigned>(W)) return false;
    for (int t = 0; t < W; ++t) {
      if (!row[t].IsNumber()) return false;
      out[size_t(i) * W + t] = static_cast<T>(row[t].GetDouble());
    }
  }
  return true;
}

/// One peer process: both batch sizes; runs[k] for kBatches[k] (ok false on failure).
std::vector<Run> torch_peer(const Job& c, bool tuned, int threads, int N, const std::string& dir) {
  const std::string label = tuned ? "tuned" : "installed";
  const std::string out = dir + "/" + c.name + "." + label + ".json", err = out + ".stderr";
  std::remove(out.c_str());
  std::string cmd = "OMP_NUM_THREADS=" + std::to_string(threads) + " ";
  if (tuned) cmd += kTunedEnv;
  cmd += "/usr/bin/python3 " + shell_quote(ZCODE_DECODE_PEER) + " --job " + shell_quote(c.job) + " --out " +
         shell_quote(out) + " --threads " + std::to_string(threads) + " --label " + label + " > /dev/null 2> " +
         shell_quote(err);
  const int rc = std::system(cmd.c_str());
  std::vector<Run> runs(std::size(kBatches));
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  rapidjson::Document d;
  d.Parse(ss.str().c_str());
  if (rc != 0 || d.HasParseError() || !d.IsObject() || !d.HasMember("runs") || !d["runs"].IsArray() ||
      d["runs"].Size() != std::size(kBatches)) {
    std::ifstream e(err);
    std::stringstream es;
    es << e.rdbuf();
    std::printf("pytorch %-9s %-5s: FAILED (exit %d): %s\n", label.c_str(), c.name.c_str(),
                WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, es.str().c_str());
    return runs;
  }
  const int W = N + 1;
  for (size_t k = 0; k < runs.size(); ++k) {
    const rapidjson::Value& v = d["runs"][static_cast<rapidjson::SizeType>(k)];
    Run& r = runs[k];
    r.batch = kBatches[k];
    const bool shape_ok =
        v.IsObject() && v.HasMember("batch") && v["batch"].IsInt() && v["batch"].GetInt() == r.batch &&
        read_rows(v, "tokens", r.batch, W, r.tokens) && read_rows(v, "top2", r.batch, W, r.top2) &&
        read_rows(v, "top1_logit", r.batch, W, r.top1_logit) && read_rows(v, "top2_logit", r.batch, W, r.top2_logit) &&
        read_rows(v, "mean_logit", r.batch, W, r.mean_logit) && v.HasMember("prefill_s") && v["prefill_s"].IsNumber() &&
        v.HasMember("decode_s") && v["decode_s"].IsNumber() && v.HasMember("timed_equal_warmup") &&
        v["timed_equal_warmup"].IsBool();
    if (!shape_ok) {
      std::printf("pytorch %-9s %-5s: FAILED: %s has no well-formed run for batch %d\n", label.c_str(), c.name.c_str(),
                  out.c_str(), r.batch);
      continue;
    }
    r.prefill_s = v["prefill_s"].GetDouble();
    r.decode_s = v["decode_s"].GetDouble();
    r.timed_equal_warmup = v["timed_equal_warmup"].GetBool();
    r.head_s = v.HasMember("head_s") && v["head_s"].IsNumber() ? v["head_s"].GetDouble() : 0.0;
    r.ok = true;
  }
  return runs;
}

void print_run(const char* who, const std::string& cfg, const Run& r, int P, int N) {
  if (!r.ok) return;
  const double step_ms = r.decode_s * 1e3 / N;
  char sgemm[96] = "";
  if (r.head_sgemm_s > 0)
    std::snprintf(sgemm, sizeof sgemm, " [head as one sgemm: %.3f ms, unpacked small-M: %.3f ms]", r.head_sgemm_s * 1e3,
                  r.head_small_m_s * 1e3);
  std::printf(
      "%-20s %-5s b=%d: prefill %8.1f tok/s (%7.1f ms) | decode %8.1f tok/s (%6.3f ms/step = LM head GEMM %.3f + "
      "rest %.3f)%s%s\n",
      who, cfg.c_str(), r.batch, r.batch * P / r.prefill_s, r.prefill_s * 1e3, r.batch * N / r.decode_s, step_ms,
      r.head_s * 1e3, step_ms - r.head_s * 1e3, sgemm,
      r.timed_equal_warmup ? "" : " | TIMED TOKENS DIFFER FROM THE WARM-UP'S");
  std::fflush(stdout);
}

/// Compares ZCode's greedy tokens with a peer's (see the header). Returns
/// false on a difference that is not a float32 near-tie; `ties` counts those.
bool check_tokens(const std::string& cfg, const std::string& peer, const Run& z, const Run& p, int N, int& ties) {
  const int W = N + 1;
  double d_top = 0, d_mean = 0;
  int agree = 0, bad = 0;
  for (int i = 0; i < z.batch; ++i)
    for (int t = 0; t < W; ++t) {
      const size_t at = size_t(i) * W + t;
      if (z.tokens[at] == p.tokens[at]) {
        ++agree;
        d_top = std::max(d_top, std::fabs(z.top1_logit[at] - p.top1_logit[at]));
        d_mean = std::max(d_mean, std::fabs(z.mean_logit[at] - p.mean_logit[at]));
        continue;
      }
      const double mz = z.top1_logit[at] - z.top2_logit[at], mp = p.top1_logit[at] - p.top2_logit[at];
      const double tol = 1e-4 * std::max(1.0, std::fabs(z.top1_logit[at]));
      const bool tie = z.top2[at] == p.tokens[at] && p.top2[at] == z.tokens[at] && mz <= tol && mp <= tol;
      ties += tie ? 1 : 0;
      bad += tie ? 0 : 1;
      std::printf(
          "%s %s %-5s b=%d: sequence %d, new token %d: zcode %d (logit %.7g; runner-up %d at %.7g, margin %.2e) vs "
          "pytorch %d (logit %.7g; runner-up %d at %.7g, margin %.2e): %s\n",
          tie ? "TIE" : "MISMATCH", peer.c_str(), cfg.c_str(), z.batch, i, t, z.tokens[at], z.top1_logit[at],
          z.top2[at], z.top2_logit[at], mz, p.tokens[at], p.top1_logit[at], p.top2[at], p.top2_logit[at], mp,
          tie ? "a float32 near-tie (the rest of this sequence is not compared)" : "NOT a near-tie: the models differ");
      break;  // the continuations of a difference are not comparable
    }
  std::printf("check %-9s %-5s b=%d: %d of %d new tokens compared identical; max |dlogit| top-1 %.2e, mean %.2e%s\n",
              peer.c_str(), cfg.c_str(), z.batch, agree, z.batch * W, d_top, d_mean, bad ? " FAIL" : "");
  return bad == 0;
}

struct Round {
  std::vector<Run> zc, tuned;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, rounds = 3, P = 0, N = 0;  // P, N: 0 = the default (64, or 16 with --small)
  std::string which = "both", peers = "both", keep;
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_decode: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto positive = [&](const std::string& v) {
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || x < 1 || x > 100000) {
        std::fprintf(stderr, "bench_decode: %s '%s' (expected an integer >= 1)\n", a.c_str(), v.c_str());
        std::exit(2);
      }
      return static_cast<int>(x);
    };
    if (a == "--threads") threads = positive(next());
    else if (a == "--rounds") rounds = positive(next());
    else if (a == "--prompt") P = positive(next());
    else if (a == "--new") N = positive(next());
    else if (a == "--config") which = next();
    else if (a == "--peers") peers = next();
    else if (a == "--small") small = true;
    else if (a == "--keep") keep = next();
    else {
      std::fprintf(stderr, "bench_decode: unknown argument '%s' (see the header of bench/decode/decode.cpp)\n",
                   a.c_str());
      return 2;
    }
  }
  if (which != "dense" && which != "moe" && which != "both") {
    std::fprintf(stderr, "bench_decode: --config '%s' (expected dense, moe or both)\n", which.c_str());
    return 2;
  }
  if (peers != "both" && peers != "tuned" && peers != "installed" && peers != "none") {
    std::fprintf(stderr, "bench_decode: --peers '%s' (expected both, tuned, installed or none)\n", peers.c_str());
    return 2;
  }
  const bool run_tuned = peers == "both" || peers == "tuned", run_installed = peers == "both" || peers == "installed";
  if (run_tuned && (!is_file("/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0") ||
                    !is_file("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"))) {
    std::fprintf(stderr,
                 "bench_decode: tuned PyTorch needs libopenblas0-openmp and libjemalloc2 (apt-get install "
                 "libopenblas0-openmp libjemalloc2), or --peers installed|none\n");
    return 2;
  }
  if ((run_tuned || run_installed) && !is_file("/usr/bin/python3")) {
    std::fprintf(stderr,
                 "bench_decode: the PyTorch peer needs /usr/bin/python3 with python3-torch (or --peers none)\n");
    return 2;
  }
  zcode::bench::use_the_products_blas_kernel("bench_decode", argv);
  zcode::kernels::set_num_threads(threads);

  std::vector<Job> cfgs;
  if (small) {
    P = P ? P : 16;
    N = N ? N : 16;
    cfgs.push_back({"dense",
                    R"({"vocab_size": 500, "d_model": 64, "n_layers": 2, "n_heads": 4, "ffn_hidden": 96,
                        "first_dense_layers": 2, "max_seq_len": 64})",
                    "",
                    nullptr,
                    "",
                    {}});
    cfgs.push_back({"moe",
                    R"({"vocab_size": 500, "d_model": 48, "n_layers": 2, "n_heads": 6, "n_kv_heads": 2,
                        "head_dim": 8, "moe_experts": 8, "moe_top_k": 2, "moe_ffn_hidden": 32,
                        "moe_shared_experts": 1, "first_dense_layers": 0, "router_activation": "sigmoid",
                        "norm_topk_prob": false, "norm": "rmsnorm", "residual": "prenorm", "tie_embeddings": false,
                        "rotary_fraction": 0.5, "rope_theta": 500, "max_seq_len": 64})",
                    "",
                    nullptr,
                    "",
                    {}});
  } else {
    P = P ? P : 64;
    N = N ? N : 64;
    cfgs.push_back({"dense", zcode::bench::kDenseJson, "", nullptr, "", {}});
    cfgs.push_back({"moe", zcode::bench::kMoeJson, "", nullptr, "", {}});
  }
  if (which != "both") std::erase_if(cfgs, [&](const Job& c) { return c.name != which; });

  std::string dir = keep;
  if (dir.empty()) {
    char tmpl[] = "/tmp/zcode_bench_decode_XXXXXX";
    if (!mkdtemp(tmpl)) {
      std::fprintf(stderr, "bench_decode: cannot create a folder under /tmp\n");
      return 1;
    }
    dir = tmpl;
  } else if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "bench_decode: --keep %s: cannot create the folder\n", dir.c_str());
    return 2;
  }
  for (Job& c : cfgs) {
    zcode::sdk::Options mo(c.model_json.c_str(), "model"), co("{}", "config");
    const glm52::Config gc = glm52::Config::resolve(mo, co, 0);
    if (P + N > gc.max_seq_len) {
      std::fprintf(stderr, "bench_decode: --prompt %d + --new %d exceeds the %s model's max_seq_len %d\n", P, N,
                   c.name.c_str(), gc.max_seq_len);
      return 2;
    }
    c.info = gc.to_json();
    c.model = std::make_unique<glm52::Model<float>>(gc, kInitSeed);
    std::mt19937 rng(kPromptSeed);
    for (int i = 0; i < kPrompts * P; ++i) c.prompts.push_back(static_cast<int32_t>(rng() % gc.vocab_size));
    if (run_tuned || run_installed) write_job(c, dir, P, N);
  }

  std::printf(
      "bench_decode: %s, %d threads, OpenBLAS core %s (OPENBLAS_CORETYPE=%s), %s build, decode head %s up to %d rows\n",
      zcode::bench::cpu_model().c_str(), threads, zcode::kernels::blas_core().c_str(),
      std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "unset",
      zcode::kernels::blas_threading().c_str(), zcode::kernels::isa_name(zcode::kernels::best_isa()),
      zcode::kernels::kSmallM);
  std::printf(
      "bench_decode: %d prompts x %d ids (uniform, mt19937 seed %llu), %d new tokens greedy after the prefill's, "
      "batches 1 and 8, 1 warm-up + 1 timed decode each, %d round(s), weights from seed %llu\n",
      kPrompts, P, static_cast<unsigned long long>(kPromptSeed), N, rounds, static_cast<unsigned long long>(kInitSeed));
  for (const Job& c : cfgs) std::printf("config %-5s: %s\n", c.name.c_str(), c.info.c_str());
  std::fflush(stdout);

  bool ok = true;
  int ties = 0;
  std::vector<std::vector<Round>> res(cfgs.size());
  std::vector<std::vector<Run>> installed(cfgs.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t ci = 0; ci < cfgs.size(); ++ci) {
      Job& c = cfgs[ci];
      if (rounds > 1) std::printf("round %d/%d, %s\n", r + 1, rounds, c.name.c_str());
      Round rd;
      for (int b : kBatches) {
        rd.zc.push_back(zcode_run(*c.model, c.prompts, P, N, b));
        print_run("zcode", c.name, rd.zc.back(), P, N);
        ok = ok && rd.zc.back().timed_equal_warmup;
      }
      std::vector<std::pair<std::string, std::vector<Run>>> peer_runs;
      if (run_tuned) {
        rd.tuned = torch_peer(c, true, threads, N, dir);
        peer_runs.emplace_back("tuned", rd.tuned);
      }
      if (run_installed && r == 0) {
        installed[ci] = torch_peer(c, false, threads, N, dir);
        peer_runs.emplace_back("installed", installed[ci]);
      }
      for (const auto& [label, runs] : peer_runs)
        for (size_t k = 0; k < runs.size(); ++k) {
          print_run(label == "tuned" ? "pytorch tuned" : "pytorch as installed", c.name, runs[k], P, N);
          if (!runs[k].ok) {
            ok = false;
            continue;
          }
          ok = ok && runs[k].timed_equal_warmup;
          ok = check_tokens(c.name, label, rd.zc[k], runs[k], N, ties) && ok;
        }
      res[ci].push_back(std::move(rd));
    }

  auto over_rounds = [&](const std::vector<Round>& rs, auto&& per_round, const char* unit = "x") {
    std::vector<double> v;
    for (const Round& rd : rs) {
      const double x = per_round(rd);
      if (x > 0) v.push_back(x);
    }
    if (v.empty()) return std::string("n/a");
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    char buf[96];
    if (v.size() > 1) std::snprintf(buf, sizeof buf, "%.2f%s (rounds %.2f-%.2f)", median(v), unit, *lo, *hi);
    else std::snprintf(buf, sizeof buf, "%.2f%s", v[0], unit);
    return std::string(buf);
  };
  auto rate = [](const Run& r, int per) { return r.ok && r.decode_s > 0 ? r.batch * per / r.decode_s : 0.0; };
  auto prate = [](const Run& r, int per) { return r.ok && r.prefill_s > 0 ? r.batch * per / r.prefill_s : 0.0; };
  std::printf("--- ratios%s ---\n", rounds > 1 ? " (median of the per-round ratios)" : "");
  for (size_t ci = 0; ci < cfgs.size(); ++ci)
    for (size_t k = 0; k < std::size(kBatches); ++k) {
      const std::string& n = cfgs[ci].name;
      const int b = kBatches[k];
      std::printf("%-5s b=%d: zcode decode %s tok/s, prefill %s tok/s\n", n.c_str(), b,
                  over_rounds(
                      res[ci], [&](const Round& rd) { return rate(rd.zc[k], N); }, "")
                      .c_str(),
                  over_rounds(
                      res[ci], [&](const Round& rd) { return prate(rd.zc[k], P); }, "")
                      .c_str());
      if (run_tuned)
        std::printf("%-5s b=%d: pytorch tuned decode %s tok/s, prefill %s tok/s\n", n.c_str(), b,
                    over_rounds(
                        res[ci], [&](const Round& rd) { return rd.tuned.empty() ? 0.0 : rate(rd.tuned[k], N); }, "")
                        .c_str(),
                    over_rounds(
                        res[ci], [&](const Round& rd) { return rd.tuned.empty() ? 0.0 : prate(rd.tuned[k], P); }, "")
                        .c_str());
      if (!installed[ci].empty() && installed[ci][k].ok) {
        const Round& r0 = res[ci][0];
        std::printf("%-5s b=%d: zcode / pytorch as installed (round 1): decode %.2fx, prefill %.2fx\n", n.c_str(), b,
                    rate(r0.zc[k], N) / rate(installed[ci][k], N), prate(r0.zc[k], P) / prate(installed[ci][k], P));
      }
      if (run_tuned)
        std::printf("%-5s b=%d: prefill zcode / pytorch tuned %s\n", n.c_str(), b,
                    over_rounds(res[ci], [&](const Round& rd) {
                      return rd.tuned.empty() || !rd.tuned[k].ok ? 0.0 : prate(rd.zc[k], P) / prate(rd.tuned[k], P);
                    }).c_str());
    }
  if (ties) std::printf("float32 near-ties: %d (printed above as TIE; not failures)\n", ties);
  if (run_tuned)
    for (size_t ci = 0; ci < cfgs.size(); ++ci)
      for (size_t k = 0; k < std::size(kBatches); ++k)
        std::printf("%-5s b=%d: zcode / pytorch tuned: decode %s (target >= 1.5x)\n", cfgs[ci].name.c_str(),
                    kBatches[k],
                    over_rounds(res[ci], [&](const Round& rd) {
                      return rd.tuned.empty() || !rd.tuned[k].ok ? 0.0 : rate(rd.zc[k], N) / rate(rd.tuned[k], N);
                    }).c_str());
  std::printf("bench_decode: %s\n", ok ? "all checks passed" : "CHECKS FAILED (see above)");
  if (keep.empty()) {
    for (const Job& c : cfgs)
      for (const char* suffix : {".safetensors", ".job.json", ".tuned.json", ".tuned.json.stderr", ".installed.json",
                                 ".installed.json.stderr"})
        std::remove((dir + "/" + c.name + suffix).c_str());
    ::rmdir(dir.c_str());
  }
  return ok ? 0 : 1;
}
