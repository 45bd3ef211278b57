#include "transport/backends.h"

namespace braid::transport {

Result<std::unique_ptr<Transport>> createTransport(const std::string& name,
                                                   const TransportOptions& options) {
  if (name == "loopback") return createLoopbackTransport(options);
  if (name == "shm") return createShmTransport(options);
  if (name == "tcp") return createTcpTransport(options);
  return invalidArgument("unknown transport '" + name + "'; valid: loopback, shm, tcp");
}

}  // namespace braid::transport
