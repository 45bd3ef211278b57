#include "plugin/plugin_log.h"

#include <cstdarg>
#include <cstdio>

#include "core/log.h"

namespace braid::plugin {
namespace {
std::atomic<abi::Logger> gLogger{nullptr};
}  // namespace

void setNcclLogger(abi::Logger logger) {
  if (logger != nullptr) gLogger.store(logger, std::memory_order_release);
}

void clearNcclLogger() { gLogger.store(nullptr, std::memory_order_release); }

void pluginLog(abi::LogLevel level, unsigned long subsys, const char* file, int line,
               const char* fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  abi::Logger logger = gLogger.load(std::memory_order_acquire);
  if (logger != nullptr) {
    logger(level, subsys, file, line, "braid: %s", text);
    return;
  }
  if (level == abi::kLogWarn) {
    braid::logMessage(LogLevel::kWarn, file, line, "%s", text);
  } else if (braid::logEnabled(LogLevel::kInfo)) {
    braid::logMessage(LogLevel::kInfo, file, line, "%s", text);
  }
}

}  // namespace braid::plugin
