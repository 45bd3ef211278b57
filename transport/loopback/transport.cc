// Placeholder until the loopback backend lands.
#include "transport/backends.h"

namespace braid::transport {

Result<std::unique_ptr<Transport>> createLoopbackTransport(const TransportOptions&) {
  return internalError("loopback transport not built yet");
}

}  // namespace braid::transport
