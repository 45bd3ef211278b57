// Logging. BRAID_DEBUG=WARN|INFO|TRACE (default WARN; ERROR lines always print), output to stderr
// or to BRAID_DEBUG_FILE (%h = host, %p = pid, %r = rank are substituted). Each line starts with
// "host:pid:rank braid LEVEL " so that interleaved output of many ranks can be told apart.
#pragma once

#include <cstdarg>
#include <string>

namespace braid {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

/// True when lines of `level` are printed (cheap; use before formatting expensive text).
bool logEnabled(LogLevel level);
/// The rank printed in line prefixes (-1 before a communicator exists prints "-").
void setLogRank(int rank);
/// Formats one line and writes it with a single write() (lines of concurrent processes sharing
/// a file or pipe do not interleave mid-line). TRACE lines add "file:line " after the prefix.
void logMessage(LogLevel level, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

/// A file name pattern with %h (host), %p (pid), %r (rank; "-" when < 0) substituted and %% a
/// literal '%', as BRAID_DEBUG_FILE is (BRAID_TRACE_FILE uses it too).
std::string expandFilePattern(const std::string& pattern, int pid, int rank);

/// Tests only: closes the log file and re-reads BRAID_DEBUG and BRAID_DEBUG_FILE on next use.
/// Not safe while other threads log.
void resetLogForTesting();

}  // namespace braid

#define BRAID_LOG(level, ...)                                                          \
  do {                                                                                 \
    if (::braid::logEnabled(::braid::LogLevel::level))                                 \
      ::braid::logMessage(::braid::LogLevel::level, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define BRAID_ERROR(...) BRAID_LOG(kError, __VA_ARGS__)
#define BRAID_WARN(...) BRAID_LOG(kWarn, __VA_ARGS__)
#define BRAID_INFO(...) BRAID_LOG(kInfo, __VA_ARGS__)
#define BRAID_TRACE(...) BRAID_LOG(kTrace, __VA_ARGS__)
