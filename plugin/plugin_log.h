// Logging from the plugins: through NCCL's logger when NCCL gave us one (so that NCCL_DEBUG and
// NCCL_DEBUG_SUBSYS filter our lines with NCCL's), else through braid's own logger.
#pragma once

#include <atomic>

#include "plugin/nccl_abi.h"

namespace braid::plugin {

/// Remembers NCCL's logger (null: none). The last init's logger wins; they are all NCCL's.
void setNcclLogger(abi::Logger logger);
/// Forgets the logger (the last communicator finalized; NCCL may unload us).
void clearNcclLogger();

/// One line; level as NCCL's, subsystem bits as NCCL's.
void pluginLog(abi::LogLevel level, unsigned long subsys, const char* file, int line,
               const char* fmt, ...) __attribute__((format(printf, 5, 6)));

}  // namespace braid::plugin

#define BRAID_PLUGIN_WARN(subsys, ...) \
  ::braid::plugin::pluginLog(::braid::abi::kLogWarn, subsys, __FILE__, __LINE__, __VA_ARGS__)
#define BRAID_PLUGIN_INFO(subsys, ...) \
  ::braid::plugin::pluginLog(::braid::abi::kLogInfo, subsys, __FILE__, __LINE__, __VA_ARGS__)
