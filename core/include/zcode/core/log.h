// zcode/core/log.h: the host's one logger.
//
// Lines look like the guide's: `[INFO] Step 0/500 | loss: 10.23`, and a line
// from a plugin names its component: `[WARN] jsonl: skipped 3 bad records`.
// Two sinks: the console (filtered by logging.console_log_level; INFO and
// below on stdout, WARN and ERROR on stderr, so `zcode-host run ... > log`
// captures the training log and the problems still reach the terminal) and,
// once a run folder exists, `<run>/logs/console.log` (everything at DEBUG and
// above, always as text, whatever --quiet and --log-format say). All functions are thread-safe: plugins log from worker
// threads through zc_host_services.log.
#pragma once

#include <zcode/abi.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace zcode::log {

/// Severity, in the ABI's order (zc_log_level values).
enum class Level : uint32_t {
  Trace = ZC_LOG_TRACE,
  Debug = ZC_LOG_DEBUG,
  Info = ZC_LOG_INFO,
  Warn = ZC_LOG_WARN,
  Error = ZC_LOG_ERROR
};

/// "TRACE", "DEBUG", "INFO", "WARN", "ERROR".
const char* level_name(Level level);

/// Parses a console_log_level value: TRACE, DEBUG, INFO, WARNING (alias WARN)
/// or ERROR, case-insensitively. std::nullopt for anything else.
std::optional<Level> parse_level(std::string_view text);

/// Lines below `level` are not printed on the console (default INFO).
void set_console_level(Level level);
Level console_level();

/// Opens (appending, creating parent folders) the file sink, e.g.
/// `<run>/logs/console.log`. Lines at `level` and above are written and
/// flushed line by line. Throws std::runtime_error naming the path when the
/// file cannot be opened. Replaces a previously opened file.
void open_file(const std::filesystem::path& path, Level level = Level::Debug);
/// Closes the file sink (no-op when none is open).
void close_file();

/// Writes one line to every sink whose level admits it. `component` is ""
/// for the host itself, or a plugin/stage name. Newlines inside `message`
/// are kept (each sink receives the text as given, with one trailing '\n').
void write(Level level, std::string_view component, std::string_view message);

inline void trace(std::string_view m) { write(Level::Trace, {}, m); }
inline void debug(std::string_view m) { write(Level::Debug, {}, m); }
inline void info(std::string_view m) { write(Level::Info, {}, m); }
inline void warn(std::string_view m) { write(Level::Warn, {}, m); }
inline void error(std::string_view m) { write(Level::Error, {}, m); }

/// Formats a line exactly as the sinks print it (without the newline):
/// `[INFO] message` or `[INFO] component: message`.
std::string format(Level level, std::string_view component, std::string_view message);

/// An extra sink receiving every line (all levels, formatted, no newline);
/// used by tests and by embedders. Returns an id for remove_sink.
using Sink = std::function<void(Level level, const std::string& line)>;
int add_sink(Sink sink);
void remove_sink(int id);

/// When false, the console sink prints nothing (tests, `--quiet` tools).
void set_console_enabled(bool enabled);
/// For commands whose stdout is their data (`generate`, `tokenize`,
/// `plugins`): when true, every console line goes to stderr, so
/// `zcode-host generate ... > out.txt` holds only the generated text.
void set_data_on_stdout(bool data);
/// Writes `record` (one JSON object, no newline) and its newline on stdout in
/// one write, under the logger's lock so it never interleaves with a line.
/// Not written when the console is disabled; hidden by --quiet unless
/// `shown_when_quiet` (a command's result, such as evaluate's metrics, is
/// not a log line). Neither the file sink nor the extra sinks receive it.
/// Plugins reach it through zc_host_services.log with component
/// kRecordComponent (the console callback's --log-format json events).
void write_record(std::string_view record, bool shown_when_quiet = false);
/// The component name that makes a zc_host_services.log message a record
/// (write_record) instead of a line.
inline constexpr std::string_view kRecordComponent = "zcode.record";

/// `--quiet`: the console shows only WARN and ERROR, whatever the level set
/// by set_console_level (the file sink is unchanged).
void set_console_quiet(bool quiet);
bool console_quiet();

/// Console line format. Text: `[INFO] component: message`. Json (`--log-format
/// json`): one JSON object a line, `{"level":"INFO","component":"jsonl",
/// "message":"..."}` ("component" omitted for the host's own lines), written
/// with RapidJSON's Writer; same streams as text.
enum class Format { Text, Json };
void set_console_format(Format format);
Format console_format();
/// "text" -> Text, "json" -> Json; std::nullopt for anything else.
std::optional<Format> parse_format(std::string_view text);
/// The JSON form of one line (no newline), as the Json console prints it.
std::string format_json(Level level, std::string_view component, std::string_view message);

}  // namespace zcode::log
