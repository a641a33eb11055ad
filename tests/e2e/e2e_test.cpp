// End-to-end runs of the real `zcode-host` (fork/exec) with the bundled
// plugins: a nano GLM-5.2 for a few dozen steps on a tiny corpus.
//   - every file of the run folder and its fields;
//   - exact resume: N steps uninterrupted == k steps, SIGTERM (or SIGKILL
//     after a checkpoint), resume, N steps: per-step losses and final weights
//     bit-identical;
//   - a used run folder is refused; evaluate and generate work on the result.
#include <zcode/core/checkpoint.h>
#include <zcode/core/run_dir.h>
#include <zcode/sdk/safetensors.h>

#include "host_process.h"

#include <gtest/gtest.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

namespace {

namespace fs = std::filesystem;

const fs::path kHost = ZCODE_HOST_EXE;
const fs::path kSrc = ZCODE_SOURCE_DIR;

using zcode::test::Proc;
using zcode::test::slurp;
using zcode::test::wait_for;

rapidjson::Document json_file(const fs::path& p) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag>(slurp(p).c_str());
  return d;
}

// The first object key that occurs twice in one object of `v` ("path.key"),
// or "" (RapidJSON keeps duplicate members, so they can be seen).
std::string duplicate_keys(const rapidjson::Value& v, const std::string& path = "") {
  if (v.IsObject()) {
    std::set<std::string> seen;
    for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
      const std::string k = it->name.GetString();
      if (!seen.insert(k).second) return path + "." + k;
      if (auto d = duplicate_keys(it->value, path + "." + k); !d.empty()) return d;
    }
  } else if (v.IsArray()) {
    for (rapidjson::SizeType i = 0; i < v.Size(); ++i)
      if (auto d = duplicate_keys(v[i], path + "[" + std::to_string(i) + "]"); !d.empty()) return d;
  }
  return "";
}

// What must exist for an end-to-end run; empty when everything is there.
std::string missing_prerequisites() {
  if (!fs::exists(kHost)) return "zcode-host is not built";
  const fs::path plugins = kHost.parent_path().parent_path() / "lib" / "zcode" / "plugins";
  for (const char* p : {"bpe", "jsonl", "glm52", "optimizers", "schedulers", "lm", "callbacks"})
    if (!fs::exists(plugins / (std::string("libzcode_") + p + ".so")))
      return std::string("plugin libzcode_") + p + ".so is not built";
  if (!fs::exists(kSrc / "assets/hf/gpt2/vocab.json")) return "assets/hf/gpt2 is missing (run scripts/fetch-assets.sh)";
  return "";
}

// Starts zcode-host with `args`, stdout+stderr into `log`.
Proc start(const std::vector<std::string>& args, const fs::path& log) {
  return zcode::test::start_program(kHost, args, log);
}

int run_host(const std::vector<std::string>& args, const fs::path& log) { return wait_for(start(args, log)); }

// Runs zcode-host in `cwd` with stdout into `out` and stderr into `err`.
int run_split(const std::vector<std::string>& args, const fs::path& out, const fs::path& err, const fs::path& cwd) {
  pid_t pid = fork();
  if (pid == 0) {
    if (::chdir(cwd.c_str()) != 0) _exit(126);
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kHost.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kHost.c_str(), argv.data());
    _exit(127);
  }
  return wait_for(Proc{pid});
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

class E2E : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = missing_prerequisites();
    if (!why.empty()) GTEST_SKIP() << "e2e needs the full build: " << why;
    dir_ = fs::temp_directory_path() / ("zcode_e2e_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    zcode::test::write_tiny_corpus(dir_);  // 60 short documents, every 6th to val
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  // A nano config; `name` is the experiment (run folder) name; `model_extra`
  // goes into the model section (", key: value" items).
  fs::path write_config(const std::string& name, int max_steps, const std::string& model_extra = "") {
    const fs::path p = dir_ / (name + ".yaml");
    std::ofstream c(p);
    c << "experiment_name: " << name << "\nseed: 7\n"
      << "hardware: {accelerator: cpu, num_threads: 1}\n"
      << "model: {type: GLM5pt2, variant: nano, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1, head_dim: 16,\n"
      << "        moe_experts: 4, moe_top_k: 2, moe_ffn_hidden: 32, ffn_hidden: 64, max_seq_len: 32" << model_extra
      << "}\n"
      << "data: {train_path: " << (dir_ / "train.jsonl").string() << ", val_path: " << (dir_ / "val.jsonl").string()
      << ", tokenizer: " << (kSrc / "assets/hf/gpt2").string()
      << ", batch_size: 2, num_workers: 0, cache_dir: " << (dir_ / "cache").string() << "}\n"
      << "optimizer: {name: AdamW, lr: 0.003, weight_decay: 0.01}\n"
      << "scheduler: {type: cosine_with_warmup, warmup_steps: 2}\n"
      << "training: {max_steps: " << max_steps
      << ", gradient_accumulation: 2, clip_grad_norm: 1.0, eval_every: 6, save_every: 4, keep_last_n: 2, log_every: "
         "1}\n"
      << "logging: {console_log_level: INFO, output_dir: " << (dir_ / "outputs").string() << "}\n"
      << "evaluation: {plugins: [lm], split: val, batch_size: 2}\n";
    return p;
  }
  fs::path run_dir(const std::string& name) const { return dir_ / "outputs" / name; }

  // Per-step train losses from metrics.json (log_every 1 keeps every step).
  std::vector<std::pair<uint64_t, double>> losses(const std::string& name) {
    auto d = json_file(run_dir(name) / "metrics.json");
    std::vector<std::pair<uint64_t, double>> out;
    if (!d.IsObject()) return out;
    for (const auto& e : d["history"]["train"].GetArray())
      out.emplace_back(e["step"].GetUint64(), e["loss"].GetDouble());
    return out;
  }

  // The final model weights, tensor by tensor.
  std::map<std::string, std::string> weights(const std::string& name) {
    auto ck = zcode::ckpt::load_checkpoint(zcode::ckpt::resolve("latest", run_dir(name)));
    std::map<std::string, std::string> w;
    for (const auto& t : ck.model->tensors()) w[t.name] = std::string(reinterpret_cast<const char*>(t.data), t.nbytes);
    return w;
  }

  // Waits until `pred` holds (polling), up to `seconds`.
  template <class F>
  bool wait_until(F pred, int seconds) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  fs::path dir_;
};

TEST_F(E2E, RunFolderHasEveryFileAndField) {
  const fs::path cfg = write_config("full", 12);
  ASSERT_EQ(run_host({"run", cfg.string()}, dir_ / "full.log"), 0) << slurp(dir_ / "full.log");
  const fs::path rd = run_dir("full");
  const std::string log = slurp(dir_ / "full.log");
  EXPECT_NE(log.find("[INFO] Step 1/12 | loss: "), std::string::npos) << log;
  EXPECT_NE(log.find("Training complete. Best val loss: "), std::string::npos) << log;
  // config.yaml: the resolved config.
  const std::string yaml = slurp(rd / "config.yaml");
  EXPECT_NE(yaml.find("experiment_name"), std::string::npos);
  EXPECT_NE(yaml.find("full"), std::string::npos);
  // logs/console.log mirrors the console.
  EXPECT_NE(slurp(rd / "logs/console.log").find("Step 12/12"), std::string::npos);
  // checkpoints: cadence 4 with keep_last_n 2 -> step_8, step_12; latest -> step_12.
  auto cks = zcode::ckpt::list_checkpoints(rd / "checkpoints");
  ASSERT_EQ(cks.size(), 2u);
  EXPECT_EQ(cks[0].first, 8u);
  EXPECT_EQ(cks[1].first, 12u);
  EXPECT_EQ(slurp(rd / "checkpoints/latest"), "step_12\n");
  auto ck = zcode::ckpt::load_checkpoint(cks[1].second);  // verifies every SHA-256
  EXPECT_EQ(ck.step, 12u);
  EXPECT_NE(ck.model->find("embed.weight"), nullptr);
  EXPECT_GT(ck.optimizer->tensors().size(), 0u);
  auto st = json_file(cks[1].second / "state.json");
  ASSERT_TRUE(st.IsObject());
  EXPECT_EQ(st["step"].GetUint64(), 12u);
  for (const char* k : {"model", "optimizer", "scheduler", "data.train", "tokenizer"})
    EXPECT_TRUE(st["stages"].HasMember(k)) << k;
  EXPECT_EQ(std::string(st["config_sha256"].GetString()).size(), 64u);
  EXPECT_TRUE(st["config"].IsObject());
  EXPECT_TRUE(st["git_commit"].IsString());
  EXPECT_TRUE(st["environment"]["cpu_model"].IsString());
  EXPECT_TRUE(st["environment"]["num_threads"].IsInt());
  EXPECT_EQ(std::string(st["files"]["model.safetensors"].GetString()),
            zcode::ckpt::sha256_file(cks[1].second / "model.safetensors"));
  EXPECT_TRUE(st["engine"]["tokens_seen"].IsNumber());
  ASSERT_TRUE(st["plugins"].IsArray());
  EXPECT_GE(st["plugins"].Size(), 5u);
  EXPECT_TRUE(st["plugins"][0]["version"].IsString());
  // metrics.json: final and best train/val metrics and history.
  auto m = json_file(rd / "metrics.json");
  ASSERT_TRUE(m.IsObject());
  EXPECT_TRUE(m["final"]["train"]["loss"].IsNumber());
  for (const char* k : {"loss", "perplexity", "bits_per_byte", "bits_per_char", "accuracy"})
    EXPECT_TRUE(m["final"]["val"][k].IsNumber()) << k;
  EXPECT_NEAR(m["final"]["val"]["perplexity"].GetDouble(), std::exp(m["final"]["val"]["loss"].GetDouble()),
              1e-9 * m["final"]["val"]["perplexity"].GetDouble());
  EXPECT_TRUE(m["best"]["val_loss"].IsNumber());
  EXPECT_EQ(m["history"]["train"].Size(), 12u);
  // training.eval_at_start (default true): step 0, then steps 6 and 12.
  ASSERT_EQ(m["history"]["val"].Size(), 3u);
  EXPECT_EQ(m["history"]["val"][0]["step"].GetUint64(), 0u);
  EXPECT_EQ(m["history"]["val"][1]["step"].GetUint64(), 6u);
  EXPECT_EQ(m["history"]["val"][2]["step"].GetUint64(), 12u);
  EXPECT_LT(m["history"]["val"][2]["loss"].GetDouble(), m["history"]["val"][0]["loss"].GetDouble())
      << "val loss after 12 steps is not below the untrained model's";
  EXPECT_NE(m["best"]["step"].GetUint64(), 0u);  // step 0 is history, never best
  {
    char b[64];
    std::snprintf(b, sizeof b,
                  "[INFO] Step 0/12 | val_loss: %.4f | val_ppl: ", m["history"]["val"][0]["loss"].GetDouble());
    EXPECT_NE(log.find(b), std::string::npos) << b << "\n" << log;
    EXPECT_LT(log.find(b), log.find("[INFO] Step 1/12 | loss: "));
  }
  // Every object of metrics.json has each key once (a duplicate "tokens"
  // once came from the engine's count and the model's metric).
  EXPECT_EQ(duplicate_keys(m), "");
  for (const auto& e : m["history"]["train"].GetArray()) {
    ASSERT_TRUE(e["tokens"].IsNumber());
    EXPECT_GT(e["tokens"].GetDouble(), 0);
    EXPECT_NEAR(e["tokens_per_s"].GetDouble(), e["tokens"].GetDouble() / (e["step_time_ms"].GetDouble() / 1000.0),
                1e-6 * e["tokens_per_s"].GetDouble());
  }
  auto l = losses("full");
  EXPECT_LT(l.back().second, l.front().second) << "the loss did not go down in 12 steps";
  // model_card.md
  const std::string card = slurp(rd / "model_card.md");
  EXPECT_NE(card.find("# Model card: full"), std::string::npos) << card;
  EXPECT_NE(card.find("train.jsonl"), std::string::npos) << card;
  EXPECT_NE(card.find("kWh"), std::string::npos);
  EXPECT_NE(card.find("active per token"), std::string::npos);
  EXPECT_NE(card.find("| perplexity |"), std::string::npos) << card;
  // A second run into the same folder is refused (exit 2) and changes nothing.
  const std::string before = slurp(rd / "metrics.json");
  EXPECT_EQ(run_host({"run", cfg.string()}, dir_ / "again.log"), 2);
  EXPECT_NE(slurp(dir_ / "again.log").find("run folder already used"), std::string::npos) << slurp(dir_ / "again.log");
  EXPECT_EQ(slurp(rd / "metrics.json"), before);
  // evaluate reproduces the final val numbers from the checkpoint.
  const fs::path out = dir_ / "eval.json";
  ASSERT_EQ(run_host({"evaluate", "--config", cfg.string(), "--checkpoint", "latest", "--split", "val", "--out",
                      out.string()},
                     dir_ / "eval.log"),
            0)
      << slurp(dir_ / "eval.log");
  auto ev = json_file(out);
  EXPECT_EQ(ev["metrics"]["loss"].GetDouble(), m["final"]["val"]["loss"].GetDouble());
  // The train split cycles epochs: evaluation stops after one pass.
  const fs::path out_train = dir_ / "eval_train.json";
  ASSERT_EQ(run_host({"evaluate", "--config", cfg.string(), "--checkpoint", "latest", "--split", "train", "--out",
                      out_train.string()},
                     dir_ / "eval_train.log"),
            0)
      << slurp(dir_ / "eval_train.log");
  auto evt = json_file(out_train);
  EXPECT_GT(evt["metrics"]["tokens"].GetDouble(), ev["metrics"]["tokens"].GetDouble());  // train is the larger split
  // generate: greedy twice gives the same text; exit 0.
  const fs::path ckdir = cks[1].second;
  ASSERT_EQ(run_host({"generate", "--checkpoint", ckdir.string(), "--prompt", "the sky", "--max-new-tokens", "5"},
                     dir_ / "gen1.log"),
            0)
      << slurp(dir_ / "gen1.log");
  ASSERT_EQ(run_host({"generate", "--checkpoint", ckdir.string(), "--prompt", "the sky", "--max-new-tokens", "5"},
                     dir_ / "gen2.log"),
            0);
  EXPECT_EQ(slurp(dir_ / "gen1.log"), slurp(dir_ / "gen2.log"));
  // --stream prints the same text; seeded sampling repeats itself.
  ASSERT_EQ(
      run_host({"generate", "--checkpoint", ckdir.string(), "--prompt", "the sky", "--max-new-tokens", "5", "--stream"},
               dir_ / "gen3.log"),
      0);
  EXPECT_EQ(slurp(dir_ / "gen1.log"), slurp(dir_ / "gen3.log"));
  for (const char* f : {"s1.log", "s2.log"})
    ASSERT_EQ(run_host({"generate", "--checkpoint", ckdir.string(), "--prompt", "a river", "--strategy", "sample",
                        "--temperature", "1.3", "--top-k", "50", "--seed", "11", "--max-new-tokens", "6"},
                       dir_ / f),
              0)
        << slurp(dir_ / f);
  EXPECT_EQ(slurp(dir_ / "s1.log"), slurp(dir_ / "s2.log"));
  // Each strategy with its own flags (issue 17: a flag another strategy
  // uses is a usage error, so the two no longer share one flag list).
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--strategy", "beam", "--num-beams", "3"},
        {"--strategy", "contrastive", "--top-k", "3", "--penalty-alpha", "0.5"}}) {
    std::vector<std::string> args = {
        "generate", "--checkpoint", ckdir.string(), "--prompt", "stone", "--max-new-tokens", "4"};
    args.insert(args.end(), flags.begin(), flags.end());
    EXPECT_EQ(run_host(args, dir_ / "strategy.log"), 0) << flags[1] << ": " << slurp(dir_ / "strategy.log");
  }
}

// Issue 17, item 4: stdout/stderr, --quiet, --log-format json, relative paths
// recorded absolute, the callbacks list adding to the defaults, the end
// summary naming only files that exist, and a failed start not blocking the
// retry. Every run is 2 steps of the nano model; paths are relative to the
// working directory dir_.
TEST_F(E2E, OutputStreamsPathsCallbacksAndFailedStart) {
  auto config = [&](const std::string& name, const std::string& extra) {
    const fs::path p = dir_ / (name + ".yaml");
    std::ofstream c(p);
    c << "experiment_name: " << name << "\nseed: 7\nhardware: {num_threads: 1}\n"
      << "model: {type: GLM5pt2, variant: nano, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 1, head_dim: 16,\n"
      << "        moe_experts: 2, moe_top_k: 1, moe_ffn_hidden: 32, ffn_hidden: 64, max_seq_len: 16}\n"
      << "data: {train_path: train.jsonl, val_path: val.jsonl, tokenizer: " << (kSrc / "assets/hf/gpt2").string()
      << ", batch_size: 2, num_workers: 0, cache_dir: cache}\n"
      << "training: {max_steps: 2, log_every: 1, eval_every: 2, save_every: 2}\n"
      << "logging: {output_dir: outputs}\nevaluation: {max_batches: 2}\n"
      << extra;
    return p.filename().string();
  };
  const fs::path out = dir_ / "out.txt", err = dir_ / "err.txt";

  // A start that fails before its first step (a bad record in the train
  // data) leaves config.yaml and logs/ only; the retry reuses the folder.
  const std::string good = slurp(dir_ / "train.jsonl");
  std::ofstream(dir_ / "train.jsonl") << good << "{\"title\": \"no text\"}\n";
  const std::string plain = config("streams", "");
  EXPECT_NE(run_split({"run", plain}, out, err, dir_), 0);
  EXPECT_NE(slurp(err).find("missing field"), std::string::npos) << slurp(err);
  EXPECT_TRUE(fs::exists(run_dir("streams") / "config.yaml"));
  std::ofstream(dir_ / "train.jsonl") << good;
  ASSERT_EQ(run_split({"run", plain}, out, err, dir_), 0) << slurp(out) << slurp(err);
  const std::string o = slurp(out), e = slurp(err);
  EXPECT_NE(o.find("[INFO] Reusing "), std::string::npos) << o;
  // stdout: the step lines and the summary; stderr: no INFO line.
  EXPECT_NE(o.find("[INFO] Step 1/2 | loss: "), std::string::npos) << o;
  EXPECT_NE(o.find("Training complete"), std::string::npos) << o;
  EXPECT_EQ(e.find("[INFO]"), std::string::npos) << e;
  EXPECT_NE(o.find(": config.yaml, metrics.json, model_card.md, logs/console.log"), std::string::npos) << o;
  // config.yaml records the relative paths made absolute (hf:// would stay).
  const std::string yaml = slurp(run_dir("streams") / "config.yaml");
  for (const char* f : {"train.jsonl", "val.jsonl", "cache", "outputs"})
    EXPECT_NE(yaml.find((dir_ / f).lexically_normal().string()), std::string::npos) << f << "\n" << yaml;

  // --quiet: nothing on stdout; logs/console.log keeps everything.
  ASSERT_EQ(run_split({"run", plain, "--overwrite", "--quiet"}, out, err, dir_), 0) << slurp(err);
  EXPECT_EQ(slurp(out), "");
  EXPECT_NE(slurp(run_dir("streams") / "logs/console.log").find("Step 2/2 | loss: "), std::string::npos);

  // --log-format json, with callbacks that add to and remove from the defaults.
  const std::string cbs = config("json",
                                 "callbacks:\n  - {type: model_card, enabled: false}\n"
                                 "  - {type: early_stopping, patience: 5}\n");
  ASSERT_EQ(run_split({"run", cbs, "--log-format", "json"}, out, err, dir_), 0) << slurp(err);
  // Every stdout line is an object: a log line (level, message) or a
  // console event (event: step|eval, step, max_steps and the metrics).
  bool step_event = false, eval_event = false, outputs_line = false;
  for (const std::string& l : lines_of(slurp(out))) {
    rapidjson::Document d;
    d.Parse(l.c_str());
    ASSERT_TRUE(!d.HasParseError() && d.IsObject()) << l;
    if (d.HasMember("event")) {
      ASSERT_TRUE(d["event"].IsString() && d["step"].IsUint64() && d["max_steps"].IsUint64()) << l;
      EXPECT_EQ(d["max_steps"].GetUint64(), 2u) << l;
      const std::string ev = d["event"].GetString();
      if (ev == "step" && d["step"].GetUint64() == 1) step_event = d["loss"].IsNumber() && d["lr"].IsNumber();
      if (ev == "eval" && d["step"].GetUint64() == 2) eval_event = d["loss"].IsNumber() && d["perplexity"].IsNumber();
      continue;
    }
    ASSERT_TRUE(d["level"].IsString() && d["message"].IsString()) << l;
    const std::string m = d["message"].GetString();
    EXPECT_NE(m.rfind("Step 1/2 | loss: ", 0), 0u) << "the text step line is DEBUG in json mode: " << l;
    if (m.rfind("Outputs in ", 0) == 0) {
      outputs_line = true;
      EXPECT_NE(m.find(": config.yaml, metrics.json, logs/console.log"), std::string::npos) << m;
    }
  }
  EXPECT_TRUE(step_event) << slurp(out);
  EXPECT_TRUE(eval_event) << slurp(out);
  EXPECT_TRUE(outputs_line) << slurp(out);
  EXPECT_NE(slurp(run_dir("json") / "logs/console.log").find("[DEBUG] Step 1/2 | loss: "), std::string::npos);
  EXPECT_TRUE(fs::exists(run_dir("json") / "metrics.json"));  // a default kept
  // logs/metrics.jsonl holds the console's event records, the same lines.
  std::vector<std::string> events;
  for (const std::string& l : lines_of(slurp(out)))
    if (l.rfind("{\"event\":", 0) == 0) events.push_back(l);
  EXPECT_EQ(lines_of(slurp(run_dir("json") / "logs/metrics.jsonl")), events);
  EXPECT_FALSE(fs::exists(run_dir("json") / "model_card.md"));  // a default removed
  EXPECT_TRUE(fs::exists(run_dir("json") / "checkpoints/latest"));
}

TEST(RunDir, FailedStartIsReusedAndAnythingElseRefused) {
  const fs::path d = fs::temp_directory_path() / ("zcode_rundir_" + std::to_string(::getpid()));
  fs::remove_all(d);
  // A hand-written config.yaml (no ZCode header) in a folder that looks like a
  // failed start: refused, and left byte-identical.
  const std::string mine = "# my experiment\nmodel: {d_model: 64}\n";
  fs::create_directories(d / "logs");
  std::ofstream(d / "logs/console.log") << "";
  std::ofstream(d / "config.yaml") << mine;
  EXPECT_FALSE(zcode::rundir::is_failed_start(d));
  EXPECT_THROW(zcode::rundir::prepare(d, false, false), zcode::rundir::RunDirError);
  {
    std::ifstream in(d / "config.yaml", std::ios::binary);
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), mine);
  }
  // ZCode's header but no logs/console.log: refused too.
  std::ofstream(d / "config.yaml") << zcode::rundir::kResolvedConfigHeader << "; from x.yaml\nx: 1\n";
  fs::remove(d / "logs/console.log");
  EXPECT_FALSE(zcode::rundir::is_failed_start(d));
  std::ofstream(d / "logs/console.log") << "[INFO] ...\n";
  EXPECT_TRUE(zcode::rundir::is_failed_start(d));
  // A start killed after its step-0 evaluation: metrics.json with an empty
  // train history (and model_card.md) still counts as a failed start...
  std::ofstream(d / "metrics.json") << R"({"final":{},"history":{"train":[],"val":[{"step":0,"loss":10.9}]}})"
                                    << "\n";
  std::ofstream(d / "model_card.md") << "# card\n";
  EXPECT_TRUE(zcode::rundir::is_failed_start(d));
  // ...but not once a step was trained.
  std::ofstream(d / "metrics.json") << R"({"history":{"train":[{"step":1,"loss":10.8}],"val":[]}})"
                                    << "\n";
  EXPECT_FALSE(zcode::rundir::is_failed_start(d));
  std::ofstream(d / "metrics.json") << "{}\n";  // the step-0 evaluation of a failed start
  fs::create_directories(d / "checkpoints");
  EXPECT_FALSE(zcode::rundir::is_failed_start(d));
  EXPECT_TRUE(zcode::rundir::discard_failed_start(d));
  EXPECT_FALSE(fs::exists(d / "metrics.json"));
  EXPECT_FALSE(fs::exists(d / "checkpoints"));
  EXPECT_TRUE(fs::exists(d / "config.yaml"));
  EXPECT_TRUE(zcode::rundir::is_failed_start(d));
  EXPECT_TRUE(zcode::rundir::prepare(d, false, false));  // reused, not refused
  // A checkpoint makes it a used folder again: refused, and never discarded.
  fs::create_directories(d / "checkpoints/step_1");
  EXPECT_FALSE(zcode::rundir::discard_failed_start(d));
  EXPECT_TRUE(fs::exists(d / "checkpoints/step_1"));
  EXPECT_THROW(zcode::rundir::prepare(d, false, false), zcode::rundir::RunDirError);
  fs::remove_all(d);
}

void expect_same_run(E2E* t, const std::vector<std::pair<uint64_t, double>>& a,
                     const std::vector<std::pair<uint64_t, double>>& b, const std::map<std::string, std::string>& wa,
                     const std::map<std::string, std::string>& wb) {
  (void)t;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second, b[i].second) << "loss differs at step " << a[i].first;  // bit-identical
  }
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [name, bytes] : wa) EXPECT_TRUE(wb.at(name) == bytes) << "weights differ: " << name;
}

TEST_F(E2E, ExactResumeAfterSigterm) {
  const int N = 12;
  ASSERT_EQ(run_host({"run", write_config("straight", N).string()}, dir_ / "a.log"), 0) << slurp(dir_ / "a.log");
  const fs::path cfg = write_config("stopped", N);
  Proc p = start({"run", cfg.string()}, dir_ / "b1.log");
  ASSERT_TRUE(wait_until([&] { return slurp(dir_ / "b1.log").find("Step 5/12") != std::string::npos; }, 300));
  kill(p.pid, SIGTERM);
  EXPECT_EQ(wait_for(p), 130) << slurp(dir_ / "b1.log");
  EXPECT_NE(slurp(dir_ / "b1.log").find("Stopped on request"), std::string::npos);
  ASSERT_EQ(run_host({"run", cfg.string(), "--resume-from", "latest"}, dir_ / "b2.log"), 0) << slurp(dir_ / "b2.log");
  expect_same_run(this, losses("straight"), losses("stopped"), weights("straight"), weights("stopped"));
}

TEST_F(E2E, ExactResumeAfterSigkill) {
  const int N = 12;
  ASSERT_EQ(run_host({"run", write_config("straight", N).string()}, dir_ / "a.log"), 0) << slurp(dir_ / "a.log");
  const fs::path cfg = write_config("killed", N);
  Proc p = start({"run", cfg.string()}, dir_ / "c1.log");
  // Kill for real once the step-4 checkpoint exists and training went on.
  ASSERT_TRUE(wait_until([&] { return slurp(dir_ / "c1.log").find("Step 6/12") != std::string::npos; }, 300));
  kill(p.pid, SIGKILL);
  EXPECT_EQ(wait_for(p), 128 + SIGKILL);
  ASSERT_EQ(run_host({"run", cfg.string(), "--resume-from", "latest"}, dir_ / "c2.log"), 0) << slurp(dir_ / "c2.log");
  EXPECT_NE(slurp(dir_ / "c2.log").find("Resumed from"), std::string::npos);
  expect_same_run(this, losses("straight"), losses("killed"), weights("straight"), weights("killed"));
  // The resumed run does not evaluate step 0 again: val history 0, 6, 12 in both.
  auto val_steps = [&](const std::string& name) {
    std::vector<uint64_t> s;
    auto d = json_file(run_dir(name) / "metrics.json");
    for (const auto& e : d["history"]["val"].GetArray()) s.push_back(e["step"].GetUint64());
    return s;
  };
  EXPECT_EQ(val_steps("straight"), (std::vector<uint64_t>{0, 6, 12}));
  EXPECT_EQ(val_steps("killed"), (std::vector<uint64_t>{0, 6, 12}));
  // logs/metrics.jsonl: the resumed run dropped what the killed one wrote
  // after its checkpoint, so both streams hold the same records, each step
  // once, and their step losses are metrics.json's history (another writer).
  auto stream = [&](const std::string& name) {
    std::vector<std::tuple<std::string, uint64_t, double>> out;
    for (const std::string& l : lines_of(slurp(run_dir(name) / "logs/metrics.jsonl"))) {
      rapidjson::Document d;
      d.Parse<rapidjson::kParseFullPrecisionFlag>(l.c_str());
      EXPECT_TRUE(!d.HasParseError() && d.IsObject() && d.HasMember("loss")) << l;
      if (d.HasParseError() || !d.IsObject() || !d.HasMember("loss")) continue;
      out.emplace_back(d["event"].GetString(), d["step"].GetUint64(), d["loss"].GetDouble());
    }
    return out;
  };
  const auto sa = stream("straight"), sk = stream("killed");
  EXPECT_EQ(sa, sk);
  std::vector<std::pair<uint64_t, double>> steps_of_stream;
  for (const auto& [ev, step, loss] : sk)
    if (ev == "step") steps_of_stream.emplace_back(step, loss);
  EXPECT_EQ(steps_of_stream, losses("killed"));
  EXPECT_EQ(steps_of_stream.size(), static_cast<size_t>(N));
  EXPECT_EQ(slurp(dir_ / "c2.log").find("Step 0/12 | val_loss"), std::string::npos) << slurp(dir_ / "c2.log");
}

// The blocking in use is recorded in the checkpoint (state.json,
// stages.model.blocking) and a resume reuses it: a run pinned to a blocking
// no machine's rules give (slices of 48 columns, 3 groups, attention tiles of
// 8 rows, logits chunks of 64 Ki elements), stopped, and resumed from a config
// that pins nothing, is bit-identical to the pinned run uninterrupted. The
// same run on the machine's own blocking differs in the last bits, so the
// check has teeth.
TEST_F(E2E, ResumeReusesTheRecordedBlocking) {
  const int N = 12;
  const std::string pinned =
      ", blocking: {head_fused_slice: 48, head_fused_groups: 3, attn_tile: 8, logits_chunk_elems: 65536}";
  ASSERT_EQ(run_host({"run", write_config("pinned", N, pinned).string()}, dir_ / "a.log"), 0) << slurp(dir_ / "a.log");
  ASSERT_EQ(run_host({"run", write_config("derived", N).string()}, dir_ / "d.log"), 0) << slurp(dir_ / "d.log");
  EXPECT_TRUE(weights("pinned") != weights("derived"))
      << "the pinned blocking changes no bit: this test proves nothing";
  {
    const auto ck = zcode::ckpt::load_checkpoint(zcode::ckpt::resolve("latest", run_dir("pinned")));
    rapidjson::Document st;
    st.Parse(ck.state_json.c_str());
    ASSERT_TRUE(st.IsObject() && st.HasMember("stages") && st["stages"].HasMember("model")) << ck.state_json;
    const auto& b = st["stages"]["model"]["blocking"];
    ASSERT_TRUE(b.IsObject()) << ck.state_json;
    EXPECT_EQ(b["head_fused_slice"].GetInt(), 48);
    EXPECT_EQ(b["head_fused_groups"].GetInt(), 3);
    EXPECT_EQ(b["attn_tile"].GetInt(), 8);
    EXPECT_EQ(b["logits_chunk_elems"].GetInt64(), 65536);
  }
  const fs::path cfg = write_config("stopped", N, pinned);
  Proc p = start({"run", cfg.string()}, dir_ / "b1.log");
  ASSERT_TRUE(wait_until([&] { return slurp(dir_ / "b1.log").find("Step 5/12") != std::string::npos; }, 300));
  kill(p.pid, SIGTERM);
  EXPECT_EQ(wait_for(p), 130) << slurp(dir_ / "b1.log");
  // Resumed from a config without model.blocking: the record decides.
  const fs::path plain = write_config("stopped", N);
  ASSERT_EQ(run_host({"run", plain.string(), "--resume-from", "latest"}, dir_ / "b2.log"), 0) << slurp(dir_ / "b2.log");
  EXPECT_NE(slurp(dir_ / "b2.log").find("from the checkpoint"), std::string::npos) << slurp(dir_ / "b2.log");
  EXPECT_EQ(slurp(dir_ / "b2.log").find("cannot follow this change"), std::string::npos);
  expect_same_run(this, losses("pinned"), losses("stopped"), weights("pinned"), weights("stopped"));
}

// ZCODE_GEMM for the host processes started inside one scope.
struct GemmEnv {
  explicit GemmEnv(const char* value) { setenv("ZCODE_GEMM", value, 1); }
  ~GemmEnv() { unsetenv("ZCODE_GEMM"); }
};

// The float GEMMs' engine is recorded in the checkpoint (state.json,
// stages.model.float_gemm) and a resume follows it, as it follows the
// blocking: a run on OpenBLAS's sgemm, stopped, and resumed by a process
// whose environment picks ZCode's AVX-512 kernel, is bit-identical to the
// OpenBLAS run uninterrupted. The same run on the AVX-512 kernel differs in
// the last bits, so the check has teeth.
TEST_F(E2E, ResumeFollowsTheRecordedGemmEngine) {
  if (!__builtin_cpu_supports("avx512f"))
    GTEST_SKIP() << "this CPU lacks AVX-512F: float GEMMs run on OpenBLAS whatever ZCODE_GEMM says, so there is no "
                    "second engine to resume on";
  const int N = 12;
  {
    const GemmEnv env("openblas");
    ASSERT_EQ(run_host({"run", write_config("blas", N).string()}, dir_ / "a.log"), 0) << slurp(dir_ / "a.log");
  }
  {
    const GemmEnv env("avx512");
    ASSERT_EQ(run_host({"run", write_config("ours", N).string()}, dir_ / "o.log"), 0) << slurp(dir_ / "o.log");
  }
  EXPECT_TRUE(weights("blas") != weights("ours")) << "the two engines give the same bits: this test proves nothing";
  {
    const auto ck = zcode::ckpt::load_checkpoint(zcode::ckpt::resolve("latest", run_dir("blas")));
    rapidjson::Document st;
    st.Parse(ck.state_json.c_str());
    ASSERT_TRUE(st.IsObject() && st.HasMember("stages") && st["stages"].HasMember("model")) << ck.state_json;
    ASSERT_TRUE(st["stages"]["model"]["float_gemm"].IsString()) << ck.state_json;
    EXPECT_EQ(std::string(st["stages"]["model"]["float_gemm"].GetString()), "openblas");
  }
  const fs::path cfg = write_config("switched", N);
  {
    const GemmEnv env("openblas");
    Proc p = start({"run", cfg.string()}, dir_ / "b1.log");
    ASSERT_TRUE(wait_until([&] { return slurp(dir_ / "b1.log").find("Step 5/12") != std::string::npos; }, 300));
    kill(p.pid, SIGTERM);
    EXPECT_EQ(wait_for(p), 130) << slurp(dir_ / "b1.log");
  }
  {
    const GemmEnv env("avx512");
    ASSERT_EQ(run_host({"run", cfg.string(), "--resume-from", "latest"}, dir_ / "b2.log"), 0) << slurp(dir_ / "b2.log");
  }
  EXPECT_NE(slurp(dir_ / "b2.log").find("float GEMMs on openblas from the checkpoint (this process had chosen avx512)"),
            std::string::npos)
      << slurp(dir_ / "b2.log");
  expect_same_run(this, losses("blas"), losses("switched"), weights("blas"), weights("switched"));
}

}  // namespace

namespace {

TEST_F(E2E, ResumeChecksConfigAndRefusesTamperedCheckpoints) {
  const fs::path cfg = write_config("guarded", 4);
  ASSERT_EQ(run_host({"run", cfg.string()}, dir_ / "r1.log"), 0) << slurp(dir_ / "r1.log");
  // An architecture change is an error (exit 2) naming the field.
  EXPECT_EQ(run_host({"run", cfg.string(), "--resume-from", "latest", "--set", "model.d_model=64"}, dir_ / "r2.log"),
            2);
  EXPECT_NE(slurp(dir_ / "r2.log").find("model.d_model: checkpoint has 32, config has 64"), std::string::npos)
      << slurp(dir_ / "r2.log");
  // Other changes are warnings; training continues to the new max_steps.
  ASSERT_EQ(
      run_host({"run", cfg.string(), "--resume-from", "latest", "--set", "training.max_steps=6"}, dir_ / "r3.log"), 0)
      << slurp(dir_ / "r3.log");
  EXPECT_NE(slurp(dir_ / "r3.log").find("resume: config differs: training.max_steps: checkpoint has 4, config has 6"),
            std::string::npos)
      << slurp(dir_ / "r3.log");
  EXPECT_NE(slurp(dir_ / "r3.log").find("Step 6/6"), std::string::npos);
  // A flipped byte in the newest checkpoint: refused naming the file (exit 1), nothing loaded.
  const fs::path latest = zcode::ckpt::resolve("latest", run_dir("guarded"));
  {
    std::fstream f(latest / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x42');
  }
  EXPECT_EQ(
      run_host({"run", cfg.string(), "--resume-from", "latest", "--set", "training.max_steps=8"}, dir_ / "r4.log"), 1);
  EXPECT_NE(slurp(dir_ / "r4.log").find((latest / "model.safetensors").string() + ": SHA-256 mismatch"),
            std::string::npos)
      << slurp(dir_ / "r4.log");
  EXPECT_EQ(slurp(dir_ / "r4.log").find("Step 7/8"), std::string::npos);
}

}  // namespace

namespace {

// Removes `keys` (dotted paths) from the config stored in `ckpt`'s state.json
// and rewrites its SHA256SUMS line: a checkpoint written before those keys
// existed.
void strip_checkpoint_config(const fs::path& ckpt, const std::vector<std::string>& keys) {
  rapidjson::Document st = json_file(ckpt / "state.json");
  for (const std::string& k : keys) {
    rapidjson::Value* v = &st["config"];
    std::string rest = k;
    for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1))
      v = &(*v)[rest.substr(0, dot).c_str()];
    ASSERT_TRUE(v->RemoveMember(rest.c_str())) << k;
  }
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  st.Accept(w);
  const std::string text = std::string(sb.GetString()) + "\n";
  std::ofstream(ckpt / "state.json", std::ios::binary) << text;
  std::string sums;
  for (const std::string& l : lines_of(slurp(ckpt / "SHA256SUMS")))
    sums += l.size() > 66 && l.substr(66) == "state.json"
                ? zcode::ckpt::sha256_hex(text.data(), text.size()) + "  state.json\n"
                : l + "\n";
  std::ofstream(ckpt / "SHA256SUMS", std::ios::binary) << sums;
}

// A checkpoint made before eval_capacity_factor, mask_document_boundary and
// callbacks_replace_defaults existed resumes without an error or a warning
// about them (their values here are the defaults); eval_capacity_factor is
// not architecture; resuming with the run folder's config.yaml (absolute
// paths, plugin_path a list) warns about nothing.
TEST_F(E2E, ResumeOlderCheckpointAndRunFolderConfig) {
  const fs::path plugins = fs::relative(kHost.parent_path().parent_path() / "lib" / "zcode" / "plugins", dir_);
  const fs::path cfg = write_config("older", 4);
  std::ofstream(cfg, std::ios::app) << "plugin_path: [" << plugins.string() << "]\n";
  const fs::path out = dir_ / "out.txt", err = dir_ / "err.txt";
  ASSERT_EQ(run_split({"run", cfg.string()}, out, err, dir_), 0) << slurp(err);
  const fs::path latest = zcode::ckpt::resolve("latest", run_dir("older"));
  strip_checkpoint_config(latest,
                          {"model.eval_capacity_factor", "data.mask_document_boundary", "callbacks_replace_defaults"});
  ASSERT_EQ(
      run_split({"run", cfg.string(), "--resume-from", "latest", "--set", "training.max_steps=5"}, out, err, dir_), 0)
      << slurp(out) << slurp(err);
  const std::string e1 = slurp(err);
  EXPECT_NE(e1.find("resume: config differs: training.max_steps: checkpoint has 4, config has 5"), std::string::npos)
      << e1;
  for (const char* k : {"eval_capacity_factor", "mask_document_boundary", "callbacks_replace_defaults", "plugin_path"})
    EXPECT_EQ(e1.find(k), std::string::npos) << k << "\n" << e1;
  // Changing only evaluation's capacity factor is a warning, not an architecture change.
  ASSERT_EQ(run_split({"run", cfg.string(), "--resume-from", "latest", "--set", "training.max_steps=6", "--set",
                       "model.eval_capacity_factor=1.25"},
                      out, err, dir_),
            0)
      << slurp(err);
  EXPECT_NE(slurp(err).find("resume: config differs: model.eval_capacity_factor: checkpoint has 0, config has 1.25"),
            std::string::npos)
      << slurp(err);
  // The run folder's config.yaml records absolute paths (plugin_path a
  // list): only the changed max_steps differs.
  ASSERT_EQ(run_split({"run", (run_dir("older") / "config.yaml").string(), "--resume-from", "latest", "--set",
                       "training.max_steps=7", "--set", "model.eval_capacity_factor=1.25"},
                      out, err, dir_),
            0)
      << slurp(err);
  const std::string e3 = slurp(err);
  EXPECT_NE(e3.find("config differs: training.max_steps: checkpoint has 6, config has 7"), std::string::npos) << e3;
  EXPECT_EQ(e3.find("config differs"), e3.rfind("config differs")) << e3;  // the only one

  // generate: stdout is the generated text only; the plugins' INFO lines
  // ("glm52: Initializing ...") go to stderr.
  const std::string ck = (run_dir("older") / "checkpoints" / "latest").string();
  ASSERT_EQ(run_split({"generate", "--checkpoint", ck, "--prompt", "the sky", "--max-new-tokens", "4"}, out, err, dir_),
            0)
      << slurp(err);
  EXPECT_FALSE(slurp(out).empty());
  for (const char* tag : {"[INFO]", "[DEBUG]", "glm52:", "Initializing"})
    EXPECT_EQ(slurp(out).find(tag), std::string::npos) << tag << "\n" << slurp(out);
  EXPECT_NE(slurp(err).find("[INFO] "), std::string::npos) << slurp(err);

  // evaluate --log-format json: one result object on stdout (also under
  // --quiet), the same as --out writes.
  const fs::path res = dir_ / "eval.json";
  for (bool quiet : {false, true}) {
    std::vector<std::string> args = {"evaluate", "--checkpoint", ck, "--log-format", "json", "--out", res.string()};
    if (quiet) args.push_back("--quiet");
    ASSERT_EQ(run_split(args, out, err, dir_), 0) << slurp(err);
    const rapidjson::Document want = json_file(res);
    int events = 0;
    for (const std::string& l : lines_of(slurp(out))) {
      rapidjson::Document d;
      d.Parse<rapidjson::kParseFullPrecisionFlag>(l.c_str());
      ASSERT_TRUE(!d.HasParseError() && d.IsObject()) << l;
      if (!d.HasMember("event")) continue;
      ++events;
      ASSERT_STREQ(d["event"].GetString(), "evaluate") << l;
      EXPECT_EQ(d["step"].GetUint64(), 7u) << l;
      EXPECT_STREQ(d["split"].GetString(), "val") << l;
      EXPECT_STREQ(d["checkpoint"].GetString(), want["checkpoint"].GetString()) << l;
      EXPECT_TRUE(d["metrics"]["loss"].IsNumber()) << l;
      EXPECT_EQ(d["metrics"]["loss"].GetDouble(), want["metrics"]["loss"].GetDouble()) << l;
    }
    EXPECT_EQ(events, 1) << "quiet=" << quiet << "\n" << slurp(out);
    if (quiet) {
      EXPECT_EQ(lines_of(slurp(out)).size(), 1u) << slurp(out);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Checkpoint paths and refusals (issue 17, items 2, 5, 6, 7): one short run,
// then every command on its checkpoint.
// ---------------------------------------------------------------------------
namespace {

// A copy of step folder `from` at `to` whose model tensors are replaced by
// `fill` (NaN, inf) and which is otherwise a valid checkpoint: write_checkpoint
// recomputes SHA256SUMS and state.json's hashes, so only the weights are bad.
fs::path write_poisoned_copy(const fs::path& from, const fs::path& root, float fill) {
  auto ck = zcode::ckpt::load_checkpoint(from);
  zcode::ckpt::CheckpointContents c;
  c.step = ck.step;
  for (const auto& t : ck.model->tensors()) {
    if (t.dtype != "F32") {
      c.model.add(t.name, t.dtype.c_str(), t.shape, t.data, t.nbytes);
      continue;
    }
    std::vector<float> v(static_cast<size_t>(t.numel()), fill);
    c.model.add(t.name, "F32", t.shape, v.data(), v.size() * sizeof(float));
  }
  for (const auto& t : ck.optimizer->tensors()) c.optimizer.add(t.name, t.dtype.c_str(), t.shape, t.data, t.nbytes);
  c.state_json = ck.state_json;
  return zcode::ckpt::write_checkpoint(root, c, 0);
}

// The help text of one option of `--help` output: from "--flag" to the next option.
std::string option_help(const std::string& help, const std::string& flag) {
  // "  --flag arg  text" or "  -c [ --flag ] arg  text", in the options list.
  size_t at = help.find("\n  --" + flag + " ");
  if (at == std::string::npos) at = help.find("[ --" + flag + " ]");
  if (at == std::string::npos) return "";
  const size_t next = help.find("\n  -", at + 1);
  const std::string text = help.substr(at, next == std::string::npos ? std::string::npos : next - at);
  // boost wraps long descriptions: one space for each run of white space.
  std::string flat;
  for (char ch : text) {
    const bool space = std::isspace(static_cast<unsigned char>(ch)) != 0;
    if (!space) flat += ch;
    else if (!flat.empty() && flat.back() != ' ') flat += ' ';
  }
  return flat;
}

TEST_F(E2E, CheckpointPathsEveryCommand) {
  const fs::path cfg = write_config("paths", 4);
  ASSERT_EQ(run_host({"run", cfg.string()}, dir_ / "run.log"), 0) << slurp(dir_ / "run.log");
  const fs::path rd = run_dir("paths");
  const fs::path latest_file = rd / "checkpoints" / "latest";  // the path the run prints last
  EXPECT_NE(slurp(dir_ / "run.log").find("Latest checkpoint: " + latest_file.string()), std::string::npos);
  const double final_val = json_file(rd / "metrics.json")["final"]["val"]["loss"].GetDouble();

  // evaluate: the pointer file works, with and without --config (the config
  // stored in the checkpoint); the loss is the run's final val loss.
  ASSERT_EQ(run_host({"evaluate", "--config", cfg.string(), "--checkpoint", latest_file.string(), "--out",
                      (dir_ / "e1.json").string()},
                     dir_ / "e1.log"),
            0)
      << slurp(dir_ / "e1.log");
  EXPECT_EQ(json_file(dir_ / "e1.json")["metrics"]["loss"].GetDouble(), final_val);
  EXPECT_EQ(std::string(json_file(dir_ / "e1.json")["checkpoint"].GetString()),
            (rd / "checkpoints" / "step_4").string());
  ASSERT_EQ(run_host({"evaluate", "--checkpoint", latest_file.string(), "--out", (dir_ / "e2.json").string()},
                     dir_ / "e2.log"),
            0)
      << slurp(dir_ / "e2.log");
  EXPECT_EQ(json_file(dir_ / "e2.json")["metrics"]["loss"].GetDouble(), final_val);
  // Without --config, 'latest' alone names no run folder: a usage error that says what to give.
  EXPECT_EQ(run_host({"evaluate", "--checkpoint", "latest"}, dir_ / "e3.log"), 2);
  EXPECT_NE(slurp(dir_ / "e3.log").find("--checkpoint latest needs --config"), std::string::npos)
      << slurp(dir_ / "e3.log");

  // generate: the pointer file gives the same text as the step folder.
  ASSERT_EQ(run_host({"generate", "--checkpoint", (rd / "checkpoints" / "step_4").string(), "--prompt", "the sky",
                      "--max-new-tokens", "4"},
                     dir_ / "g1.log"),
            0)
      << slurp(dir_ / "g1.log");
  ASSERT_EQ(run_host({"generate", "--checkpoint", latest_file.string(), "--prompt", "the sky", "--max-new-tokens", "4"},
                     dir_ / "g2.log"),
            0)
      << slurp(dir_ / "g2.log");
  EXPECT_EQ(slurp(dir_ / "g1.log"), slurp(dir_ / "g2.log"));

  // --resume-from takes the pointer file too (max_steps 6: two more steps).
  ASSERT_EQ(run_host({"run", cfg.string(), "--resume-from", latest_file.string(), "--set", "training.max_steps=6"},
                     dir_ / "r1.log"),
            0)
      << slurp(dir_ / "r1.log");
  EXPECT_NE(slurp(dir_ / "r1.log").find("Resumed from " + (rd / "checkpoints" / "step_4").string()), std::string::npos)
      << slurp(dir_ / "r1.log");
}

// evaluate and generate without --config use the config stored in the
// checkpoint; its relative paths (data.val_path, data.cache_dir) are the
// training run's, resolved against the folder it ran in (state.json "cwd"),
// not against the folder evaluate is started from.
TEST_F(E2E, StoredConfigPathsResolveAgainstTheTrainingFolder) {
  const fs::path cfg = dir_ / "rel.yaml";
  std::ofstream(cfg) << "experiment_name: rel\nseed: 7\nhardware: {num_threads: 1}\n"
                     << "model: {type: GLM5pt2, variant: nano, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 1, "
                        "head_dim: 16,\n        moe_experts: 2, moe_top_k: 1, moe_ffn_hidden: 32, ffn_hidden: 64, "
                        "max_seq_len: 16}\n"
                     << "data: {train_path: train.jsonl, val_path: val.jsonl, tokenizer: "
                     << (kSrc / "assets/hf/gpt2").string() << ", batch_size: 2, num_workers: 0, cache_dir: cache}\n"
                     << "training: {max_steps: 2, log_every: 1, eval_every: 2, save_every: 2}\n"
                     << "logging: {output_dir: outputs}\nevaluation: {max_batches: 2}\n";
  const fs::path out = dir_ / "out.txt", err = dir_ / "err.txt";
  ASSERT_EQ(run_split({"run", "rel.yaml"}, out, err, dir_), 0) << slurp(err);
  const fs::path step = run_dir("rel") / "checkpoints" / "step_2";
  {
    const auto st = json_file(step / "state.json");
    ASSERT_TRUE(st.HasMember("cwd") && st["cwd"].IsString()) << "state.json records no \"cwd\"";
    EXPECT_EQ(fs::path(st["cwd"].GetString()), fs::canonical(dir_));
  }
  const double final_val = json_file(run_dir("rel") / "metrics.json")["final"]["val"]["loss"].GetDouble();
  const fs::path elsewhere = dir_ / "elsewhere";  // holds no val.jsonl
  fs::create_directories(elsewhere);
  ASSERT_EQ(
      run_split({"evaluate", "--checkpoint", step.string(), "--out", (dir_ / "ev.json").string()}, out, err, elsewhere),
      0)
      << slurp(err);
  EXPECT_EQ(json_file(dir_ / "ev.json")["metrics"]["loss"].GetDouble(), final_val);
  EXPECT_EQ(run_split({"generate", "--checkpoint", step.string(), "--prompt", "the sky", "--max-new-tokens", "3"}, out,
                      err, elsewhere),
            0)
      << slurp(err);
  EXPECT_FALSE(fs::exists(elsewhere / "cache")) << "the stored cache_dir resolved against the wrong folder";
}

TEST_F(E2E, CheckpointRefusalsNameTheProblem) {
  const fs::path cfg = write_config("refuse", 4);
  ASSERT_EQ(run_host({"run", cfg.string()}, dir_ / "run.log"), 0) << slurp(dir_ / "run.log");
  const fs::path ckroot = run_dir("refuse") / "checkpoints";
  const fs::path step4 = ckroot / "step_4";
  const double final_val = json_file(run_dir("refuse") / "metrics.json")["final"]["val"]["loss"].GetDouble();

  // A checkpoint past max_steps: refused on resume with both numbers (exit 2).
  // A refused resume leaves the run folder's config.yaml as the run wrote it
  // (its --set lines would otherwise record a config that never ran).
  const std::string config_yaml = slurp(run_dir("refuse") / "config.yaml");
  ASSERT_FALSE(config_yaml.empty());
  EXPECT_EQ(run_host({"run", cfg.string(), "--resume-from", "latest", "--set", "training.max_steps=2"}, dir_ / "m.log"),
            2);
  EXPECT_NE(slurp(dir_ / "m.log").find("the checkpoint is at step 4, past training.max_steps = 2"), std::string::npos)
      << slurp(dir_ / "m.log");
  EXPECT_EQ(slurp(run_dir("refuse") / "config.yaml"), config_yaml);

  // A step folder whose state.json says another step: refused with both numbers.
  fs::copy(step4, ckroot / "step_3", fs::copy_options::recursive);
  EXPECT_EQ(run_host({"run", cfg.string(), "--resume-from", (ckroot / "step_3").string()}, dir_ / "s.log"), 1);
  EXPECT_NE(slurp(dir_ / "s.log")
                .find((ckroot / "step_3" / "state.json").string() +
                      ": step 4 disagrees with the folder name step_3 (step 3)"),
            std::string::npos)
      << slurp(dir_ / "s.log");
  EXPECT_EQ(slurp(run_dir("refuse") / "config.yaml"), config_yaml);
  fs::remove_all(ckroot / "step_3");

  // Without optimizer.safetensors (file and SHA256SUMS line removed, as when
  // a checkpoint is stripped for release): evaluate and generate work, resume
  // says which file is missing and why it is needed.
  const fs::path stripped = dir_ / "stripped";
  fs::copy(step4, stripped, fs::copy_options::recursive);
  fs::remove(stripped / "optimizer.safetensors");
  {
    std::istringstream in(slurp(stripped / "SHA256SUMS"));
    std::string line, kept;
    while (std::getline(in, line))
      if (line.find("optimizer.safetensors") == std::string::npos) kept += line + "\n";
    std::ofstream(stripped / "SHA256SUMS") << kept;
  }
  ASSERT_EQ(
      run_host({"evaluate", "--checkpoint", stripped.string(), "--out", (dir_ / "e.json").string()}, dir_ / "e.log"), 0)
      << slurp(dir_ / "e.log");
  EXPECT_EQ(json_file(dir_ / "e.json")["metrics"]["loss"].GetDouble(), final_val);
  EXPECT_EQ(run_host({"generate", "--checkpoint", stripped.string(), "--prompt", "a", "--max-new-tokens", "2"},
                     dir_ / "g.log"),
            0)
      << slurp(dir_ / "g.log");
  EXPECT_EQ(run_host({"run", cfg.string(), "--resume-from", stripped.string(), "--set", "training.max_steps=6"},
                     dir_ / "o.log"),
            1);
  EXPECT_NE(slurp(dir_ / "o.log")
                .find((stripped / "optimizer.safetensors").string() +
                      ": missing (resuming training needs "
                      "the optimizer state; evaluate and generate need only model.safetensors)"),
            std::string::npos)
      << slurp(dir_ / "o.log");

  // Weights that give a NaN or infinite loss: evaluate exits 1 naming the
  // checkpoint, and writes no metrics file.
  for (float fill : {std::nanf(""), INFINITY}) {
    fs::remove_all(dir_ / "poisoned");
    const fs::path bad = write_poisoned_copy(step4, dir_ / "poisoned", fill);
    fs::remove(dir_ / "bad.json");
    EXPECT_EQ(
        run_host({"evaluate", "--checkpoint", bad.string(), "--out", (dir_ / "bad.json").string()}, dir_ / "n.log"), 1)
        << slurp(dir_ / "n.log");
    EXPECT_NE(slurp(dir_ / "n.log").find("evaluate: " + bad.string() + " gives a "), std::string::npos)
        << slurp(dir_ / "n.log");
    EXPECT_FALSE(fs::exists(dir_ / "bad.json"));
  }

  // Half-written checkpoint folders from a killed process are removed at the
  // next start, with a log line; one of a live process is left alone.
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // a PID that no longer runs
  const fs::path dead = ckroot / (".tmp-step_8-" + std::to_string(child));
  const fs::path live = ckroot / (".tmp-step_9-" + std::to_string(::getpid()));
  for (const auto& d : {dead, live}) {
    fs::create_directories(d);
    std::ofstream(d / "model.safetensors") << "partial";
  }
  ASSERT_EQ(run_host({"run", cfg.string(), "--resume-from", "latest", "--set", "training.max_steps=5"}, dir_ / "t.log"),
            0)
      << slurp(dir_ / "t.log");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_NE(slurp(dir_ / "t.log").find("Removed " + dead.string() + ": a checkpoint left half-written"),
            std::string::npos)
      << slurp(dir_ / "t.log");
  EXPECT_EQ(slurp(dir_ / "t.log").find(live.string()), std::string::npos);
}

TEST_F(E2E, GenerateFlagsFitTheStrategy) {
  const fs::path cfg = write_config("flags", 2);
  ASSERT_EQ(run_host({"run", cfg.string(), "--set", "training.save_every=2"}, dir_ / "run.log"), 0)
      << slurp(dir_ / "run.log");
  const std::string ck = (run_dir("flags") / "checkpoints" / "latest").string();
  struct Bad {
    std::vector<std::string> flags;
    std::string message;
  };
  const Bad cases[] = {
      {{"--temperature", "0.8"},
       "--temperature is used only by --strategy sample (sampling temperature), not by strategy 'greedy'"},
      {{"--top-p", "0.9"}, "--top-p is used only by --strategy sample (nucleus sampling), not by strategy 'greedy'"},
      {{"--strategy", "beam", "--top-p", "0.9"},
       "--top-p is used only by --strategy sample (nucleus sampling), not by --strategy beam"},
      {{"--strategy", "beam", "--top-k", "3"}, "--top-k is used only by --strategy sample or contrastive"},
      {{"--strategy", "contrastive", "--temperature", "1.0"},
       "--temperature is used only by --strategy sample (sampling temperature), not by --strategy contrastive"},
      {{"--strategy", "sample", "--num-beams", "3"}, "--num-beams is used only by --strategy beam"},
      {{"--strategy", "greedy", "--penalty-alpha", "0.5"}, "--penalty-alpha is used only by --strategy contrastive"},
      {{"--strategy", "beam", "--num-beams", "1"}, "--strategy beam needs --num-beams >= 2, found 1"},
      {{"--strategy", "beam", "--num-beams", "2", "--frequency-penalty", "0.5"},
       "--frequency-penalty is used only by --strategy greedy or sample, not by --strategy beam"},
      {{"--strategy", "contrastive", "--logit-bias", "3=1"},
       "--logit-bias is used only by --strategy greedy or sample, not by --strategy contrastive"},
      {{"--logit-bias", "99999999=1"}, "--logit-bias: token id 99999999 is outside the vocabulary [0, "},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"generate", "--checkpoint", ck, "--prompt", "a", "--max-new-tokens", "2"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    EXPECT_EQ(run_host(args, dir_ / "bad.log"), 2) << c.message << "\n" << slurp(dir_ / "bad.log");
    EXPECT_NE(slurp(dir_ / "bad.log").find("[ERROR] generate: " + c.message), std::string::npos)
        << c.message << "\n"
        << slurp(dir_ / "bad.log");
  }
  // Values the flags' own parsing refuses: one line on stderr naming the flag, exit 2.
  const Bad unparsable[] = {
      {{"--presence-penalty", "2.5"}, "zcode-host generate: --presence-penalty: 2.5 is outside [-2, 2]"},
      {{"--frequency-penalty=-3"}, "zcode-host generate: --frequency-penalty: -3 is outside [-2, 2]"},
      {{"--frequency-penalty", "nan"}, "zcode-host generate: --frequency-penalty: nan is outside [-2, 2]"},
      {{"--presence-penalty", "lots"}, "'--presence-penalty' is invalid"},
      {{"--logit-bias", "7"}, "zcode-host generate: --logit-bias: '7' is not ID=BIAS with ID a token id"},
      {{"--logit-bias", "x=1"}, "zcode-host generate: --logit-bias: 'x=1' is not ID=BIAS with ID a token id"},
      {{"--logit-bias", "-1=1"}, "zcode-host generate: --logit-bias: '-1=1' is not ID=BIAS with ID a token id"},
      {{"--logit-bias", "7=high"}, "zcode-host generate: --logit-bias: '7=high': BIAS is not a number"},
      {{"--logit-bias", "7="}, "zcode-host generate: --logit-bias: '7=': BIAS is not a number"},
      {{"--logit-bias", "7=101"}, "zcode-host generate: --logit-bias: '7=101': BIAS 101 is outside [-100, 100]"},
      {{"--logit-bias", "7=1", "--logit-bias", "7=2"}, "zcode-host generate: --logit-bias: token id 7 is given twice"},
  };
  for (const auto& c : unparsable) {
    std::vector<std::string> args = {"generate", "--checkpoint", ck, "--prompt", "a", "--max-new-tokens", "2"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    EXPECT_EQ(run_host(args, dir_ / "bad.log"), 2) << c.message << "\n" << slurp(dir_ / "bad.log");
    const std::string log = slurp(dir_ / "bad.log");
    EXPECT_NE(log.find(c.message), std::string::npos) << c.message << "\n" << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  }
  // The flags each strategy uses are accepted.
  for (const std::vector<std::string>& ok :
       {std::vector<std::string>{"--strategy", "sample", "--temperature", "0.8", "--top-k", "5", "--top-p", "0.9"},
        {"--strategy", "contrastive", "--top-k", "3", "--penalty-alpha", "0.5"},
        {"--strategy", "beam", "--num-beams", "2", "--length-penalty", "1.2"},
        {"--strategy", "greedy", "--presence-penalty=-0.5", "--frequency-penalty", "2", "--logit-bias", "3=1.5",
         "--logit-bias", "4=-100"},
        {"--strategy", "sample", "--presence-penalty", "1", "--logit-bias", "0=0"}}) {
    std::vector<std::string> args = {"generate", "--checkpoint", ck, "--prompt", "a", "--max-new-tokens", "2"};
    args.insert(args.end(), ok.begin(), ok.end());
    EXPECT_EQ(run_host(args, dir_ / "ok.log"), 0) << ok[1] << "\n" << slurp(dir_ / "ok.log");
  }
  // --help shows the default of every generation option.
  ASSERT_EQ(run_host({"generate", "--help"}, dir_ / "help.log"), 0);
  const std::string help = slurp(dir_ / "help.log");
  for (const char* flag :
       {"strategy", "temperature", "top-k", "top-p", "num-beams", "length-penalty", "penalty-alpha", "max-new-tokens",
        "stop", "seed", "stream", "config", "presence-penalty", "frequency-penalty", "logit-bias"})
    EXPECT_NE(option_help(help, flag).find("default"), std::string::npos) << "--" << flag << " shows no default:\n"
                                                                          << help;
  EXPECT_NE(option_help(help, "temperature").find("else 1)"), std::string::npos) << help;
  EXPECT_NE(option_help(help, "max-new-tokens").find("else 64)"), std::string::npos) << help;
}

// Evaluation is dropless by default: the perplexity of the same tokens does
// not depend on evaluation.batch_size (with training's capacity, drops depend
// on which rows share a forward call; the last check shows the difference the
// default removes).
TEST_F(E2E, EvaluationDoesNotDependOnBatchSize) {
  const fs::path cfg = write_config("bsize", 12);
  ASSERT_EQ(run_host({"run", cfg.string(), "--set", "training.save_every=12"}, dir_ / "run.log"), 0)
      << slurp(dir_ / "run.log");
  const std::string ck = (run_dir("bsize") / "checkpoints" / "latest").string();
  std::set<double> tokens;
  auto ppl = [&](int bs, const std::string& eval_cf) {
    const fs::path out = dir_ / ("e" + std::to_string(bs) + ".json");
    std::vector<std::string> args = {"evaluate",
                                     "--checkpoint",
                                     ck,
                                     "--out",
                                     out.string(),
                                     "--set",
                                     "data.batch_size=8",
                                     "--set",
                                     "evaluation.batch_size=" + std::to_string(bs)};
    if (!eval_cf.empty()) args.insert(args.end(), {"--set", "model.eval_capacity_factor=" + eval_cf});
    EXPECT_EQ(run_host(args, dir_ / "e.log"), 0) << slurp(dir_ / "e.log");
    auto d = json_file(out);
    tokens.insert(d["metrics"]["tokens"].GetDouble());
    return d["metrics"]["perplexity"].GetDouble();
  };
  const double p1 = ppl(1, ""), p3 = ppl(3, ""), p8 = ppl(8, "");
  EXPECT_EQ(tokens.size(), 1u) << "the batch sizes saw different tokens";
  EXPECT_NEAR(p3, p1, 1e-6 * p1);
  EXPECT_NEAR(p8, p1, 1e-6 * p1);
  // With training's capacity factor (1.25) the numbers move with the batch.
  const double c1 = ppl(1, "1.25"), c8 = ppl(8, "1.25");
  EXPECT_GT(std::fabs(c1 - c8), 1e-5 * c8) << "no capacity drops in this run: the check above proves nothing";
}

// The samples callback: generating between steps leaves training bit for bit
// as it was, and the samples at the end are what `zcode-host generate` makes
// of the final checkpoint with the same prompt and strategy.
TEST_F(E2E, SamplesLeaveTrainingUnchangedAndMatchGenerate) {
  const fs::path plain = write_config("plain", 8);
  const fs::path with = write_config("withs", 8);
  std::ofstream(with, std::ios::app)
      << "callbacks: [{type: samples, every: 3, max_new_tokens: 8, prompts: [\"alpha beta\", \"the sky\"]}]\n";
  ASSERT_EQ(run_host({"run", plain.string()}, dir_ / "plain.log"), 0) << slurp(dir_ / "plain.log");
  ASSERT_EQ(run_host({"run", with.string()}, dir_ / "withs.log"), 0) << slurp(dir_ / "withs.log");
  EXPECT_EQ(losses("plain"), losses("withs"));
  EXPECT_TRUE(weights("plain") == weights("withs")) << "sampling changed the trained weights";

  std::vector<std::tuple<uint64_t, std::string, std::string>> samples;
  std::istringstream in(slurp(run_dir("withs") / "logs/samples.jsonl"));
  for (std::string line; std::getline(in, line);) {
    rapidjson::Document d;
    d.Parse(line.c_str());
    ASSERT_TRUE(d.IsObject()) << line;
    EXPECT_LE(d["tokens"].GetInt(), 8);
    EXPECT_STREQ(d["strategy"].GetString(), "greedy");
    samples.emplace_back(d["step"].GetUint64(), d["prompt"].GetString(), d["text"].GetString());
  }
  // Steps 3 and 6 (every 3) and 8 (the end), both prompts each time.
  ASSERT_EQ(samples.size(), 6u);
  const uint64_t steps[] = {3, 3, 6, 6, 8, 8};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(std::get<0>(samples[i]), steps[i]);
    EXPECT_EQ(std::get<1>(samples[i]), i % 2 ? "the sky" : "alpha beta");
  }
  EXPECT_NE(slurp(dir_ / "withs.log").find("samples: step 8: the sky|"), std::string::npos)
      << slurp(dir_ / "withs.log");
  for (size_t i = 4; i < 6; ++i) {
    const fs::path out = dir_ / ("gen" + std::to_string(i) + ".txt"), err = dir_ / "gen.err";
    ASSERT_EQ(run_split({"generate", "--checkpoint", (run_dir("withs") / "checkpoints/latest").string(), "--prompt",
                         std::get<1>(samples[i]), "--max-new-tokens", "8"},
                        out, err, dir_),
              0)
        << slurp(err);
    EXPECT_EQ(slurp(out), std::get<2>(samples[i]) + "\n") << std::get<1>(samples[i]);
  }
}

}  // namespace
