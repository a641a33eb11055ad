// The core logger: format, levels, file sink, thread safety.
#include <zcode/core/log.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace {
namespace log = zcode::log;

TEST(Log, FormatLikeTheGuide) {
  EXPECT_EQ(log::format(log::Level::Info, "", "Step 0/500 | loss: 10.23"), "[INFO] Step 0/500 | loss: 10.23");
  EXPECT_EQ(log::format(log::Level::Warn, "jsonl", "x"), "[WARN] jsonl: x");
  EXPECT_EQ(log::format(log::Level::Error, "", ""), "[ERROR] ");
}

TEST(Log, ParseLevel) {
  EXPECT_EQ(log::parse_level("INFO"), log::Level::Info);
  EXPECT_EQ(log::parse_level("debug"), log::Level::Debug);
  EXPECT_EQ(log::parse_level("Warning"), log::Level::Warn);
  EXPECT_EQ(log::parse_level("WARN"), log::Level::Warn);
  EXPECT_EQ(log::parse_level("trace"), log::Level::Trace);
  EXPECT_EQ(log::parse_level("ERROR"), log::Level::Error);
  EXPECT_FALSE(log::parse_level("verbose").has_value());
  EXPECT_FALSE(log::parse_level("").has_value());
}

TEST(Log, FileSinkKeepsDebugConsoleLevelFiltersConsoleOnly) {
  auto dir = std::filesystem::temp_directory_path() / ("zcode_log_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto file = dir / "logs" / "console.log";
  log::open_file(file);
  log::set_console_level(log::Level::Error);
  log::trace("t");
  log::debug("d");
  log::info("i");
  log::write(log::Level::Warn, "model", "w");
  log::close_file();
  log::set_console_level(log::Level::Info);
  std::ifstream f(file);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), "[DEBUG] d\n[INFO] i\n[WARN] model: w\n");
  std::filesystem::remove_all(dir);
}

// Issue 17: INFO to stdout, WARN/ERROR to stderr (so `run ... > log` keeps the
// training log), --quiet and --log-format json; the file sink stays text.
TEST(Log, InfoToStdoutWarningsToStderrQuietAndJson) {
  auto dir = std::filesystem::temp_directory_path() / ("zcode_log_streams_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  log::open_file(dir / "console.log");
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  log::info("Step 1/2 | loss: 3.5");
  log::write(log::Level::Warn, "jsonl", "skipped 1 record");
  log::set_console_quiet(true);
  log::info("hidden");
  log::error("shown");
  log::set_console_quiet(false);
  log::set_console_format(log::Format::Json);
  log::write(log::Level::Info, "bpe", "say \"hi\"\nback\\slash");
  log::error("bad");
  log::set_console_format(log::Format::Text);
  const std::string out = testing::internal::GetCapturedStdout();
  const std::string err = testing::internal::GetCapturedStderr();
  log::close_file();
  EXPECT_EQ(out,
            "[INFO] Step 1/2 | loss: 3.5\n"
            "{\"level\":\"INFO\",\"component\":\"bpe\",\"message\":\"say \\\"hi\\\"\\nback\\\\slash\"}\n");
  EXPECT_EQ(err, "[WARN] jsonl: skipped 1 record\n[ERROR] shown\n{\"level\":\"ERROR\",\"message\":\"bad\"}\n");
  std::ifstream f(dir / "console.log");
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(),
            "[INFO] Step 1/2 | loss: 3.5\n[WARN] jsonl: skipped 1 record\n[INFO] hidden\n[ERROR] shown\n"
            "[INFO] bpe: say \"hi\"\nback\\slash\n[ERROR] bad\n");
  EXPECT_EQ(log::parse_format("json"), log::Format::Json);
  EXPECT_EQ(log::parse_format("text"), log::Format::Text);
  EXPECT_FALSE(log::parse_format("yaml").has_value());
  std::filesystem::remove_all(dir);
}

// Records (--log-format json events, a command's result) go to stdout whole,
// obey --quiet unless they are a result and a disabled console; a command
// whose stdout is data sends every line, INFO too, to stderr. Plugins reach
// records through zc_host_services.log with component "zcode.record".
TEST(Log, RecordsAndDataOnStdout) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  log::write_record("{\"event\":\"step\",\"step\":1}");
  log::set_console_quiet(true);
  log::write_record("{\"event\":\"step\",\"step\":2}");  // hidden by --quiet
  log::write_record("{\"event\":\"evaluate\"}", true);   // a result: shown
  log::set_console_quiet(false);
  log::set_console_enabled(false);
  log::write_record("{\"event\":\"step\",\"step\":3}");  // console disabled
  log::set_console_enabled(true);
  log::set_data_on_stdout(true);
  log::info("glm52 ready");
  log::set_data_on_stdout(false);
  const std::string out = testing::internal::GetCapturedStdout();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "{\"event\":\"step\",\"step\":1}\n{\"event\":\"evaluate\"}\n");
  EXPECT_EQ(err, "[INFO] glm52 ready\n");
  EXPECT_EQ(std::string(log::kRecordComponent), "zcode.record");
}

TEST(Log, OpenFileInAMissingPlaceThrowsNamingIt) {
  try {
    log::open_file("/proc/zcode-no-such-dir/console.log");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "/proc/zcode-no-such-dir/console.log: cannot open the log file for writing");
  }
}

TEST(Log, ConcurrentWritersProduceWholeLines) {
  std::vector<std::string> lines;
  int id = log::add_sink([&](log::Level, const std::string& l) { lines.push_back(l); });  // called under the lock
  log::set_console_enabled(false);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([t] {
      for (int i = 0; i < 200; ++i)
        log::write(log::Level::Info, std::string("w").append(std::to_string(t)),
                   std::string("line ").append(std::to_string(i)));
    });
  for (auto& t : ts) t.join();
  log::set_console_enabled(true);
  log::remove_sink(id);
  ASSERT_EQ(lines.size(), 800u);
  std::set<std::string> uniq(lines.begin(), lines.end());
  EXPECT_EQ(uniq.size(), 800u);
  EXPECT_TRUE(uniq.count("[INFO] w3: line 199"));
}

}  // namespace
