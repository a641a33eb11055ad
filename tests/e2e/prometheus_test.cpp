// The `prometheus` callback against the real Prometheus server (Debian's
// `prometheus` 2.42, started and stopped here on loopback): a short training
// with `logging.prometheus`, scraped every second; the values the server's
// HTTP API returns must be the ones the run wrote to logs/metrics.jsonl, and
// `promtool check metrics` must find nothing to say about /metrics.
#include <gtest/gtest.h>
#include <httplib.h>

#include <rapidjson/document.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "host_process.h"

namespace {

namespace fs = std::filesystem;
using zcode::test::Proc;
using zcode::test::slurp;

const fs::path kHost = ZCODE_HOST_EXE;
const fs::path kSrc = ZCODE_SOURCE_DIR;
const fs::path kPrometheus = "/usr/bin/prometheus";
const fs::path kPromtool = "/usr/bin/promtool";

// A TCP port on 127.0.0.1 that was free a moment ago (bound to 0, read back,
// closed). `listening` keeps it bound and listening (a port in use).
int free_port(int* listening = nullptr) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  if (listening) {
    ::listen(fd, 1);
    *listening = fd;
  } else {
    ::close(fd);
  }
  return ntohs(a.sin_port);
}

rapidjson::Document parse(const std::string& s) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag>(s.c_str());
  return d;
}

class PrometheusSink : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const fs::path& p : {kPrometheus, kPromtool})
      if (!fs::exists(p)) GTEST_SKIP() << p << " is missing: scripts/install-deps.sh installs Debian's prometheus";
    if (!fs::exists(kHost)) GTEST_SKIP() << "zcode-host is not built";
    if (!fs::exists(kSrc / "assets/hf/gpt2/vocab.json")) GTEST_SKIP() << "assets/hf/gpt2 is missing";
    dir_ = fs::temp_directory_path() / ("zcode_prom_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    zcode::test::write_tiny_corpus(dir_);  // 60 short documents, every 6th to val
  }
  void TearDown() override {
    if (server_.pid > 0) {
      ::kill(server_.pid, SIGTERM);
      zcode::test::wait_for(server_);
    }
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  fs::path write_config(const std::string& name, int max_steps, const std::string& prometheus) {
    const fs::path p = dir_ / (name + ".yaml");
    std::ofstream c(p);
    c << "experiment_name: " << name << "\nseed: 7\n"
      << "hardware: {accelerator: cpu, num_threads: 1}\n"
      << "model: {type: GLM5pt2, variant: nano, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1, head_dim: 16,\n"
      << "        moe_experts: 4, moe_top_k: 2, moe_ffn_hidden: 32, ffn_hidden: 64, max_seq_len: 32}\n"
      << "data: {train_path: " << (dir_ / "train.jsonl").string() << ", val_path: " << (dir_ / "val.jsonl").string()
      << ", tokenizer: " << (kSrc / "assets/hf/gpt2").string()
      << ", batch_size: 2, num_workers: 0, cache_dir: " << (dir_ / "cache").string() << "}\n"
      << "optimizer: {name: AdamW, lr: 0.003}\n"
      << "training: {max_steps: " << max_steps << ", eval_every: 6, log_every: 1}\n"
      << "logging: {output_dir: " << (dir_ / "outputs").string() << ", prometheus: " << prometheus << "}\n";
    return p;
  }

  // Starts Prometheus scraping 127.0.0.1:`target` every second; waits for /-/ready.
  void start_server(int target) {
    api_port_ = free_port();
    std::ofstream(dir_ / "prometheus.yml") << "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
                                           << "scrape_configs:\n  - job_name: zcode\n    static_configs:\n"
                                           << "      - targets: ['127.0.0.1:" << target << "']\n";
    server_ = zcode::test::start_program(
        kPrometheus,
        {"--config.file=" + (dir_ / "prometheus.yml").string(), "--storage.tsdb.path=" + (dir_ / "tsdb").string(),
         "--web.listen-address=127.0.0.1:" + std::to_string(api_port_)},
        dir_ / "prometheus.log");
    httplib::Client api("127.0.0.1", api_port_);
    for (int i = 0; i < 300; ++i) {
      if (auto r = api.Get("/-/ready"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "prometheus did not get ready in 30 s; its log:\n" << slurp(dir_ / "prometheus.log");
  }

  // The instant vector of `query` from the server's HTTP API: labels -> value.
  std::map<std::string, double> query(const std::string& q, const std::string& label = "") {
    httplib::Client api("127.0.0.1", api_port_);
    auto r = api.Get("/api/v1/query", httplib::Params{{"query", q}}, httplib::Headers{});
    std::map<std::string, double> out;
    if (!r || r->status != 200) return out;
    auto d = parse(r->body);
    if (!d.IsObject() || std::string(d["status"].GetString()) != "success") return out;
    for (const auto& s : d["data"]["result"].GetArray()) {
      const auto& m = s["metric"];
      std::string key = label.empty() ? "" : m[label.c_str()].GetString();
      out[key] = std::stod(s["value"][1].GetString());
    }
    return out;
  }

  fs::path dir_;
  Proc server_;
  int api_port_ = 0;
};

// The exposition writes 16 significant digits (prometheus-cpp), one short of a
// double's round trip: values agree to the last bit or two.
void expect_same(double from_prometheus, double logged, const std::string& what) {
  EXPECT_NEAR(from_prometheus, logged, 4e-15 * std::fabs(logged) + 1e-300) << what;
}

TEST_F(PrometheusSink, TheServerScrapesWhatTheRunLogged) {
  const int target = free_port();
  start_server(target);
  if (HasFatalFailure()) return;
  const int kSteps = 12;
  Proc run = zcode::test::start_program(
      kHost, {"run", write_config("prom", kSteps, "{port: " + std::to_string(target) + ", linger_s: 20}").string()},
      dir_ / "run.log");

  // Until the server has scraped the last step and the evaluation after it
  // (the endpoint stays up 20 s after the run). The step gauge is set when
  // step 12 ends, the evaluation's ~7 ms later (~90 ms under asan): a scrape
  // between the two would hold evaluations = 2.
  bool done = false;
  for (int i = 0; i < 1200 && !done; ++i) {
    auto step = query("zcode_step"), evals = query("zcode_evaluations_total");
    done = step.count("") && step[""] == kSteps && evals.count("") && evals[""] == 3;
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(done) << "zcode_step never reached " << kSteps << " with 3 evaluations; run log:\n"
                    << slurp(dir_ / "run.log");

  // The endpoint itself: the text format Prometheus's own linter accepts.
  httplib::Client ep("127.0.0.1", target);
  auto page = ep.Get("/metrics");
  ASSERT_TRUE(page && page->status == 200);
  std::ofstream(dir_ / "metrics.txt") << page->body;
  const std::string check = kPromtool.string() + " check metrics < " + (dir_ / "metrics.txt").string() + " > " +
                            (dir_ / "promtool.txt").string() + " 2>&1";
  EXPECT_EQ(std::system(check.c_str()), 0) << slurp(dir_ / "promtool.txt");
  EXPECT_EQ(slurp(dir_ / "promtool.txt"), "");

  // Every zcode_* name the shipped Grafana dashboard queries is served.
  {
    const std::string dash = slurp(kSrc / "examples/grafana/zcode.json");
    ASSERT_FALSE(dash.empty());
    size_t names = 0;
    for (size_t at = dash.find("zcode_"); at != std::string::npos; at = dash.find("zcode_", at + 1)) {
      if (at > 0 &&
          (std::isalnum(static_cast<unsigned char>(dash[at - 1])) || dash[at - 1] == '_' || dash[at - 1] == '-'))
        continue;  // inside another word ("zcode-training" is the uid)
      size_t end = at;
      while (end < dash.size() && (std::isalnum(static_cast<unsigned char>(dash[end])) || dash[end] == '_')) ++end;
      const std::string name = dash.substr(at, end - at);
      ++names;
      EXPECT_NE(page->body.find("\n" + name + "{"), std::string::npos) << "the dashboard queries " << name;
    }
    EXPECT_GE(names, 10u);
  }

  // Series labels: the job and the run's.
  {
    httplib::Client api("127.0.0.1", api_port_);
    auto r = api.Get("/api/v1/query", httplib::Params{{"query", "zcode_train_loss"}}, httplib::Headers{});
    ASSERT_TRUE(r && r->status == 200);
    auto d = parse(r->body);
    ASSERT_EQ(d["data"]["result"].Size(), 1u);
    const auto& m = d["data"]["result"][0]["metric"];
    EXPECT_STREQ(m["job"].GetString(), "zcode");
    EXPECT_STREQ(m["experiment"].GetString(), "prom");
    EXPECT_STREQ(m["rank"].GetString(), "0");
    EXPECT_EQ(std::string(m["instance"].GetString()), "127.0.0.1:" + std::to_string(target));
  }

  // Everything Prometheus holds now against the run's own records.
  const auto loss = query("zcode_train_loss"), lr = query("zcode_train_lr"), gn = query("zcode_train_grad_norm"),
             tps = query("zcode_train_tokens_per_second"), st = query("zcode_train_step_time_seconds"),
             steps = query("zcode_train_steps_total"), tokens = query("zcode_train_tokens_total"),
             load = query("zcode_train_moe_load", "expert"), dropped = query("zcode_train_moe_dropped_fraction"),
             vloss = query("zcode_eval_loss{split=\"val\"}"), bpb = query("zcode_eval_bpb"),
             evals = query("zcode_evaluations_total"), rss = query("zcode_resident_memory_bytes");

  // The endpoint lingers for a last scrape, but not past a stop request.
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(run.pid, SIGTERM);
  EXPECT_EQ(zcode::test::wait_for(run), 0) << slurp(dir_ / "run.log");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15)) << "the linger ignored SIGTERM";
  std::vector<rapidjson::Document> step_records, eval_records;
  std::istringstream in(slurp(dir_ / "outputs/prom/logs/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    auto d = parse(line);
    ASSERT_TRUE(d.IsObject()) << line;
    (std::string(d["event"].GetString()) == "step" ? step_records : eval_records).push_back(std::move(d));
  }
  ASSERT_EQ(step_records.size(), static_cast<size_t>(kSteps));  // log_every 1
  ASSERT_EQ(eval_records.size(), 3u);                           // steps 0, 6, 12
  const auto& last = step_records.back();
  ASSERT_EQ(last["step"].GetInt(), kSteps);
  expect_same(loss.at(""), last["loss"].GetDouble(), "loss");
  expect_same(lr.at(""), last["lr"].GetDouble(), "lr");
  expect_same(gn.at(""), last["grad_norm"].GetDouble(), "grad_norm");
  expect_same(tps.at(""), last["tokens_per_s"].GetDouble(), "tokens_per_s");
  expect_same(st.at(""), last["step_time_ms"].GetDouble() / 1000, "step_time_ms");
  expect_same(dropped.at(""), last["moe_dropped_fraction"].GetDouble(), "moe_dropped_fraction");
  ASSERT_EQ(load.size(), 4u);
  for (int e = 0; e < 4; ++e)
    expect_same(load.at(std::to_string(e)), last[("moe_load_" + std::to_string(e)).c_str()].GetDouble(),
                "moe_load_" + std::to_string(e));
  double token_sum = 0;
  for (const auto& r : step_records) token_sum += r["tokens"].GetDouble();
  EXPECT_EQ(steps.at(""), kSteps);
  EXPECT_EQ(tokens.at(""), token_sum);
  EXPECT_EQ(evals.at(""), 3);
  expect_same(vloss.at(""), eval_records.back()["loss"].GetDouble(), "val loss");
  expect_same(bpb.at(""), eval_records.back()["bits_per_byte"].GetDouble(), "bits_per_byte");
  EXPECT_GT(rss.at(""), 10e6);
  EXPECT_LT(rss.at(""), 4e9);
}

TEST_F(PrometheusSink, APortInUseIsOneClearErrorBeforeTraining) {
  int busy_fd = -1;
  const int busy = free_port(&busy_fd);
  ASSERT_GT(busy, 0);
  const int code = zcode::test::wait_for(zcode::test::start_program(
      kHost, {"run", write_config("busy", 4, "{port: " + std::to_string(busy) + "}").string()}, dir_ / "run.log"));
  ::close(busy_fd);
  const std::string log = slurp(dir_ / "run.log");
  EXPECT_NE(code, 0);
  EXPECT_NE(log.find("callbacks.prometheus: cannot serve /metrics on 127.0.0.1:" + std::to_string(busy)),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("Step 1/"), std::string::npos) << "trained although the endpoint failed:\n" << log;
}

}  // namespace
