// The core logger: console (stdout/stderr by level) + optional file sink + extra sinks.
#include <zcode/core/log.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>

namespace zcode::log {
namespace {

struct State {
  std::mutex mu;
  Level console = Level::Info;
  bool console_enabled = true;
  bool quiet = false;
  bool data_on_stdout = false;  // every console line to stderr
  Format format = Format::Text;
  std::ofstream file;
  std::filesystem::path file_path;
  Level file_level = Level::Debug;
  std::map<int, Sink> sinks;
  int next_id = 1;
};

// Leaked on purpose: plugin worker threads may log during static destruction
// of the host (their instances are destroyed before, but a detached logging
// path must never touch a destroyed mutex).
State& state() {
  static State* s = new State();
  return *s;
}

}  // namespace

const char* level_name(Level level) {
  switch (level) {
    case Level::Trace: return "TRACE";
    case Level::Debug: return "DEBUG";
    case Level::Info: return "INFO";
    case Level::Warn: return "WARN";
    case Level::Error: return "ERROR";
  }
  return "INFO";
}

std::optional<Level> parse_level(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (s == "TRACE") return Level::Trace;
  if (s == "DEBUG") return Level::Debug;
  if (s == "INFO") return Level::Info;
  if (s == "WARNING" || s == "WARN") return Level::Warn;
  if (s == "ERROR") return Level::Error;
  return std::nullopt;
}

void set_console_level(Level level) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().console = level;
}

Level console_level() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().console;
}

void set_console_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().console_enabled = enabled;
}

void set_data_on_stdout(bool data) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().data_on_stdout = data;
}

void write_record(std::string_view record, bool shown_when_quiet) {
  std::string text;
  text.reserve(record.size() + 1);
  text.append(record).push_back('\n');
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.console_enabled || (s.quiet && !shown_when_quiet)) return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void set_console_quiet(bool quiet) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().quiet = quiet;
}

bool console_quiet() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().quiet;
}

void set_console_format(Format format) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().format = format;
}

Format console_format() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().format;
}

std::optional<Format> parse_format(std::string_view text) {
  if (text == "text") return Format::Text;
  if (text == "json") return Format::Json;
  return std::nullopt;
}

std::string format_json(Level level, std::string_view component, std::string_view message) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("level");
  w.String(level_name(level));
  if (!component.empty()) {
    w.Key("component");
    w.String(component.data(), static_cast<rapidjson::SizeType>(component.size()));
  }
  w.Key("message");
  w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

void open_file(const std::filesystem::path& path, Level level) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream f(path, std::ios::app);
  if (!f) throw std::runtime_error(path.string() + ": cannot open the log file for writing");
  std::lock_guard<std::mutex> lock(state().mu);
  state().file = std::move(f);
  state().file_path = path;
  state().file_level = level;
}

void close_file() {
  std::lock_guard<std::mutex> lock(state().mu);
  if (state().file.is_open()) state().file.close();
  state().file_path.clear();
}

std::string format(Level level, std::string_view component, std::string_view message) {
  std::string line;
  line.reserve(message.size() + component.size() + 12);
  line += '[';
  line += level_name(level);
  line += "] ";
  if (!component.empty()) {
    line += component;
    line += ": ";
  }
  line += message;
  return line;
}

void write(Level level, std::string_view component, std::string_view message) {
  const std::string line = format(level, component, message);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  // The file first: a console that blocks or drops (mpirun ending a job
  // stops reading the ranks' output) must not cost the run folder a line.
  if (s.file.is_open() && level >= s.file_level) {
    s.file << line << '\n';
    s.file.flush();
  }
  if (s.console_enabled && level >= s.console && (!s.quiet || level >= Level::Warn)) {
    std::FILE* out = level >= Level::Warn || s.data_on_stdout ? stderr : stdout;
    // One fwrite of the line and its newline: stdio locks per call, so two
    // calls could let another writer's text in between.
    std::string text = s.format == Format::Json ? format_json(level, component, message) : line;
    text.push_back('\n');
    std::fwrite(text.data(), 1, text.size(), out);
    std::fflush(out);
  }
  for (auto& [id, sink] : s.sinks) {
    try {
      sink(level, line);
    } catch (...) {
      // A failing test/embedder sink must not break logging for the others.
    }
  }
}

int add_sink(Sink sink) {
  std::lock_guard<std::mutex> lock(state().mu);
  int id = state().next_id++;
  state().sinks.emplace(id, std::move(sink));
  return id;
}

void remove_sink(int id) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().sinks.erase(id);
}

}  // namespace zcode::log
