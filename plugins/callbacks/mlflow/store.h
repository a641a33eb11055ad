// Where the `mlflow` callback's records go: a local MLflow file store
// (file_store.cpp) or an MLflow tracking server's REST API (rest_store.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zcode::mlflow {

/// One metric point, as MLflow's Metric entity: key, value, timestamp (ms
/// since the Unix epoch), step.
struct Metric {
  std::string key;
  double value = 0;
  int64_t timestamp_ms = 0;
  int64_t step = 0;
};

/// A param or a tag (MLflow's Param and RunTag entities).
struct KeyValue {
  std::string key, value;
};

/// What identifies the run: start() creates it, or reopens `run_id` when
/// that is set (a resumed training run continues its MLflow run).
struct RunInfo {
  std::string experiment_name;
  std::string run_name;
  std::string run_id;  ///< empty: a new run
  int64_t start_time_ms = 0;
  int64_t resumed_step = 0;  ///< > 0: points of later steps written before are dropped (file store)
  std::string user;
};

/// The threading contract: every call comes from the training thread, in
/// order start, log*, end; none of them blocks on the network (the REST
/// store hands its requests to a thread of its own). Errors of a local file
/// store throw sdk::Error(ZC_ERR_IO) naming the file.
class Store {
 public:
  virtual ~Store() = default;
  /// Creates or reopens the run; returns its run id (the REST store: the id
  /// once the server has answered, else "").
  virtual std::string start(const RunInfo& info) = 0;
  virtual void log(std::vector<Metric> metrics, std::vector<KeyValue> params, std::vector<KeyValue> tags) = 0;
  /// Copies `file` into the run's artifacts (a missing file is skipped).
  virtual void artifact(const std::string& file) = 0;
  /// Ends the run: status "FINISHED", "FAILED" or "KILLED"; waits for what
  /// is still to be sent (the REST store: within its retry budget).
  virtual void end(const std::string& status, int64_t end_time_ms) = 0;
  /// The run id, once known.
  virtual std::string run_id() const = 0;
};

/// A file store rooted at `root` (an `mlruns` folder; created as MLflow
/// creates one: experiment 0 "Default" and .trash).
std::unique_ptr<Store> make_file_store(const std::string& root);

/// Options of the REST store.
struct RestOptions {
  std::string tracking_uri;     ///< http(s)://host[:port][/prefix]
  double flush_interval_s = 5;  ///< the sender's batching period
  double timeout_s = 10;        ///< per request, connect and read
  int retries = 3;              ///< attempts after the first, with backoff 0.5 s × 2^k
  std::string unsent_path;      ///< where requests go once the server is given up on
  /// Called once, from the sender thread, when the server is given up on.
  void (*warn)(void* ctx, const std::string& message) = nullptr;
  void* warn_ctx = nullptr;
};

std::unique_ptr<Store> make_rest_store(const RestOptions& options);

/// Milliseconds since the Unix epoch.
int64_t now_ms();

}  // namespace zcode::mlflow
