#include "transport/backends.h"

namespace braid::transport {

Result<std::unique_ptr<Transport>> createTransport(const std::string& name,
                                                   const TransportOptions& options) {
  if (name == "loopback") return createLoopbackTransport(options);
  if (name == "shm") return createShmTransport(options);
  if (name == "tcp") return createTcpTransport(options);
  if (name == "ucx") {
#if BRAID_WITH_UCX
    return createUcxTransport(options);
#else
    return invalidUsage(
        "the ucx transport is not built yet in this build: UCX was not found when braid was "
        "configured (install libucx-dev and reconfigure with -DBRAID_WITH_UCX=ON)");
#endif
  }
  return invalidArgument("unknown transport '" + name + "'; valid: loopback, shm, tcp, ucx");
}

}  // namespace braid::transport
