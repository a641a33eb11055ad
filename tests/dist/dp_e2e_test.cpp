// Data-parallel training end to end (label mpi): the real zcode-host started
// by the real mpirun with 2 and 3 ranks, on a nano GLM-5.2 and a tiny corpus.
// The independent computation each multi-rank run is held to is the same run
// in one process with the same global batch (data.batch_size x
// training.gradient_accumulation x hardware.devices):
//   - deterministic reduction (training.deterministic): per-step losses and
//     final weights bit-identical to one process, for AdamW, LAMB and
//     Adafactor, with and without ZeRO-1, and across a resume that changes
//     the number of processes or the ZeRO stage;
//   - the fast (bucketed, overlapped reduce-scatter) path, with and without
//     ZeRO-1: the same curve to rounding;
//   - a resume that changes the global batch, a hardware.devices that does
//     not match the launcher, ranks with different configs, and commands
//     that are single-process are refused with a message that says so;
//   - a rank killed mid-run (also during a ZeRO-1 checkpoint) or hung ends
//     the whole job, and the last checkpoint loads and resumes exactly.
// Every child has a deadline: a hang fails the test instead of CI.
#include <zcode/core/checkpoint.h>

#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

namespace {

namespace fs = std::filesystem;

const fs::path kHost = ZCODE_HOST_EXE;
const fs::path kMpirun = ZCODE_MPIEXEC;
const fs::path kSrc = ZCODE_SOURCE_DIR;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Child {
  pid_t pid = -1;
};

// Kills and reaps a child (and its process group) that a failed ASSERT left
// running, so no mpirun outlives its test.
struct Reaper {
  Child& c;
  ~Reaper() {
    if (c.pid > 0) {
      kill(-c.pid, SIGKILL);
      kill(c.pid, SIGKILL);
      int st = 0;
      waitpid(c.pid, &st, 0);
    }
  }
};

// Starts `argv` (argv[0] is a path) with stdout+stderr into `log`, and the
// variables mpirun needs as root.
Child start(const std::vector<std::string>& argv, const fs::path& log) {
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    setpgid(0, 0);  // its own group: a deadline kills mpirun and its ranks together
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  return c;
}

// Exit code, 128 + signal, or -1 when `seconds` passed (the group is killed).
// The child is reaped either way (c.pid becomes -1).
int wait_for(Child& c, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int st = 0;
  while (true) {
    const pid_t r = waitpid(c.pid, &st, WNOHANG);
    if (r == c.pid) {
      c.pid = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-c.pid, SIGKILL);
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &st, 0);
      c.pid = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int wait_for(Child&& c, int seconds) { return wait_for(c, seconds); }

// The pid of the zcode-host of `rank` running `cfg` (mpirun's ranks carry
// OMPI_COMM_WORLD_RANK in their environment), or -1.
pid_t rank_pid(const fs::path& cfg, int rank) {
  const std::string key = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string env = slurp(e.path() / "environ");
    const std::string cmd = slurp(e.path() / "cmdline");
    if (cmd.rfind(kHost.string(), 0) != 0 || cmd.find(cfg.string()) == std::string::npos) continue;
    for (size_t at = 0; at < env.size();) {  // NUL-separated VAR=value entries
      const size_t end = std::min(env.find('\0', at), env.size());
      if (env.compare(at, end - at, key) == 0) return std::stoi(pid);
      at = end + 1;
    }
  }
  return -1;
}

// `zcode-host args...` alone (ranks == 0) or under `mpirun -np ranks`.
// `mpirun_extra` goes to mpirun before -np.
std::vector<std::string> command(int ranks, const std::vector<std::string>& args,
                                 const std::vector<std::string>& mpirun_extra = {}) {
  std::vector<std::string> a;
  if (ranks > 0) {
    a = {kMpirun.string(), "--oversubscribe"};
    a.insert(a.end(), mpirun_extra.begin(), mpirun_extra.end());
    a.insert(a.end(), {"-np", std::to_string(ranks)});
  }
  a.push_back(kHost.string());
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

std::string missing_prerequisites() {
  if (!fs::exists(kHost)) return "zcode-host is not built";
  if (!fs::exists(kMpirun)) return kMpirun.string() + " is missing (scripts/install-deps.sh installs openmpi-bin)";
  if (!fs::exists(kSrc / "assets/hf/gpt2/vocab.json")) return "assets/hf/gpt2 is missing (run scripts/fetch-assets.sh)";
  return "";
}

// What a layout changes: processes, micro-batches each, and the rest.
struct Layout {
  int ranks = 0;  // 0: a plain process (hardware.devices 1)
  int accumulation = 1;
  bool zero = false;     // distributed.zero_stage: 1
  bool overlap = false;  // distributed.overlap: true
  int experts = 1;       // distributed.expert_parallel
  int devices() const { return ranks == 0 ? 1 : ranks; }
};

class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = missing_prerequisites();
    if (!why.empty()) GTEST_SKIP() << "data-parallel e2e needs: " << why;
    dir_ = fs::temp_directory_path() / ("zcode_dp_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream tr(dir_ / "train.jsonl"), va(dir_ / "val.jsonl");
    const char* words[] = {"alpha", "beta", "gamma", "delta", "sky", "river", "stone", "light", "the", "a"};
    for (int i = 0; i < 90; ++i) {
      std::string s;
      for (int w = 0; w < 12 + i % 7; ++w) s += std::string(w ? " " : "") + words[(i * 7 + w * 3) % 10];
      (i % 6 == 5 ? va : tr) << "{\"text\": \"" << s << ".\"}\n";
    }
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  // A nano config for `layout`; `extra` is appended (YAML, top level), and
  // `model_extra` goes into the model mapping (", key: value" items).
  fs::path write_config(const std::string& name, const Layout& layout, int max_steps, bool deterministic,
                        const std::string& optimizer = "AdamW", const std::string& model_extra = "",
                        int timeout_s = 60) {
    const fs::path p = dir_ / (name + ".yaml");
    std::ofstream c(p);
    c << "experiment_name: " << name << "\nseed: 11\n"
      << "hardware: {accelerator: cpu, num_threads: 1, devices: " << layout.devices() << "}\n"
      << "model: {type: GLM5pt2, variant: nano, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1, head_dim: 16,\n"
      << "        moe_experts: 4, moe_top_k: 2, moe_ffn_hidden: 32, ffn_hidden: 64, max_seq_len: 32" << model_extra
      << "}\n"
      << "data: {train_path: " << (dir_ / "train.jsonl").string() << ", val_path: " << (dir_ / "val.jsonl").string()
      << ", tokenizer: " << (kSrc / "assets/hf/gpt2").string()
      << ", batch_size: 2, num_workers: 0, cache_dir: " << (dir_ / "cache").string() << "}\n"
      << "optimizer: {name: " << optimizer << ", lr: 0.003, weight_decay: 0.01}\n"
      << "scheduler: {type: cosine_with_warmup, warmup_steps: 2}\n"
      << "training: {max_steps: " << max_steps << ", gradient_accumulation: " << layout.accumulation
      << ", clip_grad_norm: 1.0, eval_every: 4, save_every: 4, keep_last_n: 0, log_every: 1, deterministic: "
      << (deterministic ? "true" : "false") << "}\n"
      << "logging: {console_log_level: INFO, output_dir: " << (dir_ / "outputs").string() << "}\n"
      << "evaluation: {plugins: [lm], split: val, batch_size: 2, max_batches: 4}\n";
    c << "distributed: {zero_stage: " << (layout.zero ? 1 : 0) << ", overlap: " << (layout.overlap ? "true" : "false")
      << ", timeout_s: " << timeout_s << ", bucket_mb: 0.5, expert_parallel: " << layout.experts << "}\n";
    return p;
  }
  fs::path run_dir(const std::string& name) const { return dir_ / "outputs" / name; }

  // Runs `zcode-host run cfg [more]` in `layout`; the exit code (-1: hung).
  int run(const Layout& layout, const fs::path& cfg, const std::string& log, std::vector<std::string> more = {},
          int seconds = 300) {
    std::vector<std::string> args = {"run", cfg.string()};
    args.insert(args.end(), more.begin(), more.end());
    return wait_for(start(command(layout.ranks, args), dir_ / log), seconds);
  }
  std::string log(const std::string& name) const { return slurp(dir_ / name); }

  std::map<uint64_t, double> losses(const std::string& name, const char* key = "loss") {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(slurp(run_dir(name) / "metrics.json").c_str());
    std::map<uint64_t, double> out;
    if (!d.IsObject()) return out;
    for (const auto& e : d["history"]["train"].GetArray()) out[e["step"].GetUint64()] = e[key].GetDouble();
    return out;
  }

  std::map<uint64_t, double> val_losses(const std::string& name) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(slurp(run_dir(name) / "metrics.json").c_str());
    std::map<uint64_t, double> out;
    if (!d.IsObject()) return out;
    for (const auto& e : d["history"]["val"].GetArray()) out[e["step"].GetUint64()] = e["loss"].GetDouble();
    return out;
  }

  // Model and optimizer tensors of a checkpoint ("latest" of a run by default).
  std::map<std::string, std::string> state(const std::string& name, const std::string& which = "latest") {
    auto ck = zcode::ckpt::load_checkpoint(zcode::ckpt::resolve(which, run_dir(name)));
    std::map<std::string, std::string> w;
    for (const auto& t : ck.model->tensors())
      w["model/" + t.name] = std::string(reinterpret_cast<const char*>(t.data), t.nbytes);
    if (ck.optimizer)
      for (const auto& t : ck.optimizer->tensors())
        w["optimizer/" + t.name] = std::string(reinterpret_cast<const char*>(t.data), t.nbytes);
    if (ck.optimizer_parts)  // ZeRO-1: each tensor assembled from the ranks' parts
      for (const std::string& n : ck.optimizer_parts->names()) {
        const DLTensor* t = ck.optimizer_parts->whole(n);
        int64_t count = 1;
        for (int32_t d = 0; d < t->ndim; ++d) count *= t->shape[d];
        w["optimizer/" + n] = std::string(static_cast<const char*>(t->data), static_cast<size_t>(count) * 4);
      }
    return w;
  }

  void expect_identical(const std::string& a, const std::string& b) {
    const auto la = losses(a), lb = losses(b);
    ASSERT_FALSE(la.empty());
    EXPECT_EQ(la.size(), lb.size());
    for (const auto& [step, loss] : la) {
      ASSERT_TRUE(lb.count(step)) << b << " has no loss for step " << step;
      EXPECT_EQ(loss, lb.at(step)) << "step " << step << ": " << a << " vs " << b;
    }
    const auto wa = state(a), wb = state(b);
    ASSERT_EQ(wa.size(), wb.size());
    for (const auto& [n, bytes] : wa) {
      ASSERT_TRUE(wb.count(n)) << n;
      EXPECT_TRUE(wb.at(n) == bytes) << "differs after training: " << n;
    }
  }

  fs::path dir_;
};

// The smoke case: 2 ranks x 2 micro-batches == 1 process x 4, to the bit.
TEST_F(DataParallel, TwoRanksDeterministicEqualOneProcess) {
  ASSERT_EQ(run({0, 4}, write_config("one", {0, 4}, 8, true), "one.log"), 0) << log("one.log");
  ASSERT_EQ(run({2, 2}, write_config("two", {2, 2}, 8, true), "two.log"), 0) << log("two.log");
  expect_identical("one", "two");
  const std::string l = log("two.log");
  EXPECT_NE(l.find("Training on 2 processes (Open MPI"), std::string::npos) << l;
  EXPECT_NE(l.find("global batch = batch_size 2 x gradient_accumulation 2 x 2 ranks = 8 sequences per step, each "
                   "rank reading only its own micro-batches"),
            std::string::npos)
      << l;
  // Rank 0 alone prints the steps; rank 1 keeps its own log in the run folder.
  size_t steps = 0;
  for (size_t at = l.find("] Step 8/8 | loss: "); at != std::string::npos; at = l.find("] Step 8/8 | loss: ", at + 1))
    ++steps;
  EXPECT_EQ(steps, 1u) << l;
  // The step line adds the exposed communication, the wait for the slowest
  // rank and the slowest rank's forward/backward.
  const size_t at8 = l.find("] Step 8/8 | loss: ");
  ASSERT_NE(at8, std::string::npos) << l;
  const std::string line8 = l.substr(at8, l.find('\n', at8) - at8);
  EXPECT_NE(line8.find(" ms | slowest: rank "), std::string::npos) << line8;
  EXPECT_NE(line8.find(" | comm: "), std::string::npos) << line8;
  EXPECT_NE(line8.find(" ms, wait "), std::string::npos) << line8;
  EXPECT_TRUE(fs::exists(run_dir("two") / "logs" / "rank_1.log"));
  // The watchdog's progress files: rank 1 issued as many collectives as rank 0.
  const std::string p0 = slurp(run_dir("two") / "logs" / "rank_0.progress"),
                    p1 = slurp(run_dir("two") / "logs" / "rank_1.progress");
  EXPECT_FALSE(p0.empty());
  EXPECT_EQ(p0.substr(0, p0.find(' ')), p1.substr(0, p1.find(' '))) << p0 << " vs " << p1;
  // The model card records the layout, and counts both processes' cores.
  const std::string card = slurp(run_dir("two") / "model_card.md");
  EXPECT_NE(card.find("Layout: data parallel over 2 processes (Open MPI"), std::string::npos) << card;
  EXPECT_NE(card.find("global batch 2 x 2 x 2 sequences, deterministic reduction"), std::string::npos) << card;
  EXPECT_NE(card.find("on 2 process(es) × 1 thread(s)"), std::string::npos) << card;
  EXPECT_FALSE(fs::exists(run_dir("two") / "logs" / "rank_0.log"));
  // Evaluation ran (on rank 0, on the same weights): the one process's val history.
  EXPECT_EQ(val_losses("two"), val_losses("one"));
  EXPECT_EQ(val_losses("two").size(), 3u);  // steps 0, 4, 8
}

TEST_F(DataParallel, ThreeRanksLambAndAdafactorEqualOneProcess) {
  for (const std::string opt : {"LAMB", "Adafactor"}) {
    SCOPED_TRACE(opt);
    ASSERT_EQ(run({0, 3}, write_config("one_" + opt, {0, 3}, 6, true, opt), "one_" + opt + ".log"), 0)
        << log("one_" + opt + ".log");
    ASSERT_EQ(run({3, 1}, write_config("three_" + opt, {3, 1}, 6, true, opt), "three_" + opt + ".log"), 0)
        << log("three_" + opt + ".log");
    expect_identical("one_" + opt, "three_" + opt);
  }
}

// The default path sums in bucket order over ranks, not in micro-batch
// order: the same curve, to float rounding. Dense layers only, so no router
// decision can flip on a last-bit difference and split the curves.
TEST_F(DataParallel, FastReductionFollowsOneProcess) {
  const std::string dense = ", first_dense_layers: 2";
  ASSERT_EQ(run({0, 4}, write_config("one", {0, 4}, 16, false, "AdamW", dense), "one.log"), 0) << log("one.log");
  const auto a = losses("one");
  ASSERT_EQ(a.size(), 16u);
  EXPECT_LT(a.at(16), a.at(1));
  // With ZeRO-1 (reduce-scatter only, then the parameters' all-gather), and
  // with the buckets started during the backward (small buckets: several).
  for (const Layout& l : {Layout{2, 2}, Layout{2, 2, true}, Layout{2, 2, false, true}, Layout{2, 2, true, true}}) {
    std::string name = l.zero ? "two_zero" : "two";
    name += l.overlap ? "_overlap" : "";
    SCOPED_TRACE(name);
    ASSERT_EQ(run(l, write_config(name, l, 16, false, "AdamW", dense), name + ".log"), 0) << log(name + ".log");
    const auto b = losses(name);
    ASSERT_EQ(b.size(), 16u);
    // Step 1 runs on the same weights: only the loss sum's order differs.
    EXPECT_NEAR(b.at(1), a.at(1), 1e-6 * a.at(1));
    for (const auto& [step, loss] : a) EXPECT_NEAR(b.at(step), loss, 1e-4 * loss) << "step " << step;
  }
  // Overlapped or not, a bucket's reduce-scatter is the same exchange and
  // the same rank-order sum (blocking or non-blocking): the same bits.
  EXPECT_EQ(losses("two_overlap"), losses("two"));
  EXPECT_EQ(losses("two_zero_overlap"), losses("two_zero"));
}

// One logical checkpoint, whatever the number of ranks and ZeRO stage: stop
// at step 4 in one layout, go on in another with the same global batch
// (2 x 6 = 12), and the run is the uninterrupted one to the bit. A ZeRO-1
// checkpoint holds the optimizer state in one part per rank; the resumed run
// reads its range of each tensor from whichever parts hold it.
TEST_F(DataParallel, ResumeInAnotherLayoutIsExact) {
  ASSERT_EQ(run({0, 6}, write_config("straight", {0, 6}, 8, true), "straight.log"), 0) << log("straight.log");
  const std::vector<std::pair<Layout, Layout>> moves = {{{2, 3}, {0, 6}},
                                                        {{0, 6}, {2, 3}},
                                                        {{2, 3}, {3, 2}},
                                                        {{2, 3, true}, {0, 6}},
                                                        {{0, 6}, {3, 2, true}},
                                                        {{2, 3, true}, {3, 2, true}},
                                                        {{3, 2, true}, {2, 3, false}}};
  for (const auto& [from, to] : moves) {
    std::string name = "r";  // (not "r" + to_string(): GCC 12's -Wrestrict false positive)
    name += std::to_string(from.devices());
    name += from.zero ? "zto" : "to";
    name += std::to_string(to.devices());
    name += to.zero ? "z" : "";
    SCOPED_TRACE(name);
    ASSERT_EQ(run(from, write_config(name, from, 8, true), name + "_a.log"), 0) << log(name + "_a.log");
    // Keep step 4 only, as if the job had ended there (the SIGKILL test of
    // tests/e2e shows a real interruption resumes like this).
    fs::remove_all(run_dir(name) / "checkpoints" / "step_8");
    std::ofstream(run_dir(name) / "checkpoints" / "latest") << "step_4\n";
    ASSERT_EQ(run(to, write_config(name, to, 8, true), name + "_b.log", {"--resume-from", "latest"}), 0)
        << log(name + "_b.log");
    EXPECT_NE(log(name + "_b.log").find("Resumed from"), std::string::npos) << log(name + "_b.log");
    EXPECT_EQ(log(name + "_b.log").find("changes the global batch"), std::string::npos);
    expect_identical("straight", name);
  }
}

// A resume that would change the global batch is refused (issue #20: the
// data position and the schedule belong to one global batch), naming the
// product before and after and how to keep it; nothing is trained.
TEST_F(DataParallel, ResumeThatChangesTheGlobalBatchIsRefused) {
  ASSERT_EQ(run({2, 2}, write_config("g", {2, 2}, 8, true), "a.log"), 0) << log("a.log");
  fs::remove_all(run_dir("g") / "checkpoints" / "step_8");
  std::ofstream(run_dir("g") / "checkpoints" / "latest") << "step_4\n";
  const fs::path cfg = write_config("g", {3, 1}, 8, true);  // 2 x 1 x 3 = 6, the checkpoint has 8
  EXPECT_EQ(run({3, 1}, cfg, "b.log", {"--resume-from", "latest"}), 2) << log("b.log");
  const std::string l = log("b.log");
  const std::string said =
      "resume: the checkpoint cannot follow this change: the global batch (data.batch_size x "
      "training.gradient_accumulation x hardware.devices) changes from 8 (2 x 2 x 2) to 6 (2 x 1 x 3); a resume "
      "keeps it: on N processes set gradient_accumulation = 8 / (batch_size x N)";
  EXPECT_NE(l.find(said), std::string::npos) << l;
  EXPECT_FALSE(fs::exists(run_dir("g") / "checkpoints" / "step_5"));
}

// ZeRO-1: each rank keeps and updates the optimizer state of its contiguous
// range of the flat layout (reduce-scatter, step the range, all-gather the
// parameters). LAMB's norms and Adafactor's row and column statistics are
// per tensor, and the ranges split the nano model's embedding and head, so
// their sums are gathered over the ranks: in deterministic mode 2 and 3
// ranks train bit for bit like one unsharded process, and the checkpoint
// holds one part of the optimizer state per rank, with its index.
TEST_F(DataParallel, ZeroOneEqualsOneUnshardedProcess) {
  for (const std::string opt : {"AdamW", "LAMB", "Adafactor"}) {
    SCOPED_TRACE(opt);
    ASSERT_EQ(run({0, 6}, write_config("one_" + opt, {0, 6}, 6, true, opt), "one_" + opt + ".log"), 0)
        << log("one_" + opt + ".log");
    for (const Layout& z : {Layout{2, 3, true}, Layout{3, 2, true}}) {
      std::string name = "z";  // (+=: GCC 12's -Wrestrict false positive on "z" + to_string())
      name += std::to_string(z.ranks) + "_" + opt;
      ASSERT_EQ(run(z, write_config(name, z, 6, true, opt), name + ".log"), 0) << log(name + ".log");
      EXPECT_NE(log(name + ".log").find("data parallel, ZeRO-1 (optimizer state sharded)"), std::string::npos);
      expect_identical("one_" + opt, name);
      const fs::path ck = run_dir(name) / "checkpoints" / "step_6";
      EXPECT_TRUE(fs::exists(ck / "optimizer.index.json"));
      EXPECT_FALSE(fs::exists(ck / "optimizer.safetensors"));
      for (int q = 0; q < z.ranks; ++q) EXPECT_TRUE(fs::exists(ck / zcode::ckpt::optimizer_part_name(q, z.ranks))) << q;
    }
  }
}

// Expert parallelism (distributed.expert_parallel): each of 2 ranks holds 2
// of the 4 experts and trains on its own micro-batches; the routed tokens
// travel to their experts' owners and back. In deterministic mode the run is
// one process with gradient_accumulation x 2, to the bit: losses, val
// losses (every rank evaluates, the experts' forward being a collective),
// and every tensor of the checkpoint, which holds all 4 experts and their
// optimizer state once (AdamW; LAMB's and Adafactor's per-tensor statistics
// over a rank's whole experts). Capacity 1.0 drops assignments; a shared
// expert.
const char* kExpertModel = ", capacity_factor: 1.0, moe_shared_experts: 1";

TEST_F(DataParallel, ExpertParallelEqualsOneProcess) {
  for (const std::string opt : {"AdamW", "LAMB", "Adafactor"}) {
    SCOPED_TRACE(opt);
    const Layout one{0, 4};
    ASSERT_EQ(run(one, write_config("one_" + opt, one, 8, true, opt, kExpertModel), "one_" + opt + ".log"), 0)
        << log("one_" + opt + ".log");
    // ZeRO-1 too (ABI 1.9, zc_param_shard.groups): the dense tensors' state
    // split among all ranks (DATA), each expert's among the ranks that hold
    // it (EXPERT_DATA: here one, so its part is all of it); LAMB's norms and
    // Adafactor's statistics reduced over each tensor's own group; the
    // checkpoint's optimizer state one part per rank, experts included.
    for (const bool zero : {false, true}) {
      const std::string name = (zero ? "epz_" : "ep_") + opt;
      SCOPED_TRACE(name);
      const Layout ep{2, 2, zero, false, 2};
      ASSERT_EQ(run(ep, write_config(name, ep, 8, true, opt, kExpertModel), name + ".log"), 0) << log(name + ".log");
      expect_identical("one_" + opt, name);
      EXPECT_EQ(val_losses(name), val_losses("one_" + opt));
      // The global norm folds every rank's experts in the one-process order.
      EXPECT_EQ(losses(name, "grad_norm"), losses("one_" + opt, "grad_norm"));
      const std::string l = log(name + ".log");
      EXPECT_NE(l.find(std::string("data parallel, experts split over groups of 2 ranks (4 experts, 2 per rank)") +
                       (zero ? ", ZeRO-1 (optimizer state sharded)" : "")),
                std::string::npos)
          << l;
      // The step line shows the experts' load per expert-group rank; metrics.json has it.
      EXPECT_NE(l.find(" | expert ranks: 0."), std::string::npos) << l;
      const std::string metrics = slurp(run_dir(name) / "metrics.json");
      EXPECT_NE(metrics.find("\"moe_rank_load_1\""), std::string::npos);
      // Every expert once, under its global name.
      const auto w = state(name);
      for (int x = 0; x < 4; ++x) EXPECT_TRUE(w.count("model/layers.1.moe.experts." + std::to_string(x) + ".w2")) << x;
      const fs::path ck = run_dir(name) / "checkpoints" / "step_8";
      EXPECT_EQ(fs::exists(ck / "optimizer.safetensors"), !zero);
      for (int q = 0; q < 2; ++q) EXPECT_EQ(fs::exists(ck / zcode::ckpt::optimizer_part_name(q, 2)), zero) << q;
    }
  }
}

// Four ranks in two expert groups of 2: the experts' gradients are summed
// over the 2 replicas of each (EXPERT_DATA), after each group's owner has
// added its own sources. Step 1 runs on the same weights as one process
// (the loss is the same bits); the later steps sum the experts in another
// order than one process, so they follow it to rounding (deterministic mode:
// the same on every run).
TEST_F(DataParallel, ExpertParallelWithReplicasFollowsOneProcess) {
  const Layout one{0, 4}, ep{4, 1, false, false, 2};
  ASSERT_EQ(run(one, write_config("one", one, 6, true, "AdamW", kExpertModel), "one.log"), 0) << log("one.log");
  ASSERT_EQ(run(ep, write_config("ep4", ep, 6, true, "AdamW", kExpertModel), "ep4.log"), 0) << log("ep4.log");
  const auto a = losses("one"), b = losses("ep4");
  ASSERT_EQ(b.size(), 6u) << log("ep4.log");
  EXPECT_EQ(b.at(1), a.at(1));
  for (const auto& [step, loss] : a) EXPECT_NEAR(b.at(step), loss, 1e-5 * loss) << "step " << step;
  // The weights after 6 steps, to float rounding (an expert updated from one
  // replica's gradient only would be ~1e-3 away).
  const auto wa = state("one"), wb = state("ep4");
  ASSERT_EQ(wa.size(), wb.size());
  double worst = 0;
  std::string where;
  for (const auto& [n, bytes] : wa) {
    if (n.rfind("model/", 0) != 0) continue;
    ASSERT_TRUE(wb.count(n) && wb.at(n).size() == bytes.size()) << n;
    const auto* x = reinterpret_cast<const float*>(bytes.data());
    const auto* y = reinterpret_cast<const float*>(wb.at(n).data());
    for (size_t i = 0; i < bytes.size() / 4; ++i)
      if (std::fabs(double(x[i]) - y[i]) > worst) {
        worst = std::fabs(double(x[i]) - y[i]);
        where = n;
      }
  }
  EXPECT_LT(worst, 1e-5) << where;
  // The default (fast) reduction, its buckets started during the backward
  // (distributed.overlap: the model announces expert tensors too; the
  // engine passes on the dense ones): the same step-1 loss to float
  // rounding, and the run follows (MoE routing may flip on a last bit, so
  // no bit-identity is asked).
  const Layout fast{2, 2, false, true, 2};
  ASSERT_EQ(run(fast, write_config("ep_fast", fast, 6, false, "AdamW", kExpertModel), "ep_fast.log"), 0)
      << log("ep_fast.log");
  const auto c = losses("ep_fast");
  ASSERT_EQ(c.size(), 6u);
  EXPECT_NEAR(c.at(1), a.at(1), 1e-6 * a.at(1));
  for (const auto& [step, loss] : a) EXPECT_NEAR(c.at(step), loss, 1e-3 * loss) << "step " << step;
}

// The checkpoint outlives the layout: expert parallel 2 -> one process,
// one process -> expert parallel 2, expert parallel 2 -> plain data
// parallel on 2 ranks, and 2 experts per rank on 2 ranks -> 1 per rank on 4
// (K 2 -> 4), each continuing the uninterrupted run to the bit; the same
// with ZeRO-1 turned on or off across the change.
TEST_F(DataParallel, ExpertParallelResumesInAnotherLayout) {
  const Layout straight{0, 4};
  ASSERT_EQ(run(straight, write_config("straight", straight, 8, true, "AdamW", kExpertModel), "straight.log"), 0)
      << log("straight.log");
  const std::vector<std::tuple<std::string, Layout, Layout>> moves = {
      {"ep_to_one", {2, 2, false, false, 2}, {0, 4}},
      {"one_to_ep", {0, 4}, {2, 2, false, false, 2}},
      {"ep_to_dp", {2, 2, false, false, 2}, {2, 2}},
      {"ep2_to_ep4", {2, 2, false, false, 2}, {4, 1, false, false, 4}},
      // ZeRO-1 on and off under expert parallelism, and its parts resharded.
      {"epz_to_one", {2, 2, true, false, 2}, {0, 4}},
      {"one_to_epz", {0, 4}, {2, 2, true, false, 2}},
      {"epz_to_ep", {2, 2, true, false, 2}, {2, 2, false, false, 2}},
      {"epz2_to_epz4", {2, 2, true, false, 2}, {4, 1, true, false, 4}}};
  for (const auto& [name, from, to] : moves) {
    SCOPED_TRACE(name);
    ASSERT_EQ(run(from, write_config(name, from, 8, true, "AdamW", kExpertModel), name + "_a.log"), 0)
        << log(name + "_a.log");
    fs::remove_all(run_dir(name) / "checkpoints" / "step_8");
    std::ofstream(run_dir(name) / "checkpoints" / "latest") << "step_4\n";
    ASSERT_EQ(
        run(to, write_config(name, to, 8, true, "AdamW", kExpertModel), name + "_b.log", {"--resume-from", "latest"}),
        0)
        << log(name + "_b.log");
    EXPECT_NE(log(name + "_b.log").find("Resumed from"), std::string::npos) << log(name + "_b.log");
    expect_identical("straight", name);
  }
}

// What expert parallelism cannot do is refused before any step, by name.
TEST_F(DataParallel, ExpertParallelRefusals) {
  // 3 ranks split 4 experts 3 ways: the model says why.
  const Layout three{3, 1, false, false, 3};
  EXPECT_NE(run(three, write_config("x3", three, 2, true, "AdamW", kExpertModel), "x3.log", {}, 120), 0);
  EXPECT_NE(log("x3.log").find("distributed.expert_parallel = 3 does not divide model.moe_experts = 4"),
            std::string::npos)
      << log("x3.log");
  EXPECT_EQ(log("x3.log").find("Step 1/2"), std::string::npos);

  // ZeRO-1 with K = 2 and an optimizer built for ABI 1.8 (no per-parameter
  // groups: it would reduce the experts' statistics over every rank).
  const Layout old_optimizer{2, 1, true, false, 2};
  const fs::path cfg = write_config("x18", old_optimizer, 2, true, "fake_optimizer_1_8", kExpertModel);
  std::ofstream(cfg, std::ios::app) << "plugin_path: [" << ZCODE_FAKE_OPTIMIZER_DIR << "]\n";
  EXPECT_NE(run(old_optimizer, cfg, "x18.log", {}, 120), 0);
  EXPECT_NE(log("x18.log").find("distributed.zero_stage: 1 with distributed.expert_parallel = 2 needs an optimizer "
                                "built for ABI 1.9 or newer (zc_param_shard.groups); "),
            std::string::npos)
      << log("x18.log");
  EXPECT_NE(log("x18.log").find("is built for ABI 1.8"), std::string::npos) << log("x18.log");
  EXPECT_EQ(log("x18.log").find("Step 1/2"), std::string::npos);
}

// Four ranks, K = 2: each expert is held by 2 ranks (EXPERT_DATA), which
// split its optimizer state; the dense state is split 4 ways. The experts'
// gradients are summed in another order than one process (as without
// ZeRO), so the run follows the unsharded 4-rank run: to the bit, since
// ZeRO-1 changes where each element is updated, not how. Each rank of an
// expert group holds one expert of 3 matrices of 4096 x 32 (131,072
// elements: two of Adafactor's 65,536-element bands of rows, 32 of the
// norm's blocks), so its 2 holders split the middle matrix: LAMB's
// per-expert norms and Adafactor's row and column statistics are gathered
// across them (top-1 of 2 experts, capacity 1.0: drops). Then a
// checkpoint of
// that layout resumes with ZeRO-1 turned off, and one without it resumes
// with it on, each continuing the unsharded run to the bit.
TEST_F(DataParallel, ExpertParallelWithZeroOverReplicasEqualsUnsharded) {
  const Layout ep{4, 1, false, false, 2}, epz{4, 1, true, false, 2};
  auto config = [&](const std::string& name, const Layout& l, const std::string& opt) {
    const fs::path p = write_config(name, l, 8, true, opt);
    std::string text = slurp(p);
    const std::string from = "moe_ffn_hidden: 32";
    text.replace(text.find(from), from.size(), "moe_ffn_hidden: 4096" + std::string(kExpertModel));
    const std::string experts = "moe_experts: 4, moe_top_k: 2";
    text.replace(text.find(experts), experts.size(), "moe_experts: 2, moe_top_k: 1");
    // The debugger reads every gradient: with ZeRO-1 each reducer gathers
    // its shards' sums for it (allgather_grads), dense and experts.
    text += "callbacks:\n  - {type: debugger, every: 1}\n";
    std::ofstream(p) << text;
    return p;
  };
  for (const std::string opt : {"AdamW", "LAMB", "Adafactor"}) {
    SCOPED_TRACE(opt);
    ASSERT_EQ(run(ep, config("ep4_" + opt, ep, opt), "ep4_" + opt + ".log"), 0) << log("ep4_" + opt + ".log");
    ASSERT_EQ(run(epz, config("ep4z_" + opt, epz, opt), "ep4z_" + opt + ".log"), 0) << log("ep4z_" + opt + ".log");
    expect_identical("ep4_" + opt, "ep4z_" + opt);
    EXPECT_EQ(losses("ep4z_" + opt, "grad_norm"), losses("ep4_" + opt, "grad_norm"));
    // Rank 0's debugger saw the same summed gradients (norms per group and
    // histograms, its experts included) with and without ZeRO-1.
    const std::string dbg = slurp(run_dir("ep4_" + opt) / "logs" / "debug.jsonl");
    EXPECT_EQ(std::count(dbg.begin(), dbg.end(), '\n'), 8) << dbg.substr(0, 400);
    EXPECT_NE(dbg.find("moe"), std::string::npos);
    EXPECT_TRUE(dbg == slurp(run_dir("ep4z_" + opt) / "logs" / "debug.jsonl"));
    // The state was split: every rank's part holds some of the experts'
    // state (unsplit, only the 2 ranks of one expert group would) and some
    // of the dense tensors'; an expert's state is in 2 parts.
    rapidjson::Document idx;
    idx.Parse(slurp(run_dir("ep4z_" + opt) / "checkpoints" / "step_8" / "optimizer.index.json").c_str());
    ASSERT_TRUE(idx.IsObject() && idx.HasMember("tensors")) << opt;
    std::set<std::string> expert_parts, dense_parts;
    size_t expert_pieces = 0;
    for (const auto& t : idx["tensors"].GetObject()) {
      const bool expert = std::string(t.name.GetString()).find(".experts.") != std::string::npos;
      for (const auto& piece : t.value["pieces"].GetArray())
        (expert ? expert_parts : dense_parts).insert(piece["part"].GetString());
      if (expert) expert_pieces = std::max<size_t>(expert_pieces, t.value["pieces"].Size());
    }
    EXPECT_EQ(expert_parts.size(), 4u);
    EXPECT_EQ(dense_parts.size(), 4u);
    EXPECT_EQ(expert_pieces, 2u);
  }
  for (const auto& [name, from, to] :
       std::vector<std::tuple<std::string, Layout, Layout>>{{"epz4_to_ep4", epz, ep}, {"ep4_to_epz4", ep, epz}}) {
    SCOPED_TRACE(name);
    ASSERT_EQ(run(from, config(name, from, "Adafactor"), name + "_a.log"), 0) << log(name + "_a.log");
    fs::remove_all(run_dir(name) / "checkpoints" / "step_8");
    std::ofstream(run_dir(name) / "checkpoints" / "latest") << "step_4\n";
    ASSERT_EQ(run(to, config(name, to, "Adafactor"), name + "_b.log", {"--resume-from", "latest"}), 0)
        << log(name + "_b.log");
    EXPECT_NE(log(name + "_b.log").find("Resumed from"), std::string::npos) << log(name + "_b.log");
    expect_identical("ep4_Adafactor", name);
  }
}

TEST_F(DataParallel, LaunchMismatchesAreRefusedByName) {
  // A plain process whose config asks for 2 devices.
  EXPECT_EQ(run({0, 1}, write_config("plain", {2, 1}, 2, true), "plain.log"), 2) << log("plain.log");
  EXPECT_NE(log("plain.log")
                .find("hardware.devices: 2 processes, but this process was started alone (world size 1): "
                      "launch with `mpirun -np 2 zcode-host run ...`"),
            std::string::npos)
      << log("plain.log");
  // mpirun starts 2 where the config says 3.
  const fs::path three = write_config("three", {3, 1}, 2, true);
  EXPECT_NE(run({2, 1}, three, "np2.log"), 0);
  EXPECT_NE(log("np2.log").find("hardware.devices: 3 processes, but mpirun started 2 process(es)"), std::string::npos)
      << log("np2.log");
  EXPECT_NE(log("np2.log").find("or set hardware.devices to 2"), std::string::npos) << log("np2.log");
  EXPECT_FALSE(fs::exists(run_dir("three") / "checkpoints"));
  // Two ranks with different configs (MPMD): refused before any step.
  const fs::path a = write_config("mpmd", {2, 1}, 2, true);
  {
    std::string b = slurp(a);
    b.replace(b.find("seed: 11"), 8, "seed: 12");
    std::ofstream(dir_ / "mpmd_b.yaml") << b;
  }
  const int rc = wait_for(start({kMpirun.string(), "--oversubscribe", "-np", "1", kHost.string(), "run", a.string(),
                                 ":", "-np", "1", kHost.string(), "run", (dir_ / "mpmd_b.yaml").string()},
                                dir_ / "mpmd.log"),
                          120);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, -1) << "mpirun hung";
  EXPECT_NE(log("mpmd.log").find("rank 1 runs a different config"), std::string::npos) << log("mpmd.log");
  EXPECT_EQ(log("mpmd.log").find("Step 1/2"), std::string::npos) << log("mpmd.log");
}

TEST_F(DataParallel, SingleProcessCommandsRefuseSeveralRanks) {
  const fs::path cfg = write_config("e", {0, 1}, 2, true);
  ASSERT_EQ(run({0, 1}, cfg, "a.log"), 0) << log("a.log");
  const int rc = wait_for(
      start(command(2, {"evaluate", "--config", cfg.string(), "--checkpoint", "latest"}), dir_ / "eval.log"), 120);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, -1) << "mpirun hung";
  EXPECT_NE(log("eval.log").find("zcode-host evaluate runs in one process, but mpirun started 2"), std::string::npos)
      << log("eval.log");
}

// SIGTERM to mpirun (what Slurm's scancel and a cluster's preemption send):
// Open MPI passes it to every rank, the ranks agree on the step to stop at,
// rank 0 checkpoints it, and the resumed run is the uninterrupted one.
TEST_F(DataParallel, SigtermCheckpointsAndResumesExactly) {
  ASSERT_EQ(run({2, 2}, write_config("straight", {2, 2}, 40, true), "straight.log"), 0) << log("straight.log");
  const fs::path cfg = write_config("stopped", {2, 2}, 40, true);
  Child c = start(command(2, {"run", cfg.string()}), dir_ / "stopped1.log");
  Reaper reaper{c};
  bool at5 = false;
  for (int i = 0; i < 3000 && !at5; ++i) {
    at5 = log("stopped1.log").find("Step 5/40") != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(at5) << log("stopped1.log");
  // To every rank, as Slurm's scancel does (mpirun itself would SIGKILL
  // the ranks a moment after passing a SIGTERM on).
  const pid_t r0 = rank_pid(cfg, 0), r1 = rank_pid(cfg, 1);
  ASSERT_GT(r0, 0);
  ASSERT_GT(r1, 0);
  kill(r0, SIGTERM);
  kill(r1, SIGTERM);
  const int rc = wait_for(c, 60);
  EXPECT_NE(rc, -1) << "mpirun did not end within 60 s of SIGTERM";
  EXPECT_NE(rc, 0);
  const std::string l = log("stopped1.log");
  ASSERT_NE(l.find("Stopped on request at step "), std::string::npos) << l;
  auto ck = zcode::ckpt::load_checkpoint(zcode::ckpt::resolve("latest", run_dir("stopped")));
  EXPECT_LT(ck.step, 40u);
  EXPECT_NE(l.find("Checkpoint saved to " + (run_dir("stopped") / "checkpoints" / "step_").string() +
                   std::to_string(ck.step)),
            std::string::npos)
      << "the stop step was not checkpointed\n"
      << l;
  ASSERT_EQ(run({2, 2}, cfg, "stopped2.log", {"--resume-from", "latest"}), 0) << log("stopped2.log");
  expect_identical("straight", "stopped");
}

// SIGTERM to mpirun itself (Ctrl-C in its terminal is SIGINT, handled the
// same). Open MPI 4.1 stops forwarding the ranks' output at once, waits
// odls_base_sigkill_timeout, passes SIGTERM to every rank, waits as long
// again, then SIGKILLs what is left, and exits 1. Meanwhile rank 0 may block
// printing a line; the SIGTERM frees it (the console then drops what it
// cannot take, the run folder's log keeps every line), the ranks stop at one
// step and rank 0 checkpoints it.
TEST_F(DataParallel, SigtermToMpirunCheckpointsTheStopStep) {
  const fs::path cfg = write_config("m", {2, 2}, 2000, true);
  Child c = start(command(2, {"run", cfg.string()}, {"--mca", "odls_base_sigkill_timeout", "8"}), dir_ / "m.log");
  Reaper reaper{c};
  bool at3 = false;
  for (int i = 0; i < 3000 && !at3; ++i) {
    at3 = log("m.log").find("Step 3/2000") != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(at3) << log("m.log");
  const auto t0 = std::chrono::steady_clock::now();
  kill(c.pid, SIGTERM);
  const int rc = wait_for(c, 90);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_NE(rc, -1) << "mpirun did not end within 90 s of SIGTERM\n" << log("m.log");
  EXPECT_EQ(rc, 1) << log("m.log");
  const std::string l = slurp(run_dir("m") / "logs" / "console.log");
  ASSERT_NE(l.find("Stopped on request at step "), std::string::npos)
      << l.substr(l.size() > 3000 ? l.size() - 3000 : 0);
  auto ck = zcode::ckpt::load_checkpoint(zcode::ckpt::resolve("latest", run_dir("m")));
  EXPECT_LT(ck.step, 2000u);
  EXPECT_NE(
      l.find("Checkpoint saved to " + (run_dir("m") / "checkpoints" / "step_").string() + std::to_string(ck.step)),
      std::string::npos)
      << "the stop step was not checkpointed\n"
      << l.substr(l.size() > 3000 ? l.size() - 3000 : 0);
  EXPECT_NE(l.find("Stopped on request at step " + std::to_string(ck.step)), std::string::npos);
  std::printf(
      "[ measured ] mpirun ended %.1f s after its SIGTERM (odls_base_sigkill_timeout 8), exit %d, "
      "checkpoint at step %llu\n",
      took, rc, static_cast<unsigned long long>(ck.step));
}

// A rank that dies ends the job (mpirun sees it), well inside the time a
// user would wait, and the last complete checkpoint loads and verifies.
TEST_F(DataParallel, AKilledRankEndsTheJob) {
  const fs::path cfg = write_config("k", {2, 2}, 400, true);
  Child c = start(command(2, {"run", cfg.string()}), dir_ / "k.log");
  Reaper reaper{c};
  const fs::path rank1 = run_dir("k") / "logs" / "rank_1.log";
  bool saved = false;
  for (int i = 0; i < 3000 && !saved; ++i) {
    saved = fs::exists(run_dir("k") / "checkpoints" / "step_8");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(saved) << log("k.log");
  const pid_t victim = rank_pid(cfg, 1);
  ASSERT_GT(victim, 0) << "no rank-1 process found";
  const auto t0 = std::chrono::steady_clock::now();
  kill(victim, SIGKILL);
  const int rc = wait_for(c, 60);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(rc, -1) << "mpirun did not end within 60 s of a rank's death\n" << log("k.log");
  EXPECT_NE(rc, 0);
  EXPECT_LT(took, 30.0);
  std::printf("[ measured ] the job ended %.1f s after rank 1 was killed (exit %d)\n", took, rc);
  // `latest` names a complete checkpoint: it loads and every SHA-256 holds.
  auto ck = zcode::ckpt::load_checkpoint(zcode::ckpt::resolve("latest", run_dir("k")));
  EXPECT_GE(ck.step, 8u);
  EXPECT_EQ(ck.step % 4, 0u);
}

// A rank that hangs (here: stopped with SIGSTOP) does not end the job by
// itself; the others' watchdog (distributed.timeout_s) does: the rank that
// waits longer than the timeout in a collective says which call and step,
// and which rank never reached it (logs/rank_N.progress), and exits, and
// mpirun ends the job.
TEST_F(DataParallel, AHungRankEndsTheJobWithinTheTimeout) {
  // timeout_s 6: well past a step and a checkpoint's fsync on a slow CI disk,
  // which rank 1 may wait for before it is stopped.
  const fs::path cfg = write_config("h", {2, 2}, 400, true, "AdamW", "", 6);
  Child c = start(command(2, {"run", cfg.string()}), dir_ / "h.log");
  Reaper reaper{c};
  bool saved = false;
  for (int i = 0; i < 3000 && !saved; ++i) {
    saved = fs::exists(run_dir("h") / "checkpoints" / "step_4");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(saved) << log("h.log");
  const pid_t victim = rank_pid(cfg, 1);
  ASSERT_GT(victim, 0) << "no rank-1 process found";
  const auto t0 = std::chrono::steady_clock::now();
  kill(victim, SIGSTOP);
  const int rc = wait_for(c, 60);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kill(victim, SIGKILL);  // (mpirun has killed it already, unless the test failed)
  EXPECT_NE(rc, -1) << "the job did not end within 60 s of a rank hanging\n" << log("h.log");
  EXPECT_NE(rc, 0);
  EXPECT_LT(took, 30.0);
  const std::string l = log("h.log");
  EXPECT_NE(l.find(" s for the other ranks at step "), std::string::npos) << l;
  EXPECT_NE(l.find("(distributed.timeout_s = 6): a rank is lost or hung: rank 1 (last reported: collective #"),
            std::string::npos)
      << "the line does not name the stopped rank\n"
      << l;
  std::printf("[ measured ] the job ended %.1f s after rank 1 hung, timeout 6 s (exit %d)\n", took, rc);
  if (const size_t w = l.find("a rank is lost or hung"); w != std::string::npos)
    std::printf("[ message  ] %s\n", l.substr(l.rfind('\n', w) + 1, l.find('\n', w) - l.rfind('\n', w) - 1).c_str());
  auto ck = zcode::ckpt::load_checkpoint(zcode::ckpt::resolve("latest", run_dir("h")));
  EXPECT_EQ(ck.step % 4, 0u);
}

// ZeRO-1: a rank killed while the ranks write a checkpoint (its part, or
// the others' parts) leaves `latest` at the previous complete checkpoint,
// which resumes bit-identically to the run that never stopped.
TEST_F(DataParallel, ZeroKilledRankKeepsLatestAndResumesExactly) {
  ASSERT_EQ(run({2, 2, true}, write_config("zs", {2, 2, true}, 12, true), "zs.log"), 0) << log("zs.log");
  const fs::path cfg = write_config("zk", {2, 2, true}, 12, true);
  Child c = start(command(2, {"run", cfg.string()}), dir_ / "zk.log");
  Reaper reaper{c};
  // Kill rank 1 as soon as the temp folder of step 8 appears (or, if the
  // write was too quick to catch, right after step 8 was saved).
  const fs::path ckdir = run_dir("zk") / "checkpoints";
  bool mid = false, done = false;
  for (int i = 0; i < 300000 && !mid && !done; ++i) {
    std::error_code ec;
    if (fs::is_directory(ckdir, ec))
      for (const auto& e : fs::directory_iterator(ckdir, ec))
        if (e.path().filename().string().rfind(".tmp-step_8-", 0) == 0) mid = true;
    done = fs::exists(ckdir / "step_8");
    if (!mid && !done) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const pid_t victim = rank_pid(cfg, 1);
  ASSERT_GT(victim, 0);
  kill(victim, SIGKILL);
  EXPECT_NE(wait_for(c, 60), 0);
  std::printf("[ measured ] rank 1 killed %s the checkpoint of step 8\n", mid && !done ? "during" : "after");
  const auto ck = zcode::ckpt::load_checkpoint(zcode::ckpt::resolve("latest", run_dir("zk")));
  EXPECT_TRUE(ck.step == 4 || ck.step == 8) << ck.step;
  EXPECT_TRUE(ck.optimizer_parts != nullptr);
  ASSERT_EQ(run({2, 2, true}, cfg, "zk2.log", {"--resume-from", "latest"}), 0) << log("zk2.log");
  EXPECT_NE(log("zk2.log").find("Resumed from"), std::string::npos);
  const auto a = state("zs"), b = state("zk");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [n, bytes] : a) EXPECT_TRUE(b.at(n) == bytes) << n;
}

}  // namespace
