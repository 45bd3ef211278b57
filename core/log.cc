// Logging: level filter, line prefix, and the one-write()-per-line sink.
//
// Why the details matter: many ranks (threads of one process in tests, processes on one host in
// jobs) log to one terminal or file at once. Each line is formatted completely in a local buffer
// and handed to the kernel in a single write(): on a file opened with O_APPEND, and on a pipe for
// lines up to PIPE_BUF, the kernel never splices another writer's bytes into it.
//
// The logger reads BRAID_DEBUG and BRAID_DEBUG_FILE straight from the environment rather than
// through core/params: the parameter parser reports bad values through this logger, and the two
// must not depend on each other. The accepted values are the same as in the parameter table.
//
// The write path takes no lock (only atomics), so a thread that logs while another forks cannot
// leave the child holding a logger lock. The lock is taken only to open the file: on the first
// line, and again when the file name would change (a %r pattern once setLogRank gives the rank,
// a %p pattern in a forked child). A reopen dup2()s the new file onto the same descriptor number,
// so a thread that is writing concurrently never sees a closed descriptor.
#include "core/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace braid {
namespace {

constexpr int kLevelUnset = -1;
constexpr size_t kLineBuffer = 1024;  // longer lines go through a heap buffer
constexpr size_t kPrefixBuffer = 512;

std::atomic<int> gLevel{kLevelUnset};
std::atomic<int> gRank{-1};

// Sink state. gFd == -1 means "not decided yet" (take the slow path).
std::atomic<int> gFd{-1};
std::atomic<bool> gToFile{false};
std::atomic<bool> gNameUsesRank{false};
std::atomic<bool> gNameUsesPid{false};
std::atomic<int> gFdRank{-1};
std::atomic<int> gFdPid{0};

struct SinkConfig {
  std::mutex mu;
  bool configured = false;
  std::string pattern;
  bool openFailed = false;  // warned once; later lines go to stderr (or the old file)
};

// Leaked on purpose: static destructors of other objects may still log at exit.
SinkConfig& sinkConfig() {
  static SinkConfig* s = new SinkConfig;
  return *s;
}

std::mutex& levelMutex() {
  static std::mutex* m = new std::mutex;
  return *m;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "ERROR";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kTrace:
      return "TRACE";
  }
  return "?";
}

// The short host name (up to the first '.'), as other ranks' logs print it.
const std::string& hostName() {
  static const std::string* host = [] {
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) != 0) std::strcpy(buf, "unknown");
    char* dot = std::strchr(buf, '.');
    if (dot != nullptr) *dot = '\0';
    return new std::string(buf);
  }();
  return *host;
}

void writeAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    const ssize_t n = ::write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere left to report a failing log sink
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
}

bool equalsIgnoreCase(const char* a, const char* b) {
  for (; *a != '\0' && *b != '\0'; ++a, ++b) {
    char x = *a, y = *b;
    if (x >= 'a' && x <= 'z') x = static_cast<char>(x - 'a' + 'A');
    if (y >= 'a' && y <= 'z') y = static_cast<char>(y - 'a' + 'A');
    if (x != y) return false;
  }
  return *a == *b;
}

int currentLevel() {
  const int level = gLevel.load(std::memory_order_acquire);
  if (level != kLevelUnset) return level;
  std::string bad;
  {
    std::lock_guard<std::mutex> lock(levelMutex());
    if (gLevel.load(std::memory_order_relaxed) == kLevelUnset) {
      int parsed = static_cast<int>(LogLevel::kWarn);
      const char* env = std::getenv("BRAID_DEBUG");
      if (env != nullptr && env[0] != '\0') {
        if (equalsIgnoreCase(env, "WARN")) {
          parsed = static_cast<int>(LogLevel::kWarn);
        } else if (equalsIgnoreCase(env, "INFO")) {
          parsed = static_cast<int>(LogLevel::kInfo);
        } else if (equalsIgnoreCase(env, "TRACE")) {
          parsed = static_cast<int>(LogLevel::kTrace);
        } else {
          bad = env;
        }
      }
      gLevel.store(parsed, std::memory_order_release);
    }
  }
  // Outside the lock: logMessage calls back into currentLevel().
  if (!bad.empty()) {
    logMessage(LogLevel::kWarn, __FILE__, __LINE__,
               "BRAID_DEBUG='%s' is not one of WARN|INFO|TRACE; using the default WARN",
               bad.c_str());
  }
  return gLevel.load(std::memory_order_acquire);
}

// BRAID_DEBUG_FILE with %h, %p, %r substituted (%% is a literal '%').
std::string expandPattern(const std::string& pattern, int pid, int rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 'h') {
      out += hostName();
    } else if (c == 'p') {
      out += std::to_string(pid);
    } else if (c == 'r') {
      out += rank < 0 ? std::string("-") : std::to_string(rank);
    } else if (c == '%') {
      out += '%';
    } else {
      out += '%';
      out += c;
    }
  }
  return out;
}

// True when the open file's name no longer matches the rank or pid it was made for.
bool fileNameStale(int pid) {
  return gToFile.load(std::memory_order_relaxed) &&
         ((gNameUsesRank.load(std::memory_order_relaxed) &&
           gFdRank.load(std::memory_order_relaxed) != gRank.load(std::memory_order_relaxed)) ||
          (gNameUsesPid.load(std::memory_order_relaxed) &&
           gFdPid.load(std::memory_order_relaxed) != pid));
}

// The slow path: decides where lines go and (re)opens the file when needed.
int openSink(int pid) {
  SinkConfig& cfg = sinkConfig();
  std::lock_guard<std::mutex> lock(cfg.mu);
  if (!cfg.configured) {
    const char* env = std::getenv("BRAID_DEBUG_FILE");
    cfg.pattern = env != nullptr ? env : "";
    cfg.configured = true;
    cfg.openFailed = false;
    gNameUsesRank.store(cfg.pattern.find("%r") != std::string::npos, std::memory_order_relaxed);
    gNameUsesPid.store(cfg.pattern.find("%p") != std::string::npos, std::memory_order_relaxed);
  }
  const int current = gFd.load(std::memory_order_acquire);
  if (current >= 0 && !fileNameStale(pid)) return current;  // another thread got here first
  if (cfg.pattern.empty()) {
    gFd.store(STDERR_FILENO, std::memory_order_release);
    return STDERR_FILENO;
  }
  const int rank = gRank.load(std::memory_order_relaxed);
  const std::string path = expandPattern(cfg.pattern, pid, rank);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  // Record the name's inputs even on failure so that a failing name is tried only once.
  gFdRank.store(rank, std::memory_order_relaxed);
  gFdPid.store(pid, std::memory_order_relaxed);
  if (fd < 0) {
    const int err = errno;
    if (!cfg.openFailed) {
      cfg.openFailed = true;
      char msg[1024];
      const int n = std::snprintf(msg, sizeof(msg),
                                  "%s:%d:- braid WARN cannot open BRAID_DEBUG_FILE '%s': %s; "
                                  "logging to stderr\n",
                                  hostName().c_str(), pid, path.c_str(), std::strerror(err));
      if (n > 0) writeAll(STDERR_FILENO, msg, std::min(static_cast<size_t>(n), sizeof(msg) - 1));
    }
    if (current >= 0) return current;  // keep the file we had
    gFd.store(STDERR_FILENO, std::memory_order_release);
    return STDERR_FILENO;
  }
  if (current >= 0 && gToFile.load(std::memory_order_relaxed)) {
    // Swap the file behind the descriptor number other threads may be writing to right now.
    ::dup2(fd, current);
    ::close(fd);
    fd = current;
  }
  gToFile.store(true, std::memory_order_relaxed);
  gFd.store(fd, std::memory_order_release);
  return fd;
}

}  // namespace

bool logEnabled(LogLevel level) { return static_cast<int>(level) <= currentLevel(); }

void setLogRank(int rank) { gRank.store(rank, std::memory_order_relaxed); }

void logMessage(LogLevel level, const char* file, int line, const char* fmt, ...) {
  if (!logEnabled(level)) return;
  const int pid = static_cast<int>(::getpid());  // not cached: forked children have their own
  const int rank = gRank.load(std::memory_order_relaxed);

  char prefix[kPrefixBuffer];
  char rankText[16] = "-";
  if (rank >= 0) std::snprintf(rankText, sizeof(rankText), "%d", rank);
  int prefixLen = std::snprintf(prefix, sizeof(prefix), "%s:%d:%s braid %s ", hostName().c_str(),
                                pid, rankText, levelName(level));
  if (level == LogLevel::kTrace && file != nullptr && prefixLen > 0 &&
      static_cast<size_t>(prefixLen) < sizeof(prefix)) {
    const char* slash = std::strrchr(file, '/');
    prefixLen += std::snprintf(prefix + prefixLen, sizeof(prefix) - static_cast<size_t>(prefixLen),
                               "%s:%d ", slash != nullptr ? slash + 1 : file, line);
  }
  if (prefixLen < 0) prefixLen = 0;
  const size_t pre = std::min(static_cast<size_t>(prefixLen), sizeof(prefix) - 1);

  // Format into the stack buffer; a long message is formatted again into a heap buffer.
  char stack[kLineBuffer];
  char* buf = stack;
  std::string heap;
  std::memcpy(stack, prefix, pre);
  va_list ap;
  va_start(ap, fmt);
  va_list again;
  va_copy(again, ap);
  int msgLen = std::vsnprintf(stack + pre, sizeof(stack) - pre, fmt, ap);
  va_end(ap);
  if (msgLen < 0) msgLen = 0;
  size_t len = pre + static_cast<size_t>(msgLen);
  if (len + 2 > sizeof(stack)) {  // room for '\n' and the terminating NUL
    heap.resize(len + 2);
    std::memcpy(&heap[0], prefix, pre);
    std::vsnprintf(&heap[pre], static_cast<size_t>(msgLen) + 1, fmt, again);
    buf = &heap[0];
  }
  va_end(again);
  if (len == pre || buf[len - 1] != '\n') buf[len++] = '\n';

  int fd = gFd.load(std::memory_order_acquire);
  if (fd < 0 || fileNameStale(pid)) fd = openSink(pid);
  writeAll(fd, buf, len);
}

std::string expandFilePattern(const std::string& pattern, int pid, int rank) {
  return expandPattern(pattern, pid, rank);
}

void resetLogForTesting() {
  SinkConfig& cfg = sinkConfig();
  {
    std::lock_guard<std::mutex> lock(cfg.mu);
    const int fd = gFd.exchange(-1);
    if (fd >= 0 && gToFile.load()) ::close(fd);
    gToFile.store(false);
    cfg.configured = false;
    cfg.openFailed = false;
  }
  std::lock_guard<std::mutex> lock(levelMutex());
  gLevel.store(kLevelUnset);
}

}  // namespace braid
