// The `mlflow` callback's REST client against a local HTTP server started by
// the test (cpp-httplib): a stand-in for an MLflow tracking server (MLflow
// itself cannot be installed here: not in Debian), answering as MLflow 2.x's
// REST API documents. Each request's method, path and JSON body is checked
// against that API and against what the run logged to metrics.jsonl; a
// server that answers 500 and one that hangs must cost one warning and a
// local file of unsent requests, never the run.
#include <gtest/gtest.h>
#include <httplib.h>

#include <rapidjson/document.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "host_process.h"

namespace {

namespace fs = std::filesystem;
using zcode::test::slurp;

const fs::path kHost = ZCODE_HOST_EXE;
const fs::path kSrc = ZCODE_SOURCE_DIR;

rapidjson::Document parse(const std::string& s) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag>(s.c_str());
  return d;
}

struct Request {
  std::string method, path, query_name, body;
};

// The stand-in server. mode: "ok", "500" (every request), "hang" (every
// request waits 4 s before answering).
class FakeTracking {
 public:
  explicit FakeTracking(std::string mode) : mode_(std::move(mode)) {
    auto record = [this](const httplib::Request& q, httplib::Response& r) -> bool {
      {
        std::lock_guard<std::mutex> l(mu_);
        requests_.push_back({q.method, q.path, q.get_param_value("experiment_name"), q.body});
      }
      if (mode_ == "hang") std::this_thread::sleep_for(std::chrono::seconds(4));
      if (mode_ != "ok") {
        r.status = 500;
        r.set_content(R"({"error_code":"INTERNAL_ERROR","message":"test"})", "application/json");
        return false;
      }
      return true;
    };
    const std::string api = "/api/2.0/mlflow/";
    srv_.Get(api + "experiments/get-by-name", [record](const httplib::Request& q, httplib::Response& r) {
      if (!record(q, r)) return;
      r.status = 404;
      r.set_content(R"({"error_code":"RESOURCE_DOES_NOT_EXIST","message":"no such experiment"})", "application/json");
    });
    srv_.Post(api + "experiments/create", [record](const httplib::Request& q, httplib::Response& r) {
      if (record(q, r)) r.set_content(R"({"experiment_id":"17"})", "application/json");
    });
    srv_.Post(api + "runs/create", [record](const httplib::Request& q, httplib::Response& r) {
      if (record(q, r))
        r.set_content(R"({"run":{"info":{"run_id":"0123456789abcdef0123456789abcdef","experiment_id":"17",)"
                      R"("status":"RUNNING","lifecycle_stage":"active"},"data":{}}})",
                      "application/json");
    });
    srv_.Post(api + "runs/log-batch", [record](const httplib::Request& q, httplib::Response& r) {
      if (record(q, r)) r.set_content("{}", "application/json");
    });
    srv_.Post(api + "runs/update", [record](const httplib::Request& q, httplib::Response& r) {
      if (record(q, r)) r.set_content(R"({"run_info":{}})", "application/json");
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
  }
  ~FakeTracking() {
    srv_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<Request> requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  std::string mode_;
  httplib::Server srv_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Request> requests_;
};

class MlflowRest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kHost)) GTEST_SKIP() << "zcode-host is not built";
    if (!fs::exists(kSrc / "assets/hf/gpt2/vocab.json")) GTEST_SKIP() << "assets/hf/gpt2 is missing";
    dir_ = fs::temp_directory_path() / ("zcode_mlflow_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    zcode::test::write_tiny_corpus(dir_);  // 60 short documents, every 6th to val
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }
  // Trains 8 steps with logging.mlflow against http://127.0.0.1:port; returns
  // the exit code. timeout_s: the callback's per-request timeout. 1 s only for
  // the hanging server: elsewhere a loopback answer slower than that (a loaded
  // CI machine) would be retried and recorded twice.
  int train(int port, int timeout_s = 10) {
    const fs::path p = dir_ / "mlf.yaml";
    std::ofstream c(p);
    c << "experiment_name: mlf\nseed: 7\nhardware: {accelerator: cpu, num_threads: 1}\n"
      << "model: {type: GLM5pt2, variant: nano, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1, head_dim: 16,\n"
      << "        moe_experts: 4, moe_top_k: 2, moe_ffn_hidden: 32, ffn_hidden: 64, max_seq_len: 32}\n"
      << "data: {train_path: " << (dir_ / "train.jsonl").string() << ", val_path: " << (dir_ / "val.jsonl").string()
      << ", tokenizer: " << (kSrc / "assets/hf/gpt2").string()
      << ", batch_size: 2, num_workers: 0, cache_dir: " << (dir_ / "cache").string() << "}\n"
      << "optimizer: {name: AdamW, lr: 0.003}\n"
      << "training: {max_steps: 8, eval_every: 4, log_every: 1}\n"
      << "logging: {output_dir: " << (dir_ / "outputs").string()
      << ", mlflow: true, mlflow_tracking_uri: 'http://127.0.0.1:" << port << "'}\n"
      << "callbacks: [{type: mlflow, flush_interval_s: 0.2, timeout_s: " << timeout_s << ", retries: 1}]\n";
    c.close();
    return zcode::test::wait_for(zcode::test::start_program(kHost, {"run", p.string()}, dir_ / "run.log"));
  }
  fs::path run_dir() const { return dir_ / "outputs/mlf"; }
  fs::path dir_;
};

TEST_F(MlflowRest, EveryRequestIsTheDocumentedOneWithTheLoggedValues) {
  FakeTracking server("ok");
  ASSERT_EQ(train(server.port()), 0) << slurp(dir_ / "run.log");
  const auto reqs = server.requests();
  ASSERT_GE(reqs.size(), 5u);
  const std::string api = "/api/2.0/mlflow/";
  // The experiment by name, created when missing, then the run.
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].path, api + "experiments/get-by-name");
  EXPECT_EQ(reqs[0].query_name, "mlf");
  EXPECT_EQ(reqs[1].path, api + "experiments/create");
  EXPECT_EQ(parse(reqs[1].body)["name"].GetString(), std::string("mlf"));
  ASSERT_EQ(reqs[2].path, api + "runs/create");
  auto create = parse(reqs[2].body);
  EXPECT_STREQ(create["experiment_id"].GetString(), "17");
  EXPECT_STREQ(create["run_name"].GetString(), "mlf");
  ASSERT_TRUE(create["start_time"].IsInt64());
  const int64_t start = create["start_time"].GetInt64();
  bool run_name_tag = false;
  for (const auto& t : create["tags"].GetArray())
    run_name_tag |=
        std::string(t["key"].GetString()) == "mlflow.runName" && std::string(t["value"].GetString()) == "mlf";
  EXPECT_TRUE(run_name_tag);
  // The end: the run updated to FINISHED.
  ASSERT_EQ(reqs.back().path, api + "runs/update");
  auto upd = parse(reqs.back().body);
  EXPECT_STREQ(upd["run_id"].GetString(), "0123456789abcdef0123456789abcdef");
  EXPECT_STREQ(upd["status"].GetString(), "FINISHED");
  EXPECT_GE(upd["end_time"].GetInt64(), start);

  // Everything between: log-batch requests within the documented limits.
  std::map<std::pair<std::string, int64_t>, double> metrics;
  std::map<std::string, std::string> params;
  std::set<std::string> tags;
  for (size_t i = 3; i + 1 < reqs.size(); ++i) {
    ASSERT_EQ(reqs[i].method, "POST");
    ASSERT_EQ(reqs[i].path, api + "runs/log-batch");
    auto b = parse(reqs[i].body);
    ASSERT_TRUE(b.IsObject()) << reqs[i].body;
    EXPECT_STREQ(b["run_id"].GetString(), "0123456789abcdef0123456789abcdef");
    EXPECT_LE(b["metrics"].Size(), 1000u);
    EXPECT_LE(b["params"].Size(), 100u);
    EXPECT_LE(b["tags"].Size(), 100u);
    EXPECT_LE(b["metrics"].Size() + b["params"].Size() + b["tags"].Size(), 1000u);
    for (const auto& m : b["metrics"].GetArray()) {
      ASSERT_TRUE(m["timestamp"].IsInt64() && m["step"].IsInt64() && m["value"].IsNumber()) << reqs[i].body;
      EXPECT_GE(m["timestamp"].GetInt64(), start);
      const auto key = std::make_pair(std::string(m["key"].GetString()), m["step"].GetInt64());
      EXPECT_TRUE(metrics.emplace(key, m["value"].GetDouble()).second) << "twice: " << key.first << "@" << key.second;
    }
    for (const auto& p : b["params"].GetArray())
      EXPECT_TRUE(params.emplace(p["key"].GetString(), p["value"].GetString()).second) << p["key"].GetString();
    for (const auto& t : b["tags"].GetArray()) tags.insert(t["key"].GetString());
  }
  EXPECT_EQ(params["optimizer.lr"], "0.003");
  EXPECT_EQ(params["model.d_model"], "32");
  EXPECT_EQ(params["training.max_steps"], "8");
  EXPECT_EQ(params["experiment_name"], "mlf");
  EXPECT_TRUE(tags.count("mlflow.source.name"));

  // Each metrics.jsonl value, once, at its step; nothing else.
  size_t expected = 0;
  std::istringstream in(slurp(run_dir() / "logs/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    auto r = parse(line);
    const std::string prefix = std::string(r["event"].GetString()) == "step" ? "train_" : "eval_";
    for (const auto& m : r.GetObject()) {
      const std::string k = m.name.GetString();
      if (k == "event" || k == "step" || k == "max_steps" || !m.value.IsNumber()) continue;
      ++expected;
      auto it = metrics.find({prefix + k, r["step"].GetInt64()});
      ASSERT_NE(it, metrics.end()) << prefix + k << " at step " << r["step"].GetInt64();
      EXPECT_EQ(it->second, m.value.GetDouble()) << prefix + k;
    }
  }
  EXPECT_GT(expected, 100u);
  EXPECT_EQ(metrics.size(), expected);
  EXPECT_FALSE(fs::exists(run_dir() / "logs/mlflow_unsent.jsonl"));
}

// One warning, the requests kept locally, the run unharmed.
void expect_given_up(const fs::path& dir, const fs::path& run_dir) {
  const std::string log = slurp(dir / "run.log");
  size_t warnings = 0;
  for (size_t at = log.find("MLflow tracking server"); at != std::string::npos;
       at = log.find("MLflow tracking server", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1u) << log;
  EXPECT_NE(log.find("Training complete"), std::string::npos) << log;
  std::istringstream in(slurp(run_dir / "logs/mlflow_unsent.jsonl"));
  std::vector<std::string> paths;
  for (std::string line; std::getline(in, line);) {
    auto d = parse(line);
    ASSERT_TRUE(d.IsObject()) << line;
    paths.push_back(d["path"].GetString());
    ASSERT_TRUE(d.HasMember("body"));
  }
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.front(), "/api/2.0/mlflow/experiments/get-by-name?experiment_name=mlf");
  EXPECT_EQ(paths.back(), "/api/2.0/mlflow/runs/update");
  EXPECT_NE(std::find(paths.begin(), paths.end(), "/api/2.0/mlflow/runs/log-batch"), paths.end());
}

TEST_F(MlflowRest, AServerAnswering500CostsOneWarningAndALocalFile) {
  FakeTracking server("500");
  ASSERT_EQ(train(server.port()), 0) << slurp(dir_ / "run.log");
  expect_given_up(dir_, run_dir());
  // The first request was tried 1 + retries (1) times, and nothing after it.
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST_F(MlflowRest, AServerThatHangsNeitherBlocksNorFailsTheRun) {
  FakeTracking server("hang");
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(train(server.port(), 1), 0) << slurp(dir_ / "run.log");
  // Two 1-second timeouts and a 0.5 s backoff, then offline: the run is not
  // held for the server's 4 s answers (a liveness bound, not a timing claim).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  expect_given_up(dir_, run_dir());
}

}  // namespace
